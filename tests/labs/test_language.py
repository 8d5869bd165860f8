"""One language at a time in JupyterLab (language.py): the default from open_lab's argument, the environment or
the locale; the markers the build adds to tagged markdown cells; the switch's CSS; figures in the chosen one."""

from __future__ import annotations

import json
import re

import pytest
from minivllm_labs import language
from minivllm_labs.build import parse_source
from minivllm_labs.plots import figure, in_language


def test_default_language(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", language.LANG_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert language.default_lang() == "zh"
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert language.default_lang() == "en"
    monkeypatch.setenv(language.LANG_ENV, "both")
    assert language.default_lang() == "both" and language.default_lang("ZH") == "zh"
    with pytest.raises(ValueError, match="language must be one of"):
        language.default_lang("fr")


def test_the_build_marks_each_tagged_markdown_cell():
    cells = parse_source('# %% [markdown]\n# # Title\n\n# %% [markdown] tags=["lang-en"]\n# Hello\n\n'
                         '# %% [markdown] tags=["lang-zh"]\n# 你好\n\n# %%\nx = 1\n', "99")
    assert cells[0].source == "# Title"  # untagged: shown in every language
    assert cells[1].source.endswith('<span class="mv-cell-en"></span>')
    assert cells[2].source.endswith('<span class="mv-cell-zh"></span>')
    assert cells[3].source == "x = 1"


def test_the_switch_hides_the_other_language_by_the_body_attribute():
    page = language.switch_html("zh")
    assert 'data-default="zh"' in page and "localStorage" in page
    assert 'body[data-mv-lang="en"] .jp-Cell:has(.mv-cell-zh)' in page
    assert 'body[data-mv-lang="zh"] .lang-en' in page and ".mv-sep" in page
    assert [b in page for b in ('data-lang="en"', 'data-lang="zh"', 'data-lang="both"')] == [True] * 3


def test_a_figure_in_chinese_for_jupyterlabs_renderer():
    import plotly.io as pio

    fig = figure([1, 2], {"a": [1, 2]}, title="T", x_title="X", y_title="Y",
                 zh={"title": "标题", "x": "横轴", "y": "纵轴", "names": {"a": "甲"}})
    spec = json.loads(pio.to_json(fig))
    zh = in_language(spec, "zh")
    assert (zh["layout"]["title"]["text"], zh["layout"]["xaxis"]["title"]["text"], zh["data"][0]["name"]) == \
        ("标题", "横轴", "甲")
    assert in_language(spec, "en") is spec and in_language(spec, "both") is spec
    assert spec["layout"]["title"]["text"] == "T"  # the English spec is left as it was


#: The browser test's rule for an English sentence in the 中文 view (tests/book/test_book.py's _PAGE_FACTS): 4 or
#: more plain lowercase words between Chinese characters, quotations ("...", “...”) left out.
_CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]+")


def english_runs(text: str) -> list[str]:
    text = re.sub(r'"[^"]{0,300}"|“[^”]{0,300}”', " ", " ".join(text.split()))
    return [run.strip() for run in _CJK.split(text)
            if sum(bool(re.fullmatch(r"[a-z][a-z']+[.?!]?", w)) for w in re.split(r"[\s,;:()\[\]\"]+", run)) >= 4]


def test_english_runs_finds_a_sentence_and_skips_quotes_and_names():
    assert english_runs("在 H200 上测得：one replay of the size-5 graph") == ["one replay of the size-5 graph"]
    assert english_runs("报错：“operation not permitted when stream is capturing”；FULL_AND_PIECEWISE 5 次") == []


def test_every_quiz_answers_in_chinese_with_its_evidence():
    """A question's Chinese feedback (verdict, why, model answer, the measured numbers under it) holds no English
    sentence: the evidence functions take `lang` and the cited numbers carry Chinese labels."""
    from minivllm_labs.catalog import labs
    from minivllm_labs.quiz import Question, option_feedback
    from minivllm_labs.recorded import RecordedResultsMissing, load_recorded

    bad = []
    for info in labs():
        try:
            rec = load_recorded(info.lab)
        except RecordedResultsMissing:
            rec = None
        for q in info.questions:
            if isinstance(q, Question):
                bad += [f"{q.qid}: {run[:80]}" for run in english_runs(option_feedback(q, q.correct, rec, "zh"))]
    assert not bad, f"{len(bad)} English sentences in Chinese feedback:\n  " + "\n  ".join(bad[:20])
