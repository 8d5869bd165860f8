# Source of labs/02_inside_a_cuda_graph.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 02

# %% [markdown]
# # Lab 02 · Inside a CUDA graph · CUDA Graph 内部

# %% [markdown] tags=["lang-en"]
# The handbook (§1.2-1.4) shows how a CUDA graph is captured and replayed, lists three limits (fixed input
# addresses, no data-dependent branch, no allocation inside a graph) and says vLLM captures several batch
# sizes and pads a batch of 5 to the size-8 graph (it does: a batch replays the closest larger captured size,
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py) `_set_cudagraph_sizes`). A second article adds "150 MB per graph", "replay reuses
# the capture's random seed" and "`--max-num-seqs` is the number of graphs".
#
# This lab runs each of those statements, on raw torch graphs first and then on the engine:
#
# - **a)** the capture/replay snippet and one cell per limit that breaks (and the one that does not);
# - **b)** the sizes the engine captures, and what `max_num_seqs` really controls;
# - **c)** padding: what the padded rows cost, and one graph for the largest size only (interview question 2);
# - **d)** graph memory: one shared pool vs one pool per graph;
# - **e)** random numbers inside a replayed graph;
# - **f)** vLLM's five graph modes on the engine (NONE, FULL_DECODE_ONLY, FULL, PIECEWISE, FULL_AND_PIECEWISE), and
#   whether prefill is graphed (interview question 3).
#
# Cells are of four kinds: **setup**, **recorded** (measured once on an H200 by
# `python -m minivllm_labs.record lab02`, loaded with their provenance), **run it here** (your device: a CUDA
# GPU, else a tiny CPU configuration) and **GPU only** (they say so and do nothing on a CPU).

# %% [markdown] tags=["lang-zh"]
# 手册（§1.2-1.4）讲了 CUDA Graph 怎么捕获、怎么重放，列了三条限制（输入地址固定、不能有依赖数据的分支、
# 图内不能分配显存），还说 vLLM 会捕获多个 batch size，把 batch 5 pad 到 size 8 的图上（确实如此：batch 重放不小于它的最近一档已捕获尺寸，见
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py) 的 `_set_cudagraph_sizes`）。另一篇文章又说
# “每个图 150 MB”、“重放复用捕获时的随机种子”、“`--max-num-seqs` 就是图的个数”。
#
# 本实验把这些说法逐条跑一遍，先在裸的 torch 图上，再在引擎上：a) 捕获/重放示例，以及每条限制一个会出错
# （或不出错）的单元格；b) 引擎捕获哪些 size，`max_num_seqs` 到底控制什么；c) padding 的代价，以及只捕获
# 最大 size 会怎样（面试题 2）；d) 显存：一个共享显存池 vs 每个图一个池；e) 重放图里的随机数；
# f) 引擎上 vLLM 的五种图模式（NONE、FULL_DECODE_ONLY、FULL、PIECEWISE、FULL_AND_PIECEWISE），以及预填充是否走图（面试题 3）。
#
# 单元格分四类：**环境准备**、**H200 实测记录**（由 `python -m minivllm_labs.record lab02` 录制，带出处）、
# **在本机运行**（有 GPU 用 GPU，否则用很小的 CPU 配置）、**仅限 GPU**（在 CPU 上只打印说明）。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("02")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% [markdown]
# ## 2. a) Capture, replay, and the three limits · 捕获、重放与三条限制

# %% [markdown] tags=["lang-en"]
# The handbook's snippet: capture a forward once on a fixed input tensor, then for each step `copy_` the
# real input into that tensor and `replay()`. Below are the exact functions the recorder ran, then what they
# returned on the H200. Each limit gets one: rebinding the input name instead of `copy_` (limit 1), a branch
# decided on the host (limit 2), an allocation inside the capture (limit 3), and a host sync (`.item()` of a
# GPU value), which is what really fails.

# %% [markdown] tags=["lang-zh"]
# 手册的示例：在一个固定的输入张量上捕获一次前向，之后每一步把真实输入 `copy_` 进这个张量再 `replay()`。
# 下面先打印录制时真正执行的函数，再给出它们在 H200 上的结果。每条限制各一个：不用 `copy_` 而是重新绑定
# 变量名（限制 1）、在 CPU 侧决定的分支（限制 2）、在捕获里分配显存（限制 3），以及真正会失败的主机同步
# （对 GPU 张量调用 `.item()`）。

# %% tags=["nbval-check-output"]
for fn in (lab.capture_replay, lab.limit_fixed_address, lab.limit_branch):
    lab.show_code(fn)
    print()

# %% tags=["nbval-check-output"]
lab.show_code(lab.alloc_inside_capture)
print(lab.HOST_SYNC_CODE)

