# Source of labs/12_compiler_passes_fp8.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 12

# %% [markdown]
# # Lab 12 · Inside the compiler: passes and FP8 · 深入编译器：自定义 pass 与 FP8

# %% [markdown] tags=["lang-en"]
# **Learning goals.** After this lab you can read the graph Inductor hands to a post-grad pass, say what a fusion
# pass written with Inductor's pattern matcher matches and what it puts in its place, count what FP8 weights add to
# and remove from a decode step, and tell when a pass can change a step's kernels at all.
#
# **The question under test.** The handbook (§2) lists what torch.compile's Inductor fuses, "RMSNorm + linear,
# SiLU + multiply", and ends by pointing to the compiler's internals: vLLM's `PostGradPassManager` and its own
# passes. Those passes exist mostly for quantized models: with FP8 weights every projection first quantizes its
# input, and the norm or activation before it is worth fusing with that quantization. What does such a pass
# change in a graph, what does FP8 buy on a decode step (its bytes) and cost (its kernels, its accuracy), and do
# the passes win the cost back?
#
# **What is measured, and how.** On any machine: one piece of the embedded model with FP8 weights (what mode 3
# compiles between two attention calls) traced to the ATen graph a post-grad pass sees, then each of the engine's
# three passes run on it in order (`eliminate_noops`, `fuse_norm_quant`, `fuse_act_quant`): match counts and the
# graph after each. On the H200 (the recorder runs `scripts/fp8_check.py`): decode TPOT of the Qwen3-0.6B shape
# (random bf16 weights) in bf16 and with `quantization="fp8"`, at batch 1 and 64, against the byte floor (the bytes
# a step reads over the copy bandwidth measured in the same run); the same at an asked-for mode 3, without and with
# the passes; each variant a fresh engine, every variant run twice, interleaved: a difference counts only where the
# two rounds' [min, max] do not overlap; kernels per step from a profile of one batch-1 step; FP8's cost in accuracy
# as the embedded model's checkable answers and the logprob gap to fp32.

# %% [markdown] tags=["lang-zh"]
# **学习目标。** 学完本实验，你能读懂 Inductor 交给 post-grad pass 的图，说出一个用 Inductor 模式匹配器写的算子融合 pass
# 匹配什么、换成什么，算清 FP8 权重给解码一步增加和减少了什么，并判断一个 pass 在什么情况下才可能改变一步的 kernel。
#
# **要检验的问题。** 手册（§2）列出 torch.compile 的 Inductor 会融合什么："RMSNorm + linear、SiLU + multiply"，结尾指向编译器
# 内部：vLLM 的 `PostGradPassManager` 和它自己的 pass。这些 pass 主要为量化模型而存在：用 FP8 权重时，每个投影先要量化它的
# 输入，它前面的 norm 或激活就值得和这次量化融合。这样的 pass 会怎样改图？FP8 在解码一步上省下什么（字节）、付出什么（kernel
# 和精度）？pass 能把代价赢回来吗？
#
# **测什么，怎么测。** 在任何机器上：把内置模型（FP8 权重）的一个 piece（mode 3 在两次 attention 之间编译的那段）追踪成 post-grad
# pass 看到的 ATen 图，再按顺序运行引擎的三个编译 pass（`eliminate_noops`、`fuse_norm_quant`、`fuse_act_quant`）：每个 pass 的匹配
# 次数和它之后的图。在 H200 上（记录器运行 `scripts/fp8_check.py`）：Qwen3-0.6B 形状（随机 bf16 权重）在 bf16 与
# `quantization="fp8"` 下 batch 1 和 64 的解码 TPOT，对照字节下限（一步读的字节 ÷ 同一次运行测得的拷贝带宽）；再在指定 mode 3 下
# 不开 / 开 pass 各测一遍；每个变体都是新建的引擎，每个变体交替跑两轮：只有两轮的 [最小, 最大] 不重叠时差异才算数；每步 kernel
# 数来自一个 batch 1 步的 profile；FP8 的精度代价用内置模型可核对的答案以及相对 fp32 的 logprob 差来衡量。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("12")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### One piece, before any pass · 一个 piece，pass 之前
# At mode 3 the engine splits the traced forward at each attention call and Inductor compiles the pieces between
# them. This is one such piece of the embedded model with FP8 weights, as a post-grad pass sees it: ATen ops after
# Inductor's decompositions, a symbolic token count, one line per op. Read it top to bottom: layer 0's o_proj
# (`scaled_fp8_quant` of its input, then `fp8_scaled_mm`), the residual add and RMSNorm spelled out as `pow`,
# `mean`, `add`, `rsqrt`, `mul`, another quantization and gate_up, SiLU-and-mul (`neg`, `exp`, `div`, `mul`), the
# down projection, layer 1's add + RMSNorm and its qkv projection. Every FP8 projection is two ops: the
# quantization of its input, then the matmul; the norm or activation right before a quantization is what the
# fusions look for.

