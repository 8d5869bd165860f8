"""Self-test questions: a multiple-choice question, its grader, and a small ipywidgets front end.

Why the grader is a plain function: it is the part worth testing (does the right answer pass, does every
wrong answer get a reason), and it must not need Jupyter. The widget only calls it. The feedback always
ends with the handbook's model answer *and the numbers the lab measured*, because a self-test answer is
only convincing next to a measurement.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Question:
    """`options` are (text, why) pairs; `why` explains that option (why it is right, or what it misses).
    `evidence(results)` turns a lab's measured results into the lines that back the model answer."""

    qid: str
    prompt: str
    options: tuple[tuple[str, str], ...]
    correct: int
    model_answer: str
    evidence: Callable[[dict | None], str]

    def labels(self) -> list[str]:
        return [f"{chr(65 + i)}. {text}" for i, (text, _) in enumerate(self.options)]


def parse_choice(q: Question, answer: str | int) -> int:
    """Accept a letter ('b'), a 0-based index, or an option's full text (or its 'B. ...' label)."""
    if isinstance(answer, bool):
        raise ValueError(f"answer must be a letter A-{chr(64 + len(q.options))}, got {answer!r}")
    if isinstance(answer, int):
        if 0 <= answer < len(q.options):
            return answer
    elif isinstance(answer, str):
        a = answer.strip()
        if len(a) == 1 and a.isalpha() and 0 <= ord(a.upper()) - 65 < len(q.options):
            return ord(a.upper()) - 65
        for i, (label, (text, _)) in enumerate(zip(q.labels(), q.options)):
            if a in (text, label):
                return i
    raise ValueError(f"answer must be a letter A-{chr(64 + len(q.options))} (or an option's text), "
                     f"got {answer!r}")


def grade(q: Question, answer: str | int | None, results: dict | None = None) -> tuple[bool, str]:
    """Grade one answer: (correct, feedback). Feedback = verdict + why + model answer + measured evidence.

    An empty or unparseable answer is graded wrong with a hint, never an exception (widgets send them)."""
    try:
        if answer is None or answer == "":
            raise ValueError("pick one option first")
        i = parse_choice(q, answer)
    except ValueError as e:
        return False, f"No answer graded: {e}."
    ok = i == q.correct
    verdict = "Correct." if ok else f"Not quite ({chr(65 + i)})."
    text = f"{verdict} {q.options[i][1]}\nModel answer: {q.model_answer}"
    ev = q.evidence(results)
    return ok, f"{text}\n{ev}" if ev else text


def feedback_html(q: Question, answer: str | int | None, results: dict | None = None) -> str:
    """The quiz widget's callback: grade and format as HTML (a plain function, unit-tested)."""
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