# %% tags=["nbval-check-output"]
print(lab.limits_text(rec))

# %% [markdown] tags=["lang-en"]
# Read the recorded lines against the handbook: limits 1 and 2 are real, and worse than an error - the
# replay **silently** computes on the old tensor, or takes the branch of the capture. Limit 3 is wrong as
# stated: allocation inside a capture works, because the caching allocator serves it from the graph's
# private pool (at the same address on every replay). What fails is making the CPU wait for a GPU value
# while the stream is capturing. The engine keeps every input in persistent buffers
# ([worker/input_batch.py](../minivllm/worker/input_batch.py)) and its attention reads sequence lengths from
# device tensors, so neither limit bites it.

# %% [markdown] tags=["lang-zh"]
# 对照手册看记录：限制 1 和 2 是真的，而且比报错更糟——重放会**悄悄地**用旧张量计算，或者一直走捕获时的分支。
# 限制 3 的说法是错的：捕获里可以分配显存，缓存分配器从图的私有显存池里分配（每次重放地址相同）。真正失败的是
# 在 stream 捕获时让 CPU 等 GPU 的值。引擎把所有输入放在持久化缓冲区里
# （[worker/input_batch.py](../minivllm/worker/input_batch.py)），attention 从设备张量读序列长度，所以这两条限制都不会踩到。

# %% tags=["nbval-skip"] id="gpu-limits"
if lab.gpu_only("Running the capture/replay cells"):
    here_limits = lab.graph_limits()
    print(lab.limits_text({"limits": here_limits}))

# %% [markdown]
# ## 3. b) Which sizes the engine captures · 引擎捕获哪些 size

# %% [markdown] tags=["lang-en"]
# The engine uses vLLM's rule ([config.py](../minivllm/config.py) `default_capture_sizes`,
# `EngineConfig.resolve`): 1, 2, 4, then every 8 up to 256, then every 16, up to
# `min(2 x max_num_seqs, 512)` and never above `max_num_batched_tokens`, unless `max_cudagraph_capture_size` or
# an explicit `cudagraph_capture_sizes` says otherwise (vLLM: `VllmConfig._set_cudagraph_sizes` in
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py); on its main branch it also
# appends `max_num_batched_tokens` when that lies below the cap, which this engine does not: README, "Where minivllm
# differs from vLLM"). Full decode graphs (FULL_DECODE_ONLY, and the default FULL_AND_PIECEWISE) are captured for the
# sizes up to `max_num_seqs` (a decode batch has one token per sequence), as in vLLM's
# [cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py)
# `initialize_cudagraph_keys`; FULL's graphs of any batch, keyed by token count, for all of them, as in vLLM. In this
# engine PIECEWISE graphs, keyed by token count, start from 2 tokens (a 1-token step replays size 2), where vLLM keys
# them from size 1 ([README](../README.md#where-minivllm-differs-from-vllm)). So `max_num_seqs` caps the batch; it is not the number of graphs, and there is no graph per
# sequence. This engine defaults to `max_num_seqs=256`; vLLM's `LLM` takes 1024 on a GPU of 70 GiB or more such as
# this H200 ([vllm/engine/arg_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/engine/arg_utils.py) `get_batch_defaults`), so it
# would capture full decode graphs for all 51 sizes, not 35 ([README](../README.md#where-minivllm-differs-from-vllm)).

# %% [markdown] tags=["lang-zh"]
# 引擎用 vLLM 的规则（[config.py](../minivllm/config.py) 的 `default_capture_sizes`、`EngineConfig.resolve`）：
# 1、2、4，然后每 8 一档到 256，再每 16 一档，上限 `min(2 x max_num_seqs, 512)`，且不超过 `max_num_batched_tokens`，
# 除非设置了 `max_cudagraph_capture_size` 或显式的 `cudagraph_capture_sizes`（vLLM 的规则见
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py) 的 `VllmConfig._set_cudagraph_sizes`；其 main 分支还会在
# `max_num_batched_tokens` 低于上限时把它补进列表，本引擎不补：见 README 的 "Where minivllm differs from vLLM"）。decode 整图（FULL_DECODE_ONLY 和默认的 FULL_AND_PIECEWISE）只捕获不超过
# `max_num_seqs` 的 size（decode 时每个序列一个 token），与 vLLM 的
# [cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py) 的 `initialize_cudagraph_keys` 相同；FULL 的整图适用于任何 batch，按 token 数区分，全部 size 都捕获，也与 vLLM 相同。本引擎按 token 数区分的 PIECEWISE 分段图从 2 个 token 起捕获（1 个 token 的步重放 size 2），而 vLLM 从 size 1 起（[README](../README.md#where-minivllm-differs-from-vllm)）。所以
# `max_num_seqs` 限制的是 batch 大小，不是图的个数，也不存在“每个序列一个图”。本引擎默认 `max_num_seqs=256`；vLLM 的
# `LLM` 在 70 GiB 及以上显存的 GPU（如这块 H200）上默认 1024（[vllm/engine/arg_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/engine/arg_utils.py)
# 的 `get_batch_defaults`），所以会为全部 51 个 size 捕获 decode 整图，而不是 35 个（见 [README](../README.md#where-minivllm-differs-from-vllm)）。

