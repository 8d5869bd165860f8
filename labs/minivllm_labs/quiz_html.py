"""The static quiz: self-contained HTML (+ a little JavaScript) that works with no kernel.

Why static: a notebook is read far more often than it is run (nbconvert HTML, the Jupyter Book, a JupyterLab
that opened it without running), and a widget needs a live kernel. Every option's feedback is computed here
by the same Python grader (quiz.option_feedback), in English and Chinese (spans of class `lang-en` /
`lang-zh`, which the book's language switch shows one at a time).

It degrades in steps. Each option is a `<details>` element: clicking it opens that option's feedback with no
JavaScript at all (so it works even where scripts are stripped, as in an untrusted JupyterLab output). A wrong
option's feedback is a hint (why that option is tempting, and to try again), not the answer: the answer sits
in the right option and in a last "Show the answer" fold. The script adds radio behaviour (opening one option
closes the others), records the answer in the learner's progress file through the notebook's kernel when
there is one (kernel_js.py), and, for numeric questions, grades the number typed into the box with the same
parsing, unit conversion and tolerance rule as quiz_numbers.parse_number / quiz.within (see NUMERIC_JS;
tests/labs/test_labs.py runs it with node against the Python grader).

This is also the live quiz: no ipywidgets view is stored, so a saved notebook reopened later shows the same
working quiz (a widget view would read "model not found" once its kernel is gone).
"""

from __future__ import annotations

import html
import json
import re

from minivllm_labs.kernel_js import KERNEL_JS, notebook_of
from minivllm_labs.quiz import (
    NumericQuestion,
    Question,
    answer_tail,
    letter,
    numeric_verdict,
    option_feedback,
)
from minivllm_labs.quiz_numbers import NUMBER_JS

_RIGHT, _WRONG = "#137333", "#b3261e"
_BOX = "border:1px solid #d0d7de;border-radius:6px;padding:10px 14px;margin:8px 0;max-width:52em"
_FEEDBACK = "white-space:pre-wrap;margin:6px 0 4px 0;padding:4px 10px;font-size:92%;border-left:3px solid {}"


def _dom_id(q) -> str:
    """A stable element id (stored outputs must not change between builds)."""
    return "mv-quiz-" + re.sub(r"[^A-Za-z0-9_-]", "-", q.qid)


#: Between an English span and its Chinese twin: shown with both languages, hidden with one (opening.py's switch).
SEP = '<span class="mv-sep"> · </span>'


def _bi(en: str, zh: str, tag: str = "span") -> str:
    """An English span, and its Chinese one when there is one, with a separator between them."""
    out = f'<{tag} class="lang-en">{html.escape(en)}</{tag}>'
    if zh:
        out += f'{SEP}<{tag} class="lang-zh" lang="zh">{html.escape(zh)}</{tag}>'
    return out


_MEASURED = [(re.compile(r"\bMeasured on (?:the )?([^:\n]+?)(:|\n|$)", re.M),
              lambda m: f"在 {m.group(1)} 上测得{'：' if m.group(2) == ':' else m.group(2)}"),
             (re.compile(r"\bMeasured here\b"), "在本机测得"), (re.compile(r"\bnot recorded yet\b"), "尚未录制")]


def zh_measured(text: str) -> str:
    """The evidence lines' English lead-ins ("Measured on NVIDIA H200:") in the Chinese feedback, in Chinese;
    the numbers and keys that follow are shared by both languages."""
    for pattern, repl in _MEASURED:
        text = pattern.sub(repl, text)
    return text


def _feedback(en: str, zh: str, color: str) -> str:
    zh = zh_measured(zh)
    style = _FEEDBACK.format(color)
    return (f'<div class="mv-quiz-feedback lang-en" style="{style}">{html.escape(en)}</div>'
            f'<div class="mv-quiz-feedback lang-zh" lang="zh" style="{style}">{html.escape(zh)}</div>')


_CHOICE_JS = """<script>%s
(function () {
  var s = document.currentScript, root = (s && s.closest(".mv-quiz")) || document.getElementById(%s);
  if (!root) return;
  root.setAttribute("data-live", "1");  // the script runs: the page trusts this output
  var opts = root.querySelectorAll("details.mv-quiz-option");
  opts.forEach(function (d) {
    d.addEventListener("toggle", function () {
      if (!d.open) return;
      opts.forEach(function (o) { if (o !== d) o.open = false; });
      mvRecord(root, d.getAttribute("data-ok") === "1");
    });
  });
})();</script>"""

