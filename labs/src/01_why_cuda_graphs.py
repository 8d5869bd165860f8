# Source of labs/01_why_cuda_graphs.ipynb (jupytext percent format). Edit this file, then regenerate:
# python -m minivllm_labs.build 01

# %% [markdown]
# # Lab 01 · Why CUDA graphs · 为什么需要 CUDA Graph

# %% [markdown] tags=["lang-en"]
# The handbook (chapter 03, §1.1) argues in three steps: *a kernel launch costs 5-10 µs; an 80-layer model
# launches 1000+ kernels per forward; so in a 20 ms decode step, 25-50% is launch overhead, which a CUDA graph
# removes.* Each step can be measured, and one of them is wrong. This lab finds which.
#
# **You will learn** what one launch costs eagerly and inside a graph; how many kernels one decode step of
# this engine launches; why launch overhead is not simply added to the GPU time (launches are asynchronous);
# how much a graph saves at each batch size, and why the engine pads batches instead of re-capturing.
#
# **What is measured, and how:** (a) 1,000 tiny ops eager vs one graph replay, and one of the engine's Triton
# kernels; (b) `torch.profiler` around one decode step; (c) per batch size, the CPU time to enqueue a decode
# forward, the GPU time of its kernels, the eager step and the graph replay; (d) the engine's time per output
# token (TPOT), eager vs graphs; (e) the handbook's own capture / replay snippet. Timings are medians over
# repeats; a difference is called real only when it is larger than the spread.
#
# **Cells:** *setup*; *recorded* (measured once on an H200, loaded with their provenance from
# `assets/results/h200/lab01.json`); *run it here* (the same code on your device: a CUDA GPU, else a tiny CPU
# model); *GPU only* (they say so and do nothing on a CPU). It ends with two self-test questions, exercises and
# a summary of verdicts.

# %% [markdown] tags=["lang-zh"]
# 手册（第 03 章 §1.1）的论证分三步：*一次 kernel launch 约 5-10 μs；80 层模型一次 forward launch 1000+ 个
# kernel；所以 20 ms 的 decode 步里 25-50% 是 launch overhead，CUDA Graph 可以把它去掉。* 每一步都能测，
# 其中有一步是错的。本实验把它找出来。
#
# **学完你会知道**：一次 launch 在 eager 和 graph 里各花多少；本引擎一个 decode 步 launch 多少个 kernel；
# 为什么 launch overhead 不是简单地加在 GPU 时间上（launch 是异步的）；不同 batch 下 graph 能省多少；
# 以及引擎为什么 pad batch 而不是重新捕获。
#
# **测什么、怎么测**：(a) 1000 个小算子 eager 与一次 graph 重放，以及引擎的一个 Triton kernel；
# (b) 用 `torch.profiler` 包住一个 decode 步；(c) 每个 batch 下 decode forward 的 CPU 排队时间、GPU 时间、
# eager 步与 graph 重放；(d) 引擎每个输出 token 的时间（TPOT），eager 与 CUDA Graph；(e) 手册自己的
# 捕获/重放代码片段。计时都是多次重复的中位数；只有差别大于波动范围才算数。
#
# **单元格类型**：*准备*；*实测记录*（在 H200 上测一次，连同来源信息从 `assets/results/h200/lab01.json`
# 读入）；*在本机运行*（同样的代码跑在你的设备上：有 CUDA GPU 就用 GPU，否则用很小的 CPU 模型）；
# *仅限 GPU*（在 CPU 上会说明并跳过）。最后是两道自检题、练习和结论汇总。

# %% [markdown] tags=["lang-en"]
# ## 1. Setup

# %% [markdown] tags=["lang-zh"]
# ## 1. 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("01")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
from IPython.display import HTML, display

# %% [markdown] tags=["lang-en"]
# ## 2. Recorded on an H200
#
# `load_recorded` refuses a results file without its provenance (GPU, torch version, commit, date and the
# command that produced it), so every number below can be traced and re-measured with that command.

# %% [markdown] tags=["lang-zh"]
# ## 2. H200 实测结果
#
# `load_recorded` 拒绝没有来源信息（GPU、torch 版本、commit、日期、生成它的命令）的结果文件，所以下面每个
# 数字都能追溯，也能用那条命令重新测量。