# %% tags=["nbval-check-output"]
here = {"capture_sizes": lab.capture_size_table()}
print(lab.capture_sizes_text(here))

# %% [markdown] tags=["lang-en"]
# **Knobs, live.** Change the three arguments and run the cell: it applies the engine's own rule. The
# second part builds a real engine with your knobs and prints what it reports at startup (on a CPU the mode
# is NONE: nothing is captured, but the configured sizes are the same).

# %% [markdown] tags=["lang-zh"]
# **动手调参数。** 改这三个参数再运行：用的就是引擎自己的规则。第二部分用你的参数真正建一个引擎，打印它启动时
# 报告的内容（在 CPU 上模式是 NONE，不捕获任何图，但配置出来的 size 是一样的）。

# %% tags=["nbval-ignore-output"]
max_num_seqs, max_cudagraph_capture_size, cudagraph_capture_sizes = 16, None, None
print(lab.capture_sizes_for(max_num_seqs, max_cudagraph_capture_size, cudagraph_capture_sizes))
model = lab.model()
print(lab.describe_model(model))
llm = lab.make_llm(model, "FULL_DECODE_ONLY", cudagraph_capture_sizes, max_num_seqs=max_num_seqs,
                     max_cudagraph_capture_size=max_cudagraph_capture_size)
print("startup_report().cudagraph:", llm.startup_report().cudagraph)
print("config.cudagraph_capture_sizes:", llm.config.cudagraph_capture_sizes)

# %% [markdown]
# ## 4. c) Padding, and one graph for the largest size only · padding 的代价，只捕获最大 size

# %% [markdown] tags=["lang-en"]
# A batch of 5 replays the size-8 graph with rows 5-7 padded (slot -1: no KV write; sequence length 0).
# The recorder captured sizes 1, 2, 4, **5**, 8, ... 256, so the size-5 and size-8 graphs can be timed
# side by side (CUDA events around 50 back-to-back replays, 7 repeats: median and min-max). Then interview
# question 2: an engine with one graph of size 256 only, where every batch is padded to 256.

# %% [markdown] tags=["lang-zh"]
# batch 5 重放 size 8 的图，第 5-7 行是 padding（slot 为 -1 不写 KV，序列长度为 0）。录制时捕获了 1、2、4、**5**、
# 8……256，因此可以并排测 size 5 和 size 8 的图（用 CUDA event 计 50 次连续重放，重复 7 次，取中位数和最小-最大值）。
# 然后是面试题 2：一个只捕获 size 256 的引擎，每个 batch 都要 pad 到 256。

# %% tags=["nbval-check-output"]
print(lab.padding_table(rec))
if rec:
    lab.show(lab.plot_padding(rec))

# %% [markdown] tags=["lang-en"]
# **Why the padded rows cost nothing.** Not because decode is memory-bound: at these batch sizes reading every
# weight once at the H200's measured copy bandwidth takes a fraction of a replay (below). The step is
# latency-bound: a few hundred kernels in sequence, each too small to fill the GPU, so a few more rows add almost
# nothing to any of them. Graph 8 even replays faster than graph 5, beyond the spread, which padding cannot explain.
# At 5 and 8 rows the linear layers run cuBLAS (the hand-written GEMV takes only 1 and 2 rows), and cuBLAS picks its
# GEMM kernel by the row count, so the two graphs may hold different kernels. That is a hypothesis, not a
# measurement yet: the GPU stage `lab02-padding-kernels` of `scripts/gpu_check.sh` lists the kernels of both
# replays.

# %% [markdown] tags=["lang-zh"]
# **为什么 padding 行不花时间。** 不是因为 decode 受显存带宽限制：在这些 batch 大小下，按 H200 实测的拷贝带宽把所有权重读一遍，
# 只占一次重放的一小部分（见下）。这一步受的是延迟限制：几百个 kernel 依次执行，每个都小到填不满 GPU，多几行几乎不增加
# 任何一个 kernel 的时间。size 8 的图甚至比 size 5 的重放得更快，且超出了波动范围，这是 padding 解释不了的。5 行和 8 行时
# 线性层走 cuBLAS（手写 GEMV 只处理 1、2 行），cuBLAS 按行数选 GEMM kernel，所以两张图里可能是不同的 kernel。这还只是假设，
# 尚未实测：`scripts/gpu_check.sh` 的 GPU 阶段 `lab02-padding-kernels` 会列出两次重放各自的 kernel。

