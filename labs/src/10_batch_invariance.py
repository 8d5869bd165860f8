# Source of labs/10_batch_invariance.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 10

# %% [markdown]
# # Lab 10 · Why batch 1 and batch 64 disagree · 为什么 batch 1 和 batch 64 的结果不一样

# %% [markdown] tags=["lang-en"]
# Run a prompt alone with temperature 0, then run it again among 63 others: in bf16 the tokens can differ. Nothing
# is random. Every kernel here is deterministic for a fixed shape, but the **batch size picks the shape**, the shape
# picks the kernel and how it splits its sums, and floating-point addition in another order rounds differently. A
# near-tie between the top two logits flips, and every token after it follows. This is the question Thinking
# Machines' ["Defeating Nondeterminism in LLM Inference"](https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/)
# answers, and the reason vLLM has a batch-invariant mode (`VLLM_BATCH_INVARIANT=1`, the
# [docs page](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/features/batch_invariance.md), its kernels in
# [vllm/model_executor/determinism/batch_invariant.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/determinism/batch_invariant.py)
# and its check that bs=1 and bs=N logprobs are bitwise equal in
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/v0.33.0/tests/v1/determinism/test_batch_invariance.py)).
#
# You will measure, on this engine:
#
# - **a)** the disagreement: the same prompts alone and batched (1, 2, 8, 64 on the H200; 1, 2, 4 on a CPU),
#   greedy; how many sequences keep their tokens, **where** the others part, and the gap in the chosen token's
#   logprob before they part;
# - **b)** its sources, one at a time: a matmul's row at M rows against the row alone (kernel choice and split-K
#   by M), decode attention with the KV splits chosen at batch 1 against those at batch 64, a CUDA graph of 8
#   replayed for 5 against a graph of 5, fp32 against bf16;
# - **c)** the batch-invariant mode `LLM(batch_invariant=True)` closing the gap, and what it costs in TPOT;
# - **d)** what CUDA graphs and torch.compile change.
#
# Cells: **setup**; **recorded results** (H200, `assets/results/h200/lab10.json`, the throughput bench's own
# check in `throughput.json`, and `minivllm bench invariance` in `invariance.json`); **run it here** (your device; the embedded model on a CPU); **GPU only**.

# %% [markdown] tags=["lang-zh"]
# 用 temperature 0 单独跑一个 prompt，再把它和另外 63 个一起跑：bf16 下 token 可能不一样。这里没有任何随机性。
# 每个 kernel 在固定形状下都是确定的，但 **batch 大小决定形状**，形状决定选哪个 kernel、如何切分求和，而浮点加法换个顺序，
# 舍入就不同。前两名 logit 的近似平局被翻转，之后的每个 token 都跟着变。这正是 Thinking Machines 的
# ["Defeating Nondeterminism in LLM Inference"](https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/)
# 回答的问题，也是 vLLM 提供 batch 不变模式（`VLLM_BATCH_INVARIANT=1`，见
# [文档](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/features/batch_invariance.md)、kernel 在
# [vllm/model_executor/determinism/batch_invariant.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/determinism/batch_invariant.py)、
# bs=1 与 bs=N 的 logprobs 逐位相等的检查在
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/v0.33.0/tests/v1/determinism/test_batch_invariance.py)）的原因。
#
# 你将在本引擎上测量：
#
# - **a)** 不一致本身：同样的 prompt 单独跑与批处理（H200 上 1、2、8、64；CPU 上 1、2、4），贪心解码；多少条序列保持原 token，
#   其余的**在哪里**分叉，分叉前所选 token 的 logprob 差多少；
# - **b)** 逐个测量来源：M 行 matmul 的某一行与单独计算该行（按 M 选 kernel、split-K）；batch 1 与 batch 64 时 decode
#   attention 选的 KV 切分；为 8 捕获的 CUDA Graph 重放 5 条与为 5 捕获的图；fp32 与 bf16；
# - **c)** batch 不变模式 `LLM(batch_invariant=True)` 消除差异，以及它在 TPOT 上的代价；
# - **d)** CUDA Graph 与 torch.compile 改变了什么。
#
# 单元格分四类：**环境准备**；**H200 实测记录**（`assets/results/h200/lab10.json`、`throughput.json` 中吞吐 bench
# 自带的检查，以及 `invariance.json` 中的 `minivllm bench invariance`）；**在本机运行**（CPU 上用内置小模型）；**仅限 GPU**。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("10")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
from minivllm_labs import lab07_views  # Lab 07 shows every lab's claims as one table

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### a) The disagreement
# First the engine's own benchmark: `minivllm bench throughput --check-correctness` runs 16 prompts batched and
# then one by one, greedy, 32 tokens, on a random-weight Qwen3-0.6B, in bf16 and again in fp32
# ([bench/throughput.py](../minivllm/bench/throughput.py) `check_correctness`). Random weights give flat
# distributions, so near-ties are common: a worst case for this question.

# %% [markdown] tags=["lang-zh"]
# ### a) 不一致本身
# 先看引擎自带的基准：`minivllm bench throughput --check-correctness` 在随机权重的 Qwen3-0.6B 上把 16 个 prompt
# 先批处理、再逐个运行，贪心解码 32 个 token，bf16 一次、fp32 再一次（[bench/throughput.py](../minivllm/bench/throughput.py)
# 的 `check_correctness`）。随机权重的分布很平，近似平局很多：对这个问题而言是最坏情况。

# %% tags=["nbval-check-output"]
print(lab.throughput_check_text())

# %% [markdown] tags=["lang-en"]
# The lab's own record sweeps the batch size. Batch 1 run twice is the run-to-run check: the same shapes, so the
# same bits. *max |dlogprob|* is the largest difference of the chosen token's logprob before the sequences part;
# *bitwise lp* counts sequences whose every logprob is bitwise equal, the criterion of vLLM's
# `test_logprobs_bitwise_batch_invariance_bs1_vs_bsN` (same tokens, then `torch.equal` on each step's logprobs:
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/v0.33.0/tests/v1/determinism/test_batch_invariance.py)).
# The logprob is the one `SamplingParams(logprobs=0)` returns, the chosen token's, as in vLLM
# ([sampling_params.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/sampling_params.py) `logprobs`).

