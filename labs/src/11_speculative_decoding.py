# Source of labs/11_speculative_decoding.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 11

# %% [markdown]
# # Lab 11 · Speculative decoding and CUDA graphs · 投机解码与 CUDA Graph

# %% [markdown] tags=["lang-en"]
# A decode step at batch 1 reads every weight to produce one token per request. Speculative decoding makes the
# same step produce several: something cheap **drafts** the next k tokens, and one **verify step** runs the
# target model over 1 + k query tokens per request, keeps the longest prefix of the draft it agrees with, and adds
# one token of its own. This engine builds one of vLLM's draft-model-free methods (`ngram`; `ngram_gpu` and `suffix` are the others, [config/speculative.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/speculative.py)), n-gram **prompt lookup**
# (`LLM(model, speculative_config={"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4,
# "prompt_lookup_min": 2})`): find the sequence's last 2 to 4 tokens earlier in the sequence and propose what
# followed them. The questions under test are the ones an inference interview asks next:
#
# - **a)** when are drafts accepted? The embedded model's own tasks (addition, reverse, sort) against the same
#   questions asked again after their answer, and token-id prompts with and without a repeated pattern; the
#   acceptance rate and the tokens a verify step yields, for k = 2 and 4;
# - **b)** when does it help, and when does it cost? TPOT at batch 1 and at batch 64 for k = 0, 2, 4 in one run
#   (the median of 5 repeats with its [min, max]; a difference inside the ranges is noise);
# - **c)** does it work with CUDA graphs, and what do they cost? The decode graphs speculation captures (1 + k
#   query tokens per request) and their memory;
# - **d)** does it change the output? Greedy tokens with and without; sampled tokens with and without, beside the
#   spread of two runs without.
#
# Cells: **setup**; **recorded results** (H200, `assets/results/h200/lab11.json`); **run it here** (your device;
# the embedded model on a CPU, and a live toggle of k); **GPU only**.

# %% [markdown] tags=["lang-zh"]
# batch 1 的一个解码步要读一遍全部权重，每个请求只产出一个 token。投机解码让同一步产出多个：先用廉价的办法**起草**后面 k 个
# token（草稿 token），再由一次**验证步**让目标模型对每个请求跑 1 + k 个 query token，保留与目标模型一致的最长草稿前缀，并补上
# 目标模型自己的一个 token。本引擎实现了 vLLM 不需要草稿模型的方法之一（`ngram`；另外两个是 `ngram_gpu` 和 `suffix`，见 [config/speculative.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/speculative.py)）：n-gram **prompt lookup**
# （`LLM(model, speculative_config={"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4,
# "prompt_lookup_min": 2})`）：在前文中找到序列最后 2 到 4 个 token，把它们后面的内容作为草稿。本实验回答面试里紧接着会问的问题：
#
# - **a)** 草稿什么时候被接受？内置模型自己的任务（加法、反转、排序）对比"回答之后再问一遍同一问题"，以及有无重复片段的
#   token id prompt；k = 2 与 4 时的接受率，以及每个验证步产出的 token 数；
# - **b)** 什么时候有收益、什么时候有代价？同一次运行中 batch 1 与 batch 64、k = 0、2、4 的 TPOT（5 次重复的中位数及其
#   [最小, 最大]；落在范围内的差别算噪声）；
# - **c)** 能和 CUDA Graph 一起用吗，代价是什么？投机解码捕获的 decode 图（每个请求 1 + k 个 query token）及其显存；
# - **d)** 会改变输出吗？开与不开时的贪心 token；开与不开时的采样 token，并与两次不开的运行之间的波动对比。
#
# 单元格分四类：**环境准备**；**H200 实测记录**（`assets/results/h200/lab11.json`）；**在本机运行**（CPU 上用内置小模型，
# 以及 k 的实时开关）；**仅限 GPU**。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("11")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
from minivllm_labs import lab07_views  # Lab 07 shows every lab's claims as one table

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### a) When drafts are accepted
# vLLM's n-gram proposer ([vllm/v1/spec_decode/ngram_proposer.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/spec_decode/ngram_proposer.py),
# `NgramProposer`) finds the longest suffix of the sequence, between `prompt_lookup_min` and `prompt_lookup_max`
# tokens, that occurred earlier in it, and proposes up to k tokens that followed; no match, no draft, and the step
# is a plain decode step for that request. This engine does the same
# ([spec_decode/ngram_proposer.py](../minivllm/spec_decode/ngram_proposer.py) `propose_ngram`). The record counts
# what vLLM reports: drafts (verify steps with a draft), draft tokens, accepted tokens, the acceptance rate
# (accepted / draft tokens) and the **mean acceptance length**, 1 + accepted / drafts, the tokens a verify step
# yields. The embedded model answers its own tasks; the Qwen3-0.6B shape has random weights, so it gets token-id
# prompts, one with a 16-token pattern written four times and one with no repeated pair.

