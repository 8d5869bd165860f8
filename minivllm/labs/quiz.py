"""Self-test questions: multiple-choice and numeric questions, their graders, and how a quiz is shown.

Why the grader is a plain function: it is the part worth testing (does the right answer pass, does every
wrong answer get its reason, does odd input get a hint instead of an exception), and it must not need
Jupyter. The front ends only call it. Feedback ends with our model answer *and the numbers the lab
measured* (the handbook's self-test gives no answers), because an answer convinces only next to a
measurement.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, NamedTuple


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
    `source` says where the question comes from ("handbook self-test 2", "handbook interview 1",
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

    def __post_init__(self) -> None:
        opts = tuple(o if isinstance(o, Option) else Option(*o) for o in self.options)
        object.__setattr__(self, "options", opts)
        if not 0 <= self.correct < len(opts):
            raise ValueError(f"{self.qid}: correct={self.correct} but there are {len(opts)} options")

    def labels(self) -> list[str]:
        return [f"{chr(65 + i)}. {o.text}" for i, o in enumerate(self.options)]


@dataclass(frozen=True)
class NumericQuestion:
    """A numeric estimate, right when within `rel_tol` (relative) of `answer`."""

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


def question_dict(q) -> dict:
    """What the catalog lists for a question (its correct option or numeric answer, no callables)."""
    d = {"id": q.qid, "source": q.source, "topic": q.topic, "prompt": q.prompt, "prompt_zh": q.prompt_zh}
    if isinstance(q, NumericQuestion):
        d.update(kind="numeric", answer=q.answer, rel_tol=q.rel_tol, unit=q.unit)
    else:
        d.update(kind="choice", correct=chr(65 + q.correct), options=[o.text for o in q.options])
    return d


def parse_choice(q: Question, answer: str | int) -> int:
    """Accept a letter ('b'), a 0-based index, or an option's full text (or its 'B. ...' label)."""
    if isinstance(answer, bool):
        raise ValueError(f"answer must be a letter A-{chr(64 + len(q.options))}, got {answer!r}")
    if isinstance(answer, int):
        if 0 <= answer < len(q.options):
            return answer
    elif isinstance(answer, str):
        a = answer.strip()
        if len(a) == 1 and a.isascii() and a.isalpha() and 0 <= ord(a.upper()) - 65 < len(q.options):
            return ord(a.upper()) - 65
        for i, (label, o) in enumerate(zip(q.labels(), q.options)):
            if a in (o.text, label):
                return i
    raise ValueError(f"answer must be a letter A-{chr(64 + len(q.options))} (or an option's text), "
                     f"got {answer!r}")


def grade(q: Question, answer: str | int | None, results: dict | None = None) -> tuple[bool, str]:
    """Grade one answer: (correct, feedback). Never raises: an empty or unparseable answer is graded
    wrong with a hint (widgets and learners send them)."""
    try:
        if answer is None or answer == "":
            raise ValueError("pick one option first")
        i = parse_choice(q, answer)
    except ValueError as e:
        return False, f"No answer graded: {e}."
    ok = i == q.correct
    verdict = "Correct." if ok else f"Not quite ({chr(65 + i)})."
    text = f"{verdict} {q.options[i].why}\nModel answer: {q.model_answer}"
    ev = q.evidence(results)
    return ok, f"{text}\n{ev}" if ev else text


def feedback_html(q: Question, answer: str | int | None, results: dict | None = None) -> str:
    ok, text = grade(q, answer, results)
    color = "#137333" if ok else "#b3261e"
    return f'<pre style="white-space: pre-wrap; color: {color}">{html.escape(text)}</pre>'


def quiz_widget(q: Question, results: dict | None = None):
    """Radio buttons + a Check button + feedback; the button calls `feedback_html`."""
    import ipywidgets as w

    choice = w.RadioButtons(options=q.labels(), value=None, layout=w.Layout(width="auto"))
    button = w.Button(description="Check", button_style="primary")
    out = w.HTML()
    button.on_click(lambda _b: setattr(out, "value", feedback_html(q, choice.value, results)))
    return w.VBox([w.HTML(f"<b>{html.escape(q.prompt)}</b>"), choice, button, out])


def show_quiz(q, results: dict | None = None) -> None:
    """Display a question: the static HTML + JS version (works with no kernel) and, in a live kernel, the
    widget. The one call a lab makes for a quiz."""
    from IPython.display import display

    display(quiz_widget(q, results))
