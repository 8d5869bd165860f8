"""Lab 08's views, its front ends: the mock interview as a self-contained HTML + JS page (no kernel: the book, nbconvert)
and as ipywidgets (a live kernel). Both call into lab08: the page embeds every option's feedback as computed by
lab08.grade_any, grades typed numbers with the static quiz's NUMERIC_JS (the twin of quiz.grade, units converted),
and its sampler is the JavaScript twin of lab08.mulberry32, so a seed draws the same questions in the page and in
Python.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping

from minivllm_labs.lab08 import BY_ID, ENTRIES, QUESTIONS, grade_any, mock_interview, score
from minivllm_labs.quiz import NumericQuestion
from minivllm_labs.quiz_html import NUMERIC_JS

MOCK_JS = r"""
(function () {
%(numeric)s
  var root = document.getElementById("%(id)s");
  var bank = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  var fixed = JSON.parse(root.querySelector("script.fixed").textContent);
  function mulberry32(a) {
    return function () {
      a |= 0; a = a + 0x6D2B79F5 | 0;
      var t = Math.imul(a ^ a >>> 15, 1 | a);
      t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
      return ((t ^ t >>> 14) >>> 0) / 4294967296;
    };
  }
  function draw(n, seed) {
    var ids = bank.map(function (q) { return q.id; }), rng = mulberry32(seed);
    for (var i = ids.length - 1; i > 0; i--) {
      var j = Math.floor(rng() * (i + 1)), t = ids[i]; ids[i] = ids[j]; ids[j] = t;
    }
    return ids.slice(0, n);
  }
  function byId(id) { return bank.filter(function (q) { return q.id === id; })[0]; }
  function esc(s) { var d = document.createElement("div"); d.textContent = s; return d.innerHTML; }
  var asked = [];
  function start() {
    var n = Math.max(1, Math.min(bank.length, parseInt(root.querySelector("input[name=n]").value, 10) || 8));
    var seed = parseInt(root.querySelector("input[name=seed]").value, 10) || 0;
    asked = fixed.length ? fixed : draw(n, seed);
    var out = asked.map(function (id, k) {
      var q = byId(id), body;
      if (q.kind === "numeric") {
        body = '<input type="text" name="' + id + '" size="16"> ' + esc(q.unit);
      } else {
        body = q.options.map(function (o, i) {
          return '<label style="display:block"><input type="radio" name="' + id + '" value="' + i + '"> ' +
            String.fromCharCode(65 + i) + ". " + esc(o[0]) + " <span style='color:#666'>" + esc(o[1]) + "</span></label>";
        }).join("");
      }
      return '<div class="q" style="margin:0.8em 0"><b>' + (k + 1) + ". " + esc(q.prompt) + "</b><br><i>" +
        esc(q.prompt_zh) + "</i> <small>[" + esc(q.topic) + ", " + esc(q.source) + "]</small>" + body +
        '<pre class="fb" style="white-space:pre-wrap"></pre></div>';
    }).join("");
    root.querySelector(".questions").innerHTML = out;
    root.querySelector(".result").textContent = "";
  }
  function scoreIt() {
    var right = 0, topics = {};
    asked.forEach(function (id) {
      var q = byId(id), ok = false, fb = "No answer graded.";
      if (q.kind === "numeric") {
        var g = mvGradeNumber(root.querySelector("input[name='" + id + "']").value, q.answer, q.rel_tol, q.unit);
        ok = g.ok;
        fb = g.en + (g.graded ? "\n" + q.tail : "");
      } else {
        var picked = root.querySelector("input[name='" + id + "']:checked");
        if (picked) { var i = parseInt(picked.value, 10); ok = i === q.correct; fb = q.feedback[i]; }
      }
      right += ok ? 1 : 0;
      topics[q.topic] = topics[q.topic] || [0, 0];
      topics[q.topic][0] += ok ? 1 : 0; topics[q.topic][1] += 1;
      var el = root.querySelector("input[name='" + id + "']").closest(".q").querySelector(".fb");
      el.textContent = fb; el.style.color = ok ? "#137333" : "#b3261e";
      var links = [];
      if (q.lab) { links.push('<a href="' + q.lab + '">the lab · 实验</a>'); }
      if (q.code.length) { links.push('<a href="' + q.code[0] + '">' + esc(q.code[1]) + "</a>"); }
      if (links.length) { el.insertAdjacentHTML("beforeend", "\n" + links.join(" · ")); }
    });
    var weak = Object.keys(topics).filter(function (t) { return topics[t][0] < topics[t][1]; });
    weak.sort(function (a, b) { return topics[a][0] / topics[a][1] - topics[b][0] / topics[b][1] || (a < b ? -1 : 1); });
    root.querySelector(".result").textContent = "score " + right + "/" + asked.length + "; weak topics: " +
      (weak.join(", ") || "none");
  }
  root.querySelector("button.start").addEventListener("click", start);
  root.querySelector("button.score").addEventListener("click", scoreIt);
  start();
})();
"""


def page_data(results: dict | None = None, questions=None) -> list[dict]:
    """Every question (of the bank, or `questions`) with its options and the Python grader's feedback for each
    option (numeric questions: the model answer and evidence the page appends)."""

    out = []
    for q in QUESTIONS if questions is None else questions:
        e = ENTRIES.get(q.qid)
        code = e.code.split("::") if e and e.code else []
        d = {"id": q.qid, "topic": q.topic, "source": q.source, "prompt": q.prompt, "prompt_zh": q.prompt_zh,
             "lab": e.lab.split("/")[-1] if e and e.lab else "",  # the page sits in labs/ (and the book's copy)
             "code": ["../" + code[0], code[-1]] if code else []}
        if isinstance(q, NumericQuestion):
            tail = "\n".join(x for x in (f"Model answer: {q.model_answer}", q.evidence(results)) if x)
            d.update(kind="numeric", answer=q.answer, rel_tol=q.rel_tol, unit=q.unit, tail=tail)
        else:
            d.update(kind="choice", correct=q.correct, options=[[o.text, o.text_zh] for o in q.options],
                     feedback=[grade_any(q, chr(65 + i), results)[1] for i in range(len(q.options))])
        out.append(d)
    return out


def mock_html(n: int = 8, seed: int = 0, results: dict | None = None, qids: list[str] | None = None,
              questions=None) -> str:
    """The mock interview as one self-contained block of HTML + JS (no network, no kernel). `qids` fixes the
    questions (the page then offers no new draw); `questions` (any Question / NumericQuestion, e.g. another
    lab's) replaces the bank and fixes those."""
    if questions is not None:
        qids = [q.qid for q in questions]
    cid = f"lab08-mock-{int(n)}-{int(seed)}" + (f"-{qids[0].replace('.', '-')}" if qids else "")
    data = json.dumps(page_data(results, questions), ensure_ascii=False).replace("</", "<\\/")
    controls = (f'<label>questions · 题数 <input name="n" type="number" min="1" value="{int(n)}" style="width:4em">'
                f'</label> <label>seed · 随机种子 <input name="seed" type="number" value="{int(seed)}" '
                f'style="width:5em"></label> <button class="start">New interview · 重新抽题</button>')
    return (f'<div id="{cid}" class="lab08-mock">{controls}<div class="questions"></div>'
            f'<button class="score">Score · 评分</button> <b class="result"></b>'
            f'<script type="application/json">{data}</script>'
            f'<script type="application/json" class="fixed">{json.dumps(list(qids or []))}</script></div>'
            f"<script>{MOCK_JS % {'id': cid, 'numeric': NUMERIC_JS}}</script>")


def show_mock(n: int = 8, seed: int = 0, results: dict | None = None, qids: list[str] | None = None) -> None:
    from IPython.display import HTML, display

    display(HTML(mock_html(n, seed, results, qids)))


def show_questions(questions, results: dict | None = None) -> None:
    """Any lab's questions (a sequence, or a lab's QUESTIONS by id) as one static quiz (HTML + JS, graded by
    the same Python feedback)."""
    from IPython.display import HTML, display

    if isinstance(questions, Mapping):
        questions = questions.values()

    display(HTML(mock_html(len(questions), 0, results, questions=list(questions))))


def score_values(qids: list[str], values: list) -> tuple[str, object]:
    """The widget's Score callback: widget values (a 'B. ...' label, a typed number or None) -> result text."""

    answers = dict(zip(qids, values))
    res = score(qids, answers)
    lines = [f"{i + 1}. {'right' if grade_any(BY_ID[q], answers[q])[0] else 'wrong'}: "
             f"{grade_any(BY_ID[q], answers[q])[1]}" for i, q in enumerate(qids)]
    return str(res) + "\n\n" + "\n\n".join(lines), res


def show_widget(widget) -> None:
    """Display a widget with a readable text fallback: a saved notebook or a static page without the widget's
    state shows this line instead of `VBox(children=...)`."""
    import os

    from IPython.display import display

    from minivllm_labs.quiz_show import STATIC_ENV

    note = ("(the live widget version of this quiz appears here when the notebook runs in a kernel; "
            "the static quiz above works without one)")
    if os.environ.get(STATIC_ENV):  # the committed notebook: no widget view whose model would be gone
        display({"text/plain": note, "text/html": f'<p class="mv-widget-note"><span class="lang-en">{note}</span>'
                 '<span class="lang-zh">（在 kernel 里运行时，这里会出现可交互的 widget 版本；上面的静态测验无需 '
                 'kernel）</span></p>'}, raw=True)
        return
    bundle = widget._repr_mimebundle_() if hasattr(widget, "_repr_mimebundle_") else {}
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    bundle = dict(bundle or {})
    bundle["text/plain"] = note
    display(bundle, raw=True)


def mock_widget(n: int = 8, seed: int = 0):
    """Live version: radio buttons / text boxes, a Score button, the result with every question's feedback."""
    import ipywidgets as w


    qids = mock_interview(n, seed)
    inputs, rows = [], []
    for i, qid in enumerate(qids):
        q = BY_ID[qid]
        box = (w.Text(placeholder=q.unit) if isinstance(q, NumericQuestion) else
               w.RadioButtons(options=q.labels(), value=None, layout=w.Layout(width="auto")))
        inputs.append(box)
        rows += [w.HTML(f"<b>{i + 1}. {html.escape(q.prompt)}</b><br><i>{html.escape(q.prompt_zh)}</i>"), box]
    button, out = w.Button(description="Score", button_style="primary"), w.HTML()

    def on_click(_b):
        text, _ = score_values(qids, [b.value or None for b in inputs])
        out.value = f'<pre style="white-space: pre-wrap">{html.escape(text)}</pre>'

    button.on_click(on_click)
    return w.VBox(rows + [button, out])