# %% [markdown] tags=["lang-zh"]
# ### 一个 piece，pass 之前
# 在 mode 3 下，引擎在每次 attention 调用处切开追踪出的前向，Inductor 编译两次 attention 之间的各个 piece。这是内置模型（FP8 权重）
# 的一个 piece，也就是 post-grad pass 看到的样子：经过 Inductor 分解的 ATen 算子、符号化的 token 数、每个算子一行。从上往下读：
# 第 0 层的 o_proj（先 `scaled_fp8_quant` 量化输入，再 `fp8_scaled_mm`），展开成 `pow`、`mean`、`add`、`rsqrt`、`mul` 的残差加与
# RMSNorm，又一次量化和 gate_up，SiLU-and-mul（`neg`、`exp`、`div`、`mul`），down 投影，第 1 层的残差加 + RMSNorm 和它的 qkv 投影。
# 每个 FP8 投影都是两个算子：先量化输入，再做矩阵乘；紧挨在量化之前的 norm 或激活，正是算子融合要找的东西。

# %% tags=["nbval-check-output"]
graphs = lab.graph_part(rec)  # the record's trace, else the same trace made here (no timing in it)
print(lab.piece_before(graphs))

# %% [markdown] tags=["lang-en"]
# ### The pattern the fusion matches · 融合匹配的模式
# `fuse_norm_quant` is written with Inductor's pattern matcher, as vLLM's fusions are: `register_replacement(search,
# replace, example_inputs, fwd_only, patterns)` traces both functions to ATen graphs with the same decompositions,
# and `patterns.apply(graph)` rewrites every subgraph that matches the search graph node for node
# ([compilation/passes/fusion.py](../minivllm/compilation/passes/fusion.py), `rms_norm_quant_pass`). Constants are
# part of a pattern, so there is one per eps and dtype. Below, the residual-add + RMSNorm + quantization pattern
# and its replacement, one custom op.

# %% [markdown] tags=["lang-zh"]
# ### 融合匹配的模式
# `fuse_norm_quant` 和 vLLM 的融合一样，是用 Inductor 的模式匹配器写的：`register_replacement(search, replace, example_inputs,
# fwd_only, patterns)` 用同样的分解把两个函数都追踪成 ATen 图，`patterns.apply(graph)` 把图中与搜索图逐节点一致的子图全部改写
# （[compilation/passes/fusion.py](../minivllm/compilation/passes/fusion.py)，`rms_norm_quant_pass`）。常量也是模式的一部分，所以每个
# eps、每种 dtype 各有一个模式。下面是残差加 + RMSNorm + 量化的模式，以及替换它的那一个自定义算子。

# %% tags=["nbval-check-output"]
print(lab.pattern_view(graphs))

# %% [markdown] tags=["lang-en"]
# ### Each pass, one after the other · 逐个运行 pass
# The passes in the order `PostGradPassManager` runs them ([compilation/passes/pass_manager.py](../minivllm/compilation/passes/pass_manager.py),
# `PostGradPassManager`), each on the graph the previous one left: its match count, then the lines it removed (-)
# and added (+). `eliminate_noops` removes reshapes to the shape their input already has, which would stand between
# two ops a pattern needs side by side; every reshape in this piece changes a shape, so it finds none. The table
# counts the ops a reader follows.

# %% [markdown] tags=["lang-zh"]
# ### 逐个运行 pass
# 按 `PostGradPassManager` 的顺序运行各个 pass（[compilation/passes/pass_manager.py](../minivllm/compilation/passes/pass_manager.py)，
# `PostGradPassManager`），每个都作用在上一个留下的图上：先是匹配次数，然后是它删掉（-）和加上（+）的行。`eliminate_noops` 删掉
# 形状不变的 reshape：它们会夹在模式需要相邻的两个算子之间；这个 piece 里的 reshape 都改变了形状，所以它一个也没找到。
# 表格统计了值得跟踪的几种算子。

