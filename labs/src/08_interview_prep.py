# Source of labs/08_interview_prep.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 08

# %% [markdown]
# # Lab 08 · Interview prep · 面试准备

# %% [markdown] tags=["lang-en"]
# The questions interviewers ask about LLM inference engines, over nineteen topics: CUDA graphs, torch.compile,
# custom ops, paged attention, continuous batching, chunked prefill, prefix caching, startup and caches, debugging,
# KV-cache sizing and capacity planning, the prefill/decode roofline, split-KV and FlashAttention tiling (this
# engine's own decode and prefill kernels), sampling, quantization, speculative decoding, tensor/pipeline/expert
# parallelism, MoE, disaggregated prefill, and SLO trade-offs. The handbook's four interview questions come first.
#
# Each question is multiple choice or a numeric estimate graded within a tolerance, with units converted (`"284 us"`
# to a question in ms reads as `0.284`). Where this engine can measure the answer, the feedback quotes the H200 record
# (file and key under `assets/results/h200/`, read when it is shown) and links the lab and the engine code; where it
# cannot (speculative decoding, parallelism, MoE, ...), the question says "reasoning, not measured here" and gives
# its formula and a public source. The table below counts both.
#
# Options are shuffled with a seed taken from the question id, so the letter of the right answer carries no hint.
# The mock interview draws N questions across topics with a seed, scores each topic and says which lab or reading
# to revisit for each weak one; it works on this page without a kernel, before and after a run.

# %% [markdown] tags=["lang-zh"]
# 推理引擎面试中常见的问题，覆盖十九个主题：CUDA Graph、torch.compile、自定义算子、Paged Attention、连续批处理、
# Chunked Prefill、前缀缓存、启动与缓存、调试、KV Cache 容量规划、预填充/解码的 Roofline、split-KV 与 FlashAttention
# 分块（本引擎自己的解码与预填充 kernel）、采样、量化、投机解码、张量/流水线/专家并行、MoE、PD 分离，以及 SLO 取舍。
# 手册的四道面试题排在最前。
#
# 题目为选择题或在容差内评分的数值估算，单位会换算（本题单位是 ms 时，`"284 us"` 读作 `0.284`）。本引擎能测的，
# 反馈引用 H200 记录（`assets/results/h200/` 下的文件和键，展示时读取），并链接到对应实验与引擎代码；测不了的
# （投机解码、并行、MoE 等）标明“推理题，本引擎未实测”，给出公式和公开出处。下表统计了两类题的数量。
#
# 选项按题目 id 为种子打乱，答案字母不带任何暗示。模拟面试按种子跨主题抽 N 道题，按主题评分，并为每个薄弱主题指出
# 该复习的实验或资料；本页无需 kernel 即可使用，运行前后都可以。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("08")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
print(lab.bank_table())

# %% [markdown] tags=["lang-en"]
# ## 2. The handbook's four interview questions · 手册的四道面试题
# Answer, then press *Score*: each question shows the feedback for the option you picked, with the measured numbers.

# %% [markdown] tags=["lang-zh"]
# ## 2. 手册的四道面试题
# 作答后点 *评分*：每题显示所选选项的反馈和实测数字。

# %% tags=["nbval-ignore-output"]
lab.show_mock(4, qids=[q.qid for q in lab.QUESTIONS if q.source.startswith("handbook interview")])

# %% [markdown] tags=["lang-en"]
# ## 3. Mock interview · 模拟面试
# Eight questions drawn across topics with a seed; change the number or the seed and press *New interview* for
# another set. The same seed draws the same questions here and in Python (`lab.mock_interview(8, seed=0)`). After
# *Score*, the page lists your score per topic and, for each weak topic, the lab or reading to revisit.

# %% [markdown] tags=["lang-zh"]
# ## 3. 模拟面试
# 按种子跨主题抽 8 道题；改题数或种子后点 *重新抽题* 换一组。同一种子在本页和 Python
# （`lab.mock_interview(8, seed=0)`）中抽到的题相同。点 *评分* 后，页面列出每个主题的得分，并为每个薄弱主题指出该复习的
# 实验或资料。

