# Source of labs/06_paged_kv_and_batching.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 06

# %% [markdown]
# # Lab 06 · Paged KV cache and continuous batching · 分页 KV Cache 与连续批处理

# %% [markdown] tags=["lang-en"]
# A CUDA graph makes one decode step cheap; **how many sequences share that step** decides the throughput.
# This lab opens the engine's own [block manager](../minivllm/engine/block_manager.py) and
# [scheduler](../minivllm/engine/scheduler.py) and watches them work, reading their state between steps
# (nothing is patched). You will see:
#
# - **a)** what one token costs in KV memory (GQA included) and how many blocks the engine chose;
# - **b)** a request's block table growing, block by block;
# - **c)** internal fragmentation for block sizes 8 / 16 / 32;
# - **d)** prefix caching: requests with a shared prompt hold the *same* physical blocks (reference counts);
# - **e)** preemption when blocks run out, with every request still finishing (its tokens kept, its K/V recomputed);
# - **f)** throughput and TTFT / TPOT against `max_num_seqs`, `max_num_batched_tokens` and chunked prefill on
#   nano-vllm's workload (256 requests, prompt and output lengths uniform in [100, 1024]);
# - **g)** the article's claims about paging and graphs: a "conflict" between PagedAttention and CUDA graphs,
#   "5-8% lower KV utilisation" under graphs, and "`--block-size 32` reduces graph captures".
#
# Cells: **setup**; **recorded results** (H200, `assets/results/h200/lab06.json`); **run it here** (your device;
# a tiny CPU configuration without a GPU); **GPU only**.

# %% [markdown] tags=["lang-zh"]
# CUDA Graph 让单个 decode 步变便宜；而**一步里能塞进多少条序列**决定吞吐。本实验打开引擎自己的
# [block manager](../minivllm/engine/block_manager.py) 和 [scheduler](../minivllm/engine/scheduler.py)，
# 在步与步之间读取它们的状态（不改任何代码），依次观察：
#
# - **a)** 每个 token 占多少 KV 显存（含 GQA），引擎选了多少个块；
# - **b)** 一个请求的 block table 如何逐块增长；
# - **c)** block size 8 / 16 / 32 的内部碎片；
# - **d)** 前缀缓存：共享 prompt 的请求持有*同一批*物理块（引用计数）；
# - **e)** 块不够时的抢占，每个请求仍能完成（token 保留、K/V 重算）；
# - **f)** 在 nano-vllm 的标准负载（256 个请求，prompt 与输出长度均匀分布于 [100, 1024]）上，吞吐与 TTFT / TPOT
#   随 `max_num_seqs`、`max_num_batched_tokens`、chunked prefill 的变化；
# - **g)** 文章关于分页与 CUDA Graph 的说法：PagedAttention 与 CUDA Graph "冲突"、图模式下 "KV 利用率低 5-8%"、
#   "`--block-size 32` 减少图捕获次数"。
#
# 单元格分四类：**环境准备**；**H200 实测记录**；**在本机运行**；**仅限 GPU**。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("06")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
from minivllm_labs import lab07_views  # Lab 07 shows every lab's claims as one table

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### a) KV bytes per token, and the blocks the engine chose
# A token's K and V are stored for every layer and every **KV** head: `2 x layers x kv_heads x head_dim x
# bytes`. With GQA, Qwen3-0.6B's 16 query heads share 8 KV heads, which halves the cache. The engine sizes the
# cache from free memory after the weights, the profile run's activations and the graphs' reserve (an estimate),
# capped at 2 x max_num_seqs x blocks per sequence ([worker/startup.py](../minivllm/worker/startup.py)
# `choose_num_blocks`); with the defaults below, the cap is what decides. vLLM has no such cap: its block count is
# the memory left under `gpu_memory_utilization` divided by the bytes of one block
# ([vllm/v1/core/kv_cache_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_utils.py)). In current versions its profile run also
# captures CUDA graphs to measure their memory and subtracts that (`determine_available_memory` in
# [vllm/v1/worker/gpu_worker.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_worker.py), switched by `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`
# in [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)), where this engine subtracts an estimate without capturing
# ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm)).

