"""The quiz rules, over every question of every lab (read from the catalog, so a lab added later is held to
them too): length gives the right option away in neither language, every question's feedback quotes a recorded
measurement (results file + key, each key present in its file) or says why none exists, and the catalog lists
each question's Chinese options and evidence."""

from __future__ import annotations

import json

import pytest
from minivllm_labs.catalog import labs, main
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab_info import resolve_key
from minivllm_labs.quiz import Question, option_feedback

from tests.labs.test_results_index import AWAITING_GPU

INFOS = {info.lab: info for info in labs()}


def _choices(lab: str) -> list[Question]:
    return [q for q in INFOS[lab].questions if isinstance(q, Question)]


def length_ranks(q: Question, lang: str) -> tuple[bool, bool]:
    """(the right option is the longest, it is among the two longest) in one language; a tie counts against it."""
    lengths = [len(o.text_zh if lang == "zh" else o.text) for o in q.options]
    right = lengths[q.correct]
    others = sorted((n for i, n in enumerate(lengths) if i != q.correct), reverse=True)
    return right >= others[0], len(others) < 2 or right >= others[1]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("lab", INFOS)
def test_length_gives_nothing_away(lab, lang):
    """The right option is the longest in at most 1 question in 4, and among the two longest in at most 55%."""
    qs = _choices(lab)
    if not qs:
        pytest.skip(f"{lab} has no choice questions")
    ranks = {q.qid: length_ranks(q, lang) for q in qs}
    longest = [qid for qid, (top1, _) in ranks.items() if top1]
    top2 = [qid for qid, (_, t2) in ranks.items() if t2]
    assert len(longest) <= len(qs) / 4, f"{lab} {lang}: right option longest in {longest} of {len(qs)}"
    assert len(top2) <= 0.55 * len(qs), f"{lab} {lang}: right option among the two longest in {top2} of {len(qs)}"


def test_the_length_rule_counts_ties_against_the_right_option():
    from minivllm_labs.quiz import Option

    q = Question("lab99.t", "?", (Option("aaaa", ""), Option("bbbb", ""), Option("cc", "")), 0, "")
    assert length_ranks(q, "en") == (True, True)
    q = Question("lab99.t", "?", (Option("aa", ""), Option("bbbb", ""), Option("cccc", "")), 0, "")
    assert length_ranks(q, "en") == (False, False)


@pytest.mark.parametrize("lab", INFOS)
def test_every_question_cites_a_measurement_or_says_why_not(lab):
    for q in INFOS[lab].questions:
        assert q.cites or q.not_measured, f"{q.qid}: no cites and no not_measured reason"


@pytest.mark.parametrize("lab", INFOS)
def test_every_cited_key_exists_in_its_record(lab):
    for q in INFOS[lab].questions:
        for path, key, label in q.cites:
            assert path.startswith("assets/results/h200/") and path.endswith(".json"), (q.qid, path)
            if path.rsplit("/", 1)[1] in AWAITING_GPU:  # not recorded yet: its feedback says so (quiz_data.cite_lines)
                continue
            data = json.loads((REPO_ROOT / path).read_text(encoding="utf-8"))
            value = resolve_key(data, key)  # KeyError names the missing part
            assert value is not None and label, (q.qid, key)


@pytest.mark.parametrize("lab", INFOS)
def test_feedback_quotes_the_record_and_explains_every_option(lab):
    """Every option's feedback names the results file and key it rests on; no right answer says only "Right.";
    every distractor's reason is its own (the misconception it names), in both languages."""
    for q in _choices(lab):
        for lang in ("en", "zh"):
            fb = option_feedback(q, q.correct, None, lang)
            for path, key, _ in q.cites:
                assert f"{path}:{key}" in fb, (q.qid, lang, key)
        right = q.options[q.correct]
        assert len(right.why.removeprefix("Right:").strip()) > 40, q.qid
        whys = [o.why for o in q.options]
        assert len(set(whys)) == len(whys) and all(o.why_zh and o.text_zh for o in q.options), q.qid


def test_catalog_json_lists_options_zh_and_evidence(capsys):
    assert main(["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for lab in doc["labs"]:
        for q in lab["questions"]:
            assert isinstance(q["evidence"], list), q["id"]
            if q["kind"] == "choice":
                assert len(q["options_zh"]) == len(q["options"]), q["id"]
            assert q["evidence"] or q.get("not_measured"), q["id"]
            assert all(o for o in q.get("options_zh", [1])), q["id"]