#: The answer goes to the learner's progress file (progress_file.record) through the notebook's kernel, if any.
_RECORD_JS = KERNEL_JS + r"""
function mvRecord(root, ok) {
  var nb = root.getAttribute("data-notebook");
  if (!nb) return;
  var code = "from minivllm_labs.progress_file import record as _mv_record\n_mv_record(" +
    JSON.stringify(root.getAttribute("data-qid")) + ", " + JSON.stringify(root.getAttribute("data-topic")) +
    ", " + (ok ? "True" : "False") + ")";
  window.mvKernel.run(nb, code).catch(function () {});
}"""


def _retry(i: int, why: str, why_zh: str, color: str) -> str:
    """A wrong option's feedback: what the option gets wrong, and to try again (the answer is not shown)."""
    return _feedback(f"Not quite ({letter(i)}). {why}\nTry another option, or open \"Show the answer\".",
                     f"不对（{letter(i)}）。{why_zh}\n再选一个，或展开“显示答案”。", color)


def _data(q) -> str:
    """The quiz's attributes for recording an answer: question id, topic, and the notebook of its lab."""
    lab = q.qid.split(".")[0]
    return (f'data-qid="{html.escape(q.qid)}" data-topic="{html.escape(q.topic or "general")}" '
            f'data-notebook="{html.escape(notebook_of(lab))}"')


def choice_html(q: Question, results: dict | None) -> str:
    rid = _dom_id(q)
    parts = [f'<div class="mv-quiz" id="{rid}" {_data(q)} style="{_BOX}">',
             f'<p style="margin:0 0 6px 0"><b>{_bi(q.prompt, q.prompt_zh)}</b></p>',
             '<p style="margin:0 0 6px 0;font-size:90%;color:#57606a">'
             + _bi("Click an option to see how it is graded; a wrong one gives a hint, try again.",
                   "点击一个选项查看评分；选错会给提示，可以再试。") + "</p>"]
    right = _feedback(option_feedback(q, q.correct, results, "en"), option_feedback(q, q.correct, results, "zh"),
                      _RIGHT)
    for i, o in enumerate(q.options):
        ok = i == q.correct
        fb = right if ok else _retry(i, o.why, o.why_zh or o.why, _WRONG)
        parts.append(f'<details class="mv-quiz-option" data-option="{letter(i)}" data-ok="{int(ok)}" '
                     f'style="margin:3px 0"><summary style="cursor:pointer"><b>{letter(i)}.</b> '
                     f'{_bi(o.text, o.text_zh)}</summary>{fb}</details>')
    parts.append(f'<details class="mv-quiz-answer" style="margin-top:6px"><summary style="cursor:pointer">'
                 f'{_bi("Show the answer", "显示答案")}</summary>'
                 + _feedback(f"{letter(q.correct)}. " + option_feedback(q, q.correct, results, "en"),
                             f"{letter(q.correct)}. " + option_feedback(q, q.correct, results, "zh"), _RIGHT)
                 + "</details>")
    parts.append(_CHOICE_JS % (_RECORD_JS, json.dumps(rid)))
    parts.append("</div>")
    return "\n".join(parts)


#: Grades a typed number exactly like quiz.grade does for a NumericQuestion: quiz_numbers.parse_number (the unit
#: read and converted to the question's), quiz.within and quiz.numeric_verdict.
NUMERIC_JS = NUMBER_JS + r"""
function mvNum(x) {
  return String(Number(Number(x).toPrecision(4)));
}
function mvGradeNumber(raw, answer, relTol, unit) {
  if (raw === null || raw === undefined || !String(raw).normalize("NFKC").trim())
    return {ok: false, graded: false, en: "No answer graded: type a number first.",
      zh: "未评分：请先填一个数。"};
  var p = mvParseNumber(raw, unit), u = unit ? " " + unit : "", pct = mvNum(relTol * 100);
  if (p.error !== undefined) return {ok: false, graded: false, en: "No answer graded: " + p.error + ".",
    zh: "未评分：" + p.error_zh + "。"};
  var x = p.x;
  if (Math.abs(x - answer) <= relTol * Math.abs(answer)) return {ok: true, graded: true,
    en: "Correct: " + mvNum(x) + " is within " + pct + "% of " + mvNum(answer) + u + ".",
    zh: "正确：" + mvNum(x) + " 与 " + mvNum(answer) + u + " 相差在 " + pct + "% 以内。"};
  return {ok: false, graded: true,
    en: "Not quite: " + mvNum(x) + "; the answer is " + mvNum(answer) + u + " (within " + pct + "% counts).",
    zh: "不对：" + mvNum(x) + "；答案是 " + mvNum(answer) + u + "（误差 " + pct + "% 以内算对）。"};
}"""