# %% [markdown] tags=["lang-zh"]
# ### a) 草稿什么时候被接受
# vLLM 的 n-gram proposer（[vllm/v1/spec_decode/ngram_proposer.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/spec_decode/ngram_proposer.py)
# 的 `NgramProposer`）在前文中寻找序列最长的后缀（长度在 `prompt_lookup_min` 与 `prompt_lookup_max` 之间），提出其后最多 k 个
# token；找不到就没有草稿，这个请求的这一步就是普通解码步。本引擎做法相同
# （[spec_decode/ngram_proposer.py](../minivllm/spec_decode/ngram_proposer.py) 的 `propose_ngram`）。记录的计数与 vLLM 报告的相同：
# 草稿次数（带草稿的验证步）、草稿 token 数、被接受的 token 数、接受率（接受数 / 草稿 token 数）以及**平均接受长度**
# 1 + 接受数 / 草稿次数，即一个验证步产出的 token 数。内置模型回答自己的任务；Qwen3-0.6B 形状用的是随机权重，所以给它
# token id prompt：一个把 16 个 token 的片段写 4 遍，一个没有任何重复的相邻对。

# %% tags=["nbval-check-output"]
print(lab.acceptance_table(rec))
if rec:
    lab.show(lab.plot_acceptance(rec))

# %% [markdown] tags=["lang-en"]
# Read the rows in pairs. The same trained model, the same engine, the same k: its tasks asked once give lookup
# little to copy (a reversed or sorted answer reuses the prompt's letters in another order), while the same
# question asked again after its answer puts the answer in the context, and lookup copies it. The random-weight
# model shows the other side of the method: lookup searches the whole sequence, its own output included, so a
# model whose greedy output falls into a loop (random weights often do) gets drafts whatever the prompt; compare
# its two prompt sets.

# %% [markdown] tags=["lang-zh"]
# 成对地读这些行。同一个训练过的模型、同一个引擎、同一个 k：只问一次的任务几乎没什么可照抄（反转或排序的答案用的是 prompt 里的
# 字母，但顺序不同）；而在回答之后再问一遍，答案就在上下文里，lookup 直接照抄。随机权重的模型展示了这个方法的另一面：lookup
# 搜索整个序列，包括模型自己的输出，所以贪心输出陷入循环的模型（随机权重常常如此）不论 prompt 是什么都能得到草稿；对比它的两组
# prompt。

# %% [markdown] tags=["lang-en"]
# ### b) When it helps, when it costs
# A verify step runs 1 + k query tokens for every request that has a draft. At batch 1 the step is bound by
# reading the weights (Lab 09), so the extra tokens cost little and every accepted token removes a step. At batch
# 64 the step already does 64 rows of work per weight read; with k = 4 it does up to 320, and each rejected draft
# token is computed and thrown away. The table measures both in one run, on the H200's graphs engine. The engine's
# bench measures the same trade with your settings: `minivllm bench latency --speculative-config
# '{"method": "ngram", "num_speculative_tokens": 4}' --prompt-kind repeat` reports TPOT with and without
# speculation in one run (k = 0 and the config's k, or every k of `--spec-tokens`).

