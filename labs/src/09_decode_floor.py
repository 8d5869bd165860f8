# Source of labs/09_decode_floor.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 09

# %% [markdown]
# # Lab 09 · The floor of a decode step · 解码一步的下限

# %% [markdown] tags=["lang-en"]
# **Learning goals.** After this lab you can compute the least time a batch-1 decode step can take (the bytes it
# must read over the bandwidth the GPU really delivers), read a kernel-by-kernel profile of one CUDA-graph replay,
# and say where the time above that floor goes: each kernel's ramp and tail, GEMVs too small to fill the GPU,
# kernels that wait for each other, and the idle gaps between them.
#
# **The question under test.** The handbook (§1.2) says a CUDA graph "submits the whole sequence at once and saves
# the launch overhead", and (§5) that graphs "only remove launch overhead, not the cost of the ops". With the whole
# step in one graph, how close to its floor is a step, and what keeps it from the floor? The published anchor:
# Hazy Research measured vLLM and SGLang at *at most 50%* of an H100's memory bandwidth on batch-1 Llama-3.2-1B,
# and their single "megakernel" for that model at 78%
# ([Look Ma, No Bubbles!, 2025](https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles)).
#
# **What is measured, and how.** For the Qwen3-0.6B and Llama-3.2-1B shapes (random bf16 weights: speed depends
# on shapes, not values) on the H200: the copy bandwidth (a 1 GiB device-to-device copy, median of repeats); the
# bytes a step reads (every weight once, plus the K/V of a 256-token context); the engine's step (32 consecutive
# steps timed without the profiler, {rec}`lab09.json:shapes.qwen3-06b.repeats` times: the median and [min, max]), in its default mode (FULL_AND_PIECEWISE graphs,
# vLLM's default too, [docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/configuration/optimization.md); a pure-decode
# batch such as batch 1 then replays one FULL graph, [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md)); one step kernel by
# kernel, from a CUPTI profile of 8 graph replays (the functions of `minivllm bench profile`); the same step with
# programmatic dependent launch off ({rec}`lab09.json:shapes.qwen3-06b.repeats` times as well: a difference inside the ranges is noise); and the step at
# batch 1 to 512 (one timing each). On a CPU the same code runs on the embedded
# tiny model: the floor and the step, no kernels.

# %% [markdown] tags=["lang-zh"]
# **学习目标。** 学完本实验，你能算出 batch 1 下一个 decode 步最少要多久（它必须读的字节 ÷ GPU 实际能达到的带宽），
# 能读懂一次 CUDA Graph 重放的逐 kernel profile，并说出超出下限的时间去了哪里：每个 kernel 的爬升与收尾、填不满 GPU 的
# 小 GEMV、互相等待的 kernel，以及 kernel 之间的空闲间隙。
#
# **要检验的问题。** 手册（§1.2）说 CUDA Graph "一次性提交给 GPU 调度器，省去 launch overhead"，又说（§5）图"只优化
# launch overhead，不优化 op 本身"。整步都在一张图里时，一步离它的下限有多近，又是什么让它达不到？已发表的参照：
# Hazy Research 测得 vLLM 和 SGLang 在 H100 上跑 batch 1 的 Llama-3.2-1B *最多只用到 50%* 的显存带宽，而他们为这个模型写的
# 单个 "megakernel" 达到 78%（[Look Ma, No Bubbles!, 2025](https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles)）。
#
# **测什么，怎么测。** 在 H200 上测 Qwen3-0.6B 和 Llama-3.2-1B 两种形状（随机 bf16 权重：速度取决于形状，与数值无关）：
# 拷贝带宽（1 GiB 显存内拷贝，多次取中位数）；一步要读的字节（每个权重一次，加上 256 token 上下文的 K/V）；引擎一步的
# 时间（不开 profiler 连续计时 32 步，重复 5 次：中位数与 [最小, 最大]），用默认模式（FULL_AND_PIECEWISE 图，也是 vLLM 的默认，
# [docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/configuration/optimization.md)；batch 1 这样的纯 decode 批因此重放一张 FULL 图，
# [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md)）；用 `minivllm bench profile`
# 的函数对 8 次图重放做 CUPTI profile，得到一步的逐 kernel 时间；关掉 programmatic dependent launch（PDL）后的同一步
# （同样 5 次：差值落在范围内就是噪声）；以及 batch 1 到 512 的一步（各计时一次）。CPU 上同样的代码跑内置的 tiny 模型：只有下限和一步的时间，没有 kernel。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("09")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### The floor · 下限
# A batch-1 step reads every weight once, so *bytes / copy bandwidth* is the least it can take. *floor/step* is
# the share of the copy bandwidth the step reaches: 100% would be a step that streams its bytes at the copy's rate
# from its first nanosecond to its last.