# %% [markdown] tags=["lang-en"]
# ### a) What one launch costs
#
# 1,000 calls of `x.add_(1)` on a one-element tensor: the op does no real work, so the eager time per op is the
# launch path (Python, PyTorch's dispatcher, the CUDA driver). Captured in a CUDA graph, the CPU submits all
# 1,000 kernels with a single call; what remains per op is the GPU's own cost of running a kernel. Newer
# records also time one of the engine's Triton kernels (RMSNorm) called eagerly from Python, as the engine
# calls it: keep it in mind for b).

# %% [markdown] tags=["lang-zh"]
# ### a) 一次 launch 的开销
#
# 对单元素 tensor 调用 1000 次 `x.add_(1)`：算子本身几乎不做事，所以 eager 下每个算子的时间就是 launch 路径
# （Python、PyTorch dispatcher、CUDA 驱动）。捕获进 CUDA Graph 后，CPU 一次调用提交全部 1000 个 kernel，
# 剩下的每算子时间是 GPU 自己执行一个 kernel 的成本。较新的记录还测了引擎的一个 Triton kernel（RMSNorm）
# 从 Python eager 调用的开销，也就是引擎实际付出的开销：b) 会用到。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_launch(rec))
    print(lab.launch_table(rec))

# %% [markdown] tags=["lang-en"]
# ### b) How many kernels per decode step
#
# `torch.profiler` around one `engine.step()` of an eager engine. *Ops dispatched* are the calls Python makes
# (`aten::linear` counts once, even though it calls `aten::addmm` inside); *GPU kernels* are what the GPU runs.
# The handbook's "1000+ kernels" is about kernels, so it is compared with kernels only, scaled to 80 layers.
#
# The last line compares cost per op: the time to enqueue one eager step divided by the ops it dispatches is
# several times what a tiny ATen op from a) costs (the line prints the ratio; {rec}`lab01.json:bound.enqueue_ms.0` ms
# over {rec}`lab01.json:census.ops_per_step` ops in the recording). The engine's ops are mostly Triton kernels launched from
# Python (a wrapper computing strides and the grid, then Triton's launcher), plus the model's own Python
# between them; both cost far more per op than `x.add_(1)`. This is what a graph removes at decode time.

# %% [markdown] tags=["lang-zh"]
# ### b) 每个 decode 步多少个 kernel
#
# 用 `torch.profiler` 包住 eager 引擎的一次 `engine.step()`。*分发的算子* 是 Python 发出的调用（`aten::linear`
# 只算一次，尽管它内部调用 `aten::addmm`）；*GPU kernel* 是 GPU 真正执行的。手册说的 "1000+ 个 kernel"
# 指 kernel，所以只拿 kernel 和它比，并换算到 80 层。
#
# 最后一行比较每个算子的成本：一个 eager 步的排队时间除以它分发的算子数，是 a) 中 ATen 小算子的好几倍
# （这一行会打印倍数；记录中是 {rec}`lab01.json:bound.enqueue_ms.0` ms 分给 {rec}`lab01.json:census.ops_per_step` 个算子）。
# 引擎的算子大多是从 Python 启动的 Triton kernel（先由包装函数算 stride 和 grid，再走 Triton 的 launcher），
# 再加上模型自身在算子之间的 Python 代码；两者每个算子都比 `x.add_(1)` 贵得多。decode 时 CUDA Graph 去掉的
# 正是这部分。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.census_table(rec))
    print(lab.per_op_gap(rec))