_NUMERIC_WIRE = """<script>%s
(function () {
%s
  var s = document.currentScript, root = (s && s.closest(".mv-quiz")) || document.getElementById(%s);
  if (!root) return;
  root.setAttribute("data-live", "1");  // the script runs: the page trusts this output
  var box = root.querySelector("input"), out = root.querySelector(".mv-quiz-result");
  var tails = root.querySelectorAll(".mv-quiz-tail");
  function check() {
    var answer = %s, r = mvGradeNumber(box.value, answer, %s, %s), color = r.ok ? "%s" : "%s";
    if (r.graded && !r.ok) {  // a hint, not the answer: the learner tries again or opens "Show the answer"
      var x = mvParseNumber(box.value, %s).x, hi = x > answer, n = mvNum(x);
      r.en = "Not quite: " + n + " is too " + (hi ? "high" : "low") + ". Try again, or open \\"Show the answer\\".";
      r.zh = "不对：" + n + (hi ? " 偏大" : " 偏小") + "。再试一次，或展开“显示答案”。";
    }
    if (r.graded) mvRecord(root, r.ok);
    out.innerHTML = "";
    [["lang-en", r.en, 0], ["lang-zh", r.zh, 1]].forEach(function (p) {
      var d = document.createElement("div");
      d.className = "mv-quiz-feedback " + p[0];
      d.style.cssText = "%s" + color;
      d.textContent = p[1] + (r.ok ? "\\n" + tails[p[2]].textContent : "");
      out.appendChild(d);
    });
  }
  root.querySelector("button").addEventListener("click", check);
  box.addEventListener("keydown", function (e) { if (e.key === "Enter") check(); });
})();</script>"""


def numeric_html(q: NumericQuestion, results: dict | None) -> str:
    rid = _dom_id(q)
    tail_en, tail_zh = answer_tail(q, results, "en"), answer_tail(q, results, "zh")
    reveal = _feedback(f"{numeric_verdict(q, q.answer, 'en')}\n{tail_en}",
                       f"{numeric_verdict(q, q.answer, 'zh')}\n{tail_zh}", _RIGHT)
    unit = html.escape(q.unit)
    return "\n".join([
        f'<div class="mv-quiz mv-quiz-numeric" id="{rid}" {_data(q)} style="{_BOX}">',
        f'<p style="margin:0 0 6px 0"><b>{_bi(q.prompt, q.prompt_zh)}</b></p>',
        f'<p style="margin:0"><input type="text" aria-label="your answer" size="12"> {unit} '
        f'<button type="button">Check · 检查</button></p>',
        '<div class="mv-quiz-result"></div>',
        f'<pre class="mv-quiz-tail" hidden>{html.escape(tail_en)}</pre>'
        f'<pre class="mv-quiz-tail" hidden>{html.escape(tail_zh)}</pre>',
        f'<details style="margin-top:6px"><summary style="cursor:pointer">'
        f'{_bi("Show the answer", "显示答案")}</summary>{reveal}</details>',
        _NUMERIC_WIRE % (_RECORD_JS, NUMERIC_JS, json.dumps(rid), json.dumps(q.answer), json.dumps(q.rel_tol),
                         json.dumps(q.unit), _RIGHT, _WRONG, json.dumps(q.unit), _FEEDBACK.format("")),
        "</div>"])


def quiz_html(q, results: dict | None) -> str:
    """The static quiz for a Question or a NumericQuestion, with every feedback computed now."""
    if isinstance(q, NumericQuestion):
        return numeric_html(q, results)
    if isinstance(q, Question):
        return choice_html(q, results)
    raise TypeError(f"expected a Question or NumericQuestion, got {type(q).__name__}")