# %% [markdown] tags=["lang-zh"]
# ### 下限
# batch 1 的一步要把每个权重读一遍，所以 *字节 ÷ 拷贝带宽* 是它最少要花的时间。*floor/step* 是这一步达到的拷贝带宽比例：
# 100% 意味着这一步从第一纳秒到最后一纳秒都以拷贝的速率读字节。

# %% tags=["nbval-check-output"]
print(lab.floor_table(rec) if rec else "not recorded yet: python -m minivllm_labs.record lab09 (on a CUDA GPU)")

# %% [markdown] tags=["lang-en"]
# ### One step, kernel by kernel · 一步，逐个 kernel
# Each bar is one kernel of one replayed step: its width is the kernel's own time (from the later of its start and
# the previous kernel's end), its colour the share of the copy bandwidth it reached (its bytes over its own time;
# grey: it reads no weights). White space is the GPU idle between kernels. The red tick is the byte floor: a step
# at 100% would end there. Hover over a bar for its name, bytes and gap. The bytes of a GEMM are the weight matrix
# it multiplies (the k-th GEMM kernel of the step reads the k-th linear weight in forward order); those of a decode
# attention kernel are one layer's K/V. Times are under the profiler, a little longer than the step's wall time.

# %% [markdown] tags=["lang-zh"]
# ### 一步，逐个 kernel
# 每根条是一次图重放里的一个 kernel：宽度是它自己的时间（从它开始与前一个 kernel 结束中较晚的那个算起），颜色是它达到的
# 拷贝带宽比例（它的字节 ÷ 它自己的时间；灰色：不读权重）。空白处是 kernel 之间 GPU 空闲。红色刻度是字节下限：100% 的一步
# 会在那里结束。鼠标悬停可看名字、字节数和间隙。GEMM 的字节是它乘的那个权重矩阵（一步里第 k 个 GEMM kernel 读前向顺序中
# 第 k 个线性层权重）；decode attention kernel 的字节是一层的 K/V。时间在 profiler 下测得，比一步的墙钟时间略长。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_timeline(rec))
    print(lab.kernel_table(rec))

# %% [markdown] tags=["lang-en"]
# ### Where the rest goes · 其余时间去了哪里
# One profiled step split four ways: the bytes at copy bandwidth (the floor); what the kernels that read weights
# or K/V take beyond that, the ramp while their programs start, the tail while the last ones finish, SMs left idle
# by a GEMV with fewer output tiles than the H200's 132 SMs; kernels that read no weights (norms, RoPE, the KV
# store, the sampler), each a dependent link in the chain; and idle gaps between kernels. *PDL overlap* is the time
# kernels ran beside the previous one: with programmatic dependent launch
# ([kernels/pdl.py](../minivllm/kernels/pdl.py), `launch_options`) a Triton kernel is launched while the previous
# one drains, so its launch and ramp hide under that tail. The last lines compare the step with PDL off.

# %% [markdown] tags=["lang-zh"]
# ### 其余时间去了哪里
# 把一个 profile 步分成四份：字节按拷贝带宽所需的时间（下限）；读权重或 K/V 的 kernel 超出下限的部分，即程序启动时的爬升、
# 最后几个程序结束时的收尾，以及输出 tile 少于 H200 的 132 个 SM 的 GEMV 留下的空闲 SM；不读权重的 kernel（norm、RoPE、
# KV 写入、采样），每个都是链上依赖的一环；以及 kernel 之间的空闲间隙。*PDL overlap* 是 kernel 与前一个并行的时间：有了
# programmatic dependent launch（[kernels/pdl.py](../minivllm/kernels/pdl.py)，`launch_options`），Triton kernel 在前一个收尾时
# 就已启动，它的启动和爬升藏在那段收尾之下。最后几行对比关掉 PDL 后的一步。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_where(rec))
    print(lab.where_table(rec))
    print(lab.pdl_table(rec))