# %% tags=["nbval-check-output"]
print(lab.padding_bound_text(rec))

# %% [markdown]
# ## 5. d) Graph memory: one shared pool or one per graph · 显存：共享显存池还是每图一个

# %% [markdown] tags=["lang-en"]
# The article: "about 150 MB per graph for a 7B model; 10 graphs take 1.5 GB". The engine captures its sizes
# **largest first into one pool** ([worker/graph_capture.py](../minivllm/worker/graph_capture.py)
# `capture_all_sizes`), so the smaller graphs reuse the blocks of the larger ones. The recorder captured ten
# decode sizes of Qwen3-0.6B both ways: one shared pool, and one private pool per graph.

# %% [markdown] tags=["lang-zh"]
# 文章说：“7B 模型每个图约 150 MB，10 个图 1.5 GB”。引擎**从大到小、捕获进同一个显存池**
# （[worker/graph_capture.py](../minivllm/worker/graph_capture.py) 的 `capture_all_sizes`），小图复用大图的显存块。
# 录制时把 Qwen3-0.6B 的十个 decode size 按两种方式各捕获一遍：一个共享池，和每图一个私有池。

# %% tags=["nbval-check-output"]
print(lab.pool_table(rec))
if rec and rec.get("pool"):
    lab.show(lab.plot_pool(rec))

# %% [markdown] tags=["lang-en"]
# **Every pool figure in this lab, side by side.** They measure different captures: a toy graph (limit 3), the
# model's forward alone at a short context (this section), the engine's whole decode step for the padding sizes
# (section c), and the engine's default capture recorded by `minivllm bench latency`. The last is the figure for
# "how much memory do the engine's graphs take"; an older file gives a larger number for the same graphs because it
# was read before the pool came from the allocator.

# %% [markdown] tags=["lang-zh"]
# **本实验出现的所有显存池数字，放在一起看。** 它们测的是不同的捕获：一个玩具图（限制 3）、只有模型 forward 且上下文很短的
# 捕获（本节）、引擎为 padding 实验的各 size 捕获的整个 decode 步（c 节），以及 `minivllm bench latency` 记录的引擎默认捕获。
# 回答“引擎的图占多少显存”要看最后一个；较早的文件对同样的图给出更大的数字，因为那时显存池还不是从分配器读出的。

# %% tags=["nbval-check-output"]
print(lab.pool_figures_text(rec))

# %% [markdown]
# ## 6. e) Random numbers inside a graph · 图里的随机数

# %% tags=["nbval-check-output"]
lab.show_code(lab.rng_in_graph)
print(lab.rng_text(rec))

# %% [markdown] tags=["lang-en"]
# The article says a replay reuses the capture's random seed, so "results never change". PyTorch registers
# the default generator with the graph and advances its offset at every replay: each replay draws new
# numbers. (Greedy decoding does not change from replay to replay because it uses no random numbers.)

# %% [markdown] tags=["lang-zh"]
# 文章说重放会复用捕获时的随机种子，所以“结果永远不变”。PyTorch 会把默认生成器登记到图上，每次重放推进 offset：
# 每次重放都取新的随机数。（贪心解码每次重放结果相同，是因为它根本不用随机数。）

# %% [markdown]
# ## 7. f) The five graph modes · 五种图模式

# %% [markdown] tags=["lang-en"]
# vLLM names five modes in `CUDAGraphMode`
# ([vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)), described in
# [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md); the engine
# uses the same names and meanings ([worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py)
# `CudagraphDispatcher.dispatch` picks the graph of each step):
#
# - **NONE**: no graphs; every step runs eagerly.
# - **PIECEWISE**: the forward is traced once and split at every attention op
#   ([compilation/backend.py](../minivllm/compilation/backend.py) `SplitBackend`; vLLM's main branch also splits at
#   `vllm::unified_kv_cache_update`, `set_splitting_ops_for_v1` in
#   [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)); the pieces between them are captured per **token count**, attention runs
#   eagerly between replays. Prefill and mixed batches replay too, up to the largest capture size (512 tokens here);
#   a longer prefill, such as the 1024-token one below, runs eagerly.
# - **FULL**: one graph of the whole forward per token count, for any batch (prefill, mixed and decode), where the
#   attention backend can be captured for mixed batches. The engine's graph holds one unified Triton attention kernel
#   ([kernels/triton_unified_attention.py](../minivllm/kernels/triton_unified_attention.py)
#   `unified_paged_attention`). As in vLLM, the graph holds the model only: the LM head (`compute_logits`) runs after
#   it ([vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_model_runner.py)). A prefill up to 512 tokens replays a full graph; the 1024-token one runs eagerly.
# - **FULL_DECODE_ONLY** (`(FULL, NONE)` in vLLM's enum): full graphs per batch size for pure-decode batches, every
#   other batch eagerly. Here these graphs hold the LM head too (README, "Where minivllm differs from vLLM", the FULL
#   graph contents row, [README](../README.md#where-minivllm-differs-from-vllm)). Section c measures these graphs.
# - **FULL_AND_PIECEWISE** (`(FULL, PIECEWISE)`, the default, in vLLM too: its `-O2` default sets it, in
#   [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)): FULL_DECODE_ONLY's
#   decode graphs, and PIECEWISE for every other batch.
#
# Per mode the recorder measured TPOT at batch 1 and 8, TTFT of a 128-token and a 1024-token prompt, and counted
# which path every step took. The line below says which meaning of FULL the record in this checkout holds; the buttons
# show one series at a time.

