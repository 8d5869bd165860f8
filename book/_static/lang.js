/* The book's language switch: English first, Chinese alongside, one shown at a time.
 *
 * Pages carry both languages: markdown blocks in containers `lang-en` / `lang-zh`, notebook cells tagged
 * lang-en / lang-zh (MyST-NB writes the tags as classes `tag_lang-en` / `tag_lang-zh`), quiz text in spans
 * `lang-en` / `lang-zh`. lang.css hides the other language from the attribute `data-lang` on <html>, which
 * this script sets before the page is drawn (it runs in <head>), from the reader's last choice
 * (localStorage), so a page never flashes the wrong language. Without JavaScript both languages show.
 * Titles written "English · 中文" (headings, sidebar) are split the same way.
 */
(function () {
  "use strict";
  var KEY = "minivllm-book-lang";
  var LANGS = ["en", "zh"];
  var CJK = /[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]/;

  function stored() {
    try { return localStorage.getItem(KEY); } catch (e) { return null; }
  }
  function current() {
    var l = document.documentElement.getAttribute("data-lang");
    return LANGS.indexOf(l) >= 0 ? l : "en";
  }
  function setLang(lang) {
    if (LANGS.indexOf(lang) < 0) { lang = "en"; }
    document.documentElement.setAttribute("data-lang", lang);
    document.documentElement.setAttribute("lang", lang === "zh" ? "zh-CN" : "en");
    try { localStorage.setItem(KEY, lang); } catch (e) { /* private mode: the choice lasts this page */ }
    var buttons = document.querySelectorAll("#lang-switch button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-pressed", buttons[i].getAttribute("data-lang") === lang ? "true" : "false");
    }
  }
  setLang(stored() || "en");

  /* "Lab 01 · Why CUDA graphs · 为什么需要 CUDA Graph" -> {en: "Lab 01 · Why CUDA graphs",
   *  zh: "Lab 01 · 为什么需要 CUDA Graph"}; null when the text is not a bilingual title. */
  function splitTitle(text) {
    var parts = text.split(" · ");
    if (parts.length < 2) { return null; }
    var en = [], zh = [];
    parts.forEach(function (p, i) {
      if (CJK.test(p)) { zh.push(p); return; }
      en.push(p);
      if (i === 0 && parts.length > 2 && /^(Lab\s*)?\d/.test(p)) { zh.push(p); }  /* "Lab 01" in both */
    });
    if (en.length === 0 || !zh.some(function (p) { return CJK.test(p); })) { return null; }
    return { en: en.join(" · "), zh: zh.join(" · ") };
  }

  function splitTitles() {
    var sel = "article h1, article h2, article h3, nav a, .toc-entry a, .caption-text, .logo__title, " +
              ".prev-next-title";
    var els = document.querySelectorAll(sel);
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      for (var n = el.firstChild; n; n = n.nextSibling) {
        if (n.nodeType !== 3 || n.nodeValue.indexOf(" · ") < 0) { continue; }
        var parts = splitTitle(n.nodeValue.trim());
        if (!parts) { continue; }
        var span = document.createElement("span");
        span.className = "lang-split";
        var en = document.createElement("span"); en.className = "lang-en"; en.textContent = parts.en;
        var zh = document.createElement("span"); zh.className = "lang-zh"; zh.textContent = parts.zh;
        span.appendChild(en); span.appendChild(zh);
        el.replaceChild(span, n);
        n = span;
      }
    }
  }

  function addSwitch() {
    if (document.getElementById("lang-switch")) { return; }
    var box = document.createElement("div");
    box.id = "lang-switch";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Language · 语言");
    [["en", "EN"], ["zh", "中文"]].forEach(function (pair) {
      var b = document.createElement("button");
      b.type = "button";
      b.setAttribute("data-lang", pair[0]);
      b.textContent = pair[1];
      b.addEventListener("click", function () { setLang(pair[0]); });
      box.appendChild(b);
    });
    var host = document.querySelector(".article-header-buttons") || document.querySelector(".header-article-items__end");
    if (host) { host.insertBefore(box, host.firstChild); }
    else { box.className = "floating"; document.body.appendChild(box); }
    setLang(current());
  }

  /* A notebook's lang-en / lang-zh markdown cells have no element of their own in the page: the book's copy
   * brackets each with div.lang-cell-start[data-lang] ... div.lang-cell-end (book_prepare.py). Walk the
   * article's blocks in document order and give each block between a pair its language class. */
  function classNotebookCells() {
    var article = document.querySelector("article") || document.body;
    if (!article.querySelector(".lang-cell-start")) { return; }
    var lang = null;
    var walk = function (parent) {
      for (var el = parent.firstElementChild; el; el = el.nextElementSibling) {
        if (el.classList.contains("lang-cell-start")) { lang = el.getAttribute("data-lang"); continue; }
        if (el.classList.contains("lang-cell-end") || el.classList.contains("cell")) { lang = null; continue; }
        if (el.tagName === "SECTION") { walk(el); continue; }
        if (lang) { el.classList.add("lang-" + lang); }
      }
    };
    walk(article);
  }

  window.minivllmSetLang = setLang;
  document.addEventListener("DOMContentLoaded", function () { classNotebookCells(); splitTitles(); addSwitch(); });
  window.addEventListener("load", splitTitles);  /* the theme fills some navigation after DOMContentLoaded */
})();