# %% [markdown] tags=["lang-zh"]
# ### a) 每 token 的 KV 字节数，以及引擎选的块数
# 每个 token 的 K、V 在每一层、每个 **KV 头**上各存一份：`2 × 层数 × kv_heads × head_dim × 字节数`。GQA 让
# Qwen3-0.6B 的 16 个 query 头共享 8 个 KV 头，缓存减半。引擎在权重、profile run 的激活和图的预留之后，用剩余显存
# （图的预留是估计值）决定块数，上限为 2 × max_num_seqs × 每序列块数（[worker/startup.py](../minivllm/worker/startup.py) 的
# `choose_num_blocks`）；下面用默认参数时，起决定作用的是这个上限。vLLM 没有这个上限：它的块数是 `gpu_memory_utilization`
# 之下剩余的显存除以一个块的字节数（[vllm/v1/core/kv_cache_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_utils.py)）。在当前版本里，
# 它的 profile run 还会实际捕获 CUDA Graph 来测图占用的显存并扣掉（[vllm/v1/worker/gpu_worker.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_worker.py)
# 的 `determine_available_memory`，由 [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py) 的 `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` 控制），
# 而本引擎扣的是不经捕获的估计值（[minivllm 与 vLLM 的差异](../README.md#where-minivllm-differs-from-vllm)）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.kv_table(rec))

# %% [markdown] tags=["lang-en"]
# ### b) A block table as it grows · c) fragmentation
# Each cell is one logical block of the request; its label is the physical block id the block manager gave.
# A new block appears only when the last one is full, so at most `block_size - 1` slots per sequence stay empty.

# %% [markdown] tags=["lang-zh"]
# ### b) block table 的增长 · c) 内部碎片
# 每个格子是请求的一个逻辑块，标签是 block manager 分配的物理块号。只有最后一块写满才分新块，所以每条序列最多
# 空 `block_size - 1` 个槽位。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_block_table(rec))
    lab.show(lab.plot_fragmentation(rec))
    print(lab.fragmentation_table(rec))

# %% [markdown] tags=["lang-en"]
# ### d) Prefix caching · e) preemption
# A block's hash chains over the block before it, so equal hashes mean equal prefixes; the requests below all
# point at the same physical blocks for their shared prompt, whose reference count is the number of users.
# With too few blocks the newest request is preempted (its blocks freed, its tokens kept) and recomputed later.
# vLLM does both the same way: a block's hash covers its parent's hash, its tokens and any extra keys
# (`hash_block_tokens` in [vllm/v1/core/kv_cache_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_utils.py),
# [docs/design/prefix_caching.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/prefix_caching.md)), and its V1 scheduler preempts by recompute,
# under its default FCFS policy freeing the blocks of the last request in its running queue and putting it back at the front of the waiting queue
# ([vllm/v1/core/sched/scheduler.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/sched/scheduler.py)).

# %% [markdown] tags=["lang-zh"]
# ### d) 前缀缓存 · e) 抢占
# 每个块的哈希链接前一块的哈希，哈希相等即前缀相等；下面几个请求的共享 prompt 指向同一批物理块，引用计数就是使用者
# 数量。块不够时，最新的请求被抢占（释放块、保留 token），之后重算。vLLM 这两件事的做法相同：块的哈希覆盖父块的哈希、
# 本块的 token 和额外的键（[vllm/v1/core/kv_cache_utils.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_utils.py) 的 `hash_block_tokens`；
# [docs/design/prefix_caching.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/prefix_caching.md)）；V1 调度器以重算方式抢占：在默认的 FCFS 策略下释放运行队列里最后一个请求的块，
# 把它放回等待队列的队首（[vllm/v1/core/sched/scheduler.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/sched/scheduler.py)）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.prefix_table(rec))
    print(lab.preemption_table(rec))

# %% [markdown] tags=["lang-en"]
# ### f) The standard workload: throughput, TTFT, TPOT
# More sequences per step raise throughput until the GPU is busy; each sequence's TPOT grows with the batch;
# TTFT grows when prompts wait for a slot (`max_num_seqs`) or for the token budget (`max_num_batched_tokens`).