# %% [markdown] tags=["lang-en"]
# ### c) CPU-bound or GPU-bound?
#
# Kernel launches are **asynchronous**: Python enqueues kernels while the GPU runs earlier ones. So an eager step
# takes about `max(CPU enqueue time, GPU time)`, and a graph (which makes the CPU part almost free) can save at
# most the **exposed** CPU time, `max(0, enqueue - GPU)`, not "the launch overhead" on top of the compute.
#
# For each batch size the recorder measures one decode forward of the model: the CPU time to enqueue it, the GPU
# time of its kernels run back to back (the GPU is parked in a spin kernel while the CPU enqueues), the eager wall
# time and the replay time of the same forward captured as a graph. Questions: does *saved* follow *exposed CPU*?
# At which batch size does the GPU time overtake the enqueue time? The line under the table answers both.
#
# Noise: enqueue and eager are separate runs of the same work, and the enqueue time jumps by several ms from one
# batch size to the next with no trend (Python, CPU clocks, other processes). Where *eager* is below *enqueue*,
# the two agree within that noise; newer records store the range over repeats (`*_range` in the JSON, its
# largest spread printed under the table) to show it.

# %% [markdown] tags=["lang-zh"]
# ### c) CPU 瓶颈还是 GPU 瓶颈？
#
# kernel launch 是**异步**的：Python 排队新 kernel 时，GPU 在执行之前的 kernel。所以一个 eager 步大约需要
# `max(CPU 排队时间, GPU 时间)`；CUDA Graph 让 CPU 部分几乎免费，它最多能省下**暴露**出来的 CPU 时间
# `max(0, 排队 - GPU)`，而不是叠加在计算之上的"launch overhead"。
#
# 对每个 batch，记录程序测量一次 decode forward：CPU 排队时间、kernel 连续执行的 GPU 时间（CPU 排队时让 GPU
# 先在一个自旋 kernel 里等着）、eager 的墙钟时间，以及同一个 forward 捕获成 graph 后的重放时间。问题：
# *saved* 是否跟着 *exposed CPU* 走？GPU 时间在哪个 batch 超过排队时间？表格下面那一行回答这两个问题。
#
# 噪声：enqueue 和 eager 是同一份工作的两次独立测量，enqueue 在不同 batch 之间会跳动好几 ms、没有趋势
# （Python、CPU 频率、其他进程）。*eager* 低于 *enqueue* 的地方，两者在噪声范围内一致；较新的记录会保存多次
# 重复的范围（JSON 里的 `*_range`，最大波动打印在表格下方）。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_bound(rec))
    print(lab.bound_table(rec))
    print(lab.bound_verdict(rec))

# %% [markdown] tags=["lang-en"]
# ### d) The engine's TPOT, eager vs graphs
#
# Time per output token of the whole engine (scheduler, input preparation, forward, sampling) with
# `enforce_eager=True` and with FULL decode graphs. The dropdown above the plot shows one mode at a time. On a GPU both engines
# also run with *async scheduling* (on by default with CUDA in this engine): the CPU prepares step n+1 while the GPU runs step
# n, so with graphs the TPOT approaches the GPU time of a step. Compare with it off:
# `minivllm bench latency --modes FULL_DECODE_ONLY,FULL_DECODE_ONLY+sync`.

# %% [markdown] tags=["lang-zh"]
# ### d) 引擎 TPOT：eager 与 CUDA Graph
#
# 整个引擎（调度、输入准备、forward、采样）每个输出 token 的时间，分别在 `enforce_eager=True` 和 FULL decode
# graph 下测量。图上方的下拉菜单一次显示一种模式。在 GPU 上两个引擎都开着*异步调度*（本引擎在 CUDA 下默认开启）：GPU 跑第 n 步时
# CPU 已经在准备第 n+1 步，所以有了 CUDA Graph 之后 TPOT 接近一步的 GPU 时间。关掉它对比：
# `minivllm bench latency --modes FULL_DECODE_ONLY,FULL_DECODE_ONLY+sync`。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_tpot(rec))
    print(lab.tpot_table(rec))

# %% [markdown] tags=["lang-en"]
# ### e) The handbook's capture / replay snippet, run
#
# The handbook (§1.2) shows capture and replay in ten lines. Below is what it gave when recorded, then the
# snippet itself, runnable on a GPU (`cuda` is `torch.cuda`; the warm-up on a side stream before capturing is
# what PyTorch's documentation asks for). The engine does the same at startup for each capture size:
# [worker/graph_capture.py](../minivllm/worker/graph_capture.py), `capture_graphs`. At run time a batch is padded
# up to the next captured size, and one larger than the largest captured size runs without a graph; vLLM's
# dispatcher does the same with its token counts
# ([vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py)).