# %% [markdown] tags=["lang-zh"]
# vLLM 在 `CUDAGraphMode`（[vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）
# 里定义了五种模式，说明见 [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md)；
# 引擎用同样的名字和含义（[worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) 的
# `CudagraphDispatcher.dispatch` 为每一步选图）：
#
# - **NONE**：不用图，每一步都走 eager。
# - **PIECEWISE**：前向只 trace 一次，在每个 attention 处切开
#   （[compilation/backend.py](../minivllm/compilation/backend.py) 的 `SplitBackend`；vLLM 的 main 分支还会在 `vllm::unified_kv_cache_update`
#   处切开，见 [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py) 的 `set_splitting_ops_for_v1`）；中间的分段按 **token 数** 捕获，attention 在两次重放之间 eager 执行。预填充和混合批也能重放，最多到最大捕获
#   尺寸（这里是 512 token）；更长的预填充（如下面 1024 token 的）走 eager。
# - **FULL**：整个前向按 token 数每个尺寸一张图，适用于任何 batch（预填充、混合和解码），前提是 attention 后端在混合 batch
#   下也能被捕获。引擎的整图里是一个 unified Triton attention kernel
#   （[kernels/triton_unified_attention.py](../minivllm/kernels/triton_unified_attention.py) 的
#   `unified_paged_attention`）。与 vLLM 一样，整图只包含模型本身：LM head
#   （`compute_logits`）在图之后执行（[vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_model_runner.py)）。512 token 以内的预填充重放整图；1024 token 的走 eager。
# - **FULL_DECODE_ONLY**（vLLM 枚举里是 `(FULL, NONE)`）：纯 decode 批按 batch size 用整图，其他批都走 eager。本引擎的这些图还包括
#   LM head（见 [README](../README.md#where-minivllm-differs-from-vllm) 中 FULL graph contents 一行）。第 c 节测的就是这些图。
# - **FULL_AND_PIECEWISE**（`(FULL, PIECEWISE)`，默认，vLLM 也是：由其默认的 `-O2` 设定，见
#   [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）：纯 decode 用 FULL_DECODE_ONLY 的整图，其他批用 PIECEWISE。
#
# 每种模式录制了 batch 1 和 8 的 TPOT、128 token 和 1024 token prompt 的 TTFT，并统计每一步走的路径。下面一行说明本地记录里的
# FULL 是哪种含义；按钮一次显示一组数据。

# %% tags=["nbval-check-output"]
print(lab.modes_record_text(rec))

# %% tags=["nbval-check-output"]
print(lab.modes_table(rec))
if rec:
    lab.show(lab.plot_modes(rec))