# %% [markdown] tags=["lang-zh"]
# ### b) 什么时候有收益、什么时候有代价
# 每个带草稿的请求在验证步要跑 1 + k 个 query token。batch 1 时一步受读权重限制（Lab 09），多出的 token 几乎不花钱，每个被接受
# 的 token 就省下一步。batch 64 时每读一遍权重已经要算 64 行；k = 4 时最多要算 320 行，每个被拒的草稿 token 算完就丢掉。下表在
# H200 上开着 CUDA Graph 的引擎里，在同一次运行中测了这两种情况。引擎自带的 bench 可以用你自己的设置测同样的取舍：
# `minivllm bench latency --speculative-config '{"method": "ngram", "num_speculative_tokens": 4}' --prompt-kind repeat`
# 在一次运行中给出开与不开投机解码的 TPOT（k = 0 与配置中的 k，或 `--spec-tokens` 中的每个 k）。

# %% tags=["nbval-check-output"]
print(lab.tpot_table(rec))
if rec:
    print(lab.tpot_summary(rec))

# %% [markdown] tags=["lang-en"]
# The summary lines above are computed from the record by the rule every lab uses: faster or slower only when the
# [min, max] ranges over the repeats do not overlap. vLLM's documentation presents speculation as a way to lower
# inter-token latency in memory-bound workloads at medium-to-low QPS (the first line of its
# [speculative decoding page](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/features/speculative_decoding/README.md); the page's
# table of methods is qualitative and says real gains depend on the model, the traffic, the hardware and the
# sampling): at high batch the GPU's spare compute that made the extra tokens free is gone.

# %% [markdown] tags=["lang-zh"]
# 上面的结论行按所有实验共用的规则由记录算出：只有各次重复的 [最小, 最大] 范围不重叠时才算更快或更慢。vLLM 文档把投机解码定位为
# 在中低 QPS、受显存带宽限制的场景下降低 token 间延迟的手段（其[投机解码文档](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/features/speculative_decoding/README.md)的第一句；
# 该页的方法对比表只是定性的，并说明实际收益取决于模型、流量、硬件和采样设置）：batch 大了，让多出的 token 免费的那部分闲置算力就没有了。

# %% [markdown] tags=["lang-en"]
# ### c) The graphs speculation adds
# The verify step's shape is set before it runs, by the drafts (at most k per request); acceptance only decides
# afterwards how many outputs are kept. So it is captured like plain decode: a decode graph of b requests with 1 + k
# query tokens each. vLLM's CUDA-graph dispatcher keys these uniform-decode graphs by
# `uniform_decode_query_len = 1 + num_speculative_tokens`
# ([vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/cudagraph_dispatcher.py)),
# and `capture_model` in [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)
# captures them for the capture sizes, in tokens, between that length and `max_num_seqs` times it; a step replays
# one only when it is uniform, every request with exactly 1 + k tokens, and a step in which some request has a
# shorter draft or none runs the mixed-batch graphs (PIECEWISE under FULL_AND_PIECEWISE). This engine captures its
# decode graphs per batch size in requests, each request with 1 + k tokens, and fits a verify step of T tokens with
# shorter drafts into the graph of ceil(T / (1 + k)) requests, padded: in those graphs attention is the unified
# kernel, which reads only the token count ([config.py](../minivllm/config.py) `EngineConfig.resolve`,
# [worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) `CudagraphDispatcher.dispatch`;
# [where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm)). PIECEWISE graphs stay keyed by
# token count in both. The table shows what each k captured and the graph pool.

