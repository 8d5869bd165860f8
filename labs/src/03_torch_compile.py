# Source of labs/03_torch_compile.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 03

# %% [markdown]
# # Lab 03 · torch.compile in the engine · 引擎里的 torch.compile

# %% [markdown] tags=["lang-en"]
# The handbook (§2) says: Dynamo traces PyTorch code into an FX graph, Inductor turns it into Triton kernels
# that fuse several ops, the result is "10-30% faster than eager"; vLLM "compiles per layer by default";
# custom ops such as paged attention are registered with `torch.library` so compile can see them; and
# compile and CUDA graphs stack: "两者叠加最佳".
#
# This lab looks inside each step on the engine itself:
#
# - **a)** what Dynamo sees: the FX graph of one decoder layer, its graph breaks and guards, with attention
#   registered and unregistered (self-test 2), and why `fullgraph=True` turns an unregistered op into a startup error;
# - **b)** what Inductor makes of a residual add + RMSNorm, next to the engine's hand-written Triton kernel;
# - **c)** compilation modes 0 / 2 / 3 (vLLM's `compilation_config={"mode": N}`, `CompilationMode` in
#   [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py), where `level` is the deprecated name, still the record's key) with and without CUDA graphs: TPOT at batch 1 / 8 / 64, kernels per step, compile time,
#   recompiles;
# - **d)** compile scopes (model / layer / ops) against "per layer is vLLM's default", and mode 3's split;
# - **e)** interview question 1: graphs alone, compile alone, both, on two builds of the engine.

# %% [markdown] tags=["lang-zh"]
# 手册（§2）说：Dynamo 把 PyTorch 代码 trace 成 FX graph，Inductor 把它变成融合多个算子的 Triton kernel，
# 结果“比 eager 快 10-30%”；vLLM “默认按层编译”；paged attention 这类自定义算子用 `torch.library` 注册，
# compile 才能识别；compile 和 CUDA Graph 可以叠加：“两者叠加最佳”。
#
# 本实验在引擎上逐步看进去：a) Dynamo 看到了什么：一个 decoder 层的 FX graph、断图和 guard，attention
# 注册与未注册对比（自检题 2），以及为什么 `fullgraph=True` 让未注册的算子变成启动错误；b) Inductor 为 residual add + RMSNorm 生成了什么，
# 与引擎手写的 Triton kernel 并排；c) 编译模式 0 / 2 / 3（vLLM 的 `compilation_config={"mode": N}`，即
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py) 中的 `CompilationMode`，`level` 是已弃用的旧名，记录里的键仍叫 level），开关 CUDA Graph：batch 1 / 8 / 64 的 TPOT、每步 kernel 数、编译时间、重编译次数；d) 编译范围（整个模型 /
# 每层 / 选定算子）与“默认按层”的说法，以及 mode 3 的切分；
# e) 面试题 1：只用图、只用 compile、两者都用，在两种构建上对比。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("03")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
model = lab.model()
print(lab.describe_model(model))

# %% [markdown]
# ## 2. a) What Dynamo sees · Dynamo 看到了什么

# %% [markdown] tags=["lang-en"]
# `torch._dynamo.explain` runs one decoder layer of the engine ([models/llama.py](../minivllm/models/llama.py)
# `DecoderLayer.forward`) under Dynamo and reports the graphs it captured, the graph breaks with their reasons,
# and the guards (the checks Dynamo runs before reusing the compiled code: tensor shapes and dtypes, global
# state, module attributes). The FX graph below is shortened (module paths trimmed). Look for the attention
# op: registered with `torch.library` ([attention/layer.py](../minivllm/attention/layer.py)
# `unified_attention`), it is **one node** with a fake (shape-only) implementation, as vLLM's attention is
# (`vllm::unified_attention_with_output`, one of the registered ops listed in [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)).

