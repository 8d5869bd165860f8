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
    if (window.mvPlotLang && window.Plotly) { window.mvPlotLang(lang); }  /* plot titles, axes, legends */
    if (typeof searchWords === "function") { searchWords(lang); }
    document.dispatchEvent(new CustomEvent("minivllm:lang", {detail: lang}));  /* outputs.js: select options */
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

  /* A heading with markup inside ("Startup fails with <code>x</code>: which flag first? · 启动报 <code>x</code>，…"):
   * the nodes before the " · " that starts the Chinese half go into the English span, the rest into the Chinese
   * one (the heading's # link stays outside both). */
  function splitMixed(el) {
    var kids = Array.prototype.slice.call(el.childNodes), tail = [];
    while (kids.length && kids[kids.length - 1].nodeType === 1 && kids[kids.length - 1].classList.contains("headerlink")) {
      tail.unshift(kids.pop());
    }
    var after = function (i) { return kids.slice(i + 1).map(function (k) { return k.textContent; }).join(""); };
    for (var i = 0; i < kids.length; i++) {
      if (kids[i].nodeType !== 3) { continue; }
      var text = kids[i].nodeValue, at = text.indexOf(" · ");
      while (at >= 0) {
        var left = kids.slice(0, i).map(function (k) { return k.textContent; }).join("") + text.slice(0, at);
        var right = text.slice(at + 3) + after(i), zhFirst = CJK.test(left) && !CJK.test(right);
        if ((!CJK.test(left) && CJK.test(right)) || zhFirst) {
          var span = document.createElement("span"), en = document.createElement("span"), zh = document.createElement("span");
          span.className = "lang-split"; en.className = "lang-en"; zh.className = "lang-zh";
          kids.slice(0, i).forEach(function (k) { en.appendChild(k); });
          en.appendChild(document.createTextNode(text.slice(0, at)));
          zh.appendChild(document.createTextNode(text.slice(at + 3)));
          el.removeChild(kids[i]);
          kids.slice(i + 1).forEach(function (k) { zh.appendChild(k); });
          if (zhFirst) { var t = en.className; en.className = zh.className; zh.className = t; }
          else { number(en, zh); }
          span.appendChild(en); span.appendChild(zh);
          el.insertBefore(span, el.firstChild);
          return true;
        }
        at = text.indexOf(" · ", at + 3);
      }
    }
    return false;
  }

  /* "1. English · 中文": the Chinese half gets the question's number too */
  function number(en, zh) {
    var m = /^\s*(\d+\.\s)/.exec(en.textContent);
    if (m && !/^\s*\d/.test(zh.textContent)) { zh.insertBefore(document.createTextNode(m[1]), zh.firstChild); }
  }

  function splitTitles() {
    var mixed = document.querySelectorAll("article h1, article h2, article h3, article h4, article summary, " +
                                          ".toc-entry a, nav a");
    for (var m = 0; m < mixed.length; m++) {
      var el = mixed[m];
      if (el.querySelector(".lang-split, .lang-en, .lang-zh") || el.textContent.indexOf(" · ") < 0) { continue; }
      var plain = Array.prototype.every.call(el.childNodes, function (k) {
        return k.nodeType === 3 || k.classList.contains("headerlink");
      });
      if (!plain || el.tagName === "SUMMARY") { splitMixed(el); }
    }
    var sel = "article h1, article h2, article h3, #jb-print-docs-body h1, nav a, .toc-entry a, .caption-text, .logo__title, " +
              ".prev-next-title, article a.reference, article a.reference > span.std, article a.reference > span.doc, " +
              "article th, article th > p, article td, article td > p";
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
        number(en, zh);
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

  /* The theme's own words (sphinx-book-theme writes them in English): each gets a Chinese twin that lang.css
   * shows in 中文 mode; Sphinx's search messages are looked up through Documentation.gettext. */
  var THEME = {
    "previous": "上一页", "next": "下一页", "Contents": "本页内容", "On this page": "本页内容",
    "Back to top": "回到顶部", "Skip to main content": "跳到正文", "Search": "搜索", "Search Results": "搜索结果",
    "Print to PDF": "打印为 PDF", "Toggle navigation": "切换导航", "By minivllm": "作者 minivllm"
  };
  var SEARCH = {
    "Searching": "正在搜索", "Search Results": "搜索结果", "Preparing search...": "正在准备搜索……",
    "Search finished, found ${resultCount} page(s) matching the search query.":
      "搜索完成，找到 ${resultCount} 个匹配的页面。",
    "Your search did not match any documents. Please make sure that all words are spelled correctly and that you've selected enough categories.":
      "没有找到匹配的页面。请检查拼写。",
    "Hide Search Matches": "隐藏搜索结果高亮", "search this documentation": "搜索本书"
  };
  function translateTheme() {
    var sel = ".prev-next-subtitle, .onthispage, .page-toc .tocsection, #pst-back-to-top, .skip-link, " +
              ".search-button__default-text, #search-results h2, .bd-search .form-control, .bd-sidebar-secondary .onthispage, " +
              "#jb-print-toc h2";
    var els = document.querySelectorAll(sel);
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      for (var n = el.firstChild; n; n = n.nextSibling) {
        var key = n.nodeType === 3 ? n.nodeValue.trim() : "";
        if (!key || !THEME[key]) { continue; }
        var span = document.createElement("span");
        span.className = "lang-split";
        span.innerHTML = '<span class="lang-en"></span><span class="lang-zh" lang="zh"></span>';
        span.firstChild.textContent = key;
        span.lastChild.textContent = THEME[key];
        el.replaceChild(span, n);
        n = span;
      }
      if (el.placeholder && el.placeholder.indexOf("搜索") < 0) { el.placeholder = "Search · 搜索"; }
    }
    searchWords(current());
  }
  function searchWords(lang) {  /* doctools' gettext reads Documentation.TRANSLATIONS at each call */
    if (!SEARCH || typeof Documentation === "undefined" || !Documentation.TRANSLATIONS) { return; }  /* a const of doctools.js */
    Object.keys(SEARCH).forEach(function (k) {
      if (lang === "zh") { Documentation.TRANSLATIONS[k] = SEARCH[k]; } else { delete Documentation.TRANSLATIONS[k]; }
    });
  }

  /* "On this page" of a lab lists its English and its Chinese headings: each link takes its heading's language */
  function classToc() {
    var links = document.querySelectorAll(".bd-toc a[href^='#'], .page-toc a[href^='#']");
    for (var i = 0; i < links.length; i++) {
      var a = links[i], id = decodeURIComponent(a.getAttribute("href").slice(1));
      var t = id && document.getElementById(id);
      var h = t && (t.matches("h1, h2, h3, h4") ? t : t.querySelector("h1, h2, h3, h4"));
      var l = h && h.closest(".lang-en, .lang-zh");
      if (l) { a.classList.add(l.classList.contains("lang-en") ? "lang-en" : "lang-zh"); }
    }
  }

  /* The theme's tooltips and labels (title, aria-label, Bootstrap's data-bs-title): swapped with the language;
   * the English is kept in data-en-<attribute>. */
  var TIPS = {
    "Color mode": "颜色模式", "Light": "浅色", "Dark": "深色", "System Settings": "跟随系统", "Search": "搜索",
    "Toggle primary sidebar": "展开/收起目录", "Toggle secondary sidebar": "展开/收起本页目录",
    "Site navigation": "站点导航", "On this page": "本页内容", "previous page": "上一页", "next page": "下一页",
    "Link to this heading": "链接到本节", "Index": "索引", "Back to top": "回到顶部", "Copy": "复制",
    "Copied!": "已复制！", "Download this page": "下载本页", "Fullscreen mode": "全屏"
  };
  function tips(lang) {
    ["title", "aria-label", "data-bs-title", "data-bs-original-title"].forEach(function (attr) {
      document.querySelectorAll("[" + attr + "]").forEach(function (el) {
        var keep = "data-en-" + attr, en = el.getAttribute(keep) || el.getAttribute(attr);
        if (!TIPS[en]) { return; }
        el.setAttribute(keep, en);
        el.setAttribute(attr, lang === "zh" ? TIPS[en] : en);
      });
    });
  }
  document.addEventListener("minivllm:lang", function (e) { tips(e.detail); });

  window.minivllmSetLang = setLang;
  document.addEventListener("DOMContentLoaded", function () {
    classNotebookCells(); classToc(); splitTitles(); translateTheme(); addSwitch(); tips(current());
  });
  window.addEventListener("load", function () {
    splitTitles(); translateTheme();
    var results = document.getElementById("search-results");  /* filled by searchtools.js after load */
    if (results && window.MutationObserver) {
      new MutationObserver(function () { splitLinks(results); }).observe(results, {childList: true, subtree: true});
    }
  });
  function splitLinks(root) {  /* "Title · 标题" links in the search results, one language shown */
    var links = root.querySelectorAll("a");
    for (var i = 0; i < links.length; i++) {
      var n = links[i].firstChild;
      if (!n || n.nodeType !== 3 || links[i].querySelector(".lang-split")) { continue; }
      var parts = splitTitle(n.nodeValue.trim());
      if (!parts) { continue; }
      var span = document.createElement("span"), en = document.createElement("span"), zh = document.createElement("span");
      span.className = "lang-split"; en.className = "lang-en"; zh.className = "lang-zh";
      en.textContent = parts.en; zh.textContent = parts.zh;
      number(en, zh);
      span.appendChild(en); span.appendChild(zh);
      links[i].replaceChild(span, n);
    }
  }  /* the theme fills some navigation after DOMContentLoaded */
})();