# %% [markdown] tags=["lang-zh"]
# ### e) 运行手册里的捕获/重放代码
#
# 手册（§1.2）用十行代码展示捕获与重放。下面先是记录时的结果，然后是这段代码本身，可在 GPU 上运行
# （`cuda` 即 `torch.cuda`；捕获前在副 stream 上预热是 PyTorch 文档的要求）。引擎启动时对每个捕获尺寸做的
# 是同一件事：[worker/graph_capture.py](../minivllm/worker/graph_capture.py) 中的 `capture_graphs`。运行时，batch 会被
# pad 到下一个已捕获尺寸，超过最大捕获尺寸的 batch 不走图；vLLM 的 dispatcher 按 token 数做的是同样的事
# （[vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py)）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.snippet_text(rec))

# %% tags=["nbval-skip"] id="gpu-snippet"
if lab.gpu_only("The capture / replay snippet"):
    import torch
    from torch import cuda

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).cuda()
    dummy_input, real_input = torch.zeros(4, 256, device="cuda"), torch.randn(4, 256, device="cuda")
    with torch.inference_mode():
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            model(dummy_input)  # warm-up before capture
        cuda.current_stream().wait_stream(side)
        # recording (once)
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            static_out = model(dummy_input)
        # running (every step)
        dummy_input.copy_(real_input)  # the input goes into the fixed tensor
        g.replay()  # one submission
        print("replay matches eager:", torch.allclose(static_out, model(real_input)))

# %% tags=["nbval-ignore-output"] id="01-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown] tags=["lang-en"]
# ## 3. Run it here
#
# The same measurements on your device. On a CPU there are no CUDA graphs: you see the eager side only (and a
# CPU op costs far less to launch than a CUDA kernel, because no driver is involved). The model is the embedded
# `minivllm-tiny`. Outputs here are timings, so they differ from run to run.

# %% [markdown] tags=["lang-zh"]
# ## 3. 在本机运行
#
# 同样的测量在你的设备上跑一遍。CPU 上没有 CUDA Graph，只能看到 eager 这一侧（而且 CPU 算子的 launch 比 CUDA
# kernel 便宜得多，因为不经过驱动）。模型是内置的 `minivllm-tiny`。这里的输出是计时，每次运行都会不同。

# %% tags=["nbval-ignore-output"] id="01-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% tags=["nbval-ignore-output"]
here = {"launch_overhead": lab.launch_overhead(reps=5)}
lab.show(lab.plot_launch(here))
print(lab.launch_table(here))

# %% tags=["nbval-ignore-output"]
model = lab.model()
print(lab.describe_model(model))
eager = lab.make_llm(model, graphs=False)
here["census"] = lab.kernel_census(eager)
print(lab.census_table(here))

# %% tags=["nbval-ignore-output"]
llms = {"eager": eager}
if lab.device.kind == "cuda":
    llms["graphs"] = lab.make_llm(model, graphs=True)
here["tpot"] = lab.engine_tpot(llms, repeats=1)
lab.show(lab.plot_tpot(here))
print(lab.tpot_table(here))

# %% [markdown] tags=["lang-en"]
# ## 4. GPU only
#
# The CPU/GPU split of c) needs a GPU's asynchronous stream, and a model large enough for the GPU to have work:
# a random-weight Qwen3-0.6B (28 layers). Then a live toggle runs the engines of section 3 (the model printed
# there) in either mode.

# %% [markdown] tags=["lang-zh"]
# ## 4. 仅限 GPU
#
# c) 中的 CPU/GPU 拆分需要 GPU 的异步 stream，以及足够大、让 GPU 有活干的模型：随机权重的 Qwen3-0.6B（28 层）。
# 随后一个实时开关用第 3 节的引擎（那里打印的模型）在两种模式下运行。

# %% tags=["nbval-skip"] id="gpu-bound-sweep"
if lab.gpu_only("The CPU-bound vs GPU-bound sweep"):
    big = lab.make_llm(lab.model("qwen3-0.6b"), graphs=False, max_num_seqs=256)
    here["bound"] = lab.bound_sweep(big)
    del big
    lab.free_memory()
    lab.show(lab.plot_bound(here))
    print(lab.bound_table(here))
    print(lab.bound_verdict(here))