# %% [markdown] tags=["lang-zh"]
# `torch._dynamo.explain` 在 Dynamo 下跑引擎的一个 decoder 层（[models/llama.py](../minivllm/models/llama.py) 的
# `DecoderLayer.forward`），报告它捕获的图、断图及原因、guard（Dynamo 复用编译结果前要检查的条件：张量形状和 dtype、
# 全局状态、模块属性）。下面的 FX graph 做了简化（去掉了模块路径）。找找 attention：它用 `torch.library` 注册
# （[attention/layer.py](../minivllm/attention/layer.py) 的 `unified_attention`），在图里是**一个节点**，带一个只推形状的 fake 实现，和 vLLM 的 attention 一样
# （`vllm::unified_attention_with_output`，是 [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py) 列出的已注册算子之一）。

# %% tags=["nbval-ignore-output"]
here = {"registration": lab.registration(model, engine=False)}
print(lab.dynamo_text(here["registration"]["auto"]["layer"]))

# %% [markdown] tags=["lang-en"]
# **Self-test 2: the same layer with `attention_backend="unregistered"`**: the same Python, hidden from Dynamo
# the way a plain C++/CUDA extension call is. Traced without `fullgraph`, every attention call is a graph break and
# the graphs hold no attention node. With `fullgraph=True`, what modes 1-3 compile with, as every vLLM mode does by
# default (modes 2-3 through `@support_torch_compile` in [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py)
# and its wrapper in [vllm/compilation/wrapper.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/wrapper.py); mode 1 by another path,
# `GPUModelRunner.load_model` in [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py), which
# calls `torch.compile` on the model itself; both pass `fullgraph=envs.VLLM_TEST_DYNAMO_FULLGRAPH_CAPTURE`, on unless
# that variable is set to 0), a graph break is an error: vLLM compiles during its startup profile
# run, so an op Dynamo cannot trace stops the engine before it serves instead of leaving it slow.

# %% [markdown] tags=["lang-zh"]
# **自检题 2：同一个层，`attention_backend="unregistered"`**：同样的 Python 代码，像普通的 C++/CUDA 扩展调用那样
# 对 Dynamo 隐藏。不带 `fullgraph` trace 时，每次 attention 调用都断图，图里也没有 attention 节点。mode 1-3 都用
# `fullgraph=True` 编译，和 vLLM 默认的每个模式一样（mode 2-3 经由 [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py)
# 的 `@support_torch_compile` 及 [vllm/compilation/wrapper.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/wrapper.py) 里的包装；mode 1 走另一条路：
# [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py) 的 `GPUModelRunner.load_model` 自己对模型调用
# `torch.compile`；两条路都传 `fullgraph=envs.VLLM_TEST_DYNAMO_FULLGRAPH_CAPTURE`，除非把该变量设为 0），这时断图就是错误：vLLM 在启动时的 profile run
# 中编译，所以 Dynamo 无法 trace 的算子会让引擎在服务之前就停下，而不是留下一个变慢的引擎。

# %% tags=["nbval-ignore-output"]
print(lab.dynamo_text(here["registration"]["unregistered"]["layer"], fx=False))

# %% [markdown] tags=["lang-en"]
# Recorded on the H200: one layer under Dynamo and the whole engine (28 layers) at mode 1, Dynamo only, with attention
# registered and unregistered. Registered, the engine traces once at startup and serves. Unregistered, its startup
# fails with Dynamo's `Unsupported` error, the measurement itself (`registration.fullgraph_engine`), so the
# unregistered layer row comes from an engine without compile. What the graph breaks would cost needs an engine that
# allows them: only `allow_graph_breaks=True` (mode 1, no vLLM equivalent) does, and the figures for it are from
# `attention_*.json`, recorded when mode 1 still compiled without `fullgraph`.

