"""The engine (minivllm) and the labs' helpers (minivllm_labs) import each other without cycles.

A cycle is read from the source (ast), not from Python's import machinery: every `import x` and
`from x import y` of either package is an edge, at a module's top level or inside a function (a lazy import is
how a cycle is usually hidden), and so is `importlib.import_module("pkg.mod")`; an f-string name such as
`import_module(f"pkg.{name}")` is an edge to every module of pkg with a plain name (letters and underscores,
digits at the end: `latency`, `profile`, `lab07`), the names such a loader is given; a module that shows
a whole registry (`lab07_views`) is named otherwise. Files have no line cap: each has one job, and a cycle is the sign that two
files share one, or that one file has two.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The package roots: the folder each top-level package sits in.
ROOTS = {"minivllm": REPO, "minivllm_labs": REPO / "labs"}


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module an imported name lives in (`from minivllm.a import b` may name module a.b or object b)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _package_of(mod: str, is_package: bool) -> str:
    return mod if is_package else mod.rpartition(".")[0]


def _dynamic_names(arg: ast.expr, modules: set[str]) -> list[str]:
    """The modules an import_module() call can load: its literal name, or every module under an f-string's
    constant prefix."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = arg.values[0].value
        return [m for m in modules if m.startswith(prefix) and re.fullmatch(r"([a-z]+(_[a-z]+)*)?\d*", m[len(prefix):] or "-")]
    return []


def import_graph(roots: dict[str, Path] = ROOTS) -> dict[str, set[str]]:
    """module -> the modules of `roots` it imports anywhere in its file (relative imports resolved)."""
    files = {_module_name(p, base): p for top, base in roots.items() for p in (base / top).rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in files.items():
        pkg = _package_of(mod, path.name == "__init__.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == \
                    "import_module" and node.args:
                names = _dynamic_names(node.args[0], modules)
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            for n in names:
                target = _resolve(n, modules) if n.split(".")[0] in roots else None
                # a package's __init__ is not an edge: importing minivllm.x runs minivllm/__init__.py first anyway
                if target is not None and target != mod and target not in roots:
                    graph[mod].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    color = {m: 0 for m in graph}  # 0 new, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        color[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if color[n] == 1:
                return stack[stack.index(n):] + [n]
            if color[n] == 0 and (found := visit(n)) is not None:
                return found
        stack.pop()
        color[m] = 2
        return None

    for m in sorted(graph):
        if color[m] == 0 and (found := visit(m)) is not None:
            return found
    return None


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (so a failure lists every tangle, not the first)."""
    out, graph = [], {m: set(d) for m, d in graph.items()}
    while (cycle := find_cycle(graph)) is not None:
        out.append(cycle)
        graph[cycle[-2]].discard(cycle[-1])  # break this one and look again
    return out


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from p.b import g\n")
    (pkg / "b.py").write_text("from . import a\n")
    (pkg / "c.py").write_text("import importlib\nimportlib.import_module('p.a')\n")
    (pkg / "d.py").write_text("import importlib\ndef f(n):\n    return importlib.import_module(f'p.{n}')\n")
    (pkg / "d2_views.py").write_text("")
    (pkg / "e.py").write_text("import importlib\nimportlib.import_module(f'p.d{2}')\n")
    graph = import_graph({"p": tmp_path})
    assert graph["p.a"] == {"p.b"} and graph["p.b"] == {"p.a"}
    assert graph["p.c"] == {"p.a"} and graph["p.d"] == {"p.a", "p.b", "p.c", "p.e"} and graph["p.e"] == set()
    assert find_cycle(graph) == ["p.a", "p.b", "p.a"]


def test_both_packages_are_in_the_graph():
    graph = import_graph()
    assert "minivllm.llm" in graph and "minivllm_labs.quiz" in graph
    assert not any(n.startswith("minivllm_labs") for m, deps in graph.items() if m.startswith("minivllm.")
                   for n in deps), "the engine imports nothing of the labs"


def test_no_import_cycles():
    cycles = all_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _runtime_imports(path: Path) -> set[str]:
    """The modules a file imports when it runs: annotations-only imports (`if TYPE_CHECKING:`) left out."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update([node.module] + [f"{node.module}.{a.name}" for a in node.names])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def test_engine_and_worker_do_not_import_each_other():
    """One direction only: the engine (step loop, scheduler, fallback ladder) drives workers, and a worker
    runs one resolved config without calling back into the engine. The worker may name the engine's types in
    annotations (vLLM's runner names SchedulerOutput the same way)."""
    def into(folder: str, other: str) -> dict[str, list[str]]:
        return {p.name: sorted(m for m in _runtime_imports(p) if m.startswith(f"minivllm.{other}"))
                for p in (REPO / "minivllm" / folder).glob("*.py")}

    assert any(into("engine", "worker").values())  # the engine drives workers: this direction exists
    back = {name: mods for name, mods in into("worker", "engine").items() if mods}
    assert not back, f"worker/ imports engine/ (a cycle between the folders): {back}"


def test_the_folders_import_each_other_without_a_cycle():
    """The picture a learner draws of minivllm/'s folders (engine -> worker -> compilation -> kernels ...) has
    arrows one way only: no chain of runtime imports leads from a folder back to itself."""
    root = REPO / "minivllm"
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    edges: dict[str, set[str]] = {f: set() for f in folders}
    for f in folders:
        for p in (root / f).rglob("*.py"):
            for m in _runtime_imports(p):
                parts = m.split(".")
                if len(parts) > 1 and parts[0] == "minivllm" and parts[1] in edges and parts[1] != f:
                    edges[f].add(parts[1])
    assert edges["engine"], "the scan finds the folders' imports"

    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in edges[node]:
                if nxt == start:
                    return path + [start]
                if nxt not in path:
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for c in map(cycle_from, folders) if c]
    assert not cycles, f"a cycle between minivllm/'s folders: {cycles[0]}"