# %% [markdown] tags=["lang-zh"]
# 本实验自己的记录扫描 batch 大小。batch 1 跑两次是重复运行检查：形状相同，比特相同。*max |dlogprob|* 是分叉之前所选
# token 的 logprob 的最大差；*bitwise lp* 是每个 logprob 都逐位相等的序列数，即 vLLM 的
# `test_logprobs_bitwise_batch_invariance_bs1_vs_bsN` 的判据（先比 token，再对每一步的 logprob 做 `torch.equal`：
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/v0.33.0/tests/v1/determinism/test_batch_invariance.py)）。
# 这里的 logprob 是 `SamplingParams(logprobs=0)` 返回的所选 token 的 logprob，与 vLLM 相同
# （[sampling_params.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/sampling_params.py) 的 `logprobs`）。

# %% tags=["nbval-check-output"]
print(lab.disagreement_table(rec))
if rec:
    lab.show(lab.plot_disagreement(rec))

# %% [markdown] tags=["lang-en"]
# What the H200 record shows (`lab10.json`, 32 greedy tokens per sequence; each count is one deterministic run,
# and batch 1 run again kept 1/1 with every logprob bitwise equal, so there is no run-to-run spread to subtract):
#
# - **bf16, default engine.** Batch 2 kept 1/2 sequences (the other parts at token 9), batch 8 kept 5/8, batch 64
#   kept 31/64. No batched sequence had every logprob bitwise equal (0/2, 0/8, 0/64), and before they part the
#   chosen token's logprob already differs by up to {rec}`lab10.json:disagreement.bfloat16.rows.1.max_logprob_gap:.4f` (batch 2), {rec}`lab10.json:disagreement.bfloat16.rows.2.max_logprob_gap:.4f` (batch 8), {rec}`lab10.json:disagreement.bfloat16.rows.3.max_logprob_gap:.4f` (batch 64). Two
#   of the 64 part at token 0: the first token, which the prefill picks before any decode step, so the prefill of
#   a batch (all prompts packed into one forward) is a source too, not only decode.
# - **fp32, the same engine.** Every batch kept every sequence's tokens (64/64 at batch 64), yet 0/64 had every
#   logprob bitwise equal: the gap is at most {rec}`lab10.json:disagreement.float32.rows.3.max_logprob_gap:.1e`, four orders of magnitude below bf16's {rec}`lab10.json:disagreement.bfloat16.rows.3.max_logprob_gap:.4f`. fp32 hides
#   the batch dependence; it does not remove it.
# - **bf16, `batch_invariant=True`.** 64/64 kept their tokens and 64/64 every logprob bitwise (gap 0.0).
#
# The throughput bench above agrees from another workload (16 prompts, another prompt set): 10/16 in bf16, 16/16 in
# fp32.

# %% [markdown] tags=["lang-zh"]
# H200 记录（`lab10.json`，每条序列贪心生成 32 个 token）显示的结果。每个计数都是一次确定性运行；batch 1 再跑一次得到 1/1，
# 且每个 logprob 逐位相等，所以没有需要扣除的重复运行波动：
#
# - **bf16，默认引擎。** batch 2 保持 1/2 条序列（另一条从第 9 个 token 分叉），batch 8 保持 5/8，batch 64 保持 31/64。
#   批处理中没有一条序列的 logprob 全部逐位相等（0/2、0/8、0/64）；分叉之前，所选 token 的 logprob 已相差最多 {rec}`lab10.json:disagreement.bfloat16.rows.1.max_logprob_gap:.4f`
#   （batch 2）、{rec}`lab10.json:disagreement.bfloat16.rows.2.max_logprob_gap:.4f`（batch 8）、{rec}`lab10.json:disagreement.bfloat16.rows.3.max_logprob_gap:.4f`（batch 64）。64 条中有 2 条在第 0 个 token 就分叉：第一个 token 由预填充在任何
#   解码步之前选出，所以批量预填充（所有 prompt 打包进一次 forward）本身也是来源，不只是解码。
# - **fp32，同一个引擎。** 每个 batch 都保持了全部序列的 token（batch 64 为 64/64），但 logprob 全部逐位相等的是 0/64：
#   差值最多 {rec}`lab10.json:disagreement.float32.rows.3.max_logprob_gap:.1e`，比 bf16 的 {rec}`lab10.json:disagreement.bfloat16.rows.3.max_logprob_gap:.4f` 小四个数量级。fp32 掩盖了 batch 依赖，并没有消除它。
# - **bf16，`batch_invariant=True`。** 64/64 保持 token，64/64 的 logprob 全部逐位相等（差值 0.0）。
#
# 上面的吞吐 bench 用另一份负载（16 个 prompt，另一组 prompt）得出一致的结论：bf16 下 10/16，fp32 下 16/16。

# %% [markdown] tags=["lang-en"]
# The engine's GPU tests found the same effect between two graph modes. At main 7a5abb1 on the H200,
# `tests/engine/test_cuda_graphs_gpu.py::test_graph_modes_match_eager_at_every_batch_size` ran 210 sequences
# (batches 1 to 20) of the trained embedded model in bf16 with cudagraph_mode FULL against eager: all but 3 kept
# eager's greedy tokens (batch 15 sequence 2 from token 14; batch 16 sequences 6 and 14 from tokens 4 and 12). FULL
# mode runs every batch through the unified attention kernel, which does not split the KV; eager decode runs the
# split decode kernel, whose splits are merged afterwards: the same attention summed in another order. In fp32 all
# 210 were equal. vLLM has the same kind of difference: its FlashAttention backend (FA3, the Hopper default), when
# full CUDA graphs are on, caps the number of KV splits at `VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH` for the
# steps up to the largest capture size, while a step above it runs FA3's own split heuristic
# (`FlashAttentionMetadataBuilder.build` in [flash_attn.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/attention/backends/flash_attn.py)), so a batch
# can sum one attention in another order in a graph than out of one. This engine's case is its own: FULL mode's
# unified kernel against eager's split decode kernel ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm),
# row "FULL's tokens vs eager").