# %% [markdown] tags=["lang-zh"]
# H200 记录：一个层在 Dynamo 下的情况，以及整个引擎（28 层）在 mode 1 下（只跑 Dynamo），attention 注册与未注册对比。注册时引擎
# 启动时 trace 一次，然后正常服务。不注册时启动失败，报 Dynamo 的 `Unsupported` 错误，这个错误本身就是测量结果
# （`registration.fullgraph_engine`），所以未注册那一行的层视图来自一个不编译的引擎。断图的代价要在允许断图的引擎上才能测：只有
# `allow_graph_breaks=True`（仅 mode 1，vLLM 没有对应选项）允许断图，相应数字来自 `attention_*.json`，录制时 mode 1 还不带
# `fullgraph` 编译。

# %% tags=["nbval-check-output"]
print(lab.registration_table(rec))
print(lab.Q1.evidence(rec))

# %% [markdown]
# ## 3. b) What Inductor generates · Inductor 生成了什么

# %% [markdown] tags=["lang-en"]
# `add_rms_norm` is the engine's residual add + RMSNorm in plain PyTorch (seven ops eagerly, each its own
# kernel). Compiled by Inductor, the kernel source is below: Triton on a GPU (the recorded one), C++ on a
# CPU (the one made here). Next to it, the engine's hand-written Triton kernel
# ([kernels/triton_norm.py](../minivllm/kernels/triton_norm.py) `_rms_norm_kernel`), which the engine uses at
# mode 0 and, by default, inside mode 3's pieces (`custom_ops: ["all"]`). vLLM's default differs: with Inductor and a
# compile mode it turns its custom ops off and runs Inductor's code (`custom_ops: ["none"]`, [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py); [README](../README.md#where-minivllm-differs-from-vllm)).

# %% [markdown] tags=["lang-zh"]
# `add_rms_norm` 是引擎的 residual add + RMSNorm 的纯 PyTorch 写法（eager 下 7 个算子，各自一个 kernel）。
# 经 Inductor 编译后的 kernel 源码如下：GPU 上是 Triton（记录中的那个），CPU 上是 C++（本机生成的）。旁边是引擎手写的
# Triton kernel（[kernels/triton_norm.py](../minivllm/kernels/triton_norm.py) 的 `_rms_norm_kernel`），mode 0 时引擎用它，
# 默认的 mode 3 也在各分段里用它（`custom_ops: ["all"]`）。vLLM 的默认不同：用 Inductor 且开了编译模式时关掉自定义算子，用 Inductor
# 生成的代码（`custom_ops: ["none"]`，[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)；[README](../README.md#where-minivllm-differs-from-vllm)）。

# %% tags=["nbval-check-output"]
print(lab.kernel_text(rec))

# %% tags=["nbval-ignore-output"]
here["inductor"] = lab.inductor_kernel()
print(lab.kernel_text(here, max_lines=25))

# %% tags=["nbval-check-output"]
print(lab.hand_written_kernel())

# %% [markdown]
# ## 4. c) Compilation modes, with and without graphs · 编译模式，开关 CUDA Graph

# %% [markdown] tags=["lang-en"]
# Mode (level) 0: no compile, no Dynamo. Mode 2: the forward traced once with a dynamic token dimension, compiled
# by Inductor. Mode 3: that trace split at every attention op, each piece compiled (identical pieces once) and,
# with graphs on, captured as PIECEWISE graphs ([compilation/backend.py](../minivllm/compilation/backend.py)
# `SplitBackend`, [compilation/levels.py](../minivllm/compilation/levels.py) `compile_model`). With a compile mode
# asked for, the engine uses Inductor's code for the small ops (`custom_ops: ["none"]`, as vLLM does for any mode above
# 0 with the Inductor backend, [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)); at mode 0 its hand-written kernels. The recorder ran every setup on the H200: TPOT (median and min-max over 3 runs), kernels per
# decode step (engines without graphs, from the profiler), compile time at startup, traces, run-time recompiles and
# pieces. Mode 1 (stock `torch.compile`, vLLM's `STOCK_TORCH_COMPILE` in [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)) is in sections a) and d), Dynamo only.
# Setups without mode 3's split run FULL_DECODE_ONLY graphs (full decode graphs: there are no pieces to capture);
# mode 3 runs FULL_AND_PIECEWISE, the default cudagraph mode here and in vLLM.