# %% tags=["nbval-skip"] id="gpu-tpot-toggle"
if lab.gpu_only("The live eager / graphs toggle"):
    display(lab.tpot_toggle(llms, lab.describe_model(model)))

# %% [markdown] tags=["lang-en"]
# ## 5. Self-test
#
# Two of the handbook's self-test questions. Click an option: the feedback explains it, gives our model answer
# (the handbook gives none) and the numbers this lab measured (the recorded GPU results when present, else
# yours); a wrong option gives a hint, so try again. You can also grade an answer directly:
# `from minivllm_labs import grade; print(grade(lab.Q1, "C")[1])`.

# %% [markdown] tags=["lang-zh"]
# ## 5. 自检
#
# 手册里的两道自检题。点一个选项：反馈会解释它，给出我们的参考答案（手册没有给答案）以及本实验测得的数字
# （有 GPU 记录时用记录，否则用你本机的）；选错会给提示，可以再试。也可以直接评分：
# `from minivllm_labs import grade; print(grade(lab.Q1, "C", lang="zh")[1])`。

# %% tags=["nbval-check-output"]
lab.quiz(lab.Q1, rec or here)

# %% tags=["nbval-check-output"]
lab.quiz(lab.Q4, rec or here)

# %% [markdown] tags=["lang-en"]
# ## 6. Try it yourself
#
# 1. **Fewer ops per call.** Predict the eager cost per op of `lab.launch_overhead(n_ops=10)` compared with
#    1,000 ops, then run it in the cell below. *Hint:* what is paid once per call rather than per op?
# 2. **A bigger batch.** Predict how the eager TPOT changes from batch 1 to batch 16 on your device, then run
#    `lab.engine_tpot({"eager": eager}, (1, 16), repeats=3)`. *Hint:* on a CPU, compute grows with the batch;
#    on a GPU with a small model, the enqueue time does not.
#
# <details><summary>Solution · 参考答案</summary>
#
# 1. Noticeably more per op (the cell below prints it): the synchronisation at the end of each timed call
#    is shared by only 10 ops. Launch cost is paid per op, so a graph's gain scales with the number of kernels.
# 2. On a CPU the TPOT grows with the batch (the CPU does the math). On a GPU with this tiny model it barely
#    moves: the step is CPU-bound, as c) shows for every batch up to 256 with the 0.6B model.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 动手试试
#
# 1. **每次调用更少的算子。** 先预测 `lab.launch_overhead(n_ops=10)` 每个算子的 eager 成本与 1000 个算子时
#    相比如何，再在下面的单元格里运行。*提示*：哪些开销是每次调用付一次，而不是每个算子付一次？
# 2. **更大的 batch。** 预测你的设备上 eager TPOT 从 batch 1 到 batch 16 怎么变，再运行
#    `lab.engine_tpot({"eager": eager}, (1, 16), repeats=3)`。*提示*：CPU 上计算量随 batch 增长；GPU 上用小模型时，
#    排队时间不随 batch 变。
#
# <details><summary>Solution · 参考答案</summary>
#
# 1. 每个算子明显更贵（下面的单元格会打印出来）：每次计时末尾的同步只由 10 个算子分摊。launch 成本按算子付，所以 graph 的收益
#    随 kernel 数增长。
# 2. CPU 上 TPOT 随 batch 增长（计算由 CPU 完成）。GPU 上用这个很小的模型几乎不变：这一步受 CPU 限制，c) 中
#    0.6B 模型直到 batch 256 都是如此。
#
# </details>