# %% [markdown] tags=["lang-en"]
# ### What the engine changed, before and after · 引擎改了什么：前后对比
# Each change the engine tried on the batch-1 step, kept or not, with the runs that decided it (the members of
# `assets/results/h200/archive.json`, each with its own provenance, and this lab's record). A ratio is printed
# only where before and after ran in one call or one session on one machine at one commit, back to back or
# interleaved: across machines and fresh GEMV autotunes, batch-1 TPOT moves by more than most of these changes.
# *Faster* or *slower* means the [min, max] of the repeats do not overlap; a pair with one run a side has no
# spread, so its ratio is a hint, not a measurement. The verdict is what the engine runs today
# ([layers/custom_op.py](../minivllm/layers/custom_op.py), `KNOWN_OPS`: an op not listed there can no longer be
# turned on; [kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py), `supports`). What was tried and measured
# slower stays here, as the table's *dropped* rows: fusing more into one kernel did not help when it put work on
# the critical path that PDL had hidden, or added a serial tail (an atomic and a merge) to the last program.
# Below the table, the same kernels timed alone.

# %% [markdown] tags=["lang-zh"]
# ### 引擎改了什么：前后对比
# 引擎在 batch 1 这一步上试过的每项改动，无论保留与否，连同决定它去留的那几次运行（`assets/results/h200/archive.json` 的各个成员，
# 各自带着 provenance，以及本实验的记录）。只有改动前后在同一次调用、或同一台机器同一个 commit 的同一轮测量里（前后紧挨着或交替运行）
# 测得时才给出比值：换一台机器、重新做一次 GEMV autotune，batch 1 的 TPOT 变化就比大多数改动本身还大。*faster* / *slower* 表示
# 多次重复的 [最小, 最大] 不重叠；每边只跑一次的对比没有波动范围，它的比值只是线索，不算测量结论。结论列是引擎今天实际跑的东西
# （[layers/custom_op.py](../minivllm/layers/custom_op.py) 的 `KNOWN_OPS`：不在其中的 op 已无法再开启；
# [kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py) 的 `supports`）。试过且测得更慢的改动不留在主干里，而是留在这里，
# 即表中 *dropped* 的行：当算子融合把原本被 PDL 藏住的工作放到了关键路径上，或者给最后一个 program 加了串行的收尾（一次原子操作
# 加一次合并）时，融合进一个 kernel 反而没有收益。表下方是同样的 kernel 单独计时的结果。

# %% tags=["nbval-check-output"]
archive = lab.archive_members()  # assets/results/h200/archive.json: the A/B runs, each with its provenance
print(lab.changes_table(lab.change_rows(archive, rec)))
print(lab.kernel_alone_table())

# %% [markdown] tags=["lang-en"]
# ### The engine's goals · 引擎的目标
# The engine set itself two goals for this step on the H200: the Qwen3-0.6B shape at or under a fixed time per
# step, and the Llama-3.2-1B shape, the one Hazy Research measured, at a fixed share of the copy bandwidth. Both
# are missed, and the profile says why: the GEMM kernels alone, one after another, read their weights at well
# under the copy bandwidth, so even with every other kernel and gap free the Llama step could not reach its goal,
# and the Qwen goal leaves far less time beside the GEMMs than the other kernels take today. The idle gaps
# between replayed kernels are already small and PDL is on: what remains is inside the kernel chain itself.
# Closing it takes fewer, fuller kernels: a fused MLP, a fused attention block, and at the end a persistent
# megakernel that streams the weights without kernel boundaries, as Hazy Research's did at 78% on an H100.

# %% [markdown] tags=["lang-zh"]
# ### 引擎的目标
# 引擎给 H200 上的这一步定了两个目标：Qwen3-0.6B 形状每步不超过一个固定时间；Llama-3.2-1B 形状（Hazy Research 测的那个）达到
# 拷贝带宽的一个固定比例。两个都没达到，profile 说明了原因：光是 GEMM kernel 一个接一个地跑，读权重的速度就远低于拷贝带宽，
# 所以即使其余 kernel 和间隙全都不花时间，Llama 这一步也到不了目标；而 Qwen 的目标留给 GEMM 之外的时间，远少于其余 kernel
# 今天实际花的时间。图重放时 kernel 之间的空闲已经很小，PDL 也已开启：剩下的差距在 kernel 链本身。要补上它，需要更少、更满的
# kernel：融合的 MLP、融合的 attention 块，最终是一个常驻的 megakernel，不经过 kernel 边界地流式读取权重，就像 Hazy Research
# 在 H100 上做到 78% 那样。

# %% tags=["nbval-check-output"]
print(lab.goals_table(rec) if rec else "not recorded yet: python -m minivllm_labs.record lab09 (on a CUDA GPU)")

