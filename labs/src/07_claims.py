# Source of labs/07_claims.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 07

# %% [markdown]
# # Lab 07 · The claims lab · 逐条检验材料中的说法

# %% [markdown] tags=["lang-en"]
# Two documents taught the course's starting point: the handbook chapter on CUDA graphs and torch.compile, and an
# article on vLLM's CUDA graph optimisation (both in `../shared/seeds/`, in Chinese). They make many claims with
# numbers. This lab puts **every measurable claim in one table**: the claim in Chinese (marked 原文 where it is
# the seed's text verbatim, a paraphrase otherwise) and in English, what was measured on this engine, the verdict
# (*right*, *partly*, *wrong*, *unverifiable*: no such source, or nothing here can decide it, with the reason) and
# the number that decides it, with its unit and the results file and key it comes from. A number that is a
# datasheet constant or arithmetic on constants says so: it is not a measurement.
#
# Nothing is measured twice. The rows are read at run time from the catalog
# (`from minivllm_labs.catalog import all_claims; all_claims()`): each lab declares the claims it measures, so a row here links to the lab
# that has the plot. This lab judges what no single lab shows: the article's hardware figures (A100, V100,
# Pascal: **physics**, a TPOT floor of weight bytes over memory bandwidth), sources that do not exist, and claims
# decided by the engine's benchmark records (`latency.json`, `startup.json`) or by another lab's record.

# %% [markdown] tags=["lang-zh"]
# 课程的起点是两份材料：手册中讲 CUDA Graph 与 torch.compile 的一章，以及一篇讲 vLLM CUDA Graph 优化的文章（都在
# `../shared/seeds/`）。它们给出了很多带数字的说法。本实验把**所有可测的说法放进一张表**：中文说法（逐字引自材料的标
# "原文"，否则标"转述"）与英文、在本引擎上测了什么、结论（*right* 对 / *partly* 部分对 / *wrong* 错 / *unverifiable*
# 无从查证：来源不存在，或这里没有能判定它的记录，并写明原因），以及决定结论的数字、单位和它所在的结果文件与键。
# 规格书常数或由常数算出的数字会注明，不当作实测。
#
# 不重复测量。表格在运行时从目录（`from minivllm_labs.catalog import all_claims; all_claims()`）读取：每个实验声明自己测的说法，这里的每一行
# 链接到有图的那个实验。本实验评判单个实验看不到的：文章里的硬件数字（A100、V100、Pascal：用**物理**推算，即
# "权重字节 ÷ 显存带宽" 的 TPOT 下限）、并不存在的引用来源，以及由引擎基准记录（`latency.json`、`startup.json`）
# 或其他实验的记录判定的说法。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("07")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# ### The table · 总表
# Filter by seed and verdict (works without a kernel). *number* is read from the evidence file now; "not recorded
# yet" means that lab's H200 file does not exist in this checkout. A test (`tests/labs/test_lab07.py`) recomputes each
# number from its file and key and checks the verdict rule agrees.

# %% [markdown] tags=["lang-zh"]
# ### 总表
# 可按材料和结论筛选（无需 kernel）。*number* 是此刻从证据文件读出的值；"not recorded yet" 表示该实验的 H200 文件在
# 本仓库中还不存在。测试（`tests/labs/test_lab07.py`）会从文件和键重新读出每个数字，并检查结论规则一致。

# %% tags=["nbval-ignore-output"]
table = lab.rows()
lab.show_claims(table)

# %% [markdown] tags=["lang-en"]
# ### Coverage of claims.md · 覆盖情况
# Every row of the research notes, with the lab that measures it, matched by claim id (each row lists the ids of
# the claims that cover it). A row "not measured yet" is a gap, not a pass.

# %% [markdown] tags=["lang-zh"]
# ### 覆盖情况
# 研究笔记的每一行及测它的实验，按说法的 id 匹配（每行列出覆盖它的说法 id）。"not measured yet" 是缺口，不算通过。

# %% tags=["nbval-ignore-output"]
print(lab.coverage_table(lab.coverage()))

# %% [markdown] tags=["lang-en"]
# ### Claimed against measured · 说法与实测
# One mark per claim whose seed states a number and whose record holds the same quantity: the seed's number across,
# the H200's down, both on log scales, the unit in the legend. On the dotted diagonal the seed was right; a mark far
# from it is a claim off by that factor. Two marks are arithmetic, not measurements (the A100 rows: no A100 here).

# %% [markdown] tags=["lang-zh"]
# ### 说法与实测
# 每条说法一个点：材料给出了数字、记录里又有同一个量的说法。横轴是材料的数字，纵轴是 H200 的实测，都取对数，单位见图例。
# 落在虚线对角线上说明材料说对了；离对角线越远，差的倍数越大。有两个点是算出来的，不是实测（A100 那两行：这里没有 A100）。

