"""Lab 08's views, its front ends: the mock interview as a self-contained HTML + JS page (no kernel: the book,
nbconvert) and as ipywidgets (a live kernel). Both call into lab08: the page embeds every option's feedback
as computed by lab08.grade_any in English and Chinese, grades typed numbers with the static quiz's NUMERIC_JS
(the twin of quiz.grade: quiz_numbers reads the number and converts its unit), and its sampler is the twin of
lab08.mock_interview, so a seed draws the same questions in the page and in Python.

Both languages are in the page, each in a span of class `lang-en` / `lang-zh`, which the book shows one at a
time. The questions and options are also written as plain HTML (and text/plain), so a viewer that runs no
JavaScript (GitHub, an untrusted notebook) still shows the quiz.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping

from minivllm_labs.lab08 import (
    BY_ID,
    ENTRIES,
    QUESTIONS,
    TOPIC_INFO,
    answer_tail_both,
    grade_any,
    mock_interview,
    score,
)
from minivllm_labs.quiz import NumericQuestion
from minivllm_labs.quiz_html import NUMERIC_JS

MOCK_JS = r"""
(function () {
  var s = document.currentScript, prev = s && s.previousElementSibling;
  var root = (prev && prev.id === "%(id)s") ? prev : document.getElementById("%(id)s");
  var bank = JSON.parse(root.querySelector("script.bank").textContent);
  var fixed = JSON.parse(root.querySelector("script.fixed").textContent);
  var topics = JSON.parse(root.querySelector("script.topics").textContent);
%(numeric)s
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
    var seen = {}, rank = ids.map(function (id) {
      var tp = byId(id).topic; seen[tp] = (seen[tp] || 0) + 1; return seen[tp] - 1;
    });
    var order = ids.map(function (_, i) { return i; });
    order.sort(function (a, b) { return rank[a] - rank[b] || a - b; });
    return order.slice(0, n).map(function (i) { return ids[i]; });
  }
  function byId(id) { return bank.filter(function (q) { return q.id === id; })[0]; }
  function esc(s) { var d = document.createElement("div"); d.textContent = s; return d.innerHTML; }
  function both(en, zh) {
    if (!zh || zh === en) return esc(en);
    return '<span class="lang-en">' + esc(en) + '</span><span class="mv-sep"> · </span><span class="lang-zh" lang="zh">' + esc(zh) + "</span>";
  }
  function link(path) {  // a notebook next to this one, or its page in the book
    return /\.html?$/.test(location.pathname) ? path.replace(/\.ipynb$/, ".html") : path;
  }
  var asked = fixed.length ? fixed : [];
  function render() {
    root.querySelector(".questions").innerHTML = asked.map(function (id, k) {
      var q = byId(id), body;
      if (q.kind === "numeric") {
        body = '<input type="text" name="' + id + '" size="16"> ' + esc(q.unit);
      } else {
        body = q.options.map(function (o, i) {
          return '<label style="display:block"><input type="radio" name="' + id + '" value="' + i + '"> ' +
            String.fromCharCode(65 + i) + ". " + both(o[0], o[1]) + "</label>";
        }).join("");
      }
      return '<div class="q" data-id="' + id + '" style="margin:0.8em 0"><b>' + (k + 1) + ". " +
        both(q.prompt, q.prompt_zh) + "</b> <small>[" + both(topics[q.topic][0], topics[q.topic][1]) + "]</small>" +
        body + '<pre class="fb" style="white-space:pre-wrap"></pre></div>';
    }).join("");
    root.querySelector(".result").innerHTML = "";
  }
  function start() {
    var n = Math.max(1, Math.min(bank.length, parseInt(root.querySelector("input[name=n]").value, 10) || 8));
    var seed = parseInt(root.querySelector("input[name=seed]").value, 10) || 0;
    asked = fixed.length ? fixed : draw(n, seed);
    render();
  }
  function grade(q, div) {
    if (q.kind === "numeric") {
      var g = mvGradeNumber(div.querySelector("input").value, q.answer, q.rel_tol, q.unit);
      return [g.ok, g.en + (g.graded ? "\n" + q.tail[0] : ""), g.zh + (g.graded ? "\n" + q.tail[1] : "")];
    }
    var picked = div.querySelector("input:checked");
    if (!picked) { return [false, "No answer graded: pick one option first.", "未评分：请先选一个选项。"]; }
    var i = parseInt(picked.value, 10);
    return [i === q.correct, q.feedback[i][0], q.feedback[i][1]];
  }
  function scoreIt() {
    var right = 0, by = {};
    root.querySelectorAll(".q").forEach(function (div) {
      var q = byId(div.getAttribute("data-id")), g = grade(q, div), el = div.querySelector(".fb");
      right += g[0] ? 1 : 0;
      by[q.topic] = by[q.topic] || [0, 0]; by[q.topic][0] += g[0] ? 1 : 0; by[q.topic][1] += 1;
      el.innerHTML = both(g[1], g[2]); el.style.color = g[0] ? "#137333" : "#b3261e";
      if (q.lab) {
        el.insertAdjacentHTML("beforeend", '\n<a href="' + link(q.lab) + '">' + both("the lab", "对应实验") + "</a>");
      }
    });
    var weak = Object.keys(by).filter(function (t) { return by[t][0] < by[t][1]; });
    weak.sort(function (a, b) { return by[a][0] / by[a][1] - by[b][0] / by[b][1] || (a < b ? -1 : 1); });
    var name = function (t, z) { return topics[t][z]; };
    var rows = Object.keys(by).sort().map(function (t) {
      return "<li>" + both(name(t, 0), name(t, 1)) + ": " + by[t][0] + "/" + by[t][1] + "</li>";
    }).join("");
    var revisit = weak.map(function (t) {
      var info = topics[t], a = info[2] ? '<a href="' + link(info[2].split("/").pop()) + '">' +
        esc(info[2].split("/").pop()) + "</a> · " : "";
      return "<li>" + both("revisit " + info[0] + ": ", "复习 " + info[1] + "：") + a + both(info[3], info[4]) + "</li>";
    }).join("");
    root.querySelector(".result").innerHTML = "<b>" +
      both("score " + right + "/" + asked.length + "; weak topics: " +
           (weak.map(function (t) { return name(t, 0); }).join(", ") || "none"),
           "得分 " + right + "/" + asked.length + "；薄弱主题：" +
           (weak.map(function (t) { return name(t, 1); }).join("、") || "无")) +
      "</b><ul>" + rows + "</ul>" + (revisit ? "<ul>" + revisit + "</ul>" : "");
  }
  var newDraw = root.querySelector("button.start");  // absent when the questions are fixed
  if (newDraw) { newDraw.addEventListener("click", start); }
  root.querySelector("button.score").addEventListener("click", scoreIt);
  asked = JSON.parse(root.querySelector("script.asked").textContent);
  render();
})();
"""


def _both(en: str, zh: str) -> str:
    """Both languages with a separator (hidden when the page shows one); a text the same in both, once."""
    if not zh or zh == en:
        return html.escape(en)
    return (f'<span class="lang-en">{html.escape(en)}</span><span class="mv-sep"> · </span>'
            f'<span class="lang-zh" lang="zh">{html.escape(zh)}</span>')


def page_data(results: dict | None = None, questions=None) -> list[dict]:
    """Every question (of the bank, or `questions`) with its options and the Python grader's feedback for each
    option in English and Chinese (numeric questions: the model answer and evidence the page appends)."""
    out = []
    for q in QUESTIONS if questions is None else questions:
        e = ENTRIES.get(q.qid)
        d = {"id": q.qid, "topic": q.topic or "other", "source": q.source, "prompt": q.prompt,
             "prompt_zh": q.prompt_zh, "lab": e.lab.split("/")[-1] if e and e.lab else ""}
        if isinstance(q, NumericQuestion):
            d.update(kind="numeric", answer=q.answer, rel_tol=q.rel_tol, unit=q.unit,
                     tail=list(answer_tail_both(q, results)))
        else:
            d.update(kind="choice", correct=q.correct, options=[[o.text, o.text_zh] for o in q.options],
                     feedback=[[grade_any(q, chr(65 + i), results, lang)[1] for lang in ("en", "zh")]
                               for i in range(len(q.options))])
        out.append(d)
    return out


def _topics(data: list[dict]) -> dict:
    return {d["topic"]: list(TOPIC_INFO.get(d["topic"], (d["topic"], d["topic"], "", "", ""))) for d in data}


def static_questions(qids: list[str], data: list[dict]) -> str:
    """The questions and their options as plain HTML (what a viewer without JavaScript shows); the script
    replaces it with the same markup plus inputs."""
    by = {d["id"]: d for d in data}
    topics = _topics(data)
    items = []
    for k, qid in enumerate(qids):
        d = by[qid]
        if d["kind"] == "numeric":
            body = f"<p>{_both('(a number, in ' + d['unit'] + ')', '（填一个数，单位 ' + d['unit'] + '）')}</p>"
        else:
            body = "<ol type=\"A\">" + "".join(f"<li>{_both(en, zh)}</li>" for en, zh in d["options"]) + "</ol>"
        t = topics[d["topic"]]
        items.append(f'<div class="q-static"><b>{k + 1}. {_both(d["prompt"], d["prompt_zh"])}</b> '
                     f"<small>[{_both(t[0], t[1])}]</small>{body}</div>")
    note = _both("The answer boxes and the Score button appear when the page's script runs: run this cell "
                 "(JupyterLab runs a notebook's scripts once you have run or saved it). The questions above are "
                 "already the ones this seed draws.",
                 "运行这个单元格后才会出现作答框和“评分”按钮（JupyterLab 只在你运行或保存过 notebook 之后才执行页面里的脚本）。"
                 "上面就是这个随机种子抽到的题目。")
    return "".join(items) + f'<p class="q-static-note" style="font-size:90%;color:#57606a">{note}</p>'


def mock_text(qids: list[str], questions=None) -> str:
    """The interview as plain text (text/plain of the output): each question and its lettered options."""
    by = {q.qid: q for q in (questions or QUESTIONS)}
    lines = []
    for k, qid in enumerate(qids):
        q = by[qid]
        lines.append(f"{k + 1}. {q.prompt}" + (f"\n   {q.prompt_zh}" if q.prompt_zh else ""))
        if isinstance(q, NumericQuestion):
            lines.append(f"   (a number, in {q.unit})")
        else:
            lines += [f"   {label}" for label in q.labels()]
    lines.append("Grade in Python: lab08.grade_any(question, answer) or lab08.score(qids, answers).")
    return "\n".join(lines)


def mock_html(n: int = 8, seed: int = 0, results: dict | None = None, qids: list[str] | None = None,
              questions=None) -> str:
    """The mock interview as one self-contained block of HTML + JS (no network, no kernel). `qids` fixes the
    questions (the page then offers no new draw); `questions` (any Question / NumericQuestion, e.g. another
    lab's) replaces the bank and fixes those."""
    if questions is not None:
        qids = [q.qid for q in questions]
    asked = list(qids) if qids else mock_interview(int(n), int(seed))
    cid = f"lab08-mock-{int(n)}-{int(seed)}" + (f"-{qids[0].replace('.', '-')}" if qids else "")
    if questions is None and qids:  # a fixed set: the page needs only those questions
        questions = [BY_ID[i] for i in qids]
    data = page_data(results, questions)
    esc = lambda x: json.dumps(x, ensure_ascii=False).replace("</", "<\\/")
    controls = (f'<label>{_both("questions", "题数")} <input name="n" type="number" min="1" value="{int(n)}" '
                f'style="width:4em"></label> <label>{_both("seed", "随机种子")} <input name="seed" type="number" '
                f'value="{int(seed)}" style="width:5em"></label> '
                f'<button class="start">{_both("New interview", "重新抽题")}</button>')
    if qids:
        controls = ""
    return (f'<div id="{cid}" class="lab08-mock">{controls}'
            f'<div class="questions">{static_questions(asked, data)}</div>'
            f'<button class="score">{_both("Score", "评分")}</button> <div class="result"></div>'
            f'<script type="application/json" class="bank">{esc(data)}</script>'
            f'<script type="application/json" class="fixed">{esc(list(qids or []))}</script>'
            f'<script type="application/json" class="asked">{esc(asked)}</script>'
            f'<script type="application/json" class="topics">{esc(_topics(data))}</script></div>'
            f"<script>{MOCK_JS % {'id': cid, 'numeric': NUMERIC_JS}}</script>")


def show_mock(n: int = 8, seed: int = 0, results: dict | None = None, qids: list[str] | None = None) -> None:
    from IPython.display import display

    asked = list(qids) if qids else mock_interview(int(n), int(seed))
    display({"text/html": mock_html(n, seed, results, qids), "text/plain": mock_text(asked)}, raw=True)


def show_questions(questions, results: dict | None = None) -> None:
    """Any lab's questions (a sequence, or a lab's QUESTIONS by id) as one static quiz (HTML + JS, graded by
    the same Python feedback), with the questions as plain text too."""
    from IPython.display import display

    if isinstance(questions, Mapping):
        questions = questions.values()
    questions = list(questions)
    display({"text/html": mock_html(len(questions), 0, results, questions=questions),
             "text/plain": mock_text([q.qid for q in questions], questions)}, raw=True)


def score_values(qids: list[str], values: list, lang: str = "en") -> tuple[str, object]:
    """The widget's Score callback: widget values (a 'B. ...' label, a typed number or None) -> result text."""
    answers = dict(zip(qids, values))
    res = score(qids, answers)
    zh = lang == "zh"
    lines = []
    for i, q in enumerate(qids):
        ok, fb = grade_any(BY_ID[q], answers[q], lang=lang)
        word = ("对" if ok else "错") if zh else ("right" if ok else "wrong")
        lines.append(f"{i + 1}. {word}{'：' if zh else ': '}{fb}")
    return res.text(lang) + "\n\n" + "\n\n".join(lines), res


def show_widget(widget) -> None:
    """Show the interview of `widget` (mock_widget's) as its page twin (mock_html, the same draw): a stored
    ipywidgets view reads "Error displaying widget: model not found" once the notebook is saved and reopened,
    while the page grades by itself before a run, after a run and after a reopen. The widget stays usable in
    a learner's own cell (`display(lab.mock_widget(8, seed=0))`)."""
    from IPython.display import display

    n, seed = getattr(widget, "mv_draw", (8, 0))
    note = (f"(the same interview as a page, {n} questions drawn with seed {seed}: it needs no widget, so it "
            "works again after a save and reopen)")
    display({"text/plain": note, "text/html": mock_html(n, seed)}, raw=True)


def mock_widget(n: int = 8, seed: int = 0):
    """Live version: radio buttons / text boxes, a Score button, the result with every question's feedback, in
    both languages (each in its lang-en / lang-zh span, so the book's switch shows one)."""
    import ipywidgets as w

    qids = mock_interview(n, seed)
    inputs, rows = [], []
    for i, qid in enumerate(qids):
        q = BY_ID[qid]
        box = (w.Text(placeholder=q.unit) if isinstance(q, NumericQuestion) else
               w.RadioButtons(options=[(f"{label} · {o.text_zh}" if o.text_zh else label, chr(65 + j))
                                       for j, (label, o) in enumerate(zip(q.labels(), q.options))],
                              value=None, layout=w.Layout(width="auto")))
        inputs.append(box)
        rows += [w.HTML(f"<b>{i + 1}. {_both(q.prompt, q.prompt_zh)}</b>"), box]
    button, out = w.Button(description="Score · 评分", button_style="primary"), w.HTML()

    def on_click(_b):
        values = [b.value or None for b in inputs]
        en, _ = score_values(qids, values, "en")
        zh, _ = score_values(qids, values, "zh")
        out.value = (f'<pre style="white-space: pre-wrap">{_both(en, zh)}</pre>')

    button.on_click(on_click)
    box = w.VBox(rows + [button, out])
    box.mv_draw = (n, seed)  # show_widget shows the page of the same draw
    return box