# %% tags=["nbval-check-output"]
print(lab.piece_diffs(graphs))
print(lab.ops_table(graphs))
lab.show(lab.plot_ops(graphs))

# %% [markdown] tags=["lang-en"]
# ### bf16 and FP8 against the byte floor · bf16、FP8 与字节下限
# Every variant of the recorder at batch 1 and 64: TPOT (the median of two rounds and their [min, max]), the byte
# floor (weights plus K/V at the copy bandwidth measured in the same run), the floor's share of the step, the
# weight bytes, and the kernels of one profiled batch-1 step. *Default* is the engine's default configuration,
# whose FULL decode graphs record the plain forward with the hand-written kernels; *mode 3* asks for the compiled
# forward, which the FULL graphs then record. The figure's menu shows one variant at a time.

# %% [markdown] tags=["lang-zh"]
# ### bf16、FP8 与字节下限
# 记录器的每个变体在 batch 1 和 64 下的结果：TPOT（两轮的中位数及其 [最小, 最大]）、字节下限（权重加 K/V，按同一次运行测得的拷贝带宽
# 计算）、下限占一步的比例、权重字节，以及一个 batch 1 步的 profile 里的 kernel 数。*default* 是引擎的默认配置，它的 FULL 解码图录下
# 的是用手写 kernel 的原始前向；*mode 3* 指定要编译后的前向，FULL 图随之录下它。图上的菜单一次显示一个变体。

# %% tags=["nbval-check-output"]
print(lab.fp8_table(rec))
if rec and rec.get("fp8"):
    lab.show(lab.plot_tpot(rec))

# %% [markdown] tags=["lang-en"]
# ### What each change does to the step · 每项改动对一步的影响
# Each change as after / before, at batch 1 and 64: *faster* or *slower* only where the two rounds' ranges do not
# overlap, else *within the spread*; then the kernels of a batch-1 step, and for the passes the matches they made in
# the engine's own compile (`llm.compile_report()["passes"]`). The last pair is the one that decides whether the
# passes can matter on this engine at all: FP8 with the compiled forward and the passes, against FP8 as the
# default configuration runs it. A traced forward never sees a 1-token batch (Dynamo would specialize the token
# count at 1 and retrace), so at mode 3 a batch-1 step replays the size-2 graph
# ([config.py](../minivllm/config.py), `EngineConfig`): part of what the mode-3 rows pay at batch 1.

# %% [markdown] tags=["lang-zh"]
# ### 每项改动对一步的影响
# 每项改动表示为“之后 / 之前”，分别在 batch 1 和 64：只有两轮的范围不重叠时才写 *faster* 或 *slower*，否则写 *within the spread*；
# 接着是 batch 1 一步的 kernel 数；对 pass 还列出它们在引擎自己的编译里匹配了几次（`llm.compile_report()["passes"]`）。最后一组决定
# pass 在本引擎上究竟能否起作用：用编译后的前向加 pass 的 FP8，对比默认配置下的 FP8。追踪过的前向从不接收只有 1 个 token 的批
# （Dynamo 会把 token 数特化为 1 并重新追踪），所以 mode 3 下 batch 1 的一步重放的是大小为 2 的图（[config.py](../minivllm/config.py)，
# `EngineConfig`）：这也是 mode 3 各行在 batch 1 多付出的一部分。

# %% tags=["nbval-check-output"]
print(lab.passes_table(rec))

# %% [markdown] tags=["lang-en"]
# ### What FP8 costs in accuracy · FP8 的精度代价
# The embedded model answers checkable questions (sums, reversed and sorted letters): its answers with FP8 weights,
# and the gap |logprob - fp32 logprob| over the tokens of held-out questions, teacher-forced so both engines score
# the same tokens ([quantization/accuracy.py](../minivllm/quantization/accuracy.py), `compare`); the same gap on the
# Qwen3-0.6B shape's random weights and random tokens.

# %% [markdown] tags=["lang-zh"]
# ### FP8 的精度代价
# 内置模型回答可核对的问题（加法、字母倒序和排序）：看它在 FP8 权重下的答案，以及在留出题目的 token 上 |logprob - fp32 logprob|
# 的差距；用 teacher forcing，两个引擎给同一串 token 打分（[quantization/accuracy.py](../minivllm/quantization/accuracy.py)，`compare`）；
# 再看 Qwen3-0.6B 形状随机权重、随机 token 上的同一差距。