# %% [markdown] tags=["lang-zh"]
# 引擎的 GPU 测试在两种图模式之间也发现了同样的现象。在 main 7a5abb1、H200 上，
# `tests/engine/test_cuda_graphs_gpu.py::test_graph_modes_match_eager_at_every_batch_size` 用训练过的内置模型（bf16）
# 跑了 210 条序列（batch 1 到 20），cudagraph_mode FULL 对比 eager：只有 3 条与 eager 的贪心 token 不同（batch 15 的第 2 条从
# 第 14 个 token 起；batch 16 的第 6、14 条分别从第 4、12 个 token 起）。FULL 模式让每个 batch 都走 unified attention
# kernel，它不切分 KV；eager 的 decode 走切分的 decode kernel，各段算完再合并：同样的 attention，求和顺序不同。fp32 下
# 210 条全部相同。vLLM 也有同类差别：它的 FlashAttention 后端（FA3，Hopper 上的默认）在开启整图时，对不超过最大捕获尺寸的步
# 把 KV 切分数封顶为 `VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH`，超过的步则用 FA3 自己的切分启发式
# （[flash_attn.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/attention/backends/flash_attn.py) 的 `FlashAttentionMetadataBuilder.build`），所以同一个 batch
# 在图里和图外可能以不同顺序求和同一个 attention。本引擎的情况是它自己的：FULL 模式的 unified kernel 对 eager 的切分 decode kernel
# （见 [minivllm 与 vLLM 的差异](../README.md#where-minivllm-differs-from-vllm) 中 "FULL's tokens vs eager" 一行）。

# %% [markdown] tags=["lang-en"]
# ### b) The sources, one at a time
# **Matmul by M.** Row 0 of an M-row linear (Qwen3-0.6B's down projection) against the same row computed alone.
# cuBLAS picks its kernel, tiles and split-K from M; this engine also runs a Triton GEMV at 1-2 rows
# ([kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py) `DISPATCH_MAX_M`). The batch-invariant matmul
# ([kernels/triton_matmul.py](../minivllm/kernels/triton_matmul.py) `invariant_matmul`) uses one tiling for every M.
#
# **Attention splits.** With few sequences the decode kernel splits each sequence's KV to fill the GPU; with many it
# does not need to ([kernels/triton_decode.py](../minivllm/kernels/triton_decode.py) `choose_num_splits`). So the
# same sequence's softmax is summed in 16 pieces at batch 1 and in 3 at batch 64 (context 2048 on 132 SMs).
#
# **A padded graph.** A batch of 5 replays the graph captured for 8 when no graph of 5 exists
# ([worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) `CudagraphDispatcher.dispatch`): its
# kernels are those chosen for 8 rows. Padded rows are masked (length 0, slot -1), so they never mix into real rows.

# %% [markdown] tags=["lang-zh"]
# ### b) 逐个测量来源
# **按 M 的 matmul。** M 行 linear（Qwen3-0.6B 的 down projection）的第 0 行，与单独计算该行比较。cuBLAS 按 M 选 kernel、
# 分块和 split-K；本引擎在 1-2 行时还会走 Triton GEMV（[kernels/triton_gemv.py](../minivllm/kernels/triton_gemv.py)
# 的 `DISPATCH_MAX_M`）。batch 不变的 matmul（[kernels/triton_matmul.py](../minivllm/kernels/triton_matmul.py) 的
# `invariant_matmul`）对所有 M 用同一种分块。
#
# **attention 切分。** 序列少时 decode kernel 会切分每条序列的 KV 来填满 GPU；序列多时不需要
# （[kernels/triton_decode.py](../minivllm/kernels/triton_decode.py) 的 `choose_num_splits`）。同一条序列的 softmax 在
# batch 1 时分 16 段求和，在 batch 64 时分 3 段（上下文 2048、132 个 SM）。
#
# **填充的图。** 没有为 5 捕获的图时，5 条序列的 batch 重放为 8 捕获的图（[worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py)
# 的 `CudagraphDispatcher.dispatch`）：执行的是为 8 行选的 kernel。填充行被屏蔽（长度 0、slot -1），不会混进真实的行。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.matmul_table(rec))
    print(lab.attention_table(rec))
    print(lab.graphs_table(rec))

# %% [markdown] tags=["lang-en"]
# Read the three tables against the expectation above; two of the three sources did not move the bits here.
#
# **Matmul: the bf16 row did not move.** On the H200, row 0 of the down projection in bf16 came out bitwise equal
# at every M from 1 to 64, for cuBLAS, the engine's linear and the invariant kernel alike. The reordering is
# there: in fp32 cuBLAS's row moves from M = 2 (8.3e-07, up to 1.6e-06 at M = 16) and the engine's from M = 3 (its
# GEMV at M ≤ 2 sums like M = 1), while the invariant kernel's never moves. In bf16 the fp32 accumulator's
# differences, about 1e-06, stayed below the one rounding to bf16 at the output, for every one of this shape's
# 1024 outputs. One shape is not every shape: the record does not show which of a step's other matmuls (QKV, the
# output and gate/up projections, the LM head) moved.
#
# **Attention: the kernel moved.** The Triton decode kernel's output at 16 splits against 3 differs by 0.00049 in
# bf16 (8.9e-08 in fp32). The PyTorch version of the same arithmetic, accumulated in fp32 and rounded once at the
# end, came out bitwise equal in bf16. The kernel rounds each tile's softmax weights to bf16 before multiplying
# them by V, and those weights are taken relative to the running maximum of their own split
# ([kernels/triton_decode.py](../minivllm/kernels/triton_decode.py) `_decode_kernel`), so other split boundaries
# round other weights. In the sweep of a) the lab's engines hold at most 256 tokens a sequence (`max_model_len`), so
# `choose_num_splits` picks 2 KV splits at batches 1, 2, 5 and 8, and 1 at batch 64.
#
# **The padded graph: equal here.** Batch 5 in the graph of 8 kept 5/5 sequences with every logprob bitwise equal
# to the graph of 5, and both equal eager bitwise (5/5); both engines ran 31 decode steps in full graphs and 1 step
# (the prefill) eagerly. The 8-row plan summed like the 5-row one: the bf16 matmul row is equal at M = 5 and 8, and
# both sizes pick 2 KV splits. Padding changes the numbers only where the padded size changes the plan; at a
# 2048-token context an H200 picks 7 splits for 5 sequences and 5 for 8.
#
# **The default engine against eager: not equal.** At the same batch size, torch.compile with CUDA graphs kept 7/8
# (batch 8) and 39/64 (batch 64) of eager's greedy sequences, logprob gap up to 0.0314. A graph of the exact size
# without torch.compile gave eager's bits (above), so what moved these is torch.compile's kernels (section d).

