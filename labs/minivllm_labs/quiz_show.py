"""Showing a question: the one call a lab makes for a quiz (show_quiz), and the live ipywidgets quiz.

Why apart from quiz.py and quiz_html.py: those two are the question types with their grader and the static
HTML rendering, and both are plain functions of a question; this module is the notebook's front end that picks
between them and IPython's display, so the grader never depends on how it is shown.
"""

from __future__ import annotations

import html

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

    One output: text/html is the quiz (quiz_html.py), text/plain its text. No ipywidgets view, live or not:
    a saved notebook keeps only what the page can draw without the kernel that ran it, and the HTML quiz grades
    clicks by itself and records answers through whatever kernel the notebook has now (kernel_js.py), so it
    works before a run, after a run and after a reopen. `quiz_widget` is the ipywidgets version, for a learner
    who wants one in their own cell."""
    from IPython.display import display

    if results is _MISSING:
        results = default_results(q)
    display({"text/plain": quiz_text(q), "text/html": quiz_html(q, results)}, raw=True)