# %% tags=["nbval-check-output"]
print(lab.accuracy_table(rec))

# %% [markdown] tags=["lang-en"]
# ### What vLLM does · vLLM 的做法
# The engine follows vLLM's design, read at tag v0.11.0. Inductor calls one hook on every post-grad graph,
# `post_grad_custom_post_pass`; vLLM hands it a `PostGradPassManager`
# ([vllm/compilation/pass_manager.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/pass_manager.py)),
# whose `configure` adds `NoOpEliminationPass` when `pass_config.enable_noop` is set, the RMSNorm + quant and the
# SiLU-and-mul + quant fusions when `enable_fusion` is, attention + quant with `enable_attn_fusion`, and always ends
# with the functionalization fix; its `uuid()` enters Inductor's cache key. The fusions are Inductor patterns:
# [fusion.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/fusion.py) registers RMSNorm
# (with and without the residual add) followed by static or dynamic per-token FP8 quantization with
# `register_replacement(..., fwd_only, ...)`,
# [activation_quant_fusion.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/activation_quant_fusion.py)
# SiLU-and-mul followed by the quantization, and
# [noop_elimination.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/noop_elimination.py)
# removes reshapes, slices and views that change nothing. The fields live in `PassConfig`
# ([vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/config/compilation.py):
# `enable_fusion`, `enable_attn_fusion`, `enable_noop`, `enable_sequence_parallelism`, `enable_async_tp`,
# `enable_fi_allreduce_fusion`). `quantization="fp8"` on a bf16 checkpoint quantizes every linear layer but the LM
# head at load (`Fp8LinearMethod.process_weights_after_loading`,
# [fp8.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/model_executor/layers/quantization/fp8.py)) with
# one scale per weight tensor, and quantizes activations dynamically.
#
# Where this engine differs ([Where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm), the
# rows `quantization="fp8"` and post-grad passes): it takes the later field names (`eliminate_noops`,
# `fuse_norm_quant`, `fuse_act_quant`) and accepts `enable_noop` / `enable_fusion` with a warning; it builds these
# three passes only (no attention, collective or sequence-parallel fusions: one GPU, no FP8 attention), all off
# unless asked for; its weights get one scale per output channel and a Triton FP8 GEMV serves 1-8 rows; and its
# default FULL decode graphs record the plain forward, so the passes change a decode step only when a compile mode
# is asked for.

# %% [markdown] tags=["lang-zh"]
# ### vLLM 的做法
# 本引擎沿用 vLLM 的设计（按 v0.11.0 标签阅读）。Inductor 在每张 post-grad 图上调用一个钩子 `post_grad_custom_post_pass`；vLLM 交给它
# 一个 `PostGradPassManager`（[vllm/compilation/pass_manager.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/pass_manager.py)），
# 它的 `configure` 在 `pass_config.enable_noop` 打开时加入 `NoOpEliminationPass`，在 `enable_fusion` 打开时加入 RMSNorm + 量化与
# SiLU-and-mul + 量化两个融合，`enable_attn_fusion` 时加入 attention + 量化，最后总是做一次 functionalization 修正；它的 `uuid()`
# 进入 Inductor 的编译缓存键。融合都是 Inductor 的模式：[fusion.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/fusion.py)
# 用 `register_replacement(..., fwd_only, ...)` 注册 RMSNorm（带或不带残差加）后接静态或动态逐 token FP8 量化的模式，
# [activation_quant_fusion.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/activation_quant_fusion.py)
# 注册 SiLU-and-mul 后接量化，[noop_elimination.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/noop_elimination.py)
# 删掉什么也不改变的 reshape、slice 和 view。这些开关在 `PassConfig` 里（[vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/config/compilation.py)：
# `enable_fusion`、`enable_attn_fusion`、`enable_noop`、`enable_sequence_parallelism`、`enable_async_tp`、`enable_fi_allreduce_fusion`）。
# 对 bf16 checkpoint 用 `quantization="fp8"` 时，加载阶段把除 LM head 外的每个线性层量化（`Fp8LinearMethod.process_weights_after_loading`，
# [fp8.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/model_executor/layers/quantization/fp8.py)），每个权重张量一个 scale，
# 激活则动态量化。
#
# 本引擎的不同之处（[Where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm) 中 `quantization="fp8"` 与
# post-grad pass 两行）：它用后来的字段名（`eliminate_noops`、`fuse_norm_quant`、`fuse_act_quant`），旧名 `enable_noop` /
# `enable_fusion` 也接受但会警告；只实现这三个 pass（没有 attention、通信或序列并行的融合：单 GPU，没有 FP8 attention），默认全关；
# 权重按输出通道各一个 scale，1-8 行由 Triton FP8 GEMV 计算；默认配置的 FULL 解码图录下的是原始前向，所以只有指定编译 mode 时
# pass 才会改变解码一步。

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% [markdown] tags=["lang-en"]
# **The pass toggle.** The same piece traced on this machine, and the passes you turn on in `passes` run on it in
# the manager's order. Turn one off, run the cell, and compare the match counts and the ops left: with
# `fuse_norm_quant` off the norms stay spelled out as `pow` ... `rsqrt` ... `mul` and their quantizations stay
# separate ops. The model is the one the graphs above were traced from: the embedded model loaded with FP8 weights
# on the CPU.