# %% tags=["nbval-ignore-output"]
lab.show_mock(8, seed=0)

# %% [markdown] tags=["lang-en"]
# ## 4. Run it here: grade from Python · 在本机运行：用 Python 评分
# The grader accepts a letter in any form ("b", "Ｂ", "B.", "选B"), the option's text, or a number with or without a
# unit, converted to the question's (`"284 us"`, `"32 KiB"`, `"262k tokens"`, `"2.7倍"`, full-width digits, a decimal
# comma `"0,28"`); a unit of another kind ("5 ms" for a size) or a word it does not know gets a hint instead of a grade. It
# is the reader every lab's quiz uses (`quiz_numbers`), and it never raises. Score a whole mock interview from a dict
# of answers:

# %% [markdown] tags=["lang-zh"]
# ## 4. 在本机运行：用 Python 评分
# 评分函数接受任何形式的字母（"b"、"Ｂ"、"B."、"选B"）、选项原文，或带/不带单位的数字，并换算成本题的单位（`"284 us"`、
# `"32 KiB"`、`"262k tokens"`、`"2.7倍"`、全角数字、小数逗号 `"0,28"`）；单位类型不对（字节题填 "5 ms"）或不认识的单位会得到
# 提示而不是评分。每个实验的测验都用这同一个读数函数（`quiz_numbers`），它从不抛异常。用一个答案字典给整场模拟面试评分：

# %% tags=["nbval-check-output"]
qids = lab.mock_interview(8, seed=0)
answers = {qid: "A" for qid in qids}  # try your own answers here
print(lab.score(qids, answers))
n1 = lab.BY_ID["lab08.n1"]  # the batch-1 TPOT floor, in ms
print([lab.grade_any(n1, a)[0] for a in ("0.3 ms", "284 us", "０.２８", "1 ms")])
print(lab.grade_any(n1, "0,28")[0], lab.grade_any(lab.BY_ID["lab08.n2"], "5 ms")[1].splitlines()[0])

# %% [markdown] tags=["lang-en"]
# The same draw once more, on a page of its own to answer again (no widgets: a saved widget reads "model not found"
# after a reopen, this page keeps working):

# %% [markdown] tags=["lang-zh"]
# 同一次抽题再来一遍，单独一页，可以重新作答（不用 widget：保存后重新打开时 widget 只显示“model not found”，这一页照常可用）：

# %% tags=["nbval-ignore-output"]
lab.show_widget(lab.mock_widget(8, seed=0))

# %% [markdown] tags=["lang-en"]
# ### Live toggle: how big is a chunk? · 实时开关：chunk 有多大？
# Questions f1 and f2 of the bank ask what chunked prefill does to a step and how big a chunk is. Measure it on
# this device: three requests decode, and on the third engine step a 96-token prompt arrives. Click a token budget
# (`max_num_batched_tokens`): the engine re-runs with it, the bars show the largest step (tokens) and how many steps
# held a piece of the long prompt, and the line under the figure lists the chunks. Predict first: with a budget of
# 32 and three decodes in every step, how big are the chunks? "not chunked" (`enable_chunked_prefill=False`) runs
# the whole prompt in one step. On a GPU the control also offers budget 64 with FULL graphs. The cell below it runs
# every option once, for a page without a kernel. Then answer f2 ([Lab 06](06_paged_kv_and_batching.ipynb) has the
# H200 record; the scheduler's code is [engine/scheduler.py](../minivllm/engine/scheduler.py) (`Scheduler.schedule`)).

# %% [markdown] tags=["lang-zh"]
# ### 实时开关：chunk 有多大？
# 题库的 f1、f2 两题问 chunked prefill 对一步做了什么、一个 chunk 有多大。在本机实测：三条请求在解码，第三个引擎步时
# 来了一个 96 token 的 prompt。点一个 token 预算（`max_num_batched_tokens`）：引擎用它重跑，柱状图显示最大的一步
# （token 数）和有几步包含了长 prompt 的一部分，图下一行列出每个 chunk 的大小。先预测：预算 32、每步都有三条解码时，
# chunk 多大？"not chunked"（`enable_chunked_prefill=False`）把整个 prompt 放在一步里。在 GPU 上还可选预算 64 加
# FULL 整图。下面一格把每个选项各跑一次，供无 kernel 的页面查看。然后回答 f2（H200 的记录见
# [Lab 06](06_paged_kv_and_batching.ipynb)；调度代码见 [engine/scheduler.py](../minivllm/engine/scheduler.py)
# （`Scheduler.schedule`））。

