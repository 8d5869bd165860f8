"""The engine's modules import each other without cycles, and each file stays under 400 lines.

A cycle is read from the source (ast), not from Python's import machinery: every `import minivllm.x` and
`from minivllm.x import y` at a module's top level is an edge. Within the engine (not the labs, benchmarks,
tools and CLI, which import the engine from outside), imports inside functions count too: a lazy import is
how a cycle is usually hidden.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "minivllm"
# Packages whose modules are tools and notebooks' helpers, not the engine (they import the engine; nothing in
# the engine imports them).
NOT_ENGINE = ("minivllm_labs", "minivllm.bench", "minivllm.tools", "minivllm.cli", "minivllm.demo")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
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


def import_graph(top_level_only: bool) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        for node in nodes:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for n in names:
                target = _resolve(n, modules) if n.startswith("minivllm") else None
                if target is not None and target != mod and target != "minivllm":
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


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_at_module_level():
    cycle = find_cycle(import_graph(top_level_only=True))
    assert cycle is None, " -> ".join(cycle)


def test_no_import_cycles_in_the_engine_counting_lazy_imports():
    graph = {m: {n for n in deps if not n.startswith(NOT_ENGINE)} for m, deps in import_graph(False).items()
             if not m.startswith(NOT_ENGINE)}
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_is_under_400_lines(path):
    n = len(path.read_text().splitlines())
    assert n < 400, f"{path.relative_to(ROOT)} has {n} lines"