# %% tags=["nbval-ignore-output"]
print(lab.launch_table({"launch_overhead": lab.launch_overhead(n_ops=10, reps=5)}))

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **Q1.** At best about 15 ms, and only if all 5 ms is exposed CPU time (CPU work the GPU waits for); next to no
# gain if the GPU is the bottleneck. Here exposed CPU time is half or more of the eager step at every batch size
# (batch 1: {rec}`lab01.json:bound.exposed_cpu_ms.0:.1f` of {rec}`lab01.json:bound.eager_ms.0:.1f` ms; batch 5, the least: {rec}`lab01.json:bound.exposed_cpu_ms.3:.1f` of {rec}`lab01.json:bound.eager_ms.3:.1f` ms).
#
# **Q4.** A graph replays one shape only; capturing costs time and memory and would stall serving; padding a small
# decode batch to the next captured size is cheap, because at small batch the step waits on its chain of kernels, not
# on its rows (in c, the padded batch 8 ran no slower than batch 5).
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **Q1.** 最好约 15 ms，而且只有这 5 ms 全是暴露的 CPU 时间（GPU 在等 CPU）时才成立；GPU 是瓶颈时几乎没有收益。
# 本实验中每个 batch 的 eager 步一半或更多是暴露的 CPU 时间（batch 1：{rec}`lab01.json:bound.exposed_cpu_ms.0:.1f` ms，共 {rec}`lab01.json:bound.eager_ms.0:.1f` ms；最少的 batch 5：{rec}`lab01.json:bound.exposed_cpu_ms.3:.1f` ms，共
# {rec}`lab01.json:bound.eager_ms.3:.1f` ms）。
#
# **Q4.** graph 只能重放一个 shape；捕获耗时又占显存，会卡住服务；把小 batch 的 decode pad 到下一个已捕获尺寸
# 很便宜：小 batch 时这一步等的是一串 kernel 的延迟，而不是行数（c 中 pad 到 8 的 batch 并不比 batch 5 慢）。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 7. Summary of verdicts
#
# Of the handbook's three steps, the first two hold roughly (a launch costs 5-10 µs *eagerly*; kernel counts are in
# the hundreds to thousands, depending on fusion). The third is the wrong one: launch overhead is not added to a
# fixed compute time, because launches overlap the GPU's work. What a graph saves is the exposed CPU time, which
# for this 0.6B model on an H200 is half or more of the eager step at every batch size measured (at least
# {rec}`lab01.json:bound.exposed_cpu_ms.3:.1f` of {rec}`lab01.json:bound.eager_ms.3:.1f` ms, at batch 5): at or above the top of 25-50%.
#
# Engine code: [worker/graph_capture.py](../minivllm/worker/graph_capture.py) (`capture_graphs`: the capture),
# [worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) (`CudagraphDispatcher.dispatch`:
# padding to a captured size, replay or eager), [worker/model_runner.py](../minivllm/worker/model_runner.py)
# (`ModelRunner.execute_model`), [kernels/triton_norm.py](../minivllm/kernels/triton_norm.py) (`rms_norm`, the
# Triton kernel of a)), and this lab's measurements in `labs/minivllm_labs/lab01.py`.

# %% [markdown] tags=["lang-zh"]
# ## 7. 结论汇总
#
# 手册的三步里，前两步大致成立（一次 launch 在 *eager* 下 5-10 μs；kernel 数在几百到上千，取决于算子融合）。
# 错的是第三步：launch overhead 并不是叠加在固定的计算时间上，因为 launch 与 GPU 计算重叠。graph 省下的是暴露的
# CPU 时间；对 H200 上的 0.6B 模型，它是每个 batch 的 eager 步的一半或更多（最少的 batch 5 也有
# {rec}`lab01.json:bound.exposed_cpu_ms.3:.1f` ms，共 {rec}`lab01.json:bound.eager_ms.3:.1f` ms），处在 25-50% 的上限或更高。
#
# 引擎代码：[worker/graph_capture.py](../minivllm/worker/graph_capture.py)（`capture_graphs`：捕获），
# [worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py)（`CudagraphDispatcher.dispatch`：pad 到已捕获尺寸、
# 重放或 eager），[worker/model_runner.py](../minivllm/worker/model_runner.py)（`ModelRunner.execute_model`），
# [kernels/triton_norm.py](../minivllm/kernels/triton_norm.py)（`rms_norm`，a) 中的 Triton kernel），本实验的测量代码在
# `labs/minivllm_labs/lab01.py`。

# %% tags=["nbval-check-output"]
display(HTML(lab.verdict_table(rec)))