# %% [markdown] tags=["lang-zh"]
# ### c) 投机解码增加的图
# 验证步的形状在运行之前就由草稿决定了（每个请求最多 k 个）；接受多少只决定事后保留几个输出。所以它可以像普通解码一样捕获：
# b 个请求、每个请求 1 + k 个 query token 的 decode 图。vLLM 的 CUDA Graph dispatcher 用
# `uniform_decode_query_len = 1 + num_speculative_tokens` 区分这些 uniform decode 图
# （[vllm/v1/cudagraph_dispatcher.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/cudagraph_dispatcher.py)），
# [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)
# 的 `capture_model` 按捕获尺寸（token 数）捕获，尺寸限定在这个长度与 `max_num_seqs` 倍之间；只有 uniform 的一步（每个请求
# 恰好 1 + k 个 token）才重放它，某个请求草稿较短或没有草稿的一步走混合 batch 的图（FULL_AND_PIECEWISE 下是分段图）。本引擎按
# batch 尺寸（请求数）捕获 decode 图，每个请求 1 + k 个 token，并把草稿较短、共 T 个 token 的验证步填充后放进 ceil(T / (1 + k))
# 个请求的图：这些图里的 attention 是 unified kernel，只看 token 数（[config.py](../minivllm/config.py) 的
# `EngineConfig.resolve`、[worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) 的
# `CudagraphDispatcher.dispatch`；见 [minivllm 与 vLLM 的差异](../README.md#where-minivllm-differs-from-vllm)）。两者的分段图
# （PIECEWISE）都按 token 数区分。下表列出每个 k 捕获了什么，以及显存池的大小。

# %% tags=["nbval-check-output"]
print(lab.graphs_table(rec))

# %% [markdown] tags=["lang-en"]
# ### d) Does it change the output?
# Greedy verification keeps a draft token only where it equals the target's arg-max and puts the target's own
# token at the first mismatch (vLLM's `rejection_greedy_sample_kernel` in
# [vllm/v1/sample/rejection_sampler.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/sample/rejection_sampler.py)),
# so the tokens are plain greedy decoding's; in bf16 the verify step computes the same positions in a forward of
# another shape, which can flip a near-tie (Lab 10). A sampled request uses rejection sampling (Leviathan et al.,
# the paper `RejectionSampler` follows): an n-gram draft has no probabilities, so it is a one-hot proposal
# (`NO_DRAFT_PROBS`, set when the proposer passes no draft probabilities, in `rejection_random_sample_kernel`): the draft token x is kept with probability p(x), and a rejected position is drawn from the
# target's distribution with x removed. The output is distributed as the target's; the record compares sampled
# tokens with and without speculation against the spread of two runs without
# ([spec_decode/rejection_sampler.py](../minivllm/spec_decode/rejection_sampler.py) `sampled_verify`).

# %% [markdown] tags=["lang-zh"]
# ### d) 会改变输出吗？
# 贪心验证只在草稿 token 等于目标模型 arg-max 时保留它，并在第一个不一致处放上目标模型自己的 token（vLLM
# [vllm/v1/sample/rejection_sampler.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/sample/rejection_sampler.py)
# 中的 `rejection_greedy_sample_kernel`），所以 token 就是普通贪心解码的 token；bf16 下验证步在另一种形状的前向中计算同样的位置，
# 可能翻转近似平局（Lab 10）。采样请求用拒绝采样（`RejectionSampler` 遵循的 Leviathan 等人的论文）：n-gram 草稿没有概率，
# 于是当作 one-hot 提议（`rejection_random_sample_kernel` 中的 `NO_DRAFT_PROBS`，proposer 不给草稿概率时置位）：草稿 token x 以 p(x) 的概率保留，被拒的位置从去掉 x 的目标分布中抽取。输出服从目标分布；
# 记录把开与不开投机解码的采样 token 之差，与两次不开的运行之间的波动对比
# （[spec_decode/rejection_sampler.py](../minivllm/spec_decode/rejection_sampler.py) 的 `sampled_verify`）。

# %% tags=["nbval-check-output"]
print(lab.equality_text(rec))