# %% [markdown] tags=["lang-zh"]
# 对照上面的预期来读这三张表：三个来源中有两个在这里没有改变比特。
#
# **matmul：bf16 的行没有变。** 在 H200 上，down projection 第 0 行在 bf16 下、M 从 1 到 64 全部与单独计算逐位相等，cuBLAS、
# 本引擎的 linear 和不变 kernel 都一样。重排确实存在：fp32 下 cuBLAS 的这一行从 M = 2 起就变（8.3e-07，M = 16 时最大 1.6e-06），
# 本引擎的从 M = 3 起变（M ≤ 2 时走 GEMV，求和方式与 M = 1 相同），不变 kernel 始终不变。bf16 下，fp32 累加器中约 1e-06
# 的差异，在输出处那一次舍入到 bf16 时被吸收了，这个形状的 1024 个输出无一例外。一个形状不代表所有形状：记录没有说明一个解码步里
# 其他 matmul（QKV、输出投影和 gate/up 投影、LM head）是否变了。
#
# **attention：kernel 变了。** Triton decode kernel 切 16 段与切 3 段的输出在 bf16 下相差 0.00049（fp32 下 8.9e-08）。同样
# 算法的 PyTorch 版本在 fp32 中累加、最后只舍入一次，在 bf16 下逐位相等。kernel 在与 V 相乘之前，把每个 tile 的 softmax 权重
# 舍入到 bf16，而这些权重是相对于所在切分段自己的运行最大值计算的（[kernels/triton_decode.py](../minivllm/kernels/triton_decode.py)
# 的 `_decode_kernel`），所以切分边界不同，被舍入的权重就不同。在 a) 的扫描中，本实验的引擎每条序列最多 256 个 token（`max_model_len`），所以 `choose_num_splits` 在 batch 1、2、5、8
# 时切 2 段，batch 64 时切 1 段。
#
# **填充的图：这里相同。** 5 条序列在为 8 捕获的图中运行，5/5 条与为 5 捕获的图 token 相同，且每个 logprob 逐位相等；两者也都与
# eager 逐位相同（5/5）。两个引擎都有 31 个解码步走整图，1 步（预填充）走 eager。为 8 行选的方案与为 5 行选的求和方式相同：
# bf16 matmul 的行在 M = 5 和 8 时相等，两种尺寸都切 2 段 KV。只有填充后的尺寸改变了计算方案时，填充才会改变数值；在 2048 token
# 的上下文下，H200 对 5 条序列切 7 段，对 8 条切 5 段。
#
# **默认引擎对比 eager：不相同。** 在相同 batch 大小下，torch.compile 加 CUDA Graph 保持了 eager 贪心序列的 7/8（batch 8）和
# 39/64（batch 64），logprob 差最多 0.0314。不开 torch.compile、尺寸恰好的图给出与 eager 相同的比特（见上），所以改变它们的是
# torch.compile 的 kernel（见 d 节）。

# %% [markdown] tags=["lang-en"]
# ### c) The batch-invariant mode, and what it costs · d) graphs and torch.compile
# `LLM(batch_invariant=True)` (or `VLLM_BATCH_INVARIANT=1`, as in vLLM) runs every matmul through the one-tiling
# kernel, picks decode KV splits from the context length alone, and fixes the attention and norm tiles
# ([layers/custom_op.py](../minivllm/layers/custom_op.py) `CustomOpSelection.for_engine`). vLLM does it otherwise:
# [batch_invariant.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/determinism/batch_invariant.py)
# (`enable_batch_invariant_mode`) overrides aten's log-softmax, softmax, mean and bmm with Triton kernels of one
# fixed tiling, and makes the matmuls invariant by GPU: on Ampere a Triton persistent matmul replaces `aten::mm`,
# `addmm`, `matmul` and `linear`, on Hopper and Blackwell cuBLAS stays, with split-K turned off through the cuBLAS
# workspace settings (so in the version read here; the choice has changed between versions); its FlashAttention
# backend does not split the KV at all (`num_splits=1`,
# [flash_attn.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/attention/backends/flash_attn.py)). This
# engine keeps split-KV decode with the split count taken from the longest context, and calls its Triton matmul from
# the Linear layers instead of patching `aten`
# ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm), row "batch-invariant
# attention"). The Thinking Machines post splits attention at a fixed KV size rather than into a fixed number of
# splits, as this engine does. The mode's cost is the parallelism that
# split-K, the GEMV and occupancy-based splits bought: the table measures it at batch 1 and 64 in the same run,
# medians of 5 repeats with [min, max]; a difference inside both ranges is noise.
#
# CUDA graphs replay the kernels they recorded: a graph of the batch's own size gives eager's bits (Lab 01's
# snippet: `lab01.json` `snippet.max_abs_diff` is 0.0). What changes numbers is a *different kernel*: a padded
# size whose kernels split or tile otherwise, this engine's FULL-mode unified attention (section a), or
# torch.compile's fused Inductor kernels (Lab 03 measured an Inductor residual add + RMSNorm differing from eager's in the last bits of bf16:
# `lab03.json` `inductor.max_abs_diff`).