# %% tags=["nbval-ignore-output"] id="08-toggle"
# Live toggle · 实时开关: click a budget; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% tags=["nbval-ignore-output"] id="08-toggle-all"
# Every option once (the figure and the chunks, also on a page without a kernel) · 每个选项各跑一次
lab.toggle_all()

# %% tags=["nbval-ignore-output"]
lab.show_questions([lab.BY_ID["lab08.f2"]])

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **Exercise.** Add a numeric question of your own: the KV bytes per token of Qwen3-0.6B at fp32 instead of bf16.
# Build it with `lab.build(lab.Entry(...))` and grade two answers with `lab.grade_any`.
#
# *Hint:* the bf16 figure is 114,688 B; only the element size changes.
#
# <details><summary>Solution · 参考答案</summary>
#
# ```python
# e = lab.Entry("my.q1", "kv-capacity", "interview", "KV bytes per token of Qwen3-0.6B in fp32?", "",
#                 "2 x 28 x 8 x 128 x 4 = 229,376 B", "", answer=229376, rel_tol=0.05, unit="bytes")
# q = lab.build(e)
# lab.grade_any(q, "224 KiB"), lab.grade_any(q, "114688")  # (True, ...), (False, ...)
# ```
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **练习.** 自己加一道数值题：Qwen3-0.6B 在 fp32（而非 bf16）下每 token 的 KV 字节数。用 `lab.build(lab.Entry(...))`
# 构造，并用 `lab.grade_any` 给两个答案评分。
#
# *提示：* bf16 是 114,688 B，只有元素大小变了。
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 × 28 × 8 × 128 × 4 = 229,376 B：
#
# ```python
# e = lab.Entry("my.q1", "kv-capacity", "interview", "KV bytes per token of Qwen3-0.6B in fp32?",
#                 "Qwen3-0.6B 在 fp32 下每 token 的 KV 字节数？", "2 x 28 x 8 x 128 x 4 = 229,376 B",
#                 "2 × 28 × 8 × 128 × 4 = 229,376 B", answer=229376, rel_tol=0.05, unit="bytes")
# q = lab.build(e)
# lab.grade_any(q, "224 KiB", lang="zh"), lab.grade_any(q, "114688", lang="zh")  # (True, ...), (False, ...)
# ```
# </details>

# %%
# Exercise: this question still says bf16. Change the model answer, the answer and the Chinese prompt for fp32,
# then check that "224 KiB" passes and the bf16 figure fails.
e = lab.Entry("my.q1", "kv-capacity", "interview", "KV bytes per token of Qwen3-0.6B in fp32?",
              "Qwen3-0.6B 在 fp32 下每 token 的 KV 字节数？", "2 x 28 x 8 x 128 x 2 = 114,688 B",
              "2 × 28 × 8 × 128 × 2 = 114,688 B", answer=114688, rel_tol=0.05, unit="bytes")
q = lab.build(e)
print(lab.grade_any(q, "224 KiB")[0], lab.grade_any(q, "114688")[0])

# %% [markdown] tags=["lang-en"]
# ## 6. Summary · 结论
# Every question's right answer and the lab that measures it (read after practising). The claims behind the
# questions, with their verdicts, are in [Lab 07](07_claims.ipynb).
#
# <details><summary>Answer key · 答案</summary>
#
# See `python -m minivllm_labs.catalog --json` (each question's correct option or numeric answer), or run
# `print(lab.answer_key())`.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 结论
# 每道题的答案与测量它的实验（练习之后再看）。题目背后的说法及其结论见 [Lab 07](07_claims.ipynb)。