# %% [markdown] tags=["lang-zh"]
# ### f) 标准负载：吞吐、TTFT、TPOT
# 每步序列越多吞吐越高，直到 GPU 忙满；每条序列的 TPOT 随 batch 增大；prompt 等空位（`max_num_seqs`）或等 token 预算
# （`max_num_batched_tokens`）时 TTFT 变大。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_sweep(rec))
    print(lab.sweep_table(rec))
    lab.show(lab.plot_chunked(rec))
    print(lab.chunked_table(rec))

# %% [markdown] tags=["lang-en"]
# **Why a small token budget costs throughput.** A budget of B tokens cuts the same prompt tokens into at least
# prompt tokens / B steps that carry prefill (below), and each of them costs more than a decode step's full-graph
# replay. The record runs the default FULL_AND_PIECEWISE, vLLM's default too (its default `-O2` level,
# [docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/configuration/optimization.md)):
# a step with prompt tokens replays piecewise graphs up to the largest capture size, min(2 x max_num_seqs, 512) as
# in vLLM without speculative decoding (512 in the rows of 256 sequences; vLLM also caps it at
# `max_num_batched_tokens`, `_set_cudagraph_sizes` in [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)), and runs
# without graphs above it. Each setting ran three
# times; the table gives the median and the range. On the H200, budget 512 gave {rec}`lab06.json:workload.rows.3.output_tok_s:,.0f` tok/s (range {rec}`lab06.json:workload.rows.3.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.3.tok_s_runs.2:,.0f`)
# against {rec}`lab06.json:workload.rows.4.output_tok_s:,.0f` ({rec}`lab06.json:workload.rows.4.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.4.tok_s_runs.2:,.0f`) at budget 2048: less, and beyond the spread, because its 279 or more prefill
# steps are more steps ({rec}`lab06.json:workload.rows.3.steps:,.0f` against {rec}`lab06.json:workload.rows.4.steps:,.0f`). Budget 8192 gave {rec}`lab06.json:workload.rows.2.output_tok_s:,.0f` ({rec}`lab06.json:workload.rows.2.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.2.tok_s_runs.2:,.0f`). The last lines below divide
# the wall-time gap between budget 512 and each larger budget by the extra steps. The tokens are the same, so the
# quotient prices cutting the work into more steps, and it is not one fixed cost: against 2048 it is a fraction of
# a decode step, against 8192 about a whole one at batch 64 (Lab 09 replays one in
# {rec}`lab09.json:shapes.qwen3-06b.sweep.2.step_wall_ms:.2f` ms; reading the weights once is {rec}`lab09.json:shapes.qwen3-06b.floor.bytes_ms:.2f` ms). The budgets
# differ in more than their step counts (above 512 tokens a step runs without graphs), and three runs of each cannot
# separate those costs. Turning chunking off at
# budget 2048 gave {rec}`lab06.json:workload.rows.5.output_tok_s:,.0f` ({rec}`lab06.json:workload.rows.5.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.5.tok_s_runs.2:,.0f`), the widest range of the sweep, and a TPOT p99 of {rec}`lab06.json:workload.rows.5.tpot_ms.p99:.1f` ms against {rec}`lab06.json:workload.rows.4.tpot_ms.p99:.1f` ms.