# %% [markdown] tags=["lang-en"]
# **How close PIECEWISE comes to a full graph.** A PIECEWISE decode step replays 29 pieces and, between them,
# launches the 28 attention ops from the host. The engine builds those attention launches once for a batch shape
# and reuses them in every layer of every later step ([kernels/launch.py](../minivllm/kernels/launch.py) `LaunchPlan`). That shrank the gap, but
# how much is left depends on the run: in assets/results/h200/modes.json (d4e8cd4, one process per mode,
# {rec}`modes.json:modes.PIECEWISE.prompts` prompts) PIECEWISE decoded at {rec}`modes.json:piecewise_over_full_tpot.1:.2f`x the TPOT of the full decode graphs (FULL_DECODE_ONLY) at batch 1 and {rec}`modes.json:piecewise_over_full_tpot.64:.2f`x at batch 64
# (`piecewise_over_full_tpot`; {rec}`archive.json:files.modes_b6d9efd.json.piecewise_over_full_tpot.1:.1f`x and {rec}`archive.json:files.modes_b6d9efd.json.piecewise_over_full_tpot.64:.1f`x of FULL
# before the launch plan, archive member modes_b6d9efd.json), while this lab's own record, made with older code
# (5b7709e) and this lab's engines, has PIECEWISE at {rec}`lab02.json:modes.PIECEWISE.decode.1.tpot_ms.median:.2f` ms against FULL's {rec}`lab02.json:modes.FULL.decode.1.tpot_ms.median:.2f` ms at batch 1 and {rec}`lab02.json:modes.PIECEWISE.decode.8.tpot_ms.median:.2f` against
# {rec}`lab02.json:modes.FULL.decode.8.tpot_ms.median:.2f` ms at batch 8 (`modes.PIECEWISE.decode` against `modes.FULL.decode`). Both runs are single runs; what separates PIECEWISE
# from the full decode graphs is still host time between the pieces, which a full graph does not have. The cell below
# prints the record's ratio and modes.json's, each with its commit. In modes.json FULL decodes slower than
# FULL_AND_PIECEWISE ({rec}`modes.json:modes.FULL.tpot_ms.1:.2f` against {rec}`modes.json:modes.FULL_AND_PIECEWISE.tpot_ms.1:.2f` ms at batch 1, `modes.<mode>.tpot_ms`), and even slower than PIECEWISE:
# the decode graphs of FULL_AND_PIECEWISE hold the decode attention kernel, which splits a context's KV cache
# across programs, while under FULL a pure-decode batch also runs the unified kernel, without KV splits. That kernel
# sums in another order, so FULL's bf16 greedy tokens equal eager's for {rec}`modes.json:modes.FULL.equal_to_eager` of {rec}`modes.json:modes.FULL.prompts` prompts
# (`modes.FULL.equal_to_eager`; all of them in fp32), while PIECEWISE and FULL_AND_PIECEWISE give {rec}`modes.json:modes.PIECEWISE.equal_to_eager` and {rec}`modes.json:modes.FULL_AND_PIECEWISE.equal_to_eager` (README,
# "Where minivllm differs from vLLM").

# %% [markdown] tags=["lang-zh"]
# **PIECEWISE 离整图有多近。** PIECEWISE 的一个 decode 步要重放 29 段分段图，并在段与段之间从主机 launch 28 次 attention。
# 同一种 batch 形状，引擎只构建一次这些 attention 的 launch，之后每一步的每一层都复用（[kernels/launch.py](../minivllm/kernels/launch.py) 的
# `LaunchPlan`）。差距因此缩小了，但还剩多少取决于这次运行：assets/results/h200/modes.json（d4e8cd4，每种模式一个进程，{rec}`modes.json:modes.PIECEWISE.prompts` 个 prompt）里，
# PIECEWISE 的 decode TPOT 在 batch 1 是整图 decode（FULL_DECODE_ONLY）的 {rec}`modes.json:piecewise_over_full_tpot.1:.2f` 倍，batch 64 是 {rec}`modes.json:piecewise_over_full_tpot.64:.2f` 倍（`piecewise_over_full_tpot`；launch plan 之前是 FULL 的 {rec}`archive.json:files.modes_b6d9efd.json.piecewise_over_full_tpot.1:.1f` 倍和 {rec}`archive.json:files.modes_b6d9efd.json.piecewise_over_full_tpot.64:.1f` 倍，
# 见 archive 里的 modes_b6d9efd.json）；而本 lab 自己的记录用的是更早的代码（5b7709e）、本 lab 的引擎配置，PIECEWISE 在 batch 1 是 {rec}`lab02.json:modes.PIECEWISE.decode.1.tpot_ms.median:.2f` ms，FULL 是
# {rec}`lab02.json:modes.FULL.decode.1.tpot_ms.median:.2f` ms；batch 8 是 {rec}`lab02.json:modes.PIECEWISE.decode.8.tpot_ms.median:.2f` 对 {rec}`lab02.json:modes.FULL.decode.8.tpot_ms.median:.2f` ms（`modes.PIECEWISE.decode` 对比 `modes.FULL.decode`）。两者都只跑了一次；把 PIECEWISE 和整图 decode 拉开的仍是段与段之间的
# 主机时间，而整图没有这部分开销。
# 下面的单元格打印记录里的比值和 modes.json 的比值，各带其 commit。modes.json 里 FULL 的 decode 比 FULL_AND_PIECEWISE 慢（batch 1 为 {rec}`modes.json:modes.FULL.tpot_ms.1:.2f` 对
# {rec}`modes.json:modes.FULL_AND_PIECEWISE.tpot_ms.1:.2f` ms，`modes.<mode>.tpot_ms`），甚至比 PIECEWISE 还慢：FULL_AND_PIECEWISE 的 decode 整图用的是能把一个上下文的 KV cache 切给多个 program 的 decode attention kernel，而 FULL 下纯 decode 批也走
# unified kernel，不切 KV。这个 kernel 的求和顺序不同，所以 FULL 在 bf16 下的贪心 token 只有 {rec}`modes.json:modes.FULL.prompts` 个 prompt 中的 {rec}`modes.json:modes.FULL.equal_to_eager` 个与 eager 相同
# （`modes.FULL.equal_to_eager`；fp32 下全部相同），PIECEWISE 和 FULL_AND_PIECEWISE 分别是 {rec}`modes.json:modes.PIECEWISE.equal_to_eager` 个和 {rec}`modes.json:modes.FULL_AND_PIECEWISE.equal_to_eager` 个（见 README 的 "Where minivllm differs from vLLM"）。