# %% tags=["nbval-ignore-output"] id="11-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="11-toggle"
# Live toggle · 实时开关: click a k; the engine re-runs the embedded model's questions asked again (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The same measurements on your device. On a CPU: the embedded model in fp32, eager (a CPU has no CUDA graphs),
# k = 0, 2, 4, its tasks and the repeated questions (8 each), TPOT at batch 1 and 4 over 8 tokens, and the
# sampled check with 32 samples. Expect the acceptance pattern of the record; the CPU's TPOT is compute-bound
# already at small batches, so speculation can cost there sooner than on a GPU.

# %% [markdown] tags=["lang-zh"]
# 在本机做同样的测量。CPU 上：内置模型、fp32、eager（CPU 没有 CUDA Graph），k = 0、2、4，自身任务与重复提问各 8 个，batch 1 和 4
# 上 8 个 token 的 TPOT，以及 32 个样本的采样检查。接受率的规律应与记录一致；CPU 在小 batch 时就已受算力限制，所以投机解码在
# CPU 上比在 GPU 上更早出现代价。

# %% tags=["nbval-ignore-output"]
here = lab.run_here(lab.model())
print(lab.acceptance_table(here))
print(lab.tpot_table(here))
print(lab.equality_text(here))

# %% [markdown]
# ## 4. GPU only · 仅限 GPU

# %% [markdown] tags=["lang-en"]
# What `python -m minivllm_labs.record lab11` records, at its quick settings (3 repeats, 32 tokens): a
# random-weight Qwen3-0.6B in bf16 and the embedded model, k = 0, 2, 4, each with CUDA graphs and torch.compile as
# by default.

# %% [markdown] tags=["lang-zh"]
# `python -m minivllm_labs.record lab11` 记录的内容，用它的快速设置（3 次重复、32 个 token）：随机权重 Qwen3-0.6B（bf16）与内置模型，
# k = 0、2、4，都按默认开启 CUDA Graph 与 torch.compile。

# %% tags=["nbval-skip"] id="gpu-full-lab11"
if lab.gpu_only("The TPOT table at batch 1 and 64 and the graphs speculation captures"):
    gpu_rec = lab.run_all(lab.model("qwen3-0.6b"), quick=True)
    print(lab.acceptance_table(gpu_rec))
    print(lab.tpot_table(gpu_rec))
    print(lab.graphs_table(gpu_rec))
    print(lab.equality_text(gpu_rec))

# %% [markdown]
# ## 5. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Four questions on what you measured. Pick an answer; the feedback quotes the numbers above (the recorded H200
# ones when present, else yours) and the results files and keys they come from.

