"""Lab 08, "Interview prep": a graded bank of questions, each answered by a measurement from labs 01-07, and a
mock-interview mode.

The bank is data (data/lab08.yaml, read by quiz_data.py, which shuffles each question's options with a seed
taken from its id, so the letter carries no hint and the order is the same on every machine); this module
adds each question's evidence (the numbers it cites, read when shown), grades any answer without raising,
draws a seeded mock interview, scores it and names the weak topics. The same sampler and grader run in the
static page (lab08_views.py: JavaScript built from the Python grader's feedback) and live in a kernel
(ipywidgets).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from minivllm_labs import quiz_numbers
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab_info import LabInfo, resolve_key
from minivllm_labs.quiz import NumericQuestion, Question, grade
from minivllm_labs.quiz_data import entries, question_from_data


@dataclass(frozen=True)
class Entry:
    """One question of the bank as data/lab08.yaml holds it, right option first (the notebook's exercise
    writes one by hand). `cites` are (results file, key, label) triples; `lab` and `code` link to where it is
    measured and implemented."""

    qid: str
    topic: str
    source: str
    prompt: str
    prompt_zh: str
    model_answer: str
    model_answer_zh: str
    right: tuple = ()  # (text, why, text_zh, why_zh)
    wrong: tuple = ()  # of such tuples
    answer: float | None = None  # numeric questions: the value, the relative tolerance and the unit
    rel_tol: float = 0.1
    unit: str = ""
    cites: tuple = ()  # (file, key, label)
    lab: str = ""  # "labs/06_paged_kv_and_batching.ipynb"
    code: str = ""  # "minivllm/engine/scheduler.py::Scheduler.schedule"

    @classmethod
    def from_data(cls, d: dict) -> Entry:
        opt = lambda o: (o["text"], o["why"], o.get("text_zh", ""), o.get("why_zh", ""))  # noqa: E731
        extra = ({"answer": d["answer"], "rel_tol": d["rel_tol"], "unit": d.get("unit", "")} if "answer" in d
                 else {"right": opt(d["right"]), "wrong": tuple(opt(w) for w in d["wrong"])})
        return cls(d["id"], d["topic"], d["source"], d["prompt"], d["prompt_zh"], d["model_answer"],
                   d["model_answer_zh"], cites=tuple((c["file"], c["key"], c["label"]) for c in d.get("cites", ())),
                   lab=d.get("lab", ""), code=d.get("code", ""), **extra)

    def as_data(self) -> dict:
        """The entry as the data file writes it (what quiz_data.question_from_data reads)."""
        opt = lambda o: dict(zip(("text", "why", "text_zh", "why_zh"), o))  # noqa: E731
        d: dict[str, Any] = {"id": self.qid, "topic": self.topic, "source": self.source, "prompt": self.prompt,
                             "prompt_zh": self.prompt_zh, "model_answer": self.model_answer,
                             "model_answer_zh": self.model_answer_zh}
        if self.answer is not None:
            d.update(answer=self.answer, rel_tol=self.rel_tol, unit=self.unit)
        else:
            d.update(right=opt(self.right), wrong=[opt(w) for w in self.wrong])
        if self.cites:  # the catalog lists them as the question's evidence
            d["cites"] = [{"file": f, "key": k, "label": label} for f, k, label in self.cites]
        return d


BANK: tuple[Entry, ...] = tuple(Entry.from_data(d) for d in entries("lab08").values())
TOPICS = ("cuda-graphs", "torch-compile", "custom-ops", "paged-attention", "continuous-batching", "chunked-prefill",
          "prefix-caching", "startup-caches", "debugging")


# ---- evidence: numbers read from the results files when shown ---------------------------------------
def cite_lines(cites, root=REPO_ROOT) -> list[str]:
    out = []
    for path, key, label in cites:
        p = root / path
        if not p.exists():
            out.append(f"{label}: not recorded yet ({path})")
            continue
        try:
            value = resolve_key(json.loads(p.read_text()), key)
        except KeyError:
            value = "missing key"
        if isinstance(value, float):
            value = float(f"{value:.4g}")
        out.append(f"{label}: {value} ({path}:{key})")
    return out


def _evidence(e: Entry):
    def evidence(_results: dict | None = None) -> str:
        lines = cite_lines(e.cites)
        links = [f"measured in {e.lab}" if e.lab else "", f"engine code: {e.code}" if e.code else ""]
        text = "\n".join(["Measured on the H200:", *lines] if lines else [])
        return "\n".join(x for x in (text, "; ".join(x for x in links if x)) if x)

    return evidence


# ---- the bank as Questions ---------------------------------------------------------------------------
def build(e: Entry) -> Question | NumericQuestion:
    """The entry as a quiz question, options shuffled with random.Random(qid) (quiz_data does it)."""
    return question_from_data(e.as_data(), _evidence(e))


QUESTIONS = tuple(build(e) for e in BANK)
BY_ID = {q.qid: q for q in QUESTIONS}
ENTRIES = {e.qid: e for e in BANK}


# ---- grading: any answer, never an exception ---------------------------------------------------------
_PREFIX = re.compile(r"^(选|選|answer|ans|option)\s*[:：]?\s*", re.IGNORECASE)


def normalize_choice(answer: Any) -> Any:
    """'Ｂ', ' b) ', 'B.', '选B', 'answer: b' -> 'B'; anything else is returned as it came (or NFKC-folded)."""
    if not isinstance(answer, str):
        return answer
    a = _PREFIX.sub("", unicodedata.normalize("NFKC", answer).strip())
    a = a.strip().rstrip(".)、,:：)").lstrip("(").strip()
    return a.upper() if len(a) == 1 and a.isascii() and a.isalpha() else a


def parse_number(answer: Any, unit: str = "") -> float | None:
    """The number an answer means, converted to `unit` when it names one ('0.28 ms', '284 us' for ms, '114,688 B',
    '1.1e5', '３２７６８'); None when it holds none (quiz_numbers.parse_number is the one reader)."""
    try:
        return quiz_numbers.parse_number(answer, unit)
    except ValueError:
        return None


def numeric_ok(q: NumericQuestion, value: float) -> bool:
    return abs(value - q.answer) <= q.rel_tol * abs(q.answer)


def grade_any(q, answer: Any, results: dict | None = None) -> tuple[bool, str]:
    """(correct, feedback) for a choice or a numeric question; odd input is graded wrong with a hint."""
    try:
        if isinstance(q, NumericQuestion):
            return grade(q, answer, results)  # quiz.grade: units converted, like the page's JavaScript
        if isinstance(answer, str):
            raw = unicodedata.normalize("NFKC", answer).strip().lower()
            for i, (label, o) in enumerate(zip(q.labels(), q.options)):
                if raw and raw in (label.lower(), o.text.lower(), o.text_zh.lower()):
                    return grade(q, chr(65 + i), results)
        return grade(q, normalize_choice(answer), results)
    except Exception as e:  # noqa: BLE001 - the grader promises never to raise to a learner
        return False, f"No answer graded: {type(e).__name__}."


# ---- mock interview ---------------------------------------------------------------------------------
def mulberry32(seed: int) -> Iterator[float]:
    """A tiny PRNG with an exact JavaScript twin (in MOCK_JS), so the page and Python draw the same questions."""
    a = seed & 0xFFFFFFFF
    while True:
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = a
        t = ((t ^ (t >> 15)) * (t | 1)) & 0xFFFFFFFF
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        yield ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


def mock_interview(n: int, seed: int = 0) -> list[str]:
    """n distinct question ids, a seeded Fisher-Yates shuffle of the bank."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(QUESTIONS):
        raise ValueError(f"n must be an int in [1, {len(QUESTIONS)}], got {n!r}")
    ids = [q.qid for q in QUESTIONS]
    rng = mulberry32(int(seed))
    for i in range(len(ids) - 1, 0, -1):
        j = int(next(rng) * (i + 1))
        ids[i], ids[j] = ids[j], ids[i]
    return ids[:n]