# %% [markdown] tags=["lang-zh"]
# **为什么 token 预算小会损失吞吐。** 预算为 B 时，同样多的 prompt token 至少要切成 prompt token 数 ÷ B 个带预填充的步（见下），
# 而这样的每一步都比解码步重放一次整图更贵。记录用的是默认的 FULL_AND_PIECEWISE，也是 vLLM 的默认（它默认的 `-O2` 级别，
# [docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/configuration/optimization.md)）：
# 带 prompt token 的步在 token 数不超过最大捕获尺寸时重放分段图（最大捕获尺寸是 min(2 × max_num_seqs, 512)，与不开投机解码时
# vLLM 的规则相同；256 条序列的几行是 512；vLLM 还会把它限制在 `max_num_batched_tokens` 以内，见
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py) 的 `_set_cudagraph_sizes`），超过时不走图。每个配置跑了三遍，表中是中位数和范围。在 H200 上，预算 512 得到 {rec}`lab06.json:workload.rows.3.output_tok_s:,.0f` tok/s（范围
# {rec}`lab06.json:workload.rows.3.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.3.tok_s_runs.2:,.0f`），预算 2048 得到 {rec}`lab06.json:workload.rows.4.output_tok_s:,.0f`（{rec}`lab06.json:workload.rows.4.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.4.tok_s_runs.2:,.0f`）：更少，且超出波动，原因是它至少 279 个带预填充的步让总步数
# 更多（{rec}`lab06.json:workload.rows.3.steps:,.0f` 对 {rec}`lab06.json:workload.rows.4.steps:,.0f`）。预算 8192 得到 {rec}`lab06.json:workload.rows.2.output_tok_s:,.0f`（{rec}`lab06.json:workload.rows.2.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.2.tok_s_runs.2:,.0f`）。下面最后几行用预算 512 与每个更大预算的墙钟时间之差除以多出的步数。
# token 总数相同，所以这个商是把工作切成更多步的代价，而且不是一个固定值：对 2048 只是一个解码步的一部分，对 8192 约等于
# batch 64 时一整个解码步（实验 09 重放一步要 {rec}`lab09.json:shapes.qwen3-06b.sweep.2.step_wall_ms:.2f` ms；读一遍权重要 {rec}`lab09.json:shapes.qwen3-06b.floor.bytes_ms:.2f` ms）。
# 各预算的差别不只在步数（超过 512 个 token 的步不走图），每个配置跑三遍也分不开这些代价。预算 2048 时关掉分块得到 {rec}`lab06.json:workload.rows.5.output_tok_s:,.0f`（{rec}`lab06.json:workload.rows.5.tok_s_runs.0:,.0f`-{rec}`lab06.json:workload.rows.5.tok_s_runs.2:,.0f`），
# 是整个扫描里范围最宽的一行，TPOT p99 为 {rec}`lab06.json:workload.rows.5.tpot_ms.p99:.1f` ms，开分块时为 {rec}`lab06.json:workload.rows.4.tpot_ms.p99:.1f` ms。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.budget_steps_text(rec))

# %% [markdown] tags=["lang-en"]
# Chunked prefill promises one thing for certain: no step holds more than the budget, so a long prompt never
# becomes one huge step that every decoder waits for. Whether the decoders' worst wait gets shorter depends on
# what a step costs at each token count, and that the record measures. The verdict below is computed from the
# recorded runs (the recorder runs the scenario three times in the same engine on a GPU; a difference counts only
# when the runs' ranges do not overlap, and a record of one run each is judged too thin), and the per-step lines
# under it show which steps carried prefill tokens and what they cost. vLLM's V1 engine always enables chunked prefill
# by default; its scheduler has no decode-first phase: it serves the running requests in queue order, then the
# waiting ones, each getting what the token budget leaves ("There's no 'decoding phase' nor 'prefill phase' in the
# scheduler", `Scheduler.schedule` in
# [vllm/v1/core/sched/scheduler.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/core/sched/scheduler.py)).
# Its optimization guide calls this prioritising decodes, which holds for requests already running
# ([docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.11.0/docs/configuration/optimization.md)).

# %% [markdown] tags=["lang-zh"]
# chunked prefill 只保证一件事：没有一步超过预算，长 prompt 不会变成一个所有 decode 请求都要等的大步。decode 最坏的等待会不会
# 变短，取决于每一步在不同 token 数下的耗时，这正是记录测的。下面的结论由记录里的各次运行算出（在 GPU 上录制程序在同一引擎里把场景
# 跑三遍；只有各次运行的范围不重叠，差别才算数；每个配置只跑一次的记录不足以下结论），再下面逐步列出带预填充 token 的步及其耗时。vLLM 的 V1 引擎始终默认开启
# chunked prefill；它的调度器没有"先排解码"这一阶段：按队列顺序先服务运行中的请求，再服务等待中的请求，每个拿到 token 预算剩下的部分
# （`Scheduler.schedule` 的注释："There's no 'decoding phase' nor 'prefill phase' in the scheduler"，
# [vllm/v1/core/sched/scheduler.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/core/sched/scheduler.py)）。
# 它的优化指南把这说成解码优先，对已在运行的请求成立
# （[docs/configuration/optimization.md](https://github.com/vllm-project/vllm/blob/v0.11.0/docs/configuration/optimization.md)）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.chunked_verdict(rec, "en"))
    print(lab.chunked_verdict(rec, "zh"))