# %% [markdown] tags=["lang-zh"]
# **pass 开关。** 在本机追踪同一个 piece，按管理器的顺序运行你在 `passes` 里打开的 pass。关掉一个再运行这一格，比较匹配次数和剩下的
# 算子：关掉 `fuse_norm_quant` 时，norm 仍展开成 `pow` ... `rsqrt` ... `mul`，它们的量化也仍是单独的算子。模型就是上面追踪图时用的那个：
# 以 FP8 权重加载到 CPU 上的内置模型。

# %% tags=["nbval-ignore-output"]
passes = {"eliminate_noops": True, "fuse_norm_quant": True, "fuse_act_quant": False}
here = lab.run_passes(passes)
print(lab.piece_diffs({"piece": here}))
print(lab.ops_table({"piece": here}))

# %% [markdown] tags=["lang-en"]
# FP8's cost in accuracy on this machine: the embedded model with FP8 weights against itself in fp32.

# %% [markdown] tags=["lang-zh"]
# 本机上 FP8 的精度代价：内置模型的 FP8 权重版本对比它自己的 fp32 版本。

# %% tags=["nbval-ignore-output"]
print(lab.accuracy_table({"accuracy_here": lab.accuracy_here()}))

# %% tags=["nbval-skip"] id="gpu-fp8-tpot"
if lab.gpu_only("Timing bf16 and FP8 decode"):
    gpu = lab.measure_gpu(lab.model("qwen3-0.6b"), quick=True)  # one round, bf16 and FP8 only; the recorder
    print(lab.fp8_table({"fp8": gpu}))                          # runs every variant twice: `record lab12`

# %% [markdown]
# ## 4. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Five questions on the passes and FP8. Pick or type an answer: the feedback quotes the H200 records by file and
# key, and prints this lab's record (or this run) under the model answer. In Python:
# `from minivllm_labs import grade; print(grade(lab.Q_KERNELS, "435")[1])`.

# %% [markdown] tags=["lang-zh"]
# 五道关于编译 pass 与 FP8 的题。选择或输入答案：反馈会按文件和键引用 H200 的记录，并在参考答案下列出本实验的记录（或本次运行）。
# 在 Python 里：`from minivllm_labs import grade; print(grade(lab.Q_KERNELS, "435")[1])`。

# %% tags=["nbval-ignore-output"]
for q in (lab.Q_FLOOR, lab.Q_KERNELS, lab.Q_SLOWER, lab.Q_PATTERN, lab.Q_DEFAULT):
    lab.quiz(q, rec)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab12.q1.** The linear layers' bytes halve; the tied embedding, which the LM head reads every step, stays bf16