# %% tags=["nbval-check-output"]
points = lab.versus()
lab.show(lab.plot_versus(points))
print(lab.versus_table(points))

# %% [markdown] tags=["lang-en"]
# ### Physics: the TPOT floor · 物理下限
# At batch 1 a decode step reads every weight once, so a token cannot take less than *weight bytes / memory
# bandwidth*. For LLaMA-2-13B in bf16 (26 GB) on an A100-80GB (2,039 GB/s) that is {rec}`lab07.json:physics.a100_13b.floor_ms:.2f` ms: the article's "TPOT
# 12 -> 9 ms" is below the floor before and after. On the H200 the measured copy bandwidth (not the 4.8 TB/s of
# the datasheet) is what a real kernel reaches.

# %% [markdown] tags=["lang-zh"]
# ### 物理下限
# batch 1 时每个 decode 步要把所有权重读一遍，所以每个 token 至少需要 *权重字节 ÷ 显存带宽*。LLaMA-2-13B（bf16，
# 26 GB）在 A100-80GB（2,039 GB/s）上是 {rec}`lab07.json:physics.a100_13b.floor_ms:.2f` ms：文章的 "TPOT 12 → 9 ms" 前后都低于这个下限。H200 上真实 kernel
# 能达到的是实测拷贝带宽，而不是规格书上的 4.8 TB/s。

# %% tags=["nbval-check-output"]
phys = (rec or {}).get("physics") or lab.physics()
lab.show(lab.plot_floors(phys))
print(lab.floors_table(phys))

# %% tags=["nbval-ignore-output"] id="07-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="07-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# This device's copy bandwidth, and the floor it puts under a 0.6B model ({rec}`lab09.json:shapes.qwen3-06b.floor.weight_mb*0.001:.1f` GB of bf16 weights).

# %% [markdown] tags=["lang-zh"]
# 本机的拷贝带宽，以及它给 0.6B 模型（{rec}`lab09.json:shapes.qwen3-06b.floor.weight_mb*0.001:.1f` GB bf16 权重）带来的下限。

# %% tags=["nbval-ignore-output"]
here = lab.run_all("", quick=True)
bw = here["copy_bandwidth"]["bytes_per_s"]
print(f"copy bandwidth here: {bw / 1e9:.1f} GB/s; Qwen3-0.6B floor: {lab.tpot_floor_ms(0.596e9, bw):.2f} ms per token")

# %% [markdown]
# ## 4. Self-test · 自检

# %% [markdown] tags=["lang-en"]
# Two questions on what the records decide. Type or pick an answer: the feedback quotes the recorded numbers,
# with their file and key. In Python: `from minivllm_labs import grade; print(grade(lab.Q1, "12.75 ms")[1])`.

# %% [markdown] tags=["lang-zh"]
# 两道关于记录能判定什么的题。输入或选择答案：反馈会引用记录的数字及其文件和键。在 Python 里：
# `from minivllm_labs import grade; print(grade(lab.Q1, "12.75 ms")[1])`。

# %% tags=["nbval-ignore-output"]
for q in (lab.Q1, lab.Q2):
    lab.quiz(q, rec)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab07.q1.** At batch 1 each decode step reads every weight once: 13.0e9 x 2 bytes / 2,039 GB/s = {rec}`lab07.json:physics.a100_13b.floor_ms:.2f` ms,
