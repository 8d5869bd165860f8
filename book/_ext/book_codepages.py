"""The engine's source as book pages: book/code/minivllm/<path>.md, one per Python file.

Why pages and not links to a code host: the book must work offline, and a learner following "the dispatcher
picks the graph" should land on that function. Each top-level class or function gets an anchor
(`anchor(path, name)`), used by the book's {src} role and by the labs' plain relative links
(`../minivllm/worker/graph_capture.py`), which the book's extension rewrites to these pages.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path


def write_if_changed(path: Path, text: str) -> None:
    """Sphinx re-reads a page whose file is newer: leave unchanged files alone so a rebuild stays short."""
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def anchor(path: str, name: str) -> str:
    """The HTML id of `name` (a top-level def/class) on the page of `path` ("minivllm/x/y.py").

    A leading underscore becomes "private-": `compile_model` and `_compile_model` need two ids."""
    if name.startswith("_"):
        name = "private " + name.lstrip("_")
    return re.sub(r"[^a-z0-9]+", "-", f"src {path} {name}".lower()).strip("-")


def docname(path: str) -> str:
    """"minivllm/worker/graph_capture.py" -> "code/minivllm/worker/graph_capture"."""
    return "code/" + path[: -len(".py")]


def top_level(tree: ast.Module) -> list[ast.stmt]:
    """Top-level classes and functions, first definition of each name (torch.library's fake kernels are all
    called `_`: they get no anchor of their own)."""
    seen, out = set(), []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name != "_" \
                and n.name not in seen:
            seen.add(n.name)
            out.append(n)
    return out


def defines(source: str, dotted: str) -> bool:
    """Does the module define `dotted` ("f", "Class", "Class.method") at top level?"""
    tree = ast.parse(source)
    head, _, rest = dotted.partition(".")
    for node in top_level(tree):
        if node.name == head:
            if not rest:
                return True
            return isinstance(node, ast.ClassDef) and any(
                getattr(n, "name", None) == rest for n in node.body)
    return False


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def page(path: str, source: str) -> str:
    """Markdown for one file: the definitions listed, then the file in chunks, one per definition."""
    lines = source.splitlines()
    defs = top_level(ast.parse(source))
    out = [f"# `{path}`", "",
           ("[The engine's source, as it is in the repository.]{.lang-en}"
            "[引擎源码，与仓库中的文件一致。]{.lang-zh}"), ""]
    if defs:
        out.append(" · ".join(f"[`{d.name}`](#{anchor(path, d.name)})" for d in defs))
        out.append("")
    starts = [0] + [(d.decorator_list[0].lineno if d.decorator_list else d.lineno) - 1 for d in defs]
    ends = starts[1:] + [len(lines)]
    names = [None] + [d.name for d in defs]
    for start, end, name in zip(starts, ends, names):
        chunk = "\n".join(lines[start:end]).rstrip("\n")
        if not chunk.strip():
            continue
        if name:
            out += [f"({anchor(path, name)})=", f"**`{name}`**", ""]
        fence = _fence(chunk)
        out += [f"{fence}{{code-block}} python", f":lineno-start: {start + 1}", "", chunk, fence, ""]
    return "\n".join(out)


def write_pages(root: Path, dest: Path) -> list[str]:
    """Write every minivllm/**/*.py as a page under `dest`; return their docnames in order."""
    files = sorted(p.relative_to(root).as_posix() for p in (root / "minivllm").rglob("*.py")
                   if "__pycache__" not in p.parts and p.stat().st_size > 0)
    docs = []
    for rel in files:
        target = dest.parent / (docname(rel) + ".md")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_if_changed(target, page(rel, (root / rel).read_text()))
        docs.append(docname(rel))
    for stale in dest.rglob("*.md"):  # a source file that was removed or renamed
        if stale != dest / "index.md" and stale.relative_to(dest.parent).with_suffix("").as_posix() not in docs:
            stale.unlink()
    index = ["# Engine source · 引擎源码", "",
             ("[Every Python file of the engine (`minivllm/`), one page each; the handbook and the labs link "
              "to the function they talk about.]{.lang-en}"
              "[引擎（`minivllm/`）的每个 Python 文件各一页；手册和实验里的链接直接跳到所讲的函数。]{.lang-zh}"), ""]
    index += [f"- [`{rel}`](/{docname(rel)})" for rel in files]
    write_if_changed(dest / "index.md", "\n".join(index) + "\n")
    return docs
