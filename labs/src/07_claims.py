# Source of labs/07_claims.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 07

# %% [markdown]
# # Lab 07 · The claims lab · 逐条检验材料中的说法

# %% [markdown] tags=["lang-en"]
# Two documents taught the course's starting point: the handbook chapter on CUDA graphs and torch.compile, and an
# article on vLLM's CUDA graph optimisation (both in `../shared/seeds/`, in Chinese). They make many claims with
# numbers. This lab puts **every measurable claim in one table**: the claim in the seed's own words and in
# English, what was measured on this engine, the verdict (*right*, *partly*, *wrong*, *unverifiable*: no such
# source) and the number that decides it, with the results file and key it comes from.
#
# Nothing is measured twice. The rows are read at run time from the catalog
# (`minivllm_labs.catalog.all_claims()`): each lab declares the claims it measures, so a row here links to the lab
# that has the plot. This lab judges only what no other lab can measure: the article's hardware figures (A100,
# V100, Pascal: **physics**, a TPOT floor of weight bytes over memory bandwidth) and sources that do not exist.

# %% [markdown] tags=["lang-zh"]
# 课程的起点是两份材料：手册中讲 CUDA Graph 与 torch.compile 的一章，以及一篇讲 vLLM CUDA Graph 优化的文章（都在
# `../shared/seeds/`）。它们给出了很多带数字的说法。本实验把**所有可测的说法放进一张表**：原文与英文、在本引擎上测了
# 什么、结论（*right* 对 / *partly* 部分对 / *wrong* 错 / *unverifiable* 无从查证：来源不存在），以及决定结论的数字和
# 它所在的结果文件与键。
#
# 不重复测量。表格在运行时从目录（`minivllm_labs.catalog.all_claims()`）读取：每个实验声明自己测的说法，这里的每一行
# 链接到有图的那个实验。本实验只评判别处测不了的：文章里的硬件数字（A100、V100、Pascal：用**物理**推算，即
# "权重字节 ÷ 显存带宽" 的 TPOT 下限）以及并不存在的引用来源。

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
# Every row of the research notes, with the lab that measures it. A row "not measured yet" is a gap, not a pass.

# %% [markdown] tags=["lang-zh"]
# ### 覆盖情况
# 研究笔记的每一行及测它的实验。"not measured yet" 是缺口，不算通过。

# %% tags=["nbval-ignore-output"]
print(lab.coverage_table(lab.coverage()))

# %% [markdown] tags=["lang-en"]
# ### Physics: the TPOT floor · 物理下限
# At batch 1 a decode step reads every weight once, so a token cannot take less than *weight bytes / memory
# bandwidth*. For LLaMA-2-13B in bf16 (26 GB) on an A100-80GB (2,039 GB/s) that is 12.75 ms: the article's "TPOT
# 12 -> 9 ms" is below the floor before and after. On the H200 the measured copy bandwidth (not the 4.8 TB/s of
# the datasheet) is what a real kernel reaches.

# %% [markdown] tags=["lang-zh"]
# ### 物理下限
# batch 1 时每个 decode 步要把所有权重读一遍，所以每个 token 至少需要 *权重字节 ÷ 显存带宽*。LLaMA-2-13B（bf16，
# 26 GB）在 A100-80GB（2,039 GB/s）上是 12.75 ms：文章的 "TPOT 12 → 9 ms" 前后都低于这个下限。H200 上真实 kernel
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
# This device's copy bandwidth, and the floor it puts under a 0.6B model (1.2 GB of bf16 weights).

# %% [markdown] tags=["lang-zh"]
# 本机的拷贝带宽，以及它给 0.6B 模型（1.2 GB bf16 权重）带来的下限。

# %% tags=["nbval-ignore-output"]
here = lab.run_all("", quick=True)
bw = here["copy_bandwidth"]["bytes_per_s"]
print(f"copy bandwidth here: {bw / 1e9:.1f} GB/s; Qwen3-0.6B floor: {lab.tpot_floor_ms(0.596e9, bw):.2f} ms per token")

# %% [markdown] tags=["lang-en"]
# ## 4. Try it yourself · 动手试试
#
# **Exercise.** The article says LLaMA-2-70B's TTFT drops from 128 to 112 ms with graphs (H100). Estimate the
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
# ## 4. 动手试试
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
# ## 5. Summary of verdicts · 结论
# The claims this lab judges itself (the rest are in the table above, each with its lab):

# %% [markdown] tags=["lang-zh"]
# ## 5. 结论
# 本实验自己评判的说法（其余见上表，各自链接到对应实验）：

# %% tags=["nbval-check-output"]
lab.show_markdown(lab.claims_markdown(lab.LAB_INFO.claims))
