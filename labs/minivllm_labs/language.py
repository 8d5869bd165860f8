"""One language at a time in JupyterLab: the switch the setup cell shows, and the markers the build adds.

Why: every lab is written in pairs (an English markdown cell tagged `lang-en`, its Chinese twin tagged
`lang-zh`; outputs hold spans of class `lang-en` / `lang-zh`). The book hides one language by those names;
JupyterLab knows nothing of cell tags, so it showed both, glued together. Here:

- the build ends each tagged markdown cell with an empty `<span class="mv-cell-en|zh">` (`mark_cell`), which
  the rendered cell carries;
- figures drawn by JupyterLab's plotly renderer carry their text in one language: `current()` (plots.show);
- `open_lab` shows `switch_html(lang)`: CSS that hides, by an attribute on the page's <body>, the other
  language's cells (`.jp-Cell:has(.mv-cell-zh)`), spans and separators (quizzes, toggles, the mock interview),
  and three buttons (EN, 中文, both). The choice is kept in the browser (localStorage) for every lab; until one
  is made, the default is `lang` (open_lab's argument, else $MINIVLLM_LAB_LANG, else the locale's language).
"""

from __future__ import annotations

import locale
import os

LANG_ENV = "MINIVLLM_LAB_LANG"
LANGS = ("en", "zh", "both")
_current = {"lang": "en"}


def current() -> str:
    """The language open_lab set for this kernel: what a figure's own text (plotly draws it, not the page's
    CSS) is shown in; "both" and "en" draw the English text."""
    return _current["lang"]


def set_current(lang: str) -> None:
    _current["lang"] = lang


def default_lang(lang: str | None = None) -> str:
    """open_lab's argument, else $MINIVLLM_LAB_LANG, else zh for a Chinese locale and en for any other."""
    lang = (lang or os.environ.get(LANG_ENV) or "").lower()
    if lang in LANGS:
        return lang
    if lang:
        raise ValueError(f"language must be one of {LANGS}, got {lang!r}")
    loc = os.environ.get("LC_ALL") or os.environ.get("LC_MESSAGES") or os.environ.get("LANG") or ""
    if not loc:
        loc = locale.getlocale()[0] or ""
    return "zh" if loc.lower().startswith("zh") else "en"


def mark_cell(source: str, tags: list[str]) -> str:
    """A tagged markdown cell's source with its language marker appended (the build calls this)."""
    for lang in ("en", "zh"):
        if f"lang-{lang}" in tags:
            return f'{source}\n\n<span class="mv-cell-{lang}"></span>'
    return source


_CSS = """<style>
.jp-RenderedMarkdown p:has(> span.mv-cell-en:only-child), .jp-RenderedMarkdown p:has(> span.mv-cell-zh:only-child)
  { display:none }
body[data-mv-lang="en"] .jp-Cell:has(.mv-cell-zh), body[data-mv-lang="zh"] .jp-Cell:has(.mv-cell-en),
body[data-mv-lang="en"] .lang-zh, body[data-mv-lang="zh"] .lang-en,
body[data-mv-lang="en"] .mv-sep, body[data-mv-lang="zh"] .mv-sep { display:none !important }
.mv-lang-switch button { margin:0 2px; padding:2px 10px; border:1px solid #8c959f; border-radius:4px;
  background:#f6f8fa; cursor:pointer }
.mv-lang-switch button.mv-on { background:#0969da; color:#fff; border-color:#0969da }
</style>"""

_JS = r"""<script>(function () {
  var root = document.currentScript && document.currentScript.previousElementSibling;
  var key = "minivllm-lab-lang";
  function apply(lang) {
    document.body.setAttribute("data-mv-lang", lang);
    document.querySelectorAll(".mv-lang-switch button").forEach(function (b) {
      b.classList.toggle("mv-on", b.getAttribute("data-lang") === lang);
    });
  }
  var saved = null;
  try { saved = window.localStorage.getItem(key); } catch (e) {}
  apply(saved || (root && root.getAttribute("data-default")) || "en");
  if (!root) return;
  root.querySelectorAll("button").forEach(function (b) {
    b.addEventListener("click", function () {
      var lang = b.getAttribute("data-lang");
      try { window.localStorage.setItem(key, lang); } catch (e) {}
      apply(lang);
    });
  });
})();</script>"""


def switch_html(lang: str) -> str:
    """The language switch (three buttons) with its CSS and script; `lang` is the default until the learner
    picks one."""
    buttons = "".join(f'<button type="button" data-lang="{code}">{label}</button>'
                      for code, label in (("en", "EN"), ("zh", "中文"), ("both", "EN + 中文")))
    return (f'{_CSS}<div class="mv-lang-switch" data-default="{lang}">Language · 语言: {buttons}</div>{_JS}')