# %% [markdown] tags=["lang-zh"]
# ### c) batch 不变模式及其代价 · d) CUDA Graph 与 torch.compile
# `LLM(batch_invariant=True)`（或与 vLLM 相同的 `VLLM_BATCH_INVARIANT=1`）让所有 matmul 走同一种分块的 kernel，decode 的
# KV 切分只按上下文长度决定，attention 与 norm 的分块固定（[layers/custom_op.py](../minivllm/layers/custom_op.py) 的
# `CustomOpSelection.for_engine`）。vLLM 的做法不同：
# [batch_invariant.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/determinism/batch_invariant.py)
# （`enable_batch_invariant_mode`）用固定分块的 Triton kernel 覆盖 aten 的 log-softmax、softmax、mean 和 bmm，matmul 则按
# GPU 区分：Ampere 上用 Triton persistent matmul 替换 `aten::mm`、`addmm`、`matmul` 和 `linear`，Hopper 与 Blackwell 上
# 仍用 cuBLAS，通过 cuBLAS workspace 设置关掉 split-K（这是这里读到的版本；不同版本的做法有过变化）；它的 FlashAttention
# 后端完全不切分 KV（`num_splits=1`，[flash_attn.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/attention/backends/flash_attn.py)）。
# 本引擎保留切分 KV 的 decode，切分数由最长上下文决定，并由 Linear 层直接调用自己的 Triton matmul，而不是替换 `aten`
# （见 [minivllm 与 vLLM 的差异](../README.md#where-minivllm-differs-from-vllm) 中 "batch-invariant attention" 一行）。
# Thinking Machines 的文章让 attention 按固定的 KV 长度切分，而不是切成固定的份数，本引擎也是这样。代价是 split-K、GEMV 和按占用率
# 切分原本换来的并行度：下表在同一次运行里测 batch 1 和 64，取 5 次重复的中位数并给出 [最小, 最大]；落在两边范围内的差别算噪声。
#
# CUDA Graph 重放的是录下来的 kernel：与 batch 尺寸相同的图给出与 eager 相同的比特（Lab 01 的小例子：`lab01.json` 的
# `snippet.max_abs_diff` 为 0.0）。改变数值的是*换了 kernel*：填充后的尺寸选了不同的切分或分块、本引擎 FULL 模式的 unified attention（见 a 节），或 torch.compile
# 融合出的 Inductor kernel（Lab 03 测得 bf16 下 Inductor 的残差加 + RMSNorm 与 eager 在 bf16 的末位上不同：`lab03.json` 的 `inductor.max_abs_diff`）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.invariant_table(rec))

# %% [markdown] tags=["lang-en"]
# On the H200 the mode costs TPOT at batch 1 ({rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.3f` ms [{rec}`lab10.json:batch_invariant.tpot.0.tpot_ms_range.0:.3f`, {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms_range.1:.3f`] against {rec}`lab10.json:tpot.default.0.tpot_ms:.3f` ms [{rec}`lab10.json:tpot.default.0.tpot_ms_range.0:.3f`, {rec}`lab10.json:tpot.default.0.tpot_ms_range.1:.3f`]) and
# at batch 64 ({rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.3f` ms [{rec}`lab10.json:batch_invariant.tpot.1.tpot_ms_range.0:.3f`, {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms_range.1:.3f`] against {rec}`lab10.json:tpot.default.1.tpot_ms:.3f` ms [{rec}`lab10.json:tpot.default.1.tpot_ms_range.0:.3f`, {rec}`lab10.json:tpot.default.1.tpot_ms_range.1:.3f`]); the ranges over 5 repeats are far apart, so
# both costs are real. For that it kept 64/64 sequences bitwise equal to their runs alone (section a). The engine's
# own bench, `minivllm bench invariance` (64 requests of 128 prompt tokens, 128 output tokens), measured the same
# trade on another workload: TPOT {rec}`invariance.json:modes.batch_invariant.latency.1.tpot_s*1000:.3f` ms against {rec}`invariance.json:modes.default.latency.1.tpot_s*1000:.3f` ms at batch 1 and {rec}`invariance.json:modes.batch_invariant.latency.64.tpot_s*1000:.3f` ms against {rec}`invariance.json:modes.default.latency.64.tpot_s*1000:.3f` ms at
# batch 64, output {rec}`invariance.json:modes.batch_invariant.latency.64.output_tok_s*0.001:.1f`k against {rec}`invariance.json:modes.default.latency.64.output_tok_s*0.001:.1f`k tokens/s at batch 64, for 16/16 requests identical batched
# and one by one (the default: 10/16) and 32/32 sequences with every logprob bitwise equal (the default: 0/32)
# (`invariance.json`, `modes.<mode>.latency`, `batched_vs_single`, `logprobs`; one run per mode, so no spread). The
# bench ran the mode with CUDA graphs (`invariance.json` `modes.batch_invariant.cudagraph_mode`: FULL_AND_PIECEWISE): invariance comes from the
# kernels, not from turning graphs off.
#
# For d), the record's graphs table above holds the answer: a graph of the exact size, and here also the padded one,
# replayed eager's bits, while torch.compile's kernels at the same batch size kept only 7/8 and 39/64 of eager's
# greedy sequences.

