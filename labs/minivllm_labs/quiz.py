"""Self-test questions: multiple-choice and numeric questions, their graders, and how a quiz is shown.

Why the grader is a plain function: it is the part worth testing (does the right answer pass in every form a
learner types, does every wrong answer get its reason, does odd input get a hint instead of an exception), and
it must not need Jupyter. Every front end only calls it: the static HTML quiz (quiz_html.py) grades every
option with it at display time, the ipywidgets quiz (quiz_show.py) on each click. Feedback ends with our model answer *and
the numbers the lab measured* (the handbook's self-test gives no answers), because an answer convinces only
next to a measurement.
"""

from __future__ import annotations

import inspect
import math
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, NamedTuple

from minivllm_labs.quiz_numbers import UNITS, AnswerError, parse_number  # noqa: F401 - parse_number is this API's


class Option(NamedTuple):
    text: str
    why: str  # why this option is right, or what it misses
    text_zh: str = ""
    why_zh: str = ""


def _no_evidence(_results: dict | None) -> str:
    return ""


@dataclass(frozen=True)
class Question:
    """A multiple-choice question. `options` are Option objects (or (text, why) pairs);
    `evidence(results)` turns a lab's recorded results into the lines that back the model answer.
    `qid` is "<lab>.<name>" ("lab01.q1"): the lab part is where the grader finds recorded results when it is
    given none. `source` says where the question comes from ("handbook self-test 2", "handbook interview 1",
    "interview", "lab"); `topic` groups questions for the mock interview (Lab 08)."""

    qid: str
    prompt: str
    options: tuple
    correct: int
    model_answer: str
    evidence: Callable[[dict | None], str] = _no_evidence
    prompt_zh: str = ""
    model_answer_zh: str = ""
    source: str = "lab"
    topic: str = ""
    cites: tuple = ()  # (results file, key, label): the recorded numbers the feedback quotes
    not_measured: str = ""  # why nothing is cited, when nothing is

    def __post_init__(self) -> None:
        opts = tuple(o if isinstance(o, Option) else Option(*o) for o in self.options)
        object.__setattr__(self, "options", opts)
        if not 2 <= len(opts) <= 26:
            raise ValueError(f"{self.qid}: a question needs 2-26 options, got {len(opts)}")
        if not 0 <= self.correct < len(opts):
            raise ValueError(f"{self.qid}: correct={self.correct} but there are {len(opts)} options")

    def labels(self) -> list[str]:
        return [f"{letter(i)}. {o.text}" for i, o in enumerate(self.options)]


@dataclass(frozen=True)
class NumericQuestion:
    """A numeric estimate, right when |answer given - answer| <= rel_tol * |answer|."""

    qid: str
    prompt: str
    answer: float
    rel_tol: float
    unit: str
    model_answer: str
    evidence: Callable[[dict | None], str] = _no_evidence
    prompt_zh: str = ""
    model_answer_zh: str = ""
    source: str = "lab"
    topic: str = ""
    cites: tuple = ()  # (results file, key, label): the recorded numbers the feedback quotes
    not_measured: str = ""  # why nothing is cited, when nothing is

    def __post_init__(self) -> None:
        if not (math.isfinite(self.answer) and self.rel_tol > 0):
            raise ValueError(f"{self.qid}: answer must be finite and rel_tol > 0, "
                             f"got {self.answer!r}, {self.rel_tol!r}")
        if self.unit and self.unit.lower().replace(" ", "") not in UNITS:
            raise ValueError(f"{self.qid}: unit {self.unit!r} is not one the grader converts "
                             f"(quiz_numbers.UNITS: {', '.join(sorted({u[0] for u in UNITS.values()}))})")


def letter(i: int) -> str:
    return chr(65 + i)