# %% [markdown] tags=["lang-zh"]
# mode（level）0：不编译，也不跑 Dynamo。mode 2：前向 trace 一次，token 维是动态的，由 Inductor 编译。mode 3：在每个
# attention 处切开，各分段分别编译（相同的只编一次），开图时捕获成 PIECEWISE 分段图
# （[compilation/backend.py](../minivllm/compilation/backend.py) 的 `SplitBackend`，[compilation/levels.py](../minivllm/compilation/levels.py)
# 的 `compile_model`）。指定了编译模式时引擎用 Inductor 生成的小算子（`custom_ops: ["none"]`，与 vLLM 相同：vLLM 在 mode 大于 0 且用 Inductor 后端时都这样，见 [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）；mode 0 用手写
# kernel。每种配置都在 H200 上测了：TPOT（3 次的中位数和最小-最大值）、每个解码步的 kernel 数（不开图时，来自 profiler）、
# 启动编译时间、trace 次数、运行时重编译和分段数。mode 1（原生 `torch.compile`，即 [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py) 中 vLLM 的 `STOCK_TORCH_COMPILE`）见 a)、d) 两节，只跑 Dynamo。
# 没有 mode 3 切分的配置用 FULL_DECODE_ONLY（decode 整图：没有分段可捕获）；mode 3 用 FULL_AND_PIECEWISE，这是本引擎和 vLLM 默认的
# cudagraph 模式。

# %% tags=["nbval-check-output"]
print(lab.configs_table(rec))
if rec:
    lab.show(lab.plot_levels(rec))

# %% tags=["nbval-ignore-output"] id="03-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown] tags=["lang-en"]
# **Kernels per step do not set the time.** Without graphs a step is bound by the CPU's work per launch, so compare
# the host time per kernel below. Inductor launches fewer kernels than PyTorch's own ops (it fuses them), but more
# than the engine's hand-written fused kernels, and mode 2 is still faster than eager with those: its generated
# code launches each kernel with far less Python than the eager module tree. The hand-written Triton kernels are the
# most expensive to launch from Python (a wrapper computing strides and the grid, then Triton's launcher), and
# mode 3 with them calls each through its registered custom op from inside the compiled pieces, which is consistent
# with it being slower, without graphs, than the eager engine that launches the same kernels (the lines below). With
# graphs the launch cost is gone and the same build is among the fastest (the table above). So "compile issues fewer kernels" holds against PyTorch's ops, not against
# fused kernels, and is not why compile is faster.

# %% [markdown] tags=["lang-zh"]
# **每步的 kernel 数并不决定耗时。** 不开图时，一步的时间取决于 CPU 每次 launch 的开销，所以看下面每个 kernel 摊到的主机时间。
# Inductor launch 的 kernel 比 PyTorch 自带算子少（它做了算子融合），但比引擎手写的融合 kernel 多，而 mode 2 仍比用这些
# kernel 的 eager 快：它生成的代码 launch 每个 kernel 时的 Python 开销比 eager 的模块树小得多。手写 Triton kernel 从 Python
# launch 的代价最高（先由包装函数算 stride 和 grid，再走 Triton 的 launcher），而 mode 3 配手写 kernel 时，每个 kernel 都要在
# 编译后的分段里经由注册的自定义算子调用，这与它在不开图时比 launch 同样 kernel 的 eager 引擎还慢相符（见下面几行）。开图后
# launch 开销消失，同一个构建反而是最快的之一（见上表）。所以“编译后 kernel 更少”只在对比 PyTorch 自带算子时成立，对比融合 kernel 则不成立，而且它也不是编译更快的原因。

# %% tags=["nbval-check-output"]
print(lab.kernels_vs_time_text(rec))