# %% tags=["nbval-check-output"]
print(lab.piecewise_gap_text(rec))

# %% tags=["nbval-ignore-output"] id="02-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown]
# ### Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="02-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The same measurement on your device. On a CPU only NONE (eager) runs; on a GPU all five modes (a minute or
# two with the 0.6B-shaped model; here the tiny one).

# %% [markdown] tags=["lang-zh"]
# 在你的设备上做同样的测量。CPU 上只有 NONE（eager）；GPU 上五种模式都跑（这里用很小的模型）。

# %% tags=["nbval-ignore-output"]
here["modes"] = lab.graph_modes(model, quick=True)
print(lab.modes_table(here))

# %% tags=["nbval-skip"] id="gpu-mode-toggle"
if lab.gpu_only("The live cudagraph_mode toggle"):
    display(lab.mode_toggle(lab.model("qwen3-0.6b")))

# %% [markdown]
# ## 8. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Pick an answer: the feedback gives our model answer and the numbers measured above (recorded GPU results
# when present, else yours). In Python:
# `from minivllm_labs import grade; print(grade(lab.Q1, "B", rec or here)[1])`.

# %% [markdown] tags=["lang-zh"]
# 选一个答案：反馈会给出参考答案和上面测到的数字（有 GPU 记录用记录，否则用你的）。在 Python 里：
# `from minivllm_labs import grade; print(grade(lab.Q1, "B", rec or here)[1])`。