def question_dict(q) -> dict:
    """What the catalog lists for a question (its correct option or numeric answer, no callables), with its
    evidence: the results files and keys its feedback quotes, or `not_measured` and the reason."""
    d = {"id": q.qid, "source": q.source, "topic": q.topic, "prompt": q.prompt, "prompt_zh": q.prompt_zh}
    if isinstance(q, NumericQuestion):
        d.update(kind="numeric", answer=q.answer, rel_tol=q.rel_tol, unit=q.unit)
    else:
        d.update(kind="choice", correct=letter(q.correct), options=[o.text for o in q.options],
                 options_zh=[o.text_zh for o in q.options])
    d["evidence"] = [{"file": f, "key": k, "label": label} for f, k, label in q.cites]
    if q.not_measured:
        d["not_measured"] = q.not_measured
    return d


# ---- parsing what a learner typed -------------------------------------------------------------------------
def _norm(s: str) -> str:
    """Compatibility-normalised (full-width Ｂ -> B, ligature ﬁ -> fi), case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", s).casefold().split())


# "b", "B.", "b)", "(b)", "选B", "选项 B", "答案：B", "answer: b", "option b" (after _norm).
_LETTER = re.compile(r"(?:选项?|答案?|answer|option|choice)?\s*(?:是|is)?\s*[:：]?\s*[(\[（【]?\s*([a-z])\s*"
                     r"[)\]）】]?\s*[.。、:：,，]?")
_DIGITS = re.compile(r"[(\[]?[+-]?\d+[)\].]?")


def parse_choice(q: Question, answer: str | int) -> int:
    """The 0-based option a learner means: a letter in any case or width, with the usual decorations ("B.",
    "b)", "选B"), or an option's text (or its "B. ..." label, or its Chinese text). Raises ValueError with a
    hint otherwise. Numbers are refused, 1 and "1" alike: "1" could mean A (first) or B (index 1)."""
    n = len(q.options)
    letters = f"A-{letter(n - 1)}"
    no_letter = AnswerError(f"answer with a letter {letters} (or an option's text), got {answer!r}",
                            f"请用字母 {letters}（或选项原文）作答，收到的是 {answer!r}")
    if isinstance(answer, bool) or not isinstance(answer, (int, str)):
        raise no_letter
    if isinstance(answer, int) or _DIGITS.fullmatch(_norm(answer)):
        raise AnswerError(f"{answer!r} is a number; options are lettered {letters} (the first is A)",
                          f"{answer!r} 是数字；选项用字母 {letters} 标记（第一个是 A）")
    a = _norm(answer)
    m = _LETTER.fullmatch(a)
    if m:
        i = ord(m.group(1)) - ord("a")
        if i < n:
            return i
        raise AnswerError(f"there is no option {m.group(1).upper()}: options are {letters}",
                          f"没有选项 {m.group(1).upper()}：选项是 {letters}")
    bare = a.rstrip(".。 ")
    for i, o in enumerate(q.options):
        texts = (o.text, o.text_zh, q.labels()[i]) if o.text_zh else (o.text, q.labels()[i])
        if bare in {_norm(t).rstrip(".。 ") for t in texts}:
            return i
    raise no_letter


def within(q: NumericQuestion, x: float) -> bool:
    """The tolerance rule (the static quiz's JavaScript uses the same expression)."""
    return abs(x - q.answer) <= q.rel_tol * abs(q.answer)


# ---- grading ------------------------------------------------------------------------------------------------
def default_results(q) -> dict | None:
    """The recorded results of the question's lab ("lab01.q1" -> assets/results/h200/lab01.json), or None
    when this checkout has none (or only an invalid one)."""
    lab = q.qid.split(".")[0]
    if not re.fullmatch(r"lab\d\d", lab):
        return None
    from minivllm_labs.recorded import ProvenanceError, RecordedResultsMissing, load_recorded

    try:
        return load_recorded(lab)
    except (RecordedResultsMissing, ProvenanceError):
        return None


def _num(x: float) -> str:
    """4 significant digits, written as JavaScript's String(Number(x.toPrecision(4))) writes them (the static quiz
    prints the same line): fixed notation for exponents -7 < e < 21, else "9e-8", "1.5e+21"."""
    r = float(f"{x:.4g}")
    if r == 0 or not math.isfinite(r):
        return "0" if r == 0 else str(r)
    d = Decimal(repr(r))
    e = d.adjusted()
    if -7 < e < 21:
        s = format(d, "f")
        return s.rstrip("0").rstrip(".") if "." in s else s
    m = format(d.scaleb(-e), "f")
    m = m.rstrip("0").rstrip(".") if "." in m else m
    return f"{m}e{'+' if e > 0 else '-'}{abs(e)}"


def numeric_verdict(q: NumericQuestion, x: float, lang: str = "en") -> str:
    """First line of a numeric answer's feedback (quiz_html.NUMERIC_JS writes the same strings)."""
    unit = f" {q.unit}" if q.unit else ""
    pct = _num(q.rel_tol * 100)
    if within(q, x):
        return (f"正确：{_num(x)} 与 {_num(q.answer)}{unit} 相差在 {pct}% 以内。" if lang == "zh" else
                f"Correct: {_num(x)} is within {pct}% of {_num(q.answer)}{unit}.")
    return (f"不对：{_num(x)}；答案是 {_num(q.answer)}{unit}（误差 {pct}% 以内算对）。" if lang == "zh" else
            f"Not quite: {_num(x)}; the answer is {_num(q.answer)}{unit} (within {pct}% counts).")


def evidence_text(evidence: Callable[..., str], results: dict | None, lang: str = "en") -> str:
    """An evidence function's lines in `lang`: one that takes `lang` writes each language itself; one that
    does not gives the same lines to both."""
    try:
        takes_lang = "lang" in inspect.signature(evidence).parameters
    except (TypeError, ValueError):  # a builtin or a callable without a readable signature
        takes_lang = False
    return evidence(results, lang=lang) if takes_lang else evidence(results)


def answer_tail(q, results: dict | None, lang: str = "en") -> str:
    """What follows the verdict: our model answer, then the measured numbers."""
    ma = (q.model_answer_zh or q.model_answer) if lang == "zh" else q.model_answer
    text = f"参考答案：{ma}" if lang == "zh" else f"Model answer: {ma}"
    ev = evidence_text(q.evidence, results, lang)
    return f"{text}\n{ev}" if ev else text


def option_feedback(q: Question, i: int, results: dict | None, lang: str = "en") -> str:
    """The feedback for option i (0-based): verdict, why, model answer, measured numbers."""
    o = q.options[i]
    if lang == "zh":
        verdict = "正确。" if i == q.correct else f"不对（{letter(i)}）。"
        why = o.why_zh or o.why
    else:
        verdict = "Correct." if i == q.correct else f"Not quite ({letter(i)})."
        why = o.why
    sep = "" if lang == "zh" else " "
    return f"{verdict}{sep}{why}\n{answer_tail(q, results, lang)}"


_MISSING = object()


def grade(q, answer, results=_MISSING, lang: str = "en") -> tuple[bool, str]:
    """Grade one answer: (correct, feedback). Never raises: an empty or unparseable answer is graded wrong
    with a hint (widgets and learners send them). Without `results`, the lab's recorded results are used."""
    if results is _MISSING:
        results = default_results(q)
    try:
        if answer is None or (isinstance(answer, str) and not unicodedata.normalize("NFKC", answer).strip()):
            raise (AnswerError("pick one option first", "请先选一个选项") if isinstance(q, Question) else
                   AnswerError("type a number first", "请先填一个数"))
        if isinstance(q, NumericQuestion):
            x = parse_number(answer, q.unit)
            return within(q, x), f"{numeric_verdict(q, x, lang)}\n{answer_tail(q, results, lang)}"
        i = parse_choice(q, answer)
    except ValueError as e:
        return False, (f"未评分：{getattr(e, 'zh', e)}。" if lang == "zh" else f"No answer graded: {e}.")
    return i == q.correct, option_feedback(q, i, results, lang)