# %% [markdown] tags=["lang-zh"]
# 在 H200 上，该模式在 batch 1 的 TPOT 代价是 {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.3f` ms [{rec}`lab10.json:batch_invariant.tpot.0.tpot_ms_range.0:.3f`, {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms_range.1:.3f`]，默认 {rec}`lab10.json:tpot.default.0.tpot_ms:.3f` ms [{rec}`lab10.json:tpot.default.0.tpot_ms_range.0:.3f`, {rec}`lab10.json:tpot.default.0.tpot_ms_range.1:.3f`]；batch 64
# 是 {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.3f` ms [{rec}`lab10.json:batch_invariant.tpot.1.tpot_ms_range.0:.3f`, {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms_range.1:.3f`]，默认 {rec}`lab10.json:tpot.default.1.tpot_ms:.3f` ms [{rec}`lab10.json:tpot.default.1.tpot_ms_range.0:.3f`, {rec}`lab10.json:tpot.default.1.tpot_ms_range.1:.3f`]；5 次重复的范围相距很远，两个代价都是真实的。换来的是 64/64 条序列
# 与单独运行逐位相同（见 a 节）。引擎自带的 `minivllm bench invariance`（64 个请求，prompt 128 token，输出 128 token）在另一份
# 负载上测到同样的取舍：batch 1 的 TPOT {rec}`invariance.json:modes.batch_invariant.latency.1.tpot_s*1000:.3f` ms 对 {rec}`invariance.json:modes.default.latency.1.tpot_s*1000:.3f` ms，batch 64 的 {rec}`invariance.json:modes.batch_invariant.latency.64.tpot_s*1000:.3f` ms 对 {rec}`invariance.json:modes.default.latency.64.tpot_s*1000:.3f` ms，batch 64
# 的输出吞吐 {rec}`invariance.json:modes.batch_invariant.latency.64.output_tok_s*0.001:.1f`k 对 {rec}`invariance.json:modes.default.latency.64.output_tok_s*0.001:.1f`k token/s；换来的是批处理与逐个运行 16/16 个请求一致（默认 10/16），32/32 条序列的 logprob
# 全部逐位相等（默认 0/32）（`invariance.json` 的 `modes.<mode>.latency`、`batched_vs_single`、`logprobs`；每种模式只跑一次，
# 没有波动范围）。该 bench 在开着 CUDA Graph 的情况下运行该模式（`invariance.json` 的 `modes.batch_invariant.cudagraph_mode`：FULL_AND_PIECEWISE）：
# 不变性来自 kernel，而不是关掉 CUDA Graph。
#
# d) 的答案在上面记录的图表里：尺寸恰好的图，以及这里填充的图，重放都给出 eager 的比特；而在相同 batch 大小下，torch.compile
# 的 kernel 只保持了 eager 贪心序列的 7/8 和 39/64。

# %% tags=["nbval-ignore-output"] id="10-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="10-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs it batched and each prompt alone (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The same functions on your device. On a CPU: the embedded model in fp32 (CPU bf16 is slow), batches 1, 2, 4,
# 8 new tokens; the default engine and the batch-invariant one. Expect equal tokens here: fp32 rounds finely and
# the model is small. The logprob columns and the matmul table still show whether the bits moved. A CPU has a
# source of its own: the PyTorch decode attention ([kernels/torch_ref.py](../minivllm/kernels/torch_ref.py)
# `paged_decode_attention_ref`) sums each sequence's softmax over the batch's block-table width, which the longest
# sequence in the batch sets, so a short sequence's logprobs move in the last bits when a longer one joins it.

# %% [markdown] tags=["lang-zh"]
# 在本机运行同样的函数。CPU 上：内置模型、fp32（CPU 上 bf16 很慢），batch 1、2、4，生成 8 个 token；默认引擎与 batch 不变引擎各一次。
# 这里 token 应当一致：fp32 舍入很细，模型也小。logprob 列和 matmul 表仍能看出比特是否变了。CPU 还有一个自己的来源：
# PyTorch 版 decode attention（[kernels/torch_ref.py](../minivllm/kernels/torch_ref.py) 的 `paged_decode_attention_ref`）
# 在整个 batch 的 block table 宽度上对 softmax 求和，而宽度由 batch 中最长的序列决定，所以更长的序列加入后，短序列的
# logprob 会在末位上变化。

# %% tags=["nbval-ignore-output"]
model = lab.model()
gpu = lab.device.kind != "cpu"
batches, new_tokens, dtype = (lab.GPU_BATCHES, 32, "bfloat16") if gpu else (lab.CPU_BATCHES, 8, "float32")
here = {"logprobs": lab.logprobs_supported(), "disagreement": {}}
llm = lab.engine(model, dtype)
here["disagreement"][dtype] = lab.disagreement(llm, batches, new_tokens)
lab.free(llm)
inv, why = lab.batch_invariant_engine(model, dtype)
here["batch_invariant"] = {"available": inv is not None, "why": why}
if inv is not None:
    here["batch_invariant"]["disagreement"] = lab.disagreement(inv, batches, new_tokens)
    lab.free(inv)
print(lab.disagreement_table(here))

# %% tags=["nbval-ignore-output"]
import torch

here["matmul"] = {"float32": lab.matmul_by_m(torch.float32)}
here["attention"] = {"float32": lab.attention_splits(torch.float32, 512)}
if gpu:
    here["matmul"]["bfloat16"] = lab.matmul_by_m(torch.bfloat16)
    here["attention"]["bfloat16"] = lab.attention_splits(torch.bfloat16, 2048)
print(lab.matmul_table(here))
print(lab.attention_table(here))

# %% [markdown]
# ## 4. GPU only · 仅限 GPU

# %% [markdown] tags=["lang-en"]
# Everything `python -m minivllm_labs.record lab10` records, on a random-weight Qwen3-0.6B in bf16: the batch sweep
# in bf16 and fp32, the default engine against eager, the padded graph, the batch-invariant mode and its TPOT
# ({rec}`lab10.json:seconds:.0f` s on the H200, `lab10.json` `seconds`; the whole notebook ran there end to end in {rec}`labs_gpu.json:notebooks[notebook=10_batch_invariance].seconds` s, `labs_gpu.json`).

# %% [markdown] tags=["lang-zh"]
# `python -m minivllm_labs.record lab10` 记录的全部内容，在随机权重 Qwen3-0.6B、bf16 上：bf16 与 fp32 的 batch 扫描、
# 默认引擎对比 eager、填充的图、batch 不变模式及其 TPOT（H200 上 {rec}`lab10.json:seconds:.0f` 秒，`lab10.json` 的 `seconds`；整个 notebook 在 H200 上
# 完整运行用时 {rec}`labs_gpu.json:notebooks[notebook=10_batch_invariance].seconds` 秒，见 `labs_gpu.json`）。

