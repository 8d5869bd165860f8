"""Sphinx extension of the book: links into the engine's source, the labs and the recorded results.

- {src}`minivllm/worker/cudagraph_dispatcher.py::CudagraphDispatcher.dispatch` links to that definition on the source
  page (book_codepages.py); the build fails if the file or the name does not exist, so a link cannot rot silently.
- {rec}`lab01.json:launch_overhead.eager_us_per_op:.1f` is a recorded number, read when the book is built.
- {lab}`03` links to Lab 03's page when labs/03_*.ipynb exists, and says "in preparation" when it does not
  (labs are written in parallel; a missing one must not break the book).
- BookSearch: the search index in both languages; Chinese, written without spaces, is indexed as overlapping
  two-character words and the reader's query is split the same way in the browser, so "编译" finds every page
  that holds it, inside any longer run of Chinese.
- The labs' plain relative links `[x](../minivllm/worker/graph_capture.py)` and
  `[f](../assets/results/h200/lab01.json)` point outside the book; a post-transform rewrites them to the
  source page and to the file's row on the results page before MyST would report them missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import book_codepages as codepages
import book_results as results
from docutils import nodes
from minivllm_labs.figures import value  # one reader of the {rec} grammar, for the labs and the book
from sphinx import search as sphinx_search
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.search.en import english_stopwords, js_porter_stemmer
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)
BOOK = Path(__file__).resolve().parents[1]
ROOT = BOOK.parent


def _lab_docs() -> dict[str, str]:
    """"03" -> "labs/03_torch_compile_in_the_engine" for the notebooks copied into book/labs."""
    return {p.stem[:2]: f"labs/{p.stem}" for p in sorted((BOOK / "labs").glob("[0-9][0-9]_*.ipynb"))}


def _ref(inliner, lineno: int, rawtext: str, docname: str, anchor: str, children: list[nodes.Node]):
    """A reference to another page (+ anchor); OutsideLinks turns it into a relative URI."""
    node = pending_xref(rawtext, refdomain="", reftype="minivllm", reftarget=docname, refexplicit=True)
    node["minivllm_anchor"] = anchor
    node.extend(children)
    return node


def src_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """{src}`path.py` or {src}`path.py::name`: a link to the engine's source page."""
    path, _, obj = text.partition("::")
    path = path.strip()
    file = ROOT / path
    if not (path.startswith("minivllm/") and path.endswith(".py") and file.is_file()):
        msg = inliner.reporter.error(f"{{src}}: no engine file {path!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    if obj and not codepages.defines(file.read_text(), obj):
        msg = inliner.reporter.error(f"{{src}}: {path} defines no {obj!r} at top level", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    anchor = codepages.anchor(path, obj.split(".")[0]) if obj else ""
    label = f"{path}::{obj}" if obj else path
    lit = nodes.literal(label, label)
    return [_ref(inliner, lineno, rawtext, codepages.docname(path), anchor, [lit])], []


def lab_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """{lab}`03`: Lab 03's page, or plain text when its notebook does not exist yet."""
    lab = text.strip().zfill(2)
    docs = _lab_docs()
    titles_file = BOOK / "_labs.json"
    titles = json.loads(titles_file.read_text()) if titles_file.exists() else {}
    inliner.document.settings.env.note_dependency(str(titles_file))  # re-read when the labs change
    if lab not in docs:
        return [nodes.inline(rawtext, "", nodes.emphasis("", f"Lab {lab} (in preparation)", classes=["lang-en"]),
                             nodes.emphasis("", f"实验 {lab}（编写中）", classes=["lang-zh"]))], []
    title = titles.get(lab) or f"Lab {lab}"
    parts = title.split(" · ")
    zh = [p for p in parts[1:] if re.search(f"[{_CJK}]", p)]
    if not zh:
        return [_ref(inliner, lineno, rawtext, docs[lab], "", [nodes.inline(title, title)])], []
    en = " · ".join(p for p in parts if p not in zh)
    zh_title = " · ".join([parts[0], *zh]).replace("Lab ", "实验 ", 1)
    return [_ref(inliner, lineno, rawtext, docs[lab], "", [nodes.inline(en, en, classes=["lang-en"]),
                                                           nodes.inline(zh_title, zh_title, classes=["lang-zh"])])], []


_REC = re.compile(r"^(?P<file>[\w.-]+\.json):(?P<path>[^*:]+)(?:\*(?P<scale>[\d.e+-]+))?(?::(?P<fmt>[^:]+))?$")


def rec_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """{rec}`lab01.json:launch_overhead.eager_us_per_op:.1f`: a number read from assets/results/h200/ at build
    time (a ratio `a/b` of two keys, optionally `*1000` to scale, then a format spec), linked to that file on the results page. The
    book's figures therefore change with the records, never by hand."""
    m = _REC.match(text.strip())
    file = ROOT / "assets" / "results" / "h200" / (m.group("file") if m else "")
    try:
        if not m:
            raise ValueError("write {rec}`file.json:key.path[*scale][:format]`")
        number = value(m.group("file"), m.group("path"), m.group("scale"), file.parent)
        inliner.document.settings.env.note_dependency(str(file))  # re-read when the record changes
        shown = format(number, m.group("fmt") or "")
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as e:
        msg = inliner.reporter.error(f"{{rec}}`{text}`: {e}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    node = pending_xref(rawtext, refdomain="", reftype="minivllm", reftarget="results", refexplicit=True)
    node["minivllm_anchor"] = results.file_id(m.group("file"))
    node["minivllm_title"] = f"{m.group('file')}: {m.group('path')}"
    node.append(nodes.inline(shown, shown, classes=["rec"]))
    return [node], []


class OutsideLinks(SphinxPostTransform):
    """Rewrite links to files outside the book (engine source, results JSON) before MyST resolves them."""

    default_priority = 8  # before MyST's reference resolver (9)
    PY = re.compile(r"^(?:\.\./)*(minivllm/[\w/]+\.py)(?:#.*)?$")
    JSON = re.compile(r"^(?:\.\./)*assets/results/\w+/([\w.-]+\.json)$")

    def run(self, **kwargs) -> None:
        builder = self.app.builder
        for node in list(self.document.findall(pending_xref)):
            target = node["reftarget"]
            if node.get("reftype") == "minivllm":  # from the {src} and {lab} roles
                uri = builder.get_relative_uri(self.env.docname, target)
                if node["minivllm_anchor"]:
                    uri += "#" + node["minivllm_anchor"]
                ref = nodes.reference("", "", internal=True, refuri=uri,
                                      reftitle=node.get("minivllm_title", ""))
                ref.extend(node.children)
                node.replace_self(ref)
                continue
            elif node.get("reftype") != "myst" or node.get("refdomain"):
                continue
            elif m := self.PY.match(target):
                path = m.group(1)
                if not (ROOT / path).is_file():
                    logger.warning(f"link to a missing engine file {path!r}", location=node)
                    continue
                uri = builder.get_relative_uri(self.env.docname, codepages.docname(path))
            elif m := self.JSON.match(target):
                if not (ROOT / "assets" / "results" / "h200" / m.group(1)).is_file():
                    logger.warning(f"link to a missing results file {target!r}", location=node)
                    continue
                uri = builder.get_relative_uri(self.env.docname, "results") + "#" + results.file_id(m.group(1))
            else:
                continue
            ref = nodes.reference("", "", internal=True, refuri=uri)
            ref.extend(node.children)
            node.replace_self(ref)


def page_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """plotly.js on pages that draw a plot, mermaid.js on pages with a flowchart; both served from _static.

    Classic scripts at the top of the body, so they have run before a plot's inline script calls
    Plotly.newPlot and before sphinxcontrib-mermaid's (deferred) module imports mermaid-shim.mjs; written
    into this page's body because assets added with app.add_js_file during page writing reach other pages."""
    # sphinx-thebe (a Jupyter Book default) writes its config once per docs read, so a rebuild declares
    # `const THEBE_JS_URL` twice (a console error), and it names a CDN; the book runs no kernel: drop it.
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if "thebe" not in
                                   (str(getattr(js, "filename", js) or "") + str(getattr(js, "attributes", {})
                                                                                 .get("body", "")))]
    body = context.get("body", "")
    extra = []
    if "Plotly.newPlot" in body:
        extra.append("vendor/plotly.min.js")
    if doctree is not None and any(n.tagname == "mermaid" for n in doctree.findall(nodes.Element)):
        extra.append("vendor/mermaid/mermaid.min.js")
    if extra:  # at the top of this page's body: before the plots' inline scripts, before mermaid's module
        tags = "".join(f'<script src="{context["pathto"](f, resource=True)}"></script>\n'
                       for f in extra)
        context["body"] = tags + body


_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


def cjk_words(run: str) -> list[str]:
    """A run of Chinese characters as the words the index holds: its overlapping pairs (one character alone
    stays itself). The browser splits a query with the same rule (BookSearch.js_splitter_code)."""
    return [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]


class BookSearch(sphinx_search.SearchLanguage):
    """English words stemmed as Sphinx's English search does, Chinese as overlapping character pairs.

    Why not Sphinx's own "zh" language: without jieba installed it indexes no Chinese at all, and with jieba
    a query is matched against jieba's words only, so a term jieba splits differently finds nothing; a
    bigram index needs no dictionary and matches any Chinese substring of two or more characters."""

    lang = "zh"
    language_name = "English and Chinese"
    stopwords = english_stopwords
    js_stemmer_code = js_porter_stemmer
    _words = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
    _cjk = re.compile(rf"^[{_CJK}]")
    js_splitter_code = """
function splitQuery(query) {
  var out = [];
  var cjk = "\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff";
  var words = new RegExp("[" + cjk + "]+|(?:(?![" + cjk + "])[\\\\p{L}\\\\p{N}_])+", "gu");
  (query.match(words) || []).forEach(function (w) {
    if (!/^[\\u3400-\\u9fff\\uf900-\\ufaff]/.test(w)) { out.push(w); return; }
    if (w.length === 1) { out.push(w); return; }
    for (var i = 0; i + 1 < w.length; i++) { out.push(w.slice(i, i + 2)); }
  });
  return out;
}
"""

    def init(self, options: dict[str, str]) -> None:
        import snowballstemmer

        self.stemmer = snowballstemmer.stemmer("english")

    def split(self, input: str) -> list[str]:
        out = []
        for w in self._words.findall(input):
            out += cjk_words(w) if self._cjk.match(w) else [w]
        return out

    def word_filter(self, word: str) -> bool:
        return len(word) > 1 or bool(self._cjk.match(word))

    def stem(self, word: str) -> str:
        return word if self._cjk.match(word) else self.stemmer.stemWord(word.lower())


#: Chinese characters and full-width punctuation: a source line break between two of them is no space.
_ZH_EDGE = f"{_CJK}\u3000-\u303f\uff00-\uffef"
_ZH_END, _ZH_START = re.compile(rf"[{_ZH_EDGE}]$"), re.compile(rf"^[{_ZH_EDGE}]")
_ZH_BREAK = re.compile(rf"(?<=[{_ZH_EDGE}])[ \t]*\n[ \t]*(?=[{_ZH_EDGE}])")


def _zh_text(node: nodes.Node) -> str:
    """What a node shows in 中文 mode: its lang-zh part when it holds both languages ({lab}`06`), else its text."""
    if isinstance(node, nodes.Element):
        zh = next(iter(node.findall(lambda n: isinstance(n, nodes.Element) and "lang-zh" in n["classes"])), None)
        if zh is not None:
            return zh.astext()
    return node.astext()


class JoinChineseLines(SphinxPostTransform):
    """A paragraph of Chinese wrapped over several source lines would show a space at each break ("推理引擎，
    每一项"): Chinese puts none between words, so a break between two Chinese characters is removed, and so is
    a space written between markup and Chinese ("**提示：** 读"). Code and raw HTML keep their text."""

    default_priority = 900

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.Text)):
            parent = node.parent
            if parent is None or isinstance(parent, (nodes.literal, nodes.literal_block, nodes.raw,
                                                     nodes.comment)):
                continue
            text = str(node)
            joined = _ZH_BREAK.sub("", text)
            # by identity: a Text node is a str, so list.index would find the first equal one ("\n")
            at = next(i for i, child in enumerate(parent.children) if child is node)
            before = next((c for c in reversed(parent.children[:at]) if c.astext()), None)  # empty Text skipped
            after = next((c for c in parent.children[at + 1:] if c.astext()), None)
            ends = before is not None and _ZH_END.search(_zh_text(before))
            starts = after is not None and _ZH_START.match(_zh_text(after))
            if not joined.strip() and "\n" in joined:  # MyST's soft break: a Text node of its own
                if ends and starts:
                    joined = ""
            else:  # "**提示：** 读", "{lab}`06` 在": a space written beside markup, between Chinese on both sides
                if ends and _ZH_START.match(joined.lstrip()):
                    joined = joined.lstrip()
                if starts and _ZH_END.search(joined.rstrip()):
                    joined = joined.rstrip()
            if joined != text:
                new = nodes.Text(joined)
                new.parent = parent
                parent.children[at] = new


def nlabs_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """{nlabs}`n`: how many labs the book shows, counted at build time (a page never says "eight" of ten)."""
    return [nodes.Text(str(len(_lab_docs())))], []


def setup(app: Sphinx) -> dict:
    sphinx_search.languages["zh"] = BookSearch
    app.connect("html-page-context", page_scripts)
    app.add_role("src", src_role)
    app.add_role("lab", lab_role)
    app.add_role("nlabs", nlabs_role)
    app.add_role("rec", rec_role)
    app.add_post_transform(OutsideLinks)
    app.add_post_transform(JoinChineseLines)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