@dataclass
class MockResult:
    correct: int
    total: int
    by_topic: dict[str, list[int]] = field(default_factory=dict)  # topic -> [right, asked]
    weak_topics: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        weak = ", ".join(self.weak_topics) or "none"
        return f"score {self.correct}/{self.total}; weak topics: {weak}"


def score(qids: list[str], answers: dict[str, Any]) -> MockResult:
    """Grade every asked question (unanswered = wrong); weak topics are those with any miss, worst first."""
    if unknown := [qid for qid in qids if qid not in BY_ID]:
        raise ValueError(f"unknown question id(s) {unknown}: the bank's ids are {QUESTIONS[0].qid} ... "
                         f"{QUESTIONS[-1].qid} (lab08.BY_ID)")
    by: dict[str, list[int]] = {}
    right = 0
    for qid in qids:
        q = BY_ID[qid]
        ok, _ = grade_any(q, answers.get(qid))
        right += ok
        t = by.setdefault(q.topic, [0, 0])
        t[0] += ok
        t[1] += 1
    weak = sorted((t for t, (r, n) in by.items() if r < n), key=lambda t: (by[t][0] / by[t][1], t))
    return MockResult(right, len(qids), by, weak)


def bank_table() -> str:
    topics = Counter(q.topic for q in QUESTIONS)
    kinds = Counter("numeric" if isinstance(q, NumericQuestion) else "choice" for q in QUESTIONS)
    letters = Counter(chr(65 + q.correct) for q in QUESTIONS if isinstance(q, Question))
    return "\n".join([f"{len(QUESTIONS)} questions: {kinds['choice']} multiple choice, {kinds['numeric']} numeric",
                      "by topic: " + ", ".join(f"{t} {topics[t]}" for t in TOPICS),
                      "right answers by letter: " + ", ".join(f"{k} {letters[k]}" for k in sorted(letters)),
                      "handbook interview questions: " + ", ".join(q.qid for q in QUESTIONS
                                                                   if q.source.startswith("handbook"))])


def answer_key() -> str:
    """Each question's right option (or numeric answer) and where it is measured."""
    out = []
    for q in QUESTIONS:
        a = f"{q.answer:g} {q.unit}" if isinstance(q, NumericQuestion) else chr(65 + q.correct)
        out.append(f"{q.qid:<10} {a:<14} {q.topic:<20} {ENTRIES[q.qid].lab}")
    return "\n".join(out)


def run_all(model: str, quick: bool = False) -> dict:
    """Lab 08 measures nothing itself: it records the numbers its feedback cites, as read now."""
    return {"questions": len(QUESTIONS),
            "cited": {q.qid: cite_lines(ENTRIES[q.qid].cites) for q in QUESTIONS if ENTRIES[q.qid].cites}}


LAB_INFO = LabInfo(
    lab="lab08", notebook="labs/08_interview_prep.ipynb", title="Interview prep", title_zh="面试准备",
    sections=("§5 interview questions", "all labs"), questions=QUESTIONS, claims=(),
    code=tuple(sorted({e.code.split("::")[0] for e in BANK if e.code})))