# %% tags=["nbval-skip"] id="gpu-full-lab10"
if lab.gpu_only("The full batch sweep, padded graphs and the batch-invariant cost"):
    gpu_rec = lab.run_all(lab.model("qwen3-0.6b"))
    print(lab.disagreement_table(gpu_rec))
    lab.show(lab.plot_disagreement(gpu_rec))
    print(lab.graphs_table(gpu_rec))
    print(lab.invariant_table(gpu_rec))

# %% [markdown]
# ## 5. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Four questions on what you measured. Pick an answer; the feedback quotes the numbers above (the recorded H200
# ones when present, else yours) and the results files and keys they come from.

# %% [markdown] tags=["lang-zh"]
# 四道关于本实验测量的题。选一个答案；反馈引用上面的数字（有 H200 记录时用记录，否则用本机结果）以及它们所在的结果文件和键。

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_DETERMINISM, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_FP32, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_PADDING, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_INVARIANT, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab10.q1.** Greedy decoding is a deterministic function of the logits, and the logits a deterministic function of
# the shapes: the batch size picks the matmul kernel (GEMV or GEMM tiles, split-K) and the attention KV splits, so
# the same row is summed in another order, rounds differently in bf16, and a near-tie flips.
#
# **lab10.q2.** The same reorderings happen in fp32, but it keeps 24 significant bits against bf16's 8: a reordered
# sum moves a logit by a step smaller by a factor of 2^16, which rarely reaches the gap between the top two tokens. fp32
# hides batch dependence; it does not remove it: on the H200 it kept 64/64 sequences' tokens at batch 64 and 0/64
# sequences' logprobs bitwise.
#
# **lab10.q3.** Only when the kernels chosen for 8 rows sum like those for 5: padding never mixes rows, but the
# padded size picks the plan. On the H200 the plan for 8 summed like the one for 5 (5/5 sequences bitwise). A graph
# of the exact size replays eager's kernels bitwise.
#
# **lab10.q4.** It fixes each reduction's order whatever the batch: one matmul tiling with no split-K by M, KV
# splits at a fixed size (from the context, not the occupancy; vLLM's FlashAttention backend does not split at all),
# per-row norms. It still batches; the price is the
# parallelism those choices bought: on the H200, TPOT {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.2f` against {rec}`lab10.json:tpot.default.0.tpot_ms:.2f` ms at batch 1 and {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.2f` against {rec}`lab10.json:tpot.default.1.tpot_ms:.2f` ms at
# batch 64, for 64/64 sequences bitwise.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab10.q1.** 贪心解码是 logits 的确定性函数，logits 又是形状的确定性函数：batch 大小决定 matmul kernel（GEMV 或 GEMM
# 分块、split-K）和 attention 的 KV 切分，同一行以不同顺序求和，bf16 舍入不同，近似平局就会翻转。
#
# **lab10.q2.** fp32 下同样会重排，但它有 24 位有效位，bf16 只有 8 位：重排后 logit 的变化只有 bf16 下的 2^-16，很少够得上前两名 token
# 的间距。fp32 掩盖了 batch 依赖，并没有消除它：H200 上 batch 64 时它保持了 64/64 条序列的 token，logprob 逐位相等的却是 0/64。
#
# **lab10.q3.** 只有当为 8 行选的 kernel 与为 5 行选的求和方式相同时才相同：填充不会混合各行，但填充后的尺寸决定计算方案。
# H200 上为 8 选的方案与为 5 选的求和方式相同（5/5 条序列逐位相等）。尺寸恰好相等的图重放与 eager 逐位相同。
#
# **lab10.q4.** 固定每个归约的求和顺序，与 batch 无关：matmul 用同一种分块、不按 M 做 split-K；KV 按固定长度切分（由上下文
# 决定，而非占用率；vLLM 的 FlashAttention 后端干脆不切分）；norm 按行计算。仍然批处理；代价是这些选择原本换来的并行度：H200 上 TPOT 在 batch 1 为 {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.2f` ms（默认 {rec}`lab10.json:tpot.default.0.tpot_ms:.2f` ms）、batch 64
# 为 {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.2f` ms（默认 {rec}`lab10.json:tpot.default.1.tpot_ms:.2f` ms），换来 64/64 条序列逐位相同。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Try it yourself · 动手试试
#
# **Exercise 1.** Predict, then measure: with `num_sms=132` (an H200), how many KV splits does
# `choose_num_splits` pick for one sequence of 2048 tokens at batch 1, 8, 64 (8 KV heads)? And
# `invariant_num_splits(2048)`?
#
# *Hint:* below 2 programs per SM the kernel splits to fill the GPU, at least 128 tokens a split; the invariant
# mode cuts one split per 256 tokens of the longest context.
#
# <details><summary>Solution · 参考答案</summary>
#
# `from minivllm.kernels.triton_decode import choose_num_splits, invariant_num_splits`; batch 1: 8 programs, 264
# wanted, so min(33, 2048 // 128 = 16) = 16 splits; batch 8: 64 programs, min(5, 16) = 5; batch 64: 512 programs
# fill the GPU, so min(3, 2048 // 512 = 4) = 3. The invariant mode: 2048 / 256 = 8 splits at every batch.
# </details>
#
# **Exercise 2.** Make a batch change the bits on your CPU: `lab.matmul_by_m(torch.float32)` shows row 0 moving at
# M > 1. Which op keeps it bitwise equal, and why is it slower?
#
# *Hint:* compare the `torch` and `invariant` rows of `matmul_table`.
#
# <details><summary>Solution · 参考答案</summary>
#
# The `invariant` op: on a CPU it computes each row as its own F.linear (on a GPU one Triton tiling for every M),
# so a row's sum never depends on the other rows. It gives up the BLAS's blocking across rows, which is where a
# batched matmul's speed comes from.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 动手试试
#
# **练习 1.** 先预测再测量：`num_sms=132`（H200）时，对一条 2048 token 的序列（8 个 KV 头），`choose_num_splits` 在 batch
# 1、8、64 时各切几段？`invariant_num_splits(2048)` 呢？
#
# *提示：* 每个 SM 不足 2 个 program 时 kernel 会切分来填满 GPU，每段至少 128 token；不变模式按最长上下文每 256 token 切一段。
#
# <details><summary>Solution · 参考答案</summary>
#
# batch 1：8 个 program，需要 264 个，min(33, 2048 // 128 = 16) = 16 段；batch 8：64 个 program，min(5, 16) = 5 段；
# batch 64：512 个 program 已填满 GPU，min(3, 2048 // 512 = 4) = 3 段。不变模式：2048 / 256 = 8，任何 batch 都是 8 段。
# </details>
#
# **练习 2.** 在 CPU 上让 batch 改变比特：`lab.matmul_by_m(torch.float32)` 显示 M > 1 时第 0 行会变。哪个算子保持逐位相等，
# 为什么它更慢？
#
# *提示：* 对比 `matmul_table` 里的 `torch` 与 `invariant` 两行。
#
# <details><summary>Solution · 参考答案</summary>
#
# `invariant`：CPU 上每一行单独做一次 F.linear（GPU 上对所有 M 用同一种 Triton 分块），一行的求和从不依赖其他行。它放弃了 BLAS
# 跨行分块的优化，而批量 matmul 的速度正来自那里。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 7. Summary of verdicts · 结论
# Verdicts rest on the recorded H200 files named in the table. All claims of both seeds are in
# [Lab 07](07_claims.ipynb).
#
# Engine code: [kernels/triton_decode.py](../minivllm/kernels/triton_decode.py) (`choose_num_splits`,
# `invariant_num_splits`), [kernels/triton_matmul.py](../minivllm/kernels/triton_matmul.py) (`invariant_matmul`),
# [kernels/elementwise_ops.py](../minivllm/kernels/elementwise_ops.py) (`invariant_linear`, the op that calls it),
# [kernels/elementwise_ops.py](../minivllm/kernels/elementwise_ops.py) (`linear`),
# [layers/custom_op.py](../minivllm/layers/custom_op.py) (`CustomOpSelection.for_engine`),
# [bench/throughput.py](../minivllm/bench/throughput.py) (`check_correctness`).

