/* The labs' stored outputs in one language at a time, and readable on a phone.
 *
 * A lab's HTML outputs were written for JupyterLab, where both languages show: a table cell holds
 * "English<br>中文" (or "中文<br><i>English</i>"), a header or a label "seed · 材料", a verdict one English word.
 * In the book, lang.css shows one language; this script gives such text its language classes:
 * - a cell whose halves, split at its <br>, are one Chinese and one not becomes a lang-zh and a lang-en span;
 * - a header, a label or a cell that is one word of WORDS gets its Chinese twin;
 * - every cell of a table in an output gets data-label-en / data-label-zh from its column's header, which
 *   phone.css shows before the cell when the table is laid out as cards on a narrow screen.
 * Select options cannot hold spans: their text is swapped when the language changes (lang.js's event).
 */
(function () {
  "use strict";
  var CJK = /[\u3400-\u9fff]/;
  var WORDS = {
    "seed": "材料", "claim": "说法", "verdict": "结论", "number": "数字", "evidence": "证据", "lab": "实验",
    "what was measured": "测量", "right": "正确", "partly": "部分正确", "wrong": "错误",
    "unverifiable": "无法验证", "all": "全部", "handbook": "手册", "article": "文章", "differs": "不同",
    "device": "设备", "value": "数值"
  };

  function span(lang, nodes) {
    var s = document.createElement("span");
    s.className = "lang-" + lang;
    if (lang === "zh") { s.setAttribute("lang", "zh"); }
    nodes.forEach(function (n) { s.appendChild(n); });
    return s;
  }
  function text(nodes) { return nodes.map(function (n) { return n.textContent; }).join(""); }

  /* "English<br>中文" -> two spans; true when the element was split */
  function splitAtBreak(el) {
    if (el.querySelector(".lang-en, .lang-zh")) { return false; }
    var kids = Array.prototype.slice.call(el.childNodes);
    var at = kids.findIndex(function (k) { return k.nodeName === "BR"; });
    if (at < 0) { return false; }
    var a = kids.slice(0, at), b = kids.slice(at + 1);
    var za = CJK.test(text(a)), zb = CJK.test(text(b));
    if (za === zb) { return false; }
    el.removeChild(kids[at]);
    var first = span(za ? "zh" : "en", a), second = span(zb ? "zh" : "en", b);
    el.appendChild(first); el.appendChild(second);
    return true;
  }

  /* "seed · 材料", "verdict" -> the English and the Chinese in spans */
  function splitLabel(el) {
    if (el.querySelector(".lang-en, .lang-zh, select, input, table")) { return; }
    var t = el.textContent.trim(), en, zh;
    var parts = t.split(" · ");
    if (parts.length === 2 && CJK.test(parts[1]) && !CJK.test(parts[0])) { en = parts[0]; zh = parts[1]; }
    else if (WORDS[t.toLowerCase()]) { en = t; zh = WORDS[t.toLowerCase()]; }
    else { return; }
    var target = el.children.length === 1 && el.firstElementChild.textContent.trim() === t ? el.firstElementChild : el;
    target.textContent = "";
    target.appendChild(span("en", [document.createTextNode(en)]));
    target.appendChild(span("zh", [document.createTextNode(zh)]));
  }

  /* a <label>seed · 材料 <select>: only the label's own text node is split */
  function splitLabelText(label) {
    var n = label.firstChild;
    if (!n || n.nodeType !== 3) { return; }
    var parts = n.nodeValue.trim().split(" · ");
    if (parts.length !== 2 || !CJK.test(parts[1])) { return; }
    var s = document.createElement("span");
    s.appendChild(span("en", [document.createTextNode(parts[0] + " ")]));
    s.appendChild(span("zh", [document.createTextNode(parts[1] + " ")]));
    label.replaceChild(s, n);
  }

  function label(th) {
    var en = th.querySelector(".lang-en"), zh = th.querySelector(".lang-zh");
    var t = th.textContent.trim();
    return {en: en ? en.textContent.trim() : t, zh: zh ? zh.textContent.trim() : (WORDS[t.toLowerCase()] || t)};
  }

  function outputs() {
    var root = document.querySelector("article") || document.body;
    var tables = root.querySelectorAll(".cell_output table, .output table, .minivllm-devices table");
    for (var i = 0; i < tables.length; i++) {
      var table = tables[i];
      table.querySelectorAll("th").forEach(splitLabel);
      table.querySelectorAll("td").forEach(function (td) { if (!splitAtBreak(td)) { splitLabel(td); } });
      var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), label);
      if (!heads.length) { continue; }
      table.classList.add("mv-cards");
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (td, j) {
          if (heads[j]) { td.setAttribute("data-label-en", heads[j].en); td.setAttribute("data-label-zh", heads[j].zh); }
        });
      });
    }
    root.querySelectorAll(".cell_output label, .output label").forEach(splitLabelText);
    root.querySelectorAll(".cell_output td > b, .output td > b").forEach(function (b) {
      /* "<b>partly</b> <span class=lang-zh>部分正确</span>": the bold word is the English twin */
      if (b.parentNode.querySelector(":scope > .lang-zh")) { b.classList.add("lang-en"); } else { splitLabel(b); }
    });
    root.querySelectorAll(".cell_output option, .output option").forEach(function (o) {
      var t = o.textContent.trim();
      if (WORDS[t]) { o.setAttribute("data-en", t); o.setAttribute("data-zh", WORDS[t]); }
    });
    options(document.documentElement.getAttribute("data-lang") || "en");
  }
  function options(lang) {
    document.querySelectorAll("option[data-en]").forEach(function (o) { o.textContent = o.getAttribute("data-" + lang); });
  }

  /* The labs' SVG diagrams (Lab 05's ladder) write each box's English and Chinese as two <text> lines: one
   * is shown, moved to the box's middle; "yes 是" and "title · 标题" become two <tspan>s. */
  function diagrams() {
    var NS = "http://www.w3.org/2000/svg";
    document.querySelectorAll("article .cell_output svg text, article .output svg text").forEach(function (t) {
      if (t.closest(".js-plotly-plot, .mermaid") || t.querySelector("tspan")) { return; }
      var s = t.textContent, parts = s.indexOf(" · ") > 0 ? s.split(" · ") : s.split(/ (?=[\u3400-\u9fff])/);
      if (parts.length === 2 && !CJK.test(parts[0]) && CJK.test(parts[1])) {
        t.textContent = "";
        [["en", parts[0]], ["zh", parts[1]]].forEach(function (p) {
          var ts = document.createElementNS(NS, "tspan"); ts.setAttribute("class", "lang-" + p[0]);
          ts.textContent = p[1]; t.appendChild(ts);
        });
        return;
      }
      var next = t.nextElementSibling;
      if (!CJK.test(s) && next && next.tagName.toLowerCase() === "text" && CJK.test(next.textContent) &&
          next.getAttribute("x") === t.getAttribute("x")) {
        var mid = (parseFloat(t.getAttribute("y")) + parseFloat(next.getAttribute("y"))) / 2;
        t.setAttribute("class", "lang-en"); next.setAttribute("class", "lang-zh");
        t.setAttribute("y", mid); next.setAttribute("y", mid);
      }
    });
  }

  /* Raw HTML in a lab's markdown (an answer in <details>) is not parsed, so the build cannot join its Chinese
   * lines (minivllm_book.JoinChineseLines): a line break between two Chinese characters would show as a
   * space. Joined here, and in the labs' outputs (Lab 07's claims) any space between two Chinese characters;
   * pre-formatted text (code, the quizzes' feedback) keeps its breaks. */
  var ZH = "\u3400-\u9fff\u3000-\u303f\uff00-\uffef";
  var BREAK = new RegExp("([" + ZH + "])[ \\t]*\\n[ \\t]*(?=[" + ZH + "])", "g");
  var SPACE = new RegExp("([" + ZH + "])\\s+(?=[" + ZH + "])", "g");  /* a lab's output: any space */
  function joinLines() {
    var root = document.querySelector("article");
    if (!root) { return; }
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), n;
    while ((n = walker.nextNode())) {
      if (!/\s/.test(n.nodeValue) || !CJK.test(n.nodeValue)) { continue; }
      var el = n.parentElement;
      if (!el || el.closest("pre, code, .highlight, .mv-quiz-feedback, script, style")) { continue; }
      if (getComputedStyle(el).whiteSpace.indexOf("pre") === 0) { continue; }
      n.nodeValue = n.nodeValue.replace(el.closest(".cell_output, .output") ? SPACE : BREAK, "$1");
    }
  }

  document.addEventListener("DOMContentLoaded", outputs);
  document.addEventListener("DOMContentLoaded", diagrams);
  document.addEventListener("DOMContentLoaded", joinLines);
  document.addEventListener("minivllm:lang", function (e) { options(e.detail); });
})();