# %% [markdown] tags=["lang-en"]
# ### Batch size and the roofline · batch 大小与 Roofline
# The same engine at batch 1 to 512 with 16-token prompts, so the step reads weights and hardly any K/V. At batch
# *B* each weight byte serves *B* FLOPs (one multiply-add per sequence per 2-byte weight): the step stays near its
# batch-1 time while *B* is far below the ridge point, the datasheet's dense bf16 rate over the measured copy
# bandwidth, and grows once the tensor cores, not the memory, set the pace.

# %% [markdown] tags=["lang-zh"]
# ### batch 大小与 Roofline
# 同一个引擎跑 batch 1 到 512，prompt 只有 16 个 token，这样一步几乎只读权重、不读 K/V。batch 为 *B* 时每个权重字节做 *B* 次
# FLOP（每个 2 字节的权重对每条序列做一次乘加）：只要 *B* 远低于拐点（规格书的稠密 bf16 算力 ÷ 实测拷贝带宽），一步就停留在
# batch 1 的时间附近；一旦由 Tensor Core 而不是显存决定速度，一步的时间就开始增长。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_sweep(rec))
    print(lab.sweep_table(rec))

# %% tags=["nbval-ignore-output"] id="09-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its floor table
# appears here beside the H200's.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="09-toggle"
# Live toggle · 实时开关: click a batch size; the engine re-runs and the figure shows its TPOT beside this device's
# floor (weight bytes / the copy bandwidth measured here). The floor does not move with the batch; does the step?
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The floor and the step on this device, with the same functions as the recorder. On a CPU the model is the
# embedded tiny one (the table below prints its weight bytes), so the floor is a fraction of a millisecond and the step is set by the
# host (Python, the scheduler, PyTorch's CPU ops): a floor share near 0% says this step is nowhere near
# memory-bound. Change `context` and `batch` and run again: the floor moves with the K/V, the step hardly at all.

# %% [markdown] tags=["lang-zh"]
# 用记录器的同一套函数测本机的下限和一步。CPU 上用的是内置 tiny 模型（下表打印它的权重字节），下限不到一毫秒，一步的时间由主机
# （Python、调度器、PyTorch 的 CPU 算子）决定：下限占比接近 0% 说明这一步离受访存限制还很远。改 `context` 和 `batch`
# 再运行：下限随 K/V 变化，一步几乎不变。

# %% tags=["nbval-ignore-output"]
context, batch = 256, 1
here = lab.measure_here(context=context, batch=batch)
print(lab.floor_table(here))
print(lab.where_table(here))

# %% tags=["nbval-skip"] id="gpu-llama-step"
if lab.gpu_only("Profiling the Llama-3.2-1B shape"):
    gpu = lab.measure_here(model=lab.model("llama-3.2-1b"))  # random bf16 weights; the recorder also sweeps batch
    print(lab.floor_table(gpu))                              # sizes and turns PDL off: `record lab09`
    lab.show(lab.plot_timeline(gpu))
    print(lab.kernel_table(gpu))
    print(lab.where_table(gpu))

# %% [markdown]
# ## 4. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Four questions on the floor and what keeps a step from it. Pick or type an answer: the feedback quotes the H200
# records by file and key. In Python: `from minivllm_labs import grade; print(grade(lab.Q_FLOOR, "5.4 ms")[1])`.

# %% [markdown] tags=["lang-zh"]
# 四道关于下限以及一步为何达不到下限的题。选择或输入答案：反馈会按文件和键引用 H200 的记录。在 Python 里：
# `from minivllm_labs import grade; print(grade(lab.Q_FLOOR, "5.4 ms")[1])`。

# %% tags=["nbval-ignore-output"]
for q in (lab.Q_ROOF, lab.Q_WHY, lab.Q_BATCH, lab.Q_FLOOR):
    lab.quiz(q, rec)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab09.q1.** Far left of the ridge, at about 1 FLOP/byte: each 2-byte weight serves 2 FLOPs per sequence. The