# %% [markdown] tags=["lang-zh"]
# 四道关于本实验测量的题。选一个答案；反馈引用上面的数字（有 H200 记录时用记录，否则用本机结果）以及它们所在的结果文件和键。

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_LOOKUP, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_BATCH, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_GRAPHS, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_GREEDY, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab11.q1.** Prompt lookup copies: it finds the sequence's last 2 to 4 tokens earlier in the sequence and
# proposes what followed. It wins where the output repeats the context (a repeated question, quoting, copying a
# list, editing code in the prompt) and proposes nothing on fresh text.
#
# **lab11.q2.** A verify step runs 1 + k query tokens per request. At batch 1 they ride along with the weight reads;
# at batch 64 they are real compute, and rejected drafts are computed and thrown away, so the gain shrinks or
# becomes a cost: read both batches in the TPOT table.
#
# **lab11.q3.** The verify step: a fixed shape of 1 + k query tokens per request, captured like plain decode (vLLM's
# `uniform_decode_query_len`; here per batch size in requests). One graph per batch size serves every acceptance
# count.
#
# **lab11.q4.** The same tokens by construction: a draft is kept only where it equals the target's arg-max, and the
# target's own token fills the first mismatch. In bf16 the verify step's other shape can flip a near-tie, as another
# batch size can (Lab 10).
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab11.q1.** prompt lookup 就是照抄：在前文中找到序列最后 2 到 4 个 token，提出其后的内容。输出重复上下文时（重复提问、引用、
# 照抄列表、修改 prompt 中的代码）收益最大；遇到新内容时提不出草稿。
#
# **lab11.q2.** 验证步每个请求跑 1 + k 个 query token。batch 1 时它们随读权重顺带算了；batch 64 时它们是实打实的计算，被拒的草稿
# 算完就丢，收益变小甚至变成代价：对照 TPOT 表中的两个 batch。
#
# **lab11.q3.** 验证步：每个请求 1 + k 个 query token 的固定形状，像普通解码一样捕获（vLLM 的 `uniform_decode_query_len`；
# 本引擎按请求数区分 batch 尺寸）。每个 batch 尺寸一张图，服务所有接受数。
#
# **lab11.q4.** 按构造就相同：草稿只在等于目标模型 arg-max 时保留，第一个不一致处放目标模型自己的 token。bf16 下验证步形状不同，
# 可能像换一个 batch 大小那样翻转近似平局（Lab 10）。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Try it yourself · 动手试试
#
# **Exercise 1.** Predict the draft, then check: what does prompt lookup propose after the tokens
# `[1, 2, 3, 4, 2, 3]` with k = 4, `prompt_lookup_min` 2 and `prompt_lookup_max` 3? And after `[1, 2, 3, 4, 5]`?
#
# *Hint:* the last 3 tokens `[4, 2, 3]` never occurred before; try the last 2. Run
# `lab.draft_for([1, 2, 3, 4, 2, 3], k=4, min_n=2, max_n=3)`.
#
# <details><summary>Solution · 参考答案</summary>
#
# `[4, 2, 3]`: the suffix `[2, 3]` occurred at the start, and three tokens followed it before the end of the
# sequence, fewer than k. After `[1, 2, 3, 4, 5]` no suffix of 2 or 3
# tokens occurred earlier: no draft, and that request's step is a plain decode step.
# </details>
#
# **Exercise 2.** A batch of 3 requests, each with a full draft, decodes with k = 4 on a GPU engine whose decode graphs were captured for
# `lab.CAPTURE` requests. How many query tokens does the verify step run, and which graph does it replay?
#
# *Hint:* a batch is padded up to the next captured size; each request brings 1 + k query tokens.
#
# <details><summary>Solution · 参考答案</summary>
#
# 3 x 5 = 15 real query tokens; 3 is not a captured size, so the batch is padded to 4 requests and replays the
# graph of 4 requests, 20 query tokens (the padded request's rows are masked). vLLM pads the token count instead:
# the batch is uniform (every request has 1 + k tokens), so 15 goes up to its next capture size in tokens.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 动手试试
#
# **练习 1.** 先预测草稿再验证：k = 4、`prompt_lookup_min` 2、`prompt_lookup_max` 3 时，prompt lookup 在 token
# `[1, 2, 3, 4, 2, 3]` 之后会提出什么？在 `[1, 2, 3, 4, 5]` 之后呢？
#
# *提示：* 最后 3 个 token `[4, 2, 3]` 之前没出现过；试试最后 2 个。运行 `lab.draft_for([1, 2, 3, 4, 2, 3], k=4, min_n=2, max_n=3)`。
#
# <details><summary>Solution · 参考答案</summary>
#
# `[4, 2, 3]`：后缀 `[2, 3]` 在开头出现过，其后到序列末尾只有 3 个 token，少于 k。
# `[1, 2, 3, 4, 5]` 之后，没有 2 或 3 个 token 的后缀在前文出现过：没有草稿，这个请求的这一步就是普通解码步。
# </details>
#
# **练习 2.** GPU 引擎的 decode 图按 `lab.CAPTURE` 个请求捕获，一个 3 个请求、每个都有完整草稿的 batch 以 k = 4 解码。验证步跑多少个 query token，
# 重放哪张图？
#
# *提示：* batch 会被填充到下一个已捕获的尺寸；每个请求带 1 + k 个 query token。
#
# <details><summary>Solution · 参考答案</summary>
#
# 3 × 5 = 15 个真实的 query token；3 不是捕获尺寸，所以 batch 被填充到 4 个请求，重放 4 个请求、20 个 query token 的图（填充请求的
# 行被屏蔽）。vLLM 则填充 token 数：这个 batch 是 uniform 的（每个请求 1 + k 个 token），15 被填到下一个以 token 计的捕获尺寸。
# </details>

