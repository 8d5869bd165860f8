"""Showing a question: the one call a lab makes for a quiz (show_quiz), and the live ipywidgets quiz.

Why apart from quiz.py and quiz_html.py: those two are the question types with their grader and the static
HTML rendering, and both are plain functions of a question; this module is the notebook's front end that picks
between them and IPython's display, so the grader never depends on how it is shown.
"""

from __future__ import annotations

import html
import os

from minivllm_labs.quiz import _MISSING, NumericQuestion, default_results, grade
from minivllm_labs.quiz_html import quiz_html

#: Set (to anything) by `minivllm_labs.build` in the kernel that writes the committed notebooks: quizzes are
#: then stored as static HTML only, since no widget model survives the kernel that made it.
STATIC_ENV = "MINIVLLM_LAB_STATIC"


def feedback_html(q, answer, results=_MISSING) -> str:
    ok, text = grade(q, answer, results)
    color = "#137333" if ok else "#b3261e"
    return f'<pre style="white-space: pre-wrap; color: {color}">{html.escape(text)}</pre>'


def quiz_widget(q, results=_MISSING):
    """The live quiz: radio buttons (or a text box for a number) + a Check button + feedback."""
    import ipywidgets as w

    if results is _MISSING:
        results = default_results(q)
    if isinstance(q, NumericQuestion):
        choice = w.Text(placeholder=f"a number ({q.unit})" if q.unit else "a number")
    else:
        choice = w.RadioButtons(options=q.labels(), value=None, layout=w.Layout(width="auto"))
    button = w.Button(description="Check", button_style="primary")
    out = w.HTML()
    def check(_b) -> None:
        out.value = feedback_html(q, choice.value, results)
        if choice.value not in (None, ""):  # the learner's progress file (progress.py), kept across restarts
            from minivllm_labs.progress_file import record_answer

            try:
                record_answer(q, grade(q, choice.value, results)[0])
            except (OSError, ValueError) as e:
                out.value += f"<small>(progress not saved: {html.escape(str(e))})</small>"

    button.on_click(check)
    zh = f'<br><span class="lang-zh" lang="zh">{html.escape(q.prompt_zh)}</span>' if q.prompt_zh else ""
    return w.VBox([w.HTML(f"<b>{html.escape(q.prompt)}</b>{zh}"), choice, button, out])


def quiz_text(q) -> str:
    """A plain-text rendering (the text/plain of a quiz output: what a terminal or a text-only viewer shows)."""
    lines = [f"Quiz {q.qid}: {q.prompt}"]
    if isinstance(q, NumericQuestion):
        lines.append(f"(a number{', in ' + q.unit if q.unit else ''})")
    else:
        lines += [f"  {label}" for label in q.labels()]
    lines.append("Grade an answer with minivllm_labs.grade(question, answer).")
    return "\n".join(lines)


def show_quiz(q, results=_MISSING) -> None:
    """Display a question, the one call a lab makes for a quiz.

    One output whose text/html is the static quiz (quiz_html.py: works in nbconvert HTML, the book, and a
    JupyterLab that opened the notebook without running it: JupyterLab never renders a widget view for
    untrusted output and picks the safe text/html instead). In a live kernel the same output also carries the
    ipywidgets view, which a live frontend prefers. The committed notebooks are built with STATIC_ENV set,
    so their stored quizzes hold no widget view whose model would be gone."""
    from IPython.display import display

    if results is _MISSING:
        results = default_results(q)
    bundle = {"text/plain": quiz_text(q), "text/html": quiz_html(q, results)}
    if not os.environ.get(STATIC_ENV):
        widget = quiz_widget(q, results)
        bundle.update({k: v for k, v in widget._repr_mimebundle_().items() if k != "text/plain"})
    display(bundle, raw=True)