# computed from the datasheet, not measured. The article's 9 ms with graphs is below that floor, and so is its
# 12 ms without.
#
# **lab07.q2.** About {rec}`lab05.json:oom.freed_fraction_of_kv*100:.1f`% more KV tokens ({rec}`lab05.json:oom.eager.kv_cache_tokens:,` against {rec}`lab05.json:oom.graphs.kv_cache_tokens:,`): graphs off frees their reserve, a few
# hundred MiB, for the KV cache; worth it for debugging, not for memory.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab07.q1.** batch 1 时每个 decode 步要把所有权重读一遍：13.0e9 × 2 字节 ÷ 2,039 GB/s = {rec}`lab07.json:physics.a100_13b.floor_ms:.2f` ms，由规格书算出，
# 不是实测。文章说开图后 9 ms，低于这个下限，不开图的 12 ms 也低于它。
#
# **lab07.q2.** KV token 多约 {rec}`lab05.json:oom.freed_fraction_of_kv*100:.1f`%（{rec}`lab05.json:oom.eager.kv_cache_tokens:,` 对 {rec}`lab05.json:oom.graphs.kv_cache_tokens:,`）：关图释放的是图预留的几百 MiB，归 KV Cache；为了调试值得，
# 为了省显存不值得。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **Exercise.** The article says LLaMA-2-70B's TTFT drops from 128 ms to 112 ms with graphs (H100). Estimate the
# *compute* floor of a 512-token prefill of a 70B model on an H100 (989 TFLOP/s dense bf16): is 112 ms possible?
#
# *Hint:* a forward costs about 2 x parameters FLOPs per token.
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 x 69e9 x 512 = 70.7 TFLOP; at 989 TFLOP/s on one GPU that is at least 71 ms. But 69e9 bf16 parameters are
# 138 GB of weights, more than one 80 GB H100 holds: the model needs at least two GPUs (tensor parallel), which
# halves the compute floor per GPU and adds an all-reduce per layer, so 112 ms is possible. The claim fails
# elsewhere: vLLM v0.5.3 captured CUDA graphs for decode batches only, so prefill ran eagerly
# ([vllm/worker/model_runner.py at v0.5.3](https://github.com/vllm-project/vllm/blob/v0.5.3/vllm/worker/model_runner.py)),
# and a graph cannot remove compute. Lab 02 measures TTFT with graphs on and off.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **练习.** 文章说 LLaMA-2-70B 的 TTFT 开图后从 128 ms 降到 112 ms（H100）。估算 70B 模型 512 token prefill 在 H100
# （稠密 bf16 989 TFLOP/s）上的*计算*下限：112 ms 可能吗？
#
# *提示：* 前向每个 token 约 2 × 参数量 FLOPs。
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 × 69e9 × 512 = 70.7 TFLOP；单卡 989 TFLOP/s 下至少 71 ms。但 69e9 个 bf16 参数就是 138 GB 权重，一张 80 GB 的 H100
# 放不下：至少要两张卡做张量并行，每张卡的计算下限减半，但每层多一次 all-reduce，所以 112 ms 是可能的。问题在别处：
# vLLM v0.5.3 只为 decode batch 捕获 CUDA Graph，预填充走 eager
# （[v0.5.3 的 vllm/worker/model_runner.py](https://github.com/vllm-project/vllm/blob/v0.5.3/vllm/worker/model_runner.py)），
# 而图也不能省掉计算。Lab 02 测了开关图时的 TTFT。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Summary of verdicts · 结论
#
# **Verdict.** Of the two seeds, the handbook is mostly right about mechanisms and often wrong about sizes: two
# of its three limits of a graph, its padding and most of its fault rules hold, while its timings (profile run, startup, weight loading
# for a small model) and its compile-cache variable do not. The article is wrong or unverifiable almost throughout:
# its sources do not exist, its A100 figures are below what the hardware allows, its memory figures are tens of
# times too large, its A100 TTFT is below a prefill's arithmetic floor, its other TTFT figures cannot be checked on
# one H200, and its tidy percentages (20% at batch 8, 45-55% on Hopper) miss a 0.6B model's
# batch-1 TPOT cut from {rec}`latency.json:rows.0.tpot_s*1000:.1f` to {rec}`latency.json:rows.9.tpot_s*1000:.2f` ms. What it gets partly
# right is qualitative: graphs keep eager's greedy results where the replay runs eager's kernels (not under
# torch.compile, not where a captured size picks another kernel plan: the rule Lab 10 applies to the same
# sentence), and a smaller gain at a larger batch is plausible but not shown beyond the noise of one run per batch
# size. The claims this lab judges itself (the rest are in the table above, each with its lab):

# %% [markdown] tags=["lang-zh"]
# ## 6. 结论
#
# **结论。** 两份材料里，手册讲机制大多对，讲量级常常错：图的三条限制中的两条、padding 和大部分故障判断规则成立，而各阶段耗时（profile run、
# 启动、小模型的权重加载）和编译缓存变量不成立。文章几乎通篇是错的或无法查证的：引用的来源不存在，A100 的数字低于硬件
# 允许的下限，显存数字大了几十倍，A100 的 TTFT 低于预填充的算术下限，其余 TTFT 数字在一张 H200 上无法核对，整齐的百分比
# （batch 8 时 20%、Hopper 上 45-55%）也和 0.6B 模型 batch 1 的 TPOT
# 从 {rec}`latency.json:rows.0.tpot_s*1000:.1f` ms 降到 {rec}`latency.json:rows.9.tpot_s*1000:.2f` ms 相去甚远。它部分说对的是定性的两点：重放执行的就是 eager 的
# kernel 时，CUDA Graph 不改变贪心解码的结果（开 torch.compile 或某个捕获尺寸选了别的 kernel 方案时就不一定，实验 10 对同一句话
# 用同一条规则）；batch 越大收益越小听起来合理，但每个 batch 只跑一次，这个方向没有超出噪声。本实验自己评判的说法（其余见上表，
# 各自链接到对应实验）：

# %% tags=["nbval-check-output"]
# every number in this table is read from the recorded results (rec and the other labs' files), not measured here
lab.show_markdown(lab.claims_markdown(lab.LAB_INFO.claims))