# %% tags=["nbval-ignore-output"]
for q in (lab.Q1, lab.Q2, lab.Q3, lab.Q4, lab.Q5):
    lab.quiz(q, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab02.q1.** One graph of the largest size works but every step computes its padded rows; several sizes bound the
# padding at a small startup cost
#
# **lab02.q2.** Yes, piecewise (attention outside) when the step has at most max capture size tokens; longer prefills
# run eagerly
#
# **lab02.q3.** Three different samples: PyTorch advances the generator offset at each replay
#
# **lab02.q4.** Little: at batch 5-8 a decode step is bound by the latency of its chain of kernels (a replay takes
# {rec}`lab02.json:padding.replay_ms.1.median:.2f`-{rec}`lab02.json:padding.replay_ms.5.median:.2f` ms, reading the weights {rec}`lab09.json:shapes.qwen3-06b.floor.bytes_ms:.2f` ms), not by its rows, so the size-8 replay costs about what size 5 does;
# padded rows are computed and discarded
#
# **lab02.q5.** Only the host sync (.item()) fails; allocation works from the private pool; branch and rebinding give
# silently wrong results
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab02.q1.** 只捕获最大 size 也能用，但每步都要算 padding 出来的行；多档 size 用很小的启动代价限制了 padding。
#
# **lab02.q2.** 会：token 数不超过最大捕获尺寸时走分段图（attention 在图外）；更长的预填充走 eager。
#
# **lab02.q3.** 三个不同的样本：每次重放 PyTorch 都推进生成器的 offset。
#
# **lab02.q4.** 很小：batch 5-8 时 decode 步受一串 kernel 的延迟限制（一次重放 {rec}`lab02.json:padding.replay_ms.1.median:.2f`-{rec}`lab02.json:padding.replay_ms.5.median:.2f` ms，读权重只要
# {rec}`lab09.json:shapes.qwen3-06b.floor.bytes_ms:.2f` ms），而不是行数，所以 size 8 的重放和 size 5 差不多；padding 行被计算后丢弃。
#
# **lab02.q5.** 只有主机同步（.item()）会报错；分配可以（私有显存池）；分支和重新绑定会悄悄地给出错误结果。
#
# </details>

# %% [markdown]
# ## 9. Try it yourself · 动手练习

# %% [markdown] tags=["lang-en"]
# 1. With `max_num_seqs=8`, which sizes does the engine capture, and which full decode graph does a batch of 3 replay
#    under the default FULL_AND_PIECEWISE?
#    *Hint:* edit the knobs cell of section 3.
#    <details><summary>Solution · 参考答案</summary>
#    [1, 2, 4, 8, 16]: up to 2 x 8 = 16. Full decode graphs only for sizes up to 8 (1, 2, 4, 8); a batch of 3 replays
#    the size-4 graph with one padded row. PIECEWISE graphs exist for 16 tokens too.
#    </details>
# 2. (GPU) Capture only `cudagraph_capture_sizes=[256]` and measure TPOT at batch 1 with
#    `lab.generate_stats(llm, 1, 16, 32, 3)`. Compare with the recorded "several sizes" row.
#    *Hint:* `lab.make_llm(lab.model("qwen3-0.6b"), "FULL_DECODE_ONLY", [256], max_num_seqs=256)`.
#    <details><summary>Solution · 参考答案</summary>
#    Batch 1 then computes 256 rows every step: the recorded `padding.tpot_largest_only` is the number to
#    match. The startup is shorter (one capture), which is the whole trade-off of interview question 2.
#    </details>

# %% [markdown] tags=["lang-zh"]
# 1. `max_num_seqs=8` 时引擎捕获哪些 size？在默认的 FULL_AND_PIECEWISE 下，batch 3 重放哪个 decode 整图？*提示：* 改第 3 节的参数单元格。
#    <details><summary>Solution · 参考答案</summary>
#    [1, 2, 4, 8, 16]：上限 2 x 8 = 16。decode 整图只到 8（1、2、4、8）；batch 3 重放 size 4 的图，多一行 padding。
#    16 token 也有 PIECEWISE 分段图。
#    </details>
# 2. （GPU）只捕获 `cudagraph_capture_sizes=[256]`，用 `lab.generate_stats(llm, 1, 16, 32, 3)` 测 batch 1 的
#    TPOT，与记录里“several sizes”那一行比较。*提示：* `lab.make_llm(lab.model("qwen3-0.6b"), "FULL_DECODE_ONLY", [256], max_num_seqs=256)`。
#    <details><summary>Solution · 参考答案</summary>
#    这时 batch 1 每一步都要算 256 行：对照记录中的 `padding.tpot_largest_only`。启动更快（只捕获一次），
#    这正是面试题 2 的取舍。
#    </details>

# %% [markdown]
# ## 10. Summary of verdicts · 结论

# %% [markdown] tags=["lang-en"]
# One line per claim: the verdict, the number that decides it (from this lab's record, or from the results
# file named; "(record)" until `python -m minivllm_labs.record lab02` has run on a GPU) and where it lives.

# %% [markdown] tags=["lang-zh"]
# 每条说法一行：结论、决定它的数字（来自本实验的记录或所列结果文件；在 GPU 上运行
# `python -m minivllm_labs.record lab02` 之前显示“(record)”）以及出处。

# %% [markdown] tags=["lang-en"]
# **Verdict.** The handbook's picture of a CUDA graph holds where it describes the mechanism: addresses and the kernel
# sequence are fixed at capture (a rebound input or a host-side branch replays silently wrong), and a small batch
# replays the next captured size, its padded rows costing next to nothing. It is wrong about allocation (a capture
# allocates from the graph's private pool; a host sync is what fails), and partly right about the size list (vLLM's is
# 1, 2, 4, then steps of 8: `_set_cudagraph_sizes` in
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)) and about prefill: under
# FULL_AND_PIECEWISE (vLLM's dispatch rules: [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md)) a prefill up to the largest capture size
# replays piecewise graphs (under FULL, a full graph; only FULL_DECODE_ONLY leaves it eager), and only longer ones run
# eagerly. The article's three claims (about 150 MB per graph, one
# graph per sequence, a frozen random seed) are wrong: the graphs share one pool, they are keyed by batch size, and
# each replay draws new random numbers.

# %% [markdown] tags=["lang-zh"]
# **结论。** 手册对 CUDA Graph 机制的描述成立：地址和 kernel
# 序列在捕获时固定（重新绑定输入或主机侧分支，重放会悄悄出错），小 batch 重放下一个已捕获尺寸，padding
# 行几乎不花时间。它关于显存分配的说法是错的（捕获时从图的私有显存池分配；真正失败的是主机同步），关于尺寸列表（vLLM
# 是 1、2、4，然后每 8 一档：见 [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py) 的 `_set_cudagraph_sizes`）和预填充的说法部分正确：FULL_AND_PIECEWISE
# 下（vLLM 的分派规则见 [docs/design/cuda_graphs.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/cuda_graphs.md)），不超过最大捕获尺寸的预填充重放分段图（FULL 下重放整图；只有 FULL_DECODE_ONLY 让它走 eager），只有更长的才走 eager。文章的三条说法（每个图约 150
# MB、每个序列一个图、随机种子被冻结）都是错的：所有图共享一个显存池，按 batch size
# 区分，每次重放都取新的随机数。

# %% tags=["nbval-check-output"]
print(lab.verdicts_table(rec))