# %% tags=["nbval-check-output"]
if rec:
    print(lab.chunked_steps_text(rec))

# %% [markdown] tags=["lang-en"]
# **Why chunking did not shorten the wait here.** The decoders wait for the step that carries prefill tokens, so
# the wait is that step's cost. In this scenario the engine has `max_num_seqs` 4, so its largest capture size is
# 8 (2 x 4, vLLM's rule above), and every step with prompt tokens, 24 of them or 256 or 1,539, runs without graphs.
# Such a step costs about the same whatever its token count (the lines above: {rec}`lab06.json:chunked.0.step_ms.0:.1f` ms for 24 tokens, {rec}`lab06.json:chunked.0.step_ms.3:.1f` ms for
# 256, while 1,539 tokens took {rec}`lab06.json:chunked.1.max_ms_runs.1:.1f` and {rec}`lab06.json:chunked.1.max_ms_runs.2:.1f` ms in two of three runs, {rec}`lab06.json:chunked.1.max_ms_runs.0:.1f` ms in the third): on a 0.6B model the per-step host work of running 28 layers without graphs (Lab 02's eager
# decode step is {rec}`lab02.json:modes.NONE.decode.1.tpot_ms.median:.1f` ms) is larger than the compute of 1,539 tokens. Cutting the prompt into 256-token pieces
# then cuts the step, not its cost. Chunking shortens the wait when a step's cost grows with its tokens: a larger
# model, a longer prompt, or chunks that replay piecewise graphs (a larger `max_cudagraph_capture_size`). That
# last case is an exercise: this record does not measure it.

# %% [markdown] tags=["lang-zh"]
# **为什么这里分块没有缩短等待。** decode 请求等的是带预填充 token 的那一步，所以等待就是那一步的耗时。这个场景里引擎的
# `max_num_seqs` 是 4，最大捕获尺寸因此是 8（2 × 4，即上面 vLLM 的规则），带 prompt token 的步不论是 24 个、256 个还是
# 1,539 个 token，都不走图。这样的一步耗时几乎与 token 数无关（上面几行：24 个 token {rec}`lab06.json:chunked.0.step_ms.0:.1f` ms，256 个 {rec}`lab06.json:chunked.0.step_ms.3:.1f` ms；1,539 个
# 在三次运行中两次为 {rec}`lab06.json:chunked.1.max_ms_runs.1:.1f` 和 {rec}`lab06.json:chunked.1.max_ms_runs.2:.1f` ms，另一次 {rec}`lab06.json:chunked.1.max_ms_runs.0:.1f` ms）：在 0.6B 模型上，不走图跑 28 层的每步 host 开销（Lab 02 里 eager 的解码步是 {rec}`lab02.json:modes.NONE.decode.1.tpot_ms.median:.1f` ms）比 1,539 个 token 的计算
# 还大。把 prompt 切成 256 token 的块，切小的是步，不是步的耗时。只有当一步的耗时随 token 数增长时，分块才会缩短等待：更大的
# 模型、更长的 prompt，或者让各块重放分段图（调大 `max_cudagraph_capture_size`）。最后这种情况留作练习：这份记录没有测它。