# %% [markdown] tags=["lang-en"]
# **Run it here** with the knobs: `level`, `custom_ops`, `compile_scope`, `attention_backend`, and the graph
# mode (GPU only). On a CPU, Inductor compiling C++ takes a while, so the default here is mode 3 with the
# Dynamo-only backend (`"eager"`): it shows the split without compiling kernels.

# %% [markdown] tags=["lang-zh"]
# **在本机运行**，可以改这些参数：`level`、`custom_ops`、`compile_scope`、`attention_backend`，以及图模式（仅 GPU）。
# CPU 上 Inductor 编译 C++ 比较慢，所以这里默认用 mode 3 加只跑 Dynamo 的 `"eager"` 后端：能看到切分，但不编译 kernel。

# %% tags=["nbval-ignore-output"] id="03-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% tags=["nbval-ignore-output"]
setup = lab.EngineSetup("mine", level=3, graphs="NONE", custom_ops=None, backend="eager", scope="model",
                          attention_backend="auto")
here["configs"] = lab.sweep(model, (lab.EngineSetup("eager"), setup), batches=(1,), new_tokens=4, repeats=1,
                              census=False)
print(lab.configs_table(here))

# %% [markdown]
# ## 5. d) Compile scopes · 编译范围

# %% [markdown] tags=["lang-en"]
# The handbook lists three scopes: the whole model, each layer ("the default"), selected ops. The engine has
# all three at mode 1 (`compile_scope`), and mode 3 does what vLLM does: **one trace of the whole forward,
# split at attention** ([vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py) `VllmBackend`; vLLM's main branch splits at `vllm::unified_kv_cache_update` too:
# `set_splitting_ops_for_v1` in [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)). vLLM has no per-layer default. Recorded (Dynamo only, so the counts are Dynamo's): traces at startup, traces added
# while serving, and mode 3's pieces. With `layer`, every layer instance is traced on its own; with `ops`, only
# the small ops' PyTorch forwards are compiled, and here none of them runs (the hand-written kernels are in use),
# so the record shows 0 traces; with mode 3, one trace gives `layers + 1` pieces.

# %% [markdown] tags=["lang-zh"]
# 手册列了三种范围：整个模型、每层（“默认”）、选定算子。引擎在 mode 1 下三种都支持（`compile_scope`），mode 3 则是
# vLLM 的做法：**整个前向 trace 一次，在 attention 处切开**（[vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py) 的 `VllmBackend`；vLLM 的 main 分支还在
# `vllm::unified_kv_cache_update` 处切开：见 [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py) 的 `set_splitting_ops_for_v1`）。vLLM 并没有“默认按层”。记录（只跑 Dynamo，计数都是 Dynamo 的）：启动时的 trace 数、
# 服务时新增的 trace 数、mode 3 的分段数。`layer` 时每个层实例各 trace 一次；`ops` 时只编译小算子的 PyTorch forward，而这里一个都没执行
# （用的是手写 kernel），所以记录是 0 次 trace；mode 3 一次 trace 得到 `层数 + 1` 段。

# %% tags=["nbval-check-output"]
print(lab.scopes_table(rec))
print(lab.split_text(rec and rec.get("split")))

# %% [markdown] tags=["lang-en"]
# **The split pieces, here**: the tiny model's forward traced once and cut at each attention op, as mode 3
# does ([compilation/backend.py](../minivllm/compilation/backend.py) `SplitBackend._split`). The middle pieces
# (the end of one layer and the start of the next) are the same code with other weights, which is why mode 3
# compiles 3 distinct pieces for a 28-layer model.

# %% [markdown] tags=["lang-zh"]
# **在本机看切分结果**：小模型的前向 trace 一次，像 mode 3 一样在每个 attention 处切开
# （[compilation/backend.py](../minivllm/compilation/backend.py) 的 `SplitBackend._split`）。中间的分段（上一层的后半加下一层的前半）
# 代码相同、只是权重不同，所以 28 层的模型 mode 3 只需编译 3 个不同的分段。