# and is about a quarter of the bf16 weight bytes. The FP8 floor is a little under two thirds of the bf16 one.
#
# **lab12.q2.** The bf16 step's kernels plus seven per layer (four quantizations, three ops the one-row GEMV no
# longer fuses for FP8 weights) over 28 layers: 435.
#
# **lab12.q3.** Seven more kernels a layer, and a batch-1 step is paced by its chain of dependent kernels, not by
# its bytes (Lab 09): the bytes saved are outweighed.
#
# **lab12.q4.** The residual add + RMSNorm (or the RMSNorm alone) before a quantized projection, and the SiLU-and-mul
# before the down projection, each with the FP8 quantization after it, replaced by one custom op; the matmuls stay.
#
# **lab12.q5.** The passes run inside Inductor, and the default FULL decode graphs record the plain forward with the
# hand-written kernels, which Inductor never compiles. Asking for mode 3 makes the FULL graphs record the compiled
# forward, with the fusions in it.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab12.q1.** 线性层的字节减半；绑定的 embedding（LM head 每步都读）保持 bf16，约占 bf16 权重字节的四分之一。FP8 的下限略低于
# bf16 下限的三分之二。
#
# **lab12.q2.** bf16 一步的 kernel 数，加上每层七个（四次量化，以及单行 GEMV 对 FP8 权重不再融合的三个算子），共 28 层：435。
#
# **lab12.q3.** 每层多七个 kernel，而 batch 1 的一步由前后依赖的 kernel 链决定，而不是由字节决定（实验 09）：省下的字节抵不过它们。
#
# **lab12.q4.** 量化投影之前的残差加 + RMSNorm（或单独的 RMSNorm），以及 down 投影之前的 SiLU-and-mul，各自连同其后的 FP8 量化，
# 被一个自定义算子替换；矩阵乘保持不变。
#
# **lab12.q5.** pass 在 Inductor 里运行，而默认的 FULL 解码图录下的是用手写 kernel 的原始前向，Inductor 从不编译它。指定 mode 3 后，
# FULL 图录下编译后的前向，融合也就在其中。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **Exercise 1.** Before running: with only `fuse_act_quant` on, how many matches does the piece give, and how many
# `scaled_fp8_quant` ops are left? Set `passes = {"fuse_act_quant": True}` in the toggle cell and run it.
#
# *Hint:* the piece holds four quantized projections; count which of their inputs come straight from a SiLU-and-mul.
#
# <details><summary>Solution · 参考答案</summary>
#
# One match (the down projection's input), three quantizations left: o_proj's (its input is the attention output)
# and the two after the RMSNorms, which only `fuse_norm_quant` fuses. The passes are independent: each rewrites its
# own patterns whatever the others did.
# </details>
#
# **Exercise 2.** The o_proj's quantization is never fused here. What would have to come before it for a pass to
# fuse it, and which vLLM pass does that?
#
# *Hint:* look at what produces o_proj's input in the piece, and at the `pass_config` names this engine refuses
# (`compilation/passes/pass_config.py`, `NOT_BUILT`).
#
# <details><summary>Solution · 参考答案</summary>
#
# Its input is the attention output, a piece input here (attention is the op the graph is split at). vLLM's
# attention + quant fusion (`enable_attn_fusion`, later `fuse_attn_quant`) has the attention kernel write FP8
# directly; this engine has no FP8 attention output and refuses the field by name.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **练习 1.** 先别运行：只打开 `fuse_act_quant` 时，这个 piece 有几次匹配？还剩几个 `scaled_fp8_quant`？在开关那一格设置
# `passes = {"fuse_act_quant": True}` 再运行。
#
# *提示：* 这个 piece 有四个量化投影；数一数其中哪些的输入直接来自 SiLU-and-mul。
#
# <details><summary>Solution · 参考答案</summary>
#
# 一次匹配（down 投影的输入），剩三个量化：o_proj 的（它的输入是 attention 的输出），以及两个 RMSNorm 之后的（只有
# `fuse_norm_quant` 融合它们）。各个 pass 相互独立：无论别的 pass 做了什么，每个都只改写自己的模式。
# </details>
#
# **练习 2.** 这里 o_proj 的量化从未被融合。它前面要有什么，pass 才能融合它？vLLM 里哪个 pass 做这件事？
#
# *提示：* 看 piece 里 o_proj 的输入由谁产生，再看本引擎拒绝的 `pass_config` 名字（`compilation/passes/pass_config.py`，`NOT_BUILT`）。
#
# <details><summary>Solution · 参考答案</summary>
#
# 它的输入是 attention 的输出，在这里是 piece 的输入（图正是在 attention 处切开的）。vLLM 的 attention + 量化融合（`enable_attn_fusion`，
# 后来叫 `fuse_attn_quant`）让 attention kernel 直接写出 FP8；本引擎没有 FP8 的 attention 输出，按名字拒绝这个字段。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Summary of verdicts · 结论
#
# **Verdict.** The handbook's "RMSNorm + linear" fusion is not what a compiler pass does here, nor in vLLM: the
# matmul stays its own op, and what the pattern matcher fuses is the norm (or SiLU-and-mul) with the FP8
# quantization of the matmul's input, one custom op in place of the pair, two norm matches and one activation match
# per layer of the piece above. FP8 weights cut the bytes of the linear layers in half, which lowers the batch-1
# byte floor to a little under two thirds of bf16's (the LM head stays bf16); but on this engine each FP8 layer runs
# more kernels than its bf16 twin, and a batch-1 step is paced by its chain of kernels, so the table below says
# whether FP8 made decode faster at batch 1 and 64, whether the passes won their kernels back beyond the spread, and
# what FP8 cost the embedded model's answers. The passes act only where Inductor compiles the step: with a compile
# mode asked for, not in the default configuration's FULL decode graphs.