# %% [markdown] tags=["lang-en"]
# ### g) Paging under CUDA graphs: the article's three claims
# The decode graph reads the block table from a persistent buffer ([worker/input_batch.py](../minivllm/worker/input_batch.py)
# `InputBatch.block_tables`); the runner copies each step's block ids into it, as vLLM's runner does with its own
# persistent block-table buffers ([vllm/v1/worker/block_table.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/block_table.py)). Below: FULL-graph replays in steps
# where some sequence had just received a new block, the KV capacity and utilisation with graphs off and on, and the
# number of graphs captured for block size 16 vs 32 and `max_num_batched_tokens` 512.

# %% [markdown] tags=["lang-zh"]
# ### g) CUDA Graph 下的分页：文章的三个说法
# decode 图从持久化 buffer 读 block table（[worker/input_batch.py](../minivllm/worker/input_batch.py) 的
# `InputBatch.block_tables`），runner 每步把 block id 拷进去；vLLM 的 runner 对它自己的常驻 block table buffer 也是这样做的
# （[vllm/v1/worker/block_table.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/block_table.py)）。下面是：有序列刚分到新块的步里 FULL 图的重放次数、
# 开关图时的 KV 容量与利用率，以及 block size 16 / 32、`max_num_batched_tokens` 512 时捕获的图数。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.graphs_table(rec))
    print(lab.captures_table(rec))

# %% tags=["nbval-ignore-output"] id="06-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="06-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The same functions on your device (CPU: the embedded tiny model, a scaled-down workload of 5 requests, no graphs).
# Timings differ from run to run; the block tables, reference counts and preemption counts do not.

# %% [markdown] tags=["lang-zh"]
# 在本机运行同样的函数（CPU：内置小模型、缩小到 5 个请求的负载、没有 CUDA Graph）。时间每次不同；block table、
# 引用计数、抢占次数不会变。

# %% tags=["nbval-ignore-output"]
model = lab.model()
small = lab.make_llm(model, block_size=8, max_num_seqs=4, num_gpu_blocks_override=256, max_model_len=128)
here = {"kv": lab.kv_sizing(small), "trace": lab.block_table_trace(small, 10, 14),
        "prefix": lab.prefix_sharing(small)}
lab.free(small)
print(lab.kv_table(here))
print(lab.trace_table(here))
lab.show(lab.plot_block_table(here))

# %% tags=["nbval-ignore-output"]
here["fragmentation"] = lab.fragmentation(lab.standard_lengths(lab.STANDARD_WORKLOAD))
print(lab.fragmentation_table(here))
print(lab.prefix_table(here))
here["preemption"] = lab.preemption(model, new_tokens=8)
print(lab.preemption_table(here))

# %% tags=["nbval-ignore-output"]
workload = lab.CPU_WORKLOAD if lab.device.kind == "cpu" else lab.SMALL_GPU_WORKLOAD
here["workload"] = {"spec": workload, "rows": lab.workload_sweep(model, workload, lab.sweep_configs(True),
                                                                  128 if lab.device.kind == "cpu" else 512)}
print(lab.sweep_table(here))
here["chunked"] = [lab.chunked_prefill(model, True, 32, 96, short_new=6, max_model_len=128),
                   lab.chunked_prefill(model, False, 128, 96, short_new=6, max_model_len=128)]
print(lab.chunked_table(here))
lab.show(lab.plot_chunked(here))

# %% tags=["nbval-ignore-output"]
here["graphs"] = lab.graphs_vs_eager(model, 128, quick=True)
here["captures"] = lab.captures_by_config(model, quick=True)
print(lab.graphs_table(here))
print(lab.captures_table(here))

# %% [markdown]
# ## 4. GPU only · 仅限 GPU

# %% [markdown] tags=["lang-en"]
# The whole standard workload (256 requests) for every scheduler setting, on a random-weight Qwen3-0.6B: what
# `python -m minivllm_labs.record lab06` records: {rec}`lab06.json:provenance.seconds:.0f` s on the H200 when it was
# recorded, so this cell makes the notebook's GPU run take several minutes.

# %% [markdown] tags=["lang-zh"]
# 完整的标准负载（256 个请求），在随机权重 Qwen3-0.6B 上跑所有调度设置：即
# `python -m minivllm_labs.record lab06` 记录的内容：录制时在 H200 上用了 {rec}`lab06.json:provenance.seconds:.0f` 秒，所以这个单元格会让
# 整本 notebook 在 GPU 上跑好几分钟。