# %% [markdown] tags=["lang-zh"]
# ## 7. 结论
# 结论基于表中列出的 H200 记录文件。两份材料的全部说法见 [Lab 07](07_claims.ipynb)。

# %% [markdown] tags=["lang-en"]
# **Verdict.** Temperature 0 makes the choice deterministic, not the numbers it chooses from. On the H200, in bf16,
# batch 64 kept 31/64 sequences' greedy tokens against their runs alone and none of the 64 kept every logprob's
# bits; batch 1 run twice was bitwise equal. fp32 kept 64/64 sequences' tokens but 0/64 bitwise logprobs (gap at
# most {rec}`lab10.json:disagreement.float32.rows.3.max_logprob_gap:.1e`): it hides the batch dependence, it does not remove it. Of the sources measured one at a time, the
# decode attention kernel moved (0.00049 in bf16 between 16 and 3 KV splits) and the bf16 matmul row of the down
# projection did not. The article's claim that CUDA graphs change no arithmetic held for graphs: a graph of the
# exact size and the padded one both replayed eager's bits (5/5), because here the 8-row plan summed like the
# 5-row one; it is still only partly right, since a padded size that changes the plan (more KV splits at 5 than at 8
# with long contexts) or this engine's FULL-mode unified attention sums in another order, and torch.compile,
# which goes with the graphs by default, kept only 39/64 of eager's sequences at batch 64. The batch-invariant mode kept 64/64 bitwise
# and raised TPOT from {rec}`lab10.json:tpot.default.0.tpot_ms:.2f` to {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.2f` ms at batch 1 and from {rec}`lab10.json:tpot.default.1.tpot_ms:.2f` to {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.2f` ms at batch 64, beyond the spread of 5 repeats.

# %% [markdown] tags=["lang-zh"]
# **结论。** temperature 0 让"选择"确定，而不是让被选择的数字确定。在 H200 上、bf16 下，batch 64 中只有 31/64 条序列的贪心
# token 与单独运行相同，64 条中没有一条的 logprob 全部逐位相等；batch 1 跑两次则逐位相同。fp32 保持了 64/64 条序列的 token，
# 但 logprob 逐位相等的是 0/64（差值最多 {rec}`lab10.json:disagreement.float32.rows.3.max_logprob_gap:.1e`）：它掩盖了 batch 依赖，并没有消除它。逐个测量的来源中，decode attention
# kernel 变了（bf16 下 16 段与 3 段 KV 切分相差 0.00049），down projection 的 bf16 matmul 行没有变。文章说 CUDA Graph 不改变
# 任何运算，对图本身成立：尺寸恰好的图和填充的图重放都给出 eager 的比特（5/5），因为这里为 8 行选的方案与为 5 行选的求和方式相同；
# 但它仍只部分正确：填充后的尺寸若改变了方案（长上下文下 5 条序列比 8 条切更多段 KV），或本引擎的 FULL 模式换成 unified attention，
# 求和顺序就会不同；而默认与 CUDA Graph 一起使用的 torch.compile，在 batch 64 下只保持了 eager 序列的 39/64。batch 不变模式
# 64/64 逐位相同，TPOT 在 batch 1 从 {rec}`lab10.json:tpot.default.0.tpot_ms:.2f` ms 升到 {rec}`lab10.json:batch_invariant.tpot.0.tpot_ms:.2f` ms、batch 64 从 {rec}`lab10.json:tpot.default.1.tpot_ms:.2f` ms 升到 {rec}`lab10.json:batch_invariant.tpot.1.tpot_ms:.2f` ms，超出 5 次重复的波动范围。

# %% tags=["nbval-check-output"]
lab07_views.show_markdown(lab07_views.claims_markdown(lab.LAB_INFO.claims))
