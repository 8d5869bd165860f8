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
# [docs page](https://docs.vllm.ai/en/latest/features/batch_invariance/), its kernels in
# [vllm/model_executor/layers/batch_invariant.py](https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/batch_invariant.py)
# and its check that bs=1 and bs=N logprobs are bitwise equal in
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/main/tests/v1/determinism/test_batch_invariance.py)).
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
# Cells: **setup**; **recorded results** (H200, `assets/results/h200/lab10.json`, and the throughput bench's own
# check in `throughput.json`); **run it here** (your device; the embedded model on a CPU); **GPU only**.

# %% [markdown] tags=["lang-zh"]
# 用 temperature 0 单独跑一个 prompt，再把它和另外 63 个一起跑：bf16 下 token 可能不一样。这里没有任何随机性。
# 每个 kernel 在固定形状下都是确定的，但 **batch 大小决定形状**，形状决定选哪个 kernel、如何切分求和，而浮点加法换个顺序，
# 舍入就不同。前两名 logit 的近似平局被翻转，之后的每个 token 都跟着变。这正是 Thinking Machines 的
# ["Defeating Nondeterminism in LLM Inference"](https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/)
# 回答的问题，也是 vLLM 提供 batch 不变模式（`VLLM_BATCH_INVARIANT=1`，见
# [文档](https://docs.vllm.ai/en/latest/features/batch_invariance/)、kernel 在
# [vllm/model_executor/layers/batch_invariant.py](https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/batch_invariant.py)、
# bs=1 与 bs=N 的 logprobs 逐位相等的检查在
# [tests/v1/determinism/test_batch_invariance.py](https://github.com/vllm-project/vllm/blob/main/tests/v1/determinism/test_batch_invariance.py)）的原因。
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
# 单元格分四类：**环境准备**；**H200 实测记录**（`assets/results/h200/lab10.json`，以及 `throughput.json` 中吞吐 bench
# 自带的检查）；**在本机运行**（CPU 上用内置小模型）；**仅限 GPU**。

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
# *bitwise lp* counts sequences whose every logprob is bitwise equal, vLLM's test's criterion.

# %% [markdown] tags=["lang-zh"]
# 本实验自己的记录扫描 batch 大小。batch 1 跑两次是重复运行检查：形状相同，比特相同。*max |dlogprob|* 是分叉之前所选
# token 的 logprob 的最大差；*bitwise lp* 是每个 logprob 都逐位相等的序列数，即 vLLM 测试的判据。

# %% tags=["nbval-check-output"]
print(lab.disagreement_table(rec))
if rec:
    lab.show(lab.plot_disagreement(rec))

# %% [markdown] tags=["lang-en"]
# The engine's GPU tests found the same effect between two graph modes. At main 7a5abb1 on the H200,
# `tests/engine/test_cuda_graphs_gpu.py::test_graph_modes_match_eager_at_every_batch_size` ran 210 sequences
# (batches 1 to 20) of the trained embedded model in bf16 with cudagraph_mode FULL against eager: all but 3 kept
# eager's greedy tokens (batch 15 sequence 2 from token 14; batch 16 sequences 6 and 14 from tokens 4 and 12). FULL
# mode runs every batch through the unified attention kernel, which does not split the KV; eager decode runs the
# split decode kernel, whose splits are merged afterwards: the same attention summed in another order. In fp32 all
# 210 were equal.

# %% [markdown] tags=["lang-zh"]
# 引擎的 GPU 测试在两种图模式之间也发现了同样的现象。在 main 7a5abb1、H200 上，
# `tests/engine/test_cuda_graphs_gpu.py::test_graph_modes_match_eager_at_every_batch_size` 用训练过的内置模型（bf16）
# 跑了 210 条序列（batch 1 到 20），cudagraph_mode FULL 对比 eager：只有 3 条与 eager 的贪心 token 不同（batch 15 的第 2 条从
# 第 14 个 token 起；batch 16 的第 6、14 条分别从第 4、12 个 token 起）。FULL 模式让每个 batch 都走 unified attention
# kernel，它不切分 KV；eager 的 decode 走切分的 decode kernel，各段算完再合并：同样的 attention，求和顺序不同。fp32 下
# 210 条全部相同。

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
# ### c) The batch-invariant mode, and what it costs · d) graphs and torch.compile
# `LLM(batch_invariant=True)` (or `VLLM_BATCH_INVARIANT=1`, as in vLLM) runs every matmul through the one-tiling
# kernel, picks decode KV splits from the context length alone, and fixes the attention and norm tiles
# ([layers/custom_op.py](../minivllm/layers/custom_op.py) `CustomOpSelection.for_engine`). vLLM's batch_invariant.py
# (linked above) overrides aten's matmuls, log-softmax and mean with Triton kernels of one fixed tiling; the
# Thinking Machines post splits attention at a fixed KV size rather than into a fixed number of splits. Its cost is the parallelism that
# split-K, the GEMV and occupancy-based splits bought: the table measures it at batch 1 and 64 in the same run,
# medians of 5 repeats with [min, max]; a difference inside both ranges is noise.
#
# CUDA graphs replay the kernels they recorded: a graph of the batch's own size gives eager's bits (Lab 01's
# snippet: `lab01.json` `snippet.max_abs_diff` is 0.0). What changes numbers is a *different kernel*: a padded
# size, FULL mode's unified attention, or torch.compile's fused Inductor kernels (Lab 03 measured an Inductor
# residual add + RMSNorm differing from eager's in the last bits of bf16: `lab03.json` `inductor.max_abs_diff`).