# %% [markdown] tags=["lang-zh"]
# ## 6. 结论
#
# **结论。** 手册说的"RMSNorm + linear"融合，并不是这里（也不是 vLLM 里）编译 pass 做的事：矩阵乘仍是单独的算子，模式匹配器融合的
# 是 norm（或 SiLU-and-mul）与矩阵乘输入的 FP8 量化，一个自定义算子替换这一对，上面的 piece 里每层有两处 norm 匹配、一处激活匹配。
# FP8 权重把线性层的字节减半，使 batch 1 的字节下限降到 bf16 的三分之二略低（LM head 仍是 bf16）；但在本引擎上每个 FP8 层比 bf16
# 层运行更多 kernel，而 batch 1 的一步由 kernel 链决定，所以下表给出：FP8 在 batch 1 和 64 下是否让解码变快，pass 是否在波动之外
# 赢回了 kernel 的代价，以及 FP8 对内置模型答案的影响。pass 只在 Inductor 编译这一步时起作用：指定了编译 mode 时才有，默认配置的
# FULL 解码图里没有。

# %% tags=["nbval-check-output"]
# every number in this table is read from the recorded results, not measured here
from IPython.display import HTML, display  # noqa: E402

display(HTML(lab.verdict_table(rec)))

# %% [markdown] tags=["lang-en"]
# **Engine code.** The pass manager: [compilation/passes/pass_manager.py](../minivllm/compilation/passes/pass_manager.py)
# (`PostGradPassManager`, `for_config`); the fusions: [compilation/passes/fusion.py](../minivllm/compilation/passes/fusion.py)
# (`rms_norm_quant_pass`, `act_quant_pass`); no-op elimination:
# [compilation/passes/noop_elimination.py](../minivllm/compilation/passes/noop_elimination.py) (`NoOpEliminationPass`);
# the fields: [compilation/passes/pass_config.py](../minivllm/compilation/passes/pass_config.py) (`PassConfig`); FP8:
# [quantization/fp8.py](../minivllm/quantization/fp8.py) (`Fp8LinearMethod`) and its ops
# [kernels/fp8_ops.py](../minivllm/kernels/fp8_ops.py); the GPU measurement: `scripts/fp8_check.py` (`tpot`,
# `accuracy`); this lab's trace of a piece: `labs/minivllm_labs/lab12.py` (`trace_piece`, `run_passes`).

# %% [markdown] tags=["lang-zh"]
# **引擎代码。** pass 管理器：[compilation/passes/pass_manager.py](../minivllm/compilation/passes/pass_manager.py)（`PostGradPassManager`、
# `for_config`）；融合：[compilation/passes/fusion.py](../minivllm/compilation/passes/fusion.py)（`rms_norm_quant_pass`、`act_quant_pass`）；
# no-op 消除：[compilation/passes/noop_elimination.py](../minivllm/compilation/passes/noop_elimination.py)（`NoOpEliminationPass`）；
# 配置字段：[compilation/passes/pass_config.py](../minivllm/compilation/passes/pass_config.py)（`PassConfig`）；FP8：
# [quantization/fp8.py](../minivllm/quantization/fp8.py)（`Fp8LinearMethod`）及其算子 [kernels/fp8_ops.py](../minivllm/kernels/fp8_ops.py)；
# GPU 测量：`scripts/fp8_check.py`（`tpot`、`accuracy`）；本实验对 piece 的追踪：`labs/minivllm_labs/lab12.py`（`trace_piece`、`run_passes`）。