# %% tags=["nbval-ignore-output"]
print(lab.draft_for([1, 2, 3, 4, 2, 3], k=4, min_n=2, max_n=3), lab.draft_for([1, 2, 3, 4, 5], k=4, min_n=2, max_n=3))
print(lab.CAPTURE)

# %% [markdown] tags=["lang-en"]
# ## 7. Summary of verdicts · 结论
# Verdicts rest on the recorded H200 file named in the table. All claims of both seeds are in
# [Lab 07](07_claims.ipynb).
#
# Engine code: [spec_decode/ngram_proposer.py](../minivllm/spec_decode/ngram_proposer.py) (`propose_ngram`),
# [spec_decode/rejection_sampler.py](../minivllm/spec_decode/rejection_sampler.py) (`greedy_verify`,
# `sampled_verify`), [spec_decode/metrics.py](../minivllm/spec_decode/metrics.py) (`SpecDecodingStats`),
# [config.py](../minivllm/config.py) (`SpeculativeConfig`, `EngineConfig.resolve`),
# [worker/cudagraph_dispatcher.py](../minivllm/worker/cudagraph_dispatcher.py) (`CudagraphDispatcher.dispatch`).

# %% [markdown] tags=["lang-zh"]
# ## 7. 结论
# 结论基于表中列出的 H200 记录文件。两份材料的全部说法见 [Lab 07](07_claims.ipynb)。

# %% [markdown] tags=["lang-en"]
# **Verdict.** Speculation is a trade of a wider step for fewer steps, and both halves are measured above. The
# width is fixed by k: every verify step runs 1 + k query tokens per request, which is why it can be captured
# as a CUDA graph like plain decode (vLLM's `uniform_decode_query_len`), and why the handbook's "decode input
# length is always 1" holds only without speculation: the decode shape is fixed per engine, not 1. The steps saved
# depend on the prompts: n-gram lookup drafts only where the sequence repeats itself, so the embedded model's
# questions asked again after their answer get their drafts accepted while its tasks asked once gain little (the
# acceptance table), and text with no repetition gets no draft at all. Whether the trade pays is read from the
# TPOT table at batch 1 and at batch 64, not assumed: the extra tokens are nearly free while the step is bound by
# reading the weights and real compute once the batch is large. Greedy output is the same by construction, and
# sampled output keeps the target's distribution (rejection sampling with a one-hot draft).

# %% [markdown] tags=["lang-zh"]
# **结论。** 投机解码是用更宽的一步换更少的步数，上面两半都测了。宽度由 k 决定：每个验证步每个请求跑 1 + k 个 query token，
# 所以它能像普通解码一样被捕获为 CUDA Graph（vLLM 的 `uniform_decode_query_len`），也所以手册说的"decode 的 input 长度都是 1"
# 只在不投机时成立：decode 的形状对一个引擎是固定的，但不是 1。省下多少步取决于 prompt：n-gram lookup 只在序列自我重复时起草，
# 所以内置模型在回答之后再问一遍的问题，草稿会被接受，只问一次的任务则收益甚微（见接受率表），没有任何重复的文本根本提不出草稿。是否划算要看 batch 1 与 batch 64 的 TPOT 表，而不是想当然：一步受读
# 权重限制时多出的 token 几乎免费，batch 大了就是实打实的计算。贪心输出按构造不变，采样输出保持目标分布（以 one-hot 草稿做拒绝采样）。

# %% tags=["nbval-check-output"]
lab07_views.show_markdown(lab07_views.claims_markdown(lab.LAB_INFO.claims))