# %% tags=["nbval-ignore-output"]
split_llm = lab.make_llm(model, lab.EngineSetup("eager", custom_ops=("none",)), max_num_seqs=8)
here["split"] = lab.split_pieces(split_llm)
split_llm.shutdown()
print(lab.split_text(here["split"]))

# %% tags=["nbval-skip"] id="gpu-scopes"
if lab.gpu_only("The scope sweep on the 0.6B-shaped model"):
    print(lab.scopes_table({"scopes": lab.scopes(lab.model("qwen3-0.6b"))}))

# %% [markdown]
# ## 6. e) Interview question 1: do graphs and compile stack? · 面试题 1：图和 compile 能叠加吗？

# %% [markdown] tags=["lang-en"]
# Four corners (eager, graphs alone, compile alone = mode 3, both = mode 3 + FULL_AND_PIECEWISE) on two builds:
# **torch ops**, PyTorch's own elementwise ops (`custom_ops: ["none"]`), where compile has norms, RoPE and
# SiLU-and-mul to fuse; and **hand-fused**, the engine's Triton kernels (`custom_ops: ["all"]`), where little
# is left to fuse. A CUDA graph removes launches; compile changes the kernels. The buttons show one build.

# %% [markdown] tags=["lang-zh"]
# 四个角（eager、只用图、只用 compile = mode 3、两者 = mode 3 + FULL_AND_PIECEWISE），两种构建：**torch ops**，用
# PyTorch 自带的逐元素算子（`custom_ops: ["none"]`），compile 有 norm、RoPE、SiLU-and-mul 可以融合；**hand-fused**，用引擎的
# Triton kernel（`custom_ops: ["all"]`），几乎没有可融合的了。CUDA Graph 消除 launch；compile 改变 kernel 本身。按钮一次显示一种构建。

# %% tags=["nbval-check-output"]
print(lab.grid_table(rec))
if rec:
    lab.show(lab.plot_grid(rec))
print(lab.stacking_text(rec))

# %% [markdown] tags=["lang-en"]
# **Verdict on "两者叠加最佳".** The first half, "they can be stacked", holds: at mode 3 the engine runs compiled
# pieces inside PIECEWISE graphs, as vLLM's default (mode 3, FULL_AND_PIECEWISE: [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)) does. "Best" holds only when compile has something left to
# fuse (the lines above, from this record): with PyTorch's own ops, adding mode 3 to graphs makes the step several
# times faster; with the hand-fused kernels kept, the step is the same within the spread of the repeats, at batch 1
# and 64: nothing is left to fuse, so there is no gain and no loss that counts. A difference is read only beyond the
# spread: the medians alone suggest a small loss that the repeats do not support.

# %% [markdown] tags=["lang-zh"]
# **对“两者叠加最佳”的结论。** 前一半“可以叠加”成立：mode 3 时引擎就是在 PIECEWISE 图里跑编译后的分段，vLLM 的默认配置
# （mode 3、FULL_AND_PIECEWISE：[vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）也是如此。“最佳”只在 compile 还有可融合的东西时成立（见上面几行，数字来自本记录）：用 PyTorch 自带算子时，在图上再加
# mode 3 让每步快好几倍；保留手工融合的 kernel 时，batch 1 和 batch 64 的差别都在多次重复的波动范围之内：已经没有可融合的东西，
# 既没有收益，也没有算得上数的损失。只有超出波动范围的差别才算数：单看中位数会以为略有损失，但多次重复的结果并不支持。

# %% tags=["nbval-skip"] id="gpu-grid"
if lab.gpu_only("The graphs / compile / both grid"):
    here["configs"] = lab.sweep(lab.model("qwen3-0.6b"), lab.GPU_SETUPS[6:], batches=(1, 8))
    here["grid"] = lab.GRID
    print(lab.configs_table(here))

