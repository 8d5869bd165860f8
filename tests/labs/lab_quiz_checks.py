"""Grader checks shared by the per-lab tests (tests/labs/test_labNN.py): one place for the answer forms the
lab standard accepts, so every lab's questions are held to the same rules."""

from __future__ import annotations

from minivllm_labs.quiz import grade

ODD = ("", "ß", "ﬁ", "ŉ", "1", 1, True, None, "Z", "  ", "AB")
#: the labelled and Chinese forms the lab standard's grader reads, beside the full-width letter
EXTENDED = ("{L}.", "{l})", "选{L}", "\uff21")


def check_right_answer(q, results) -> None:
    letter = chr(65 + q.correct)
    for answer in (letter, letter.lower(), f" {letter} ", q.options[q.correct].text, q.labels()[q.correct]):
        ok, text = grade(q, answer, results)
        assert ok and text.startswith("Correct."), answer
        assert q.model_answer in text


def check_extended_forms(q, results) -> None:
    letter = chr(65 + q.correct)
    forms = [f.format(L=letter, l=letter.lower()) for f in EXTENDED[:3]] + [chr(0xFF21 + q.correct)]
    for answer in forms:
        assert grade(q, answer, results)[0], answer


def check_wrong_answers(q, results) -> None:
    for i, opt in enumerate(q.options):
        if i == q.correct:
            continue
        ok, text = grade(q, chr(65 + i), results)
        assert not ok and opt.why in text, i
        assert q.model_answer in text


def check_odd_input(q, results) -> None:
    """Odd input never raises; what is not an answer at all is never graded right."""
    for answer in ODD:
        ok, text = grade(q, answer, results)
        assert isinstance(ok, bool) and isinstance(text, str) and text
        if answer in ("", None, "ß", "ﬁ", "ŉ", "  ", "AB", "Z"):
            assert ok is False, answer


def check_answer_positions(questions, min_distinct: int) -> None:
    """The right answers sit at several letters and are never the longest option; every option has its
    Chinese text and explanation."""
    assert len({q.correct for q in questions}) >= min_distinct
    for q in questions:
        lengths = [len(o.text) for o in q.options]
        assert lengths[q.correct] < max(lengths), q.qid
        assert all(o.text_zh and o.why_zh for o in q.options), q.qid


def check_grader(q, results) -> None:
    """Every rule above for one question against one set of results."""
    check_right_answer(q, results)
    check_extended_forms(q, results)
    check_wrong_answers(q, results)
    check_odd_input(q, results)
