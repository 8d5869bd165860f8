# Source of labs/08_interview_prep.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 08

# %% [markdown]
# # Lab 08 · Interview prep · 面试准备

# %% [markdown] tags=["lang-en"]
# Thirty questions of the kind interviewers ask about LLM inference engines, across CUDA graphs, torch.compile,
# custom ops, paged attention, continuous batching, chunked prefill, prefix caching, startup and caches, and
# debugging. The handbook's four interview questions come first. Each is multiple choice or a numeric estimate
# graded within a tolerance (a TPOT floor, KV bytes per token), and every answer's feedback quotes a measurement
# from labs 01-07, read from `assets/results/h200/` when it is shown, with a link to the lab and the engine code.
#
# Options are shuffled with a seed taken from the question id, so the letter of the right answer carries no hint.
# The mock interview draws N questions with a seed, scores them and names your weak topics; it works on this page
# without a kernel, and live with widgets.

# %% [markdown] tags=["lang-zh"]
# 三十道面试中常见的推理引擎问题，覆盖 CUDA Graph、torch.compile、自定义算子、paged attention、连续批处理、chunked
# prefill、前缀缓存、启动与缓存、调试。手册的四道面试题排在最前。题目为选择题或在容差内评分的数值估算（TPOT 下限、
# 每 token 的 KV 字节数），每个答案的反馈都引用 Lab 01-07 的实测数字（展示时从 `assets/results/h200/` 读取），并链接到
# 对应实验与引擎代码。
#
# 选项按题目 id 为种子打乱，答案字母不带任何暗示。模拟面试按种子抽 N 道题、评分并指出薄弱主题；本页无需 kernel
# 即可使用，在线 kernel 中还有 widget 版本。

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
# 作答后点 *Score · 评分*：每题显示所选选项的反馈和实测数字。

# %% tags=["nbval-ignore-output"]
lab.show_mock(4, qids=[q.qid for q in lab.QUESTIONS if q.source.startswith("handbook interview")])

# %% [markdown] tags=["lang-en"]
# ## 3. Mock interview · 模拟面试
# Eight questions drawn with a seed; change the number or the seed and press *New interview* for another set.
# The same seed draws the same questions here and in Python (`lab08.mock_interview(8, seed)`).

# %% [markdown] tags=["lang-zh"]
# ## 3. 模拟面试
# 按种子抽 8 道题；改题数或种子后点 *New interview · 重新抽题* 换一组。同一种子在本页和 Python
# （`lab08.mock_interview(8, seed)`）中抽到的题相同。

# %% tags=["nbval-ignore-output"]
lab.show_mock(8, seed=0)

# %% [markdown] tags=["lang-en"]
# ## 4. Run it here: grade from Python · 在本机运行：用 Python 评分
# The grader accepts a letter in any form ("b", "Ｂ", "B.", "选B"), the option's text, or a number with or without its
# unit, and never raises. Score a whole mock interview from a dict of answers:

# %% [markdown] tags=["lang-zh"]
# ## 4. 在本机运行：用 Python 评分
# 评分函数接受任何形式的字母（"b"、"Ｂ"、"B."、"选B"）、选项原文，或带/不带单位的数字，且从不抛异常。用一个答案字典给整场
# 模拟面试评分：

# %% tags=["nbval-check-output"]
qids = lab.mock_interview(8, seed=0)
answers = {qid: "A" for qid in qids}  # try your own answers here
print(lab.score(qids, answers))
print(lab.grade_any(lab.BY_ID["lab08.n1"], "0.3 ms")[0], lab.grade_any(lab.BY_ID["lab08.n1"], "1 ms")[0])

# %% [markdown] tags=["lang-en"]
# In a live kernel the same interview as widgets (the page above needs no kernel):

# %% [markdown] tags=["lang-zh"]
# 在线 kernel 中的 widget 版本（上面的页面无需 kernel）：

# %% tags=["nbval-ignore-output"]
lab.show_widget(lab.mock_widget(8, seed=0))

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **Exercise.** Add a numeric question of your own: the KV bytes per token of Qwen3-0.6B at fp32 instead of bf16.
# Build it with `lab08.build(lab08.Entry(...))` and grade two answers with `lab08.grade_any`.
#
# *Hint:* the bf16 figure is 114,688 B; only the element size changes.
#
# <details><summary>Solution · 参考答案</summary>
#
# ```python
# e = lab08.Entry("my.q1", "paged-attention", "interview", "KV bytes per token of Qwen3-0.6B in fp32?", "", 
#                 "2 x 28 x 8 x 128 x 4 = 229,376 B", "", answer=229376, rel_tol=0.05, unit="bytes")
# q = lab08.build(e)
# lab08.grade_any(q, "229376"), lab08.grade_any(q, "114688")  # (True, ...), (False, ...)
# ```
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **练习.** 自己加一道数值题：Qwen3-0.6B 在 fp32（而非 bf16）下每 token 的 KV 字节数。用 `lab08.build(lab08.Entry(...))`
# 构造，并用 `lab08.grade_any` 给两个答案评分。
#
# *提示：* bf16 是 114,688 B，只有元素大小变了。
#
# <details><summary>Solution · 参考答案</summary>
#
# 2 × 28 × 8 × 128 × 4 = 229,376 B；代码见英文部分。
# </details>

# %% [markdown] tags=["lang-en"]
# ## 6. Summary · 结论
# Every question's right answer and the lab that measures it (read after practising). The claims behind the
# questions, with their verdicts, are in [Lab 07](07_claims.ipynb).
#
# <details><summary>Answer key · 答案</summary>
#
# See `python -m minivllm_labs.catalog --json` (each question's correct option or numeric answer), or run
# `print(lab08.answer_key())`.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 6. 结论
# 每道题的答案与测量它的实验（练习之后再看）。题目背后的说法及其结论见 [Lab 07](07_claims.ipynb)。