# %% [markdown]
# ## 7. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Pick an answer: the feedback gives our model answer and the recorded numbers. In Python:
# `from minivllm_labs import grade; print(grade(lab.Q1, "A", rec or here)[1])`.

# %% [markdown] tags=["lang-zh"]
# 选一个答案：反馈会给出参考答案和记录的数字。在 Python 里：
# `from minivllm_labs import grade; print(grade(lab.Q1, "A", rec or here)[1])`。

# %% tags=["nbval-ignore-output"]
for q in (lab.Q1, lab.Q2, lab.Q3, lab.Q4):
    lab.quiz(q, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab03.q1.** vLLM compiles every mode with fullgraph=True, and so does this engine: unregistered attention stops
# startup (Unsupported). Only where graph breaks are allowed (allow_graph_breaks=True, mode 1, no vLLM equivalent)
# does it run, breaking the graph at every call (76 breaks, TPOT {rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms against {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms). Register it, which also makes it the split
# point for piecewise graphs
#
# **lab03.q2.** Graphs remove launches, compile changes the kernels; they stack only when compile still has ops to
# fuse
#
# **lab03.q3.** One trace of the whole forward, split at attention into pieces compiled and captured separately
#
# **lab03.q4.** Batch-1 decode is bound by the CPU launching kernels one by one: compile makes each launch cheaper
# (339 kernels in {rec}`lab03.json:configs.L2.tpot_ms.1.median:.3f` ms vs eager's 200 in {rec}`lab03.json:configs.eager.tpot_ms.1.median:.2f` ms), graphs submit the whole step at once ({rec}`lab03.json:configs.graphs.tpot_ms.1.median:.4f` ms)
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab03.q1.** vLLM 每个模式都用 fullgraph=True 编译，本引擎也是：未注册的 attention 让启动失败（Unsupported）。只有允许断图时
# （allow_graph_breaks=True，仅 mode 1，vLLM 没有对应选项）才能运行，每次调用都断图（76 次断图，TPOT {rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms，注册后 {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms）。应注册它，这样它也
# 成为分段图的切分点。
#
# **lab03.q2.** 图消除 launch，compile 改变 kernel 本身；只有 compile 还有算子可融合时两者叠加才有收益。
#
# **lab03.q3.** 整个前向 trace 一次，在 attention 处切成分段，分别编译和捕获。
#
# **lab03.q4.** batch 1 的解码受 CPU 逐个发射 kernel 的限制：compile 让每次发射更便宜（339 个
# kernel {rec}`lab03.json:configs.L2.tpot_ms.1.median:.3f` ms，eager 200 个 {rec}`lab03.json:configs.eager.tpot_ms.1.median:.2f` ms），图一次提交整步（{rec}`lab03.json:configs.graphs.tpot_ms.1.median:.4f` ms）。
#
# </details>

# %% [markdown]
# ## 8. Try it yourself · 动手练习

# %% [markdown] tags=["lang-en"]
# 1. In the knobs cell of section 4, set `scope="layer"` and `level=1`. How many traces does the tiny model
#    give, and why that number? *Hint:* count its decoder layers (`describe_model` above).
#    <details><summary>Solution · 参考答案</summary>
#    One trace per decoder layer instance (Dynamo guards on `self`, so each layer object is a new entry), plus
#    run-time traces when a new shape arrives (mode 1 marks nothing dynamic). Mode 3 instead traces once.
#    </details>
# 2. Set `attention_backend="unregistered"` with `level=2`. What happens at startup, and why is that better than
#    a silent slowdown? *Hint:* modes 1-3 trace with `fullgraph=True`, as vLLM's do
#    ([vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)).
#    <details><summary>Solution · 参考答案</summary>
#    Startup fails with Dynamo's `Unsupported` error naming the disabled function, as the record's mode 1 engine did:
#    with `fullgraph=True` a graph break is an error, so an unregistered op is found before serving instead of as a
#    slower engine ({rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms against {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms a token with `allow_graph_breaks=True`, the Q1 feedback).
#    </details>

# %% [markdown] tags=["lang-zh"]
# 1. 在第 4 节的参数单元格里设 `scope="layer"`、`level=1`。小模型 trace 了几次？为什么是这个数？*提示：* 数一数它的
#    decoder 层数（见上面的 `describe_model`）。
#    <details><summary>Solution · 参考答案</summary>
#    每个 decoder 层实例 trace 一次（Dynamo 对 `self` 加 guard，每个层对象都是新条目），遇到新形状时运行时还会再 trace
#    （mode 1 不把任何维度标成动态）。而 mode 3 只 trace 一次。
#    </details>
# 2. 设 `attention_backend="unregistered"`、`level=2`。启动时发生了什么？为什么这比悄悄变慢要好？*提示：* mode 1-3 都用
#    `fullgraph=True` trace，vLLM 也一样（[vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)）。
#    <details><summary>Solution · 参考答案</summary>
#    启动失败，Dynamo 报 `Unsupported`，指出被禁用的函数，和记录中 mode 1 的引擎一样：`fullgraph=True` 时断图就是错误，所以
#    未注册的算子在服务前就被发现，而不是变成一个变慢的引擎（`allow_graph_breaks=True` 时每个 token {rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms，注册后 {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms，见 Q1 的反馈）。
#    </details>

# %% [markdown]
# ## 9. Summary of verdicts · 结论

# %% [markdown] tags=["lang-en"]
# One line per claim: the verdict, the number that decides it and the results file and key it comes from
# ("(record)" until `python -m minivllm_labs.record lab03` has run on a GPU).

# %% [markdown] tags=["lang-zh"]
# 每条说法一行：结论、决定它的数字、来自哪个结果文件的哪个键（在 GPU 上运行 `python -m minivllm_labs.record lab03`
# 之前显示“(record)”）。

# %% [markdown] tags=["lang-en"]
# **Verdict.** "10-30% faster than eager" is partly right: what compile gains depends on what it replaces. Against
# PyTorch's own ops Inductor fuses a lot (add + RMSNorm's {rec}`lab03.json:inductor.eager_ops` ops become
# {rec}`lab03.json:inductor.num_kernels` generated Triton kernel in the record) and stacks
# with CUDA graphs for a large gain; against this engine's hand-fused kernels it loses without graphs, and with graphs
# on it changes nothing beyond the spread. vLLM does not compile per layer: it traces the whole forward once and splits it at attention ([vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py)). Registering
# attention with torch.library is what lets compile keep it as one node; unregistered, every attention call is a graph
# break, and since modes 1-3 compile with fullgraph, here and by default in vLLM (modes 2-3:
# [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`,
# [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)), the engine fails at startup
# instead of running slower.

# %% [markdown] tags=["lang-zh"]
# **结论。** "比 eager 快 10-30%" 部分正确：compile 的收益取决于它替换的是什么。对
# PyTorch 自带算子，Inductor 能做很多算子融合（add + RMSNorm 的 {rec}`lab03.json:inductor.eager_ops` 个算子在记录里变成
# {rec}`lab03.json:inductor.num_kernels` 个生成的 Triton kernel），与 CUDA Graph 叠加收益很大；对本引擎手写融合的
# kernel，不开图时反而更慢，开图时的差别不超出波动范围。vLLM 不按层编译：它把整个前向 trace 一次，在 attention
# 处切分（[vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py)）。attention 用 torch.library 注册后，compile 才能把它当作一个节点；不注册时每次
# attention 调用都是一次断图，而 mode 1-3 都用 fullgraph 编译（本引擎如此，vLLM 默认也如此：mode 2-3 见
# [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py)；mode 1 见
# [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py) 的 `GPUModelRunner.load_model`），所以引擎在启动时就报错，而不是跑得更慢。

# %% tags=["nbval-check-output"]
print(lab.verdicts_table(rec))