# %% tags=["nbval-skip"] id="gpu-full-lab06"
if lab.gpu_only("The full standard-workload sweep"):
    gpu = lab.run_all(lab.model("qwen3-0.6b"))
    lab.show(lab.plot_sweep(gpu))
    print(lab.sweep_table(gpu))
    print(lab.graphs_table(gpu))
    print(lab.captures_table(gpu))

# %% [markdown]
# ## 5. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Three questions on what you measured. Pick or type an answer and press *Score*; the feedback quotes the numbers
# above (the recorded H200 ones when present, else yours). In Python: `from minivllm_labs import grade; print(grade(lab.Q_KV, "114688")[1])`.

# %% [markdown] tags=["lang-zh"]
# 三道关于本实验测量的题。作答后点 *Score · 评分*；反馈引用上面的数字（有 H200 记录时用记录，否则用本机结果）。
# 也可以在 Python 里评分：`from minivllm_labs import grade; print(grade(lab.Q_KV, "114688")[1])`。

# %% tags=["nbval-ignore-output"]
from minivllm_labs import lab08_views

lab08_views.show_questions(lab.QUESTIONS, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab06.q1.** 2 (K and V) x 28 layers x 8 KV heads x 128 x 2 bytes = 114,688 B = 112 KiB. GQA counts: with 16 KV
# heads it would be twice that.
#
# **lab06.q2.** PagedAttention and CUDA graphs do not conflict: the block table is an input like the token ids, copied
# every step into a buffer at a fixed address; a graph replays with whatever ids are there.
#
# **lab06.q3.** Preemption by recompute frees the blocks and re-queues the request at the head; its tokens are kept,
# so on readmission one prefill rebuilds its K/V and it continues where it stopped.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab06.q1.** 2（K、V）× 28 层 × 8 个 KV 头 × 128 × 2 字节 = 114,688 B = 112 KiB。GQA 只按
# KV 头算；若 16 个 KV 头则翻倍。
#
# **lab06.q2.** PagedAttention 与 CUDA Graph 并不冲突：block table 和 token id
# 一样是输入，每步拷进固定地址的 buffer；图重放时读到的就是当前的 block id。
#
# **lab06.q3.** 重算式抢占：释放块、放回队首；token 保留，重新进入时一次 prefill 重建 K/V，从断点继续。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Try it yourself · 动手试试
#
# **Exercise 1.** Predict, then measure: with block size 32 instead of 8, how many blocks does the request of b)
# hold at the end, and how many of its slots are empty? Run `lab.block_table_trace` on an engine made with
# `block_size=32`.
#
# *Hint:* blocks = ceil(tokens / block_size); the prompt has 10 tokens and 14 are generated.
#
# <details><summary>Solution · 参考答案</summary>
#
# The cache ends holding 23 tokens (the 24th, just sampled, needs no K/V yet): one block of 32 (9 empty slots);
# with block size 8 they take 3 blocks (1 empty slot). Larger blocks, more fragmentation.
# `small = lab.make_llm(model, block_size=32, max_num_seqs=4, num_gpu_blocks_override=64, max_model_len=128)`,
# then `print(lab.trace_table({"trace": lab.block_table_trace(small, 10, 14)}))`.
# </details>
#
# **Exercise 2.** Make preemption worse: call `lab.preemption(model, num_blocks=4, new_tokens=8)`. Do the tokens
# still match? Why can 4 blocks of 8 run requests of 20 tokens at all?
#
# *Hint:* one request needs ceil(20 / 8) = 3 blocks at its longest.
#
# <details><summary>Solution · 参考答案</summary>
#
# On a CPU (fp32), yes: all requests match, since preemption by recompute keeps the tokens and the recomputed
# K/V equals the original. In bf16 on a GPU a recomputed K/V can differ by rounding and flip a near-tie (the
# H200 record of e) matched 2 of 3). 4 blocks hold one request at a time, so the
# scheduler runs them almost one by one, preempting the newest whenever the running one needs a block.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 动手试试
#
# **练习 1.** 先预测再测量：block size 从 8 改成 32，b) 中的请求最后持有几个块、空几个槽位？用 `block_size=32`
# 的引擎运行 `lab.block_table_trace`。
#
# *提示：* 块数 = ceil(token 数 / block_size)；prompt 10 个 token，生成 14 个。
#
# <details><summary>Solution · 参考答案</summary>
#
# 缓存最后存 23 个 token（刚采样的第 24 个还不需要 K/V）：一个 32 的块（空 9 个槽）；block size 8 时占 3 个块（空 1 个槽）。
# 块越大，碎片越多。
# </details>
#
# **练习 2.** 让抢占更严重：`lab.preemption(model, num_blocks=4, new_tokens=8)`。token 还一致吗？为什么 4 个 8 槽的块
# 也能跑 20 个 token 的请求？
#
# *提示：* 一个请求最长时需要 ceil(20 / 8) = 3 个块。
#
# <details><summary>Solution · 参考答案</summary>
#
# CPU（fp32）上一致：重算式抢占保留 token，重算的 K/V 与原来相同。GPU 上 bf16 重算的 K/V 可能因舍入不同而翻转近似
# 平局（e) 的 H200 记录：3 个请求中 2 个一致）。4 个块一次只容得下一个请求，调度器几乎逐个运行，运行中的请求要新块时
# 就抢占最新的。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 7. Summary of verdicts · 结论
# Verdicts come from the recorded H200 file; "not recorded yet" means the number will appear once
# `python -m minivllm_labs.record lab06` has run on the GPU. All claims of both seeds are in [Lab 07](07_claims.ipynb).
#
# Engine code: [engine/block_manager.py](../minivllm/engine/block_manager.py) (`BlockManager.allocate`,
# `find_cached_prefix`, `cache_full_blocks`), [engine/scheduler.py](../minivllm/engine/scheduler.py)
# (`Scheduler.schedule`, `_preempt`), [engine/sequence.py](../minivllm/engine/sequence.py) (`Sequence.block_table`),
# [worker/input_batch.py](../minivllm/worker/input_batch.py) (`InputBatch.prepare`),
# [worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) (`CudagraphDispatcher.dispatch`).

# %% [markdown] tags=["lang-zh"]
# ## 7. 结论
# 结论取自 H200 记录文件；"not recorded yet" 表示要等 GPU 上运行 `python -m minivllm_labs.record lab06` 后才有数字。
# 两份材料的全部说法见 [Lab 07](07_claims.ipynb)。

# %% [markdown] tags=["lang-en"]
# **Verdict.** The article's account of paged KV and CUDA graphs is wrong on each mechanism it names. Block tables are
# graph inputs copied into a persistent buffer, so FULL graphs replay in the very steps where sequences get new
# blocks, and graphs do not lower KV utilisation. Capture sizes are batch or token counts, so the block size does not
# change how many graphs are captured, and max_num_batched_tokens 512 does not speed up finding one (in this engine a
# bisect of well under a microsecond; vLLM's dispatcher reads a table built at startup,
# [vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py)). Its one right remark is that a larger block adds some internal fragmentation, small next to a
# request's length.

# %% [markdown] tags=["lang-zh"]
# **结论。** 文章对分页 KV Cache 与 CUDA Graph 的描述，每个机制都说错了。block table
# 是图的输入，被拷进一个常驻缓冲区，所以序列刚分到新块的那一步照样重放 FULL 图，CUDA Graph 也不会降低
# KV 利用率。捕获尺寸是 batch 或 token 数，block size
# 不改变捕获多少个图；max_num_batched_tokens 设成 512
# 也不会让查找图变快（本引擎里是一次二分查找，远不到一微秒；vLLM 的 dispatcher 查的是启动时建好的表，
# [vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/cudagraph_dispatcher.py)）。它唯一说对的是更大的块会带来一些内部碎片，但与请求长度相比很小。

# %% tags=["nbval-check-output"]
lab07_views.show_markdown(lab07_views.claims_markdown(lab.LAB_INFO.claims))
