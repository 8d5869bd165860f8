"""The lab standard (labs/README.md), checked on every lab 01-07 and 10 from its source: the self-test comes before the
exercises, its model answers follow in a collapsed cell (EN, ZH) naming every question, every exercise has a hint
in both languages, and the summary opens with a verdict paragraph in English and in Chinese."""

import re

import pytest
from minivllm_labs.build import parse_source
from minivllm_labs.catalog import labs

from tests.labs.code_links import lab_sources

SOURCES = [p for p in lab_sources() if p.name[:2] != "08"]  # Lab 08 is the interview bank, not a lab of this shape
QUESTIONS = {info.lab: [q.qid for q in info.questions] for info in labs()}
QUIZ = re.compile(r"\blab\.quiz\(|show_questions\(|show_quiz\(")


def cells(src):
    return parse_source(src.read_text(), src.stem)


def tags(c):
    return c.metadata.get("tags", [])


def first(cs, pred, start=0):
    return next((i for i in range(start, len(cs)) if pred(cs[i])), None)


def md(c, *needles, tag=None):
    return c.cell_type == "markdown" and all(n in c.source for n in needles) and (tag is None or tag in tags(c))


@pytest.fixture(params=SOURCES, ids=lambda p: p.name[:2])
def lab(request):
    return request.param, cells(request.param)


def test_self_test_comes_before_the_exercises(lab):
    src, cs = lab
    quiz = first(cs, lambda c: c.cell_type == "code" and QUIZ.search(c.source))
    exercises = first(cs, lambda c: md(c, "Try it yourself"))
    assert quiz is not None, f"{src.name}: no self-test (lab.quiz / show_questions cell)"
    assert exercises is not None and quiz < exercises, f"{src.name}: the self-test comes after the exercises"


def test_model_answers_collapsed_in_both_languages_after_the_quiz(lab):
    src, cs = lab
    quiz = max(i for i, c in enumerate(cs) if c.cell_type == "code" and QUIZ.search(c.source))
    en = first(cs, lambda c: md(c, "<details><summary>Model answers", "</details>", tag="lang-en"))
    zh = first(cs, lambda c: md(c, "<details><summary>自检参考答案", "</details>", tag="lang-zh"))
    assert en is not None and zh is not None, f"{src.name}: no collapsed model-answers cell in EN and ZH"
    assert quiz < en and quiz < zh, f"{src.name}: model answers shown before the learner answers"
    lab_id = "lab" + src.name[:2]
    for qid in QUESTIONS[lab_id][2 if lab_id == "lab01" else 0:]:  # lab01 names its two as Q1, Q4
        assert qid in cs[en].source and qid in cs[zh].source, (src.name, qid)
    assert "self-test" in cs[en].source.lower() or "Model answers" in cs[en].source


def test_every_exercise_has_a_hint_in_both_languages(lab):
    src, cs = lab
    start = first(cs, lambda c: md(c, "Try it yourself"))
    end = first(cs, lambda c: md(c, "Summary of verdicts"), start)
    assert start is not None and end is not None, src.name
    en = "\n".join(c.source for c in cs[start:end] if md(c, tag="lang-en") or (md(c) and not tags(c)))
    zh = "\n".join(c.source for c in cs[start:end] if md(c, tag="lang-zh"))
    n_en = len(re.findall(r"\*Hint[:：]?\*", en))
    n_zh = len(re.findall(r"\*提示[:：]?\*", zh + ("" if zh else en)))
    solutions = len(re.findall(r"<details><summary>Solution", en))
    assert n_en >= 1 and n_en == n_zh, (src.name, n_en, n_zh)
    assert n_en >= solutions // (2 if not zh else 1), (src.name, "an exercise without a hint", n_en, solutions)


def test_summary_opens_with_a_verdict_paragraph_in_both_languages(lab):
    src, cs = lab
    s = first(cs, lambda c: md(c, "Summary of verdicts"))
    assert s is not None, src.name
    code = first(cs, lambda c: c.cell_type == "code", s)
    prose = cs[s:code]
    def paragraph(c):
        body = [p for p in re.split(r"\n\s*\n", c.source) if not p.lstrip().startswith("#")]
        return max((len(p) for p in body), default=0)
    en = [c for c in prose if "lang-en" in tags(c) and paragraph(c) >= 300]
    zh = [c for c in prose if "lang-zh" in tags(c) and paragraph(c) >= 120]
    assert en and zh, f"{src.name}: no verdict paragraph (EN and ZH) before the verdict table"


def test_the_checks_can_fail():
    bad = ('# %% [markdown]\n# ## 5. Try it yourself\n\n# %% [markdown] tags=["lang-en"]\n# 1. Do it. *Hint:* x.\n'
           '\n# %%\nlab.quiz(lab.Q1, rec)\n\n# %% [markdown]\n# ## Summary of verdicts\n\n# %%\nprint(1)\n')
    cs = parse_source(bad, "99_bad")
    quiz = first(cs, lambda c: c.cell_type == "code" and QUIZ.search(c.source))
    assert quiz > first(cs, lambda c: md(c, "Try it yourself"))
    assert first(cs, lambda c: md(c, "<details><summary>Model answers", tag="lang-en")) is None