# %% [markdown] tags=["lang-zh"]
# ### c) batch 不变模式及其代价 · d) CUDA Graph 与 torch.compile
# `LLM(batch_invariant=True)`（或与 vLLM 相同的 `VLLM_BATCH_INVARIANT=1`）让所有 matmul 走同一种分块的 kernel，decode 的
# KV 切分只按上下文长度决定，attention 与 norm 的分块固定（[layers/custom_op.py](../minivllm/layers/custom_op.py) 的
# `CustomOpSelection.for_engine`）。vLLM 的 batch_invariant.py（见上面的链接）用固定分块的 Triton kernel 覆盖 aten 的
# matmul、log-softmax 和 mean；Thinking Machines 的文章让 attention 按固定的 KV 长度切分，而不是切成固定的份数。代价是 split-K、GEMV 和按占用率
# 切分原本换来的并行度：下表在同一次运行里测 batch 1 和 64，取 5 次重复的中位数并给出 [最小, 最大]；落在两边范围内的差别算噪声。
#
# CUDA Graph 重放的是录下来的 kernel：与 batch 尺寸相同的图给出与 eager 相同的比特（Lab 01 的小例子：`lab01.json` 的
# `snippet.max_abs_diff` 为 0.0）。改变数值的是*换了 kernel*：填充后的尺寸、FULL 模式的 unified attention，或 torch.compile
# 融合出的 Inductor kernel（Lab 03 测得 bf16 下 Inductor 的残差加 + RMSNorm 与 eager 在 bf16 的末位上不同：`lab03.json` 的 `inductor.max_abs_diff`）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.invariant_table(rec))

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
# (about 90 s on an H200).

# %% [markdown] tags=["lang-zh"]
# `python -m minivllm_labs.record lab10` 记录的全部内容，在随机权重 Qwen3-0.6B、bf16 上：bf16 与 fp32 的 batch 扫描、
# 默认引擎对比 eager、填充的图、batch 不变模式及其 TPOT（H200 上约 90 秒）。

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
# sum moves a logit by a step 2^16 times smaller, which rarely reaches the gap between the top two tokens. fp32
# hides batch dependence; it does not remove it.
#
# **lab10.q3.** Only when the kernels chosen for 8 rows sum like those for 5: padding never mixes rows, but the
# padded size picks the plan. A graph of the exact size replays eager's kernels bitwise.
#
# **lab10.q4.** It fixes each reduction's order whatever the batch: one matmul tiling with no split-K by M, KV
# splits at a fixed size (from the context, not the occupancy), per-row norms. It still batches; the price is the
# parallelism those choices bought.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab10.q1.** 贪心解码是 logits 的确定性函数，logits 又是形状的确定性函数：batch 大小决定 matmul kernel（GEMV 或 GEMM
# 分块、split-K）和 attention 的 KV 切分，同一行以不同顺序求和，bf16 舍入不同，近似平局就会翻转。
#
# **lab10.q2.** fp32 下同样会重排，但它有 24 位有效位，bf16 只有 8 位：重排后 logit 的变化小 2^16 倍，很少够得上前两名 token
# 的间距。fp32 掩盖了 batch 依赖，并没有消除它。
#
# **lab10.q3.** 只有当为 8 行选的 kernel 与为 5 行选的求和方式相同时才相同：填充不会混合各行，但填充后的尺寸决定计算方案。
# 尺寸恰好相等的图重放与 eager 逐位相同。
#
# **lab10.q4.** 固定每个归约的求和顺序，与 batch 无关：matmul 用同一种分块、不按 M 做 split-K；KV 按固定长度切分（由上下文
# 决定，而非占用率）；norm 按行计算。仍然批处理；代价是这些选择原本换来的并行度。
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
# **Exercise 2.** Make a batch change the bits on your CPU: `lab10.matmul_by_m(torch.float32)` shows row 0 moving at
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
# **练习 2.** 在 CPU 上让 batch 改变比特：`lab10.matmul_by_m(torch.float32)` 显示 M > 1 时第 0 行会变。哪个算子保持逐位相等，
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
# **Verdict.** Temperature 0 makes the choice deterministic, not the numbers it chooses from. On this engine the
# batch size picks the matmul kernel and the attention splits, so in bf16 a request batched can leave its run alone
# at a near-tie (the throughput bench's check, printed in section a), while fp32, with the same reorderings, kept
# every request's tokens there. The article's claim that CUDA graphs change no arithmetic is right only for a graph of the batch's
# own size: a padded size or another attention kernel sums in another order. The batch-invariant mode fixes every
# reduction's order and pays for it in TPOT, measured against the default in the same run.

# %% [markdown] tags=["lang-zh"]
# **结论。** temperature 0 让"选择"确定，而不是让被选择的数字确定。在本引擎上，batch 大小决定 matmul kernel 和 attention
# 切分，所以 bf16 下批处理中的请求可能在近似平局处偏离单独运行的结果（见 a) 节打印的吞吐 bench 检查），而 fp32 下同样的重排，
# 每个请求的 token 都保持不变。文章说 CUDA Graph 不改变任何运算，这只对尺寸与 batch 相同的图成立：填充后的
# 尺寸或换了 attention kernel 都会以另一种顺序求和。batch 不变模式固定了每个归约的顺序，代价体现在 TPOT 上，与默认模式在同一次运行中对比测量。

# %% tags=["nbval-check-output"]
lab07_views.show_markdown(lab07_views.claims_markdown(lab.LAB_INFO.claims))