# step is memory-bound, and its bytes over the copy bandwidth are its floor ({rec}`profile_prefetch.json:runs.0.floor.bytes_ms:.3f` ms for Qwen3-0.6B on the H200).
#
# **lab09.q2.** The step is a chain of {rec}`lab09.json:shapes.qwen3-06b.kernels_per_step:.0f` dependent kernels: each ramps up and drains, a small GEMV ends
# before 132 SMs stream at full rate, each kernel waits for the one before, and the GPU idles in the gaps. A graph
# removes the CPU's launches, not these; PDL overlaps a kernel's start with the previous one's tail, and removing
# kernel boundaries altogether (a megakernel) reached 78% on an H100.
#
# **lab09.q3.** About {rec}`lab09.json:roofline.ridge_flops_per_byte:.0f` on the H200: at batch B each weight byte serves B FLOPs, and the ridge is 989 TFLOP/s /
# {rec}`lab09.json:copy_gbps*0.001:.1f` TB/s. Below it every sequence shares the same weight bytes; K/V reads grow with batch x context and are never
# shared, so long contexts stay memory-bound at any batch.
#
# **lab09.q4.** 8.03e9 x 2 bytes = 16.06 GB; 16.06 GB / 3.0 TB/s = 5.35 ms. The datasheet's 3.35 TB/s would give
# 4.79 ms, a floor no kernel reaches.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab09.q1.** 在拐点左边很远处，约每字节 1 FLOP：每个 2 字节的权重对每条序列做 2 FLOP。这一步受访存限制，下限是它读的字节
# ÷ 拷贝带宽（H200 上的 Qwen3-0.6B 是 {rec}`profile_prefetch.json:runs.0.floor.bytes_ms:.3f` ms）。
#
# **lab09.q2.** 一步是 {rec}`lab09.json:shapes.qwen3-06b.kernels_per_step:.0f` 个前后依赖的 kernel 串成的链：每个都要爬升和收尾，小 GEMV 还没等 132 个 SM 全速读取就结束了，
# 每个 kernel 都等前一个完成，kernel 之间 GPU 空闲。CUDA Graph 去掉的是 CPU 的启动，不是这些；PDL 让一个 kernel 的启动与
# 前一个的收尾重叠，而完全去掉 kernel 边界（megakernel）在 H100 上做到了 78%。
#
# **lab09.q3.** H200 上约 {rec}`lab09.json:roofline.ridge_flops_per_byte:.0f`：batch B 时每个权重字节做 B 次 FLOP，拐点是 989 TFLOP/s ÷ {rec}`lab09.json:copy_gbps*0.001:.1f` TB/s。在此之前所有序列共用同一份
# 权重字节；K/V 的读取随 batch × 上下文增长、无法共用，所以上下文长时在任何 batch 下都受访存限制。
#
# **lab09.q4.** 8.03e9 × 2 字节 = 16.06 GB；16.06 GB ÷ 3.0 TB/s = 5.35 ms。用规格书的 3.35 TB/s 会得到 4.79 ms，那是没有
# kernel 能达到的下限。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **Exercise 1.** Before running: at a 448-token context instead of 256, how much does the floor of the tiny model's
# step grow, and does the measured step follow? Set `context = 448` in the run-it-here cell (the tiny model has 512
# positions) and run.
#
# *Hint:* the K/V of one token is 2 (K and V) x layers x KV heads x head size x 2 bytes; `floor_table` prints both
# parts of the bytes.
#
# <details><summary>Solution · 参考答案</summary>
#
# The K/V part grows by 448/256 (256 to 448 tokens) while the weights stay put, so the floor grows by the K/V's
# share. On a CPU the step hardly moves: it is set by the host, not by bytes. On the H200 the same change adds
# K/V bytes to a memory-bound step, and the step grows with them.
# </details>
#
# **Exercise 2.** A GEMV that multiplies a 2048 x 2048 bf16 matrix (8 MB) reads for 2 us at 4.2 TB/s. If every
# kernel pays about 2 us of ramp, tail and gap, what share of the copy bandwidth can that GEMV reach, and what does
# that say about fusing the step's small kernels?
#
# *Hint:* share = time at the floor / (time at the floor + fixed cost per kernel).
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 / (2 + 2) = 50%. A fixed cost per kernel weighs most on the smallest kernels, which is why fewer, fuller kernels
# (a fused MLP, a fused attention block, a persistent megakernel) raise the whole step's share, and why the
# Llama-3.2-1B shape, with larger matrices per kernel, sits closer to its floor than Qwen3-0.6B.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **练习 1.** 先别运行：上下文从 256 变为 448 个 token 时，tiny 模型一步的下限会增加多少？实测的一步会跟着变吗？在"在本机
# 运行"那一格把 `context = 448`（tiny 模型有 512 个位置）再运行。
#
# *提示：* 一个 token 的 K/V 是 2（K 和 V）× 层数 × KV 头数 × 头维度 × 2 字节；`floor_table` 会分别打印两部分字节。
#
# <details><summary>Solution · 参考答案</summary>
#
# K/V 部分按 448/256 增长（256 到 448 个 token），权重不变，所以下限按 K/V 的占比增长。CPU 上一步几乎不变：它由主机决定，
# 不由字节决定。在 H200 上，同样的改动给一个受访存限制的步增加了 K/V 字节，一步也随之变长。
# </details>
#
# **练习 2.** 一个乘 2048 × 2048 bf16 矩阵（8 MB）的 GEMV，在 4.2 TB/s 下读完要 2 us。如果每个 kernel 都要付出约 2 us 的
# 爬升、收尾和间隙，这个 GEMV 最多能达到拷贝带宽的多少？这对融合一步里的小 kernel 说明了什么？
#
# *提示：* 比例 = 按下限读完的时间 ÷（按下限读完的时间 + 每个 kernel 的固定开销）。
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 ÷ (2 + 2) = 50%。每个 kernel 的固定开销对最小的 kernel 影响最大，所以更少、更满的 kernel（融合的 MLP、融合的 attention
# 块、常驻的 megakernel）能提高整步的比例；这也是为什么每个 kernel 矩阵更大的 Llama-3.2-1B 形状比 Qwen3-0.6B 更接近下限。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Summary of verdicts · 结论
#
# **Verdict.** Both of the handbook's sentences hold in the sense they are meant, and the lab shows what they leave
# out. A CUDA graph does remove the CPU's launches: the whole step is submitted at once. It does not remove the
# GPU-side cost of a kernel boundary: each of the step's kernels still ramps up and drains, small GEMVs leave SMs
# idle, and the GPU idles between kernels, so a graph-replayed batch-1 step stays well above its byte floor (the
# table's *floor/step*). That remainder lives in the kernels, which only fewer, fuller kernels reduce: PDL hides
# part of each boundary, and a megakernel without boundaries reached 78% on an H100 where vLLM and SGLang reached at
# most 50% when Hazy Research measured them in May 2025
# ([Hazy Research](https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles)). The claims, with
# the numbers that decide them:

# %% [markdown] tags=["lang-zh"]
# ## 6. 结论
#
# **结论。** 手册的两句话在它们的本意上都成立，本实验展示的是它们没说的部分。CUDA Graph 确实去掉了 CPU 的逐个启动：整步一次提交。
# 它去不掉 kernel 边界在 GPU 侧的代价：每个 kernel 仍要爬升和收尾，小 GEMV 让 SM 空闲，kernel 之间 GPU 空闲，所以图重放的
# batch 1 一步仍明显高于它的字节下限（表中的 *floor/step*）。剩下的时间在 kernel 里，只有更少、更满的 kernel 能减少：PDL
# 藏住了每个边界的一部分，而没有边界的 megakernel 在 H100 上做到了 78%，而 Hazy Research 在 2025 年 5 月测得 vLLM 和 SGLang
# 最多 50%（[Hazy Research](https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles)）。各条说法及决定结论的数字：

# %% tags=["nbval-check-output"]
# every number in this table is read from the recorded results, not measured here
from minivllm_labs import lab07_views  # noqa: E402

lab07_views.show_markdown(lab07_views.claims_markdown(lab.LAB_INFO.claims))

# %% [markdown] tags=["lang-en"]
# **Engine code.** The profile: `scripts/maint/gpu_profile.py` (`profile_decode`, `byte_floor`,
# `categorize`); programmatic dependent launch: [kernels/pdl.py](../minivllm/kernels/pdl.py) (`launch_options`,
# `wait_for_previous_kernel`); the batch-1 GEMV: [kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py)
# (`gemv`); the graphs one step replays: [worker/graph_capture.py](../minivllm/worker/graph_capture.py)
# (`capture_graphs`); this lab's measurements: `labs/minivllm_labs/lab09.py` (`timeline`,
# `where_it_goes`).

# %% [markdown] tags=["lang-zh"]
# **引擎代码。** profile：`scripts/maint/gpu_profile.py`（`profile_decode`、`byte_floor`、`categorize`）；
# programmatic dependent launch：[kernels/pdl.py](../minivllm/kernels/pdl.py)（`launch_options`、`wait_for_previous_kernel`）；
# batch 1 的 GEMV：[kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py)（`gemv`）；一步重放的图：
# [worker/graph_capture.py](../minivllm/worker/graph_capture.py)（`capture_graphs`）；本实验的测量：
# `labs/minivllm_labs/lab09.py`（`timeline`、`where_it_goes`）。
