"""Every code hint in a lab's prose runs as written in that notebook.

The prose tells the learner to type things (`grade(lab.Q1, "C")`, `lab.launch_overhead(n_ops=10)`); a hint that
names something the notebook never defines (the old `lab01.Q1`, when the notebook binds only `lab`) raises
NameError in the learner's hands. Each lab source's markdown cells are read for inline code spans and fenced
blocks; a span is a hint when it parses as Python, calls something, and names the lab (`lab.`), a function of
the package or a name of the notebook's code cells. For each hint:

- every name it reads must be bound after the notebook's cells ran (their assignments, imports, definitions,
  loop variables), a builtin, or bound by the hint itself; every `lab.X` must exist on the lab;
- unless it reads a run-it-here value (an engine, a measurement: minutes on a CPU), loads a real checkpoint (a
  GPU exercise) or is a template (`...`),
  it is run after the notebook's import statements and its setup cell (`lab = open_lab(NN)`, `rec`); any
  exception fails the test.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "labs" / "src"
SOURCES = sorted(SRC.glob("[0-9][0-9]_*.py"))


def _cells(path: Path):
    import jupytext

    return jupytext.reads(path.read_text(), fmt="py:percent").cells


def snippets(path: Path) -> list[str]:
    """Inline code spans and fenced python blocks of the lab's markdown cells, in order, without repeats."""
    found: list[str] = []
    for cell in _cells(path):
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        found += re.findall(r"```(?:python|py)?\n(.*?)```", text, re.DOTALL)
        text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        found += re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)
    return list(dict.fromkeys(found))


def bound_names(path: Path) -> tuple[set[str], list[str]]:
    """Names the notebook's code cells bind, and its import statements (as source)."""
    names, imports = set(), []
    for cell in _cells(path):
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # a cell with IPython syntax: none in the labs
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
                imports.append(ast.unparse(node))
    return names, imports


def free_names(tree: ast.AST) -> set[str]:
    """Names a snippet reads that it does not bind itself (imports, assignments, lambda / comprehension args)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def lab_attrs(tree: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "lab"}


def hints(path: Path) -> list[tuple[str, ast.Module]]:
    """The snippets that are code for the learner to run (see the module docstring)."""
    names, imports = bound_names(path)
    imported = {(a.asname or a.name).split(".")[0] for i in imports for a in ast.parse(i).body[0].names}
    out = []
    for s in snippets(path):
        try:
            tree = ast.parse(s)
        except SyntaxError:
            continue
        if not any(isinstance(n, ast.Call) for n in ast.walk(tree)):
            continue
        roots = free_names(tree) | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                                    and n.module}
        if roots & ((names - imported) | {"minivllm_labs", "lab", "grade"}):
            out.append((s, tree))
    return out


#: A hint that loads a real checkpoint is a GPU exercise (minutes on a CPU): its names are checked, it is not run.
GPU_HINT = re.compile(r"""model\(["']qwen""")


class _Later:
    """A value of the notebook that the test does not compute (an engine, a run-it-here measurement)."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_every_lab_has_hints_and_the_extraction_finds_them():
    found = {p.stem[:2]: [s for s, _ in hints(p)] for p in SOURCES}
    assert 'from minivllm_labs import grade; print(grade(lab.Q1, "C")[1])' in found["01"]
    assert sum(map(len, found.values())) >= 15, found


def problems(src: Path, number: str | None = None) -> list[str]:
    """What goes wrong with each hint of a lab source (see the module docstring); [] when every hint runs."""
    from minivllm_labs.opening import Lab

    names, imports = bound_names(src)
    lab = Lab(number or src.stem[:2])
    ns: dict = {n: _Later(n) for n in names}
    for stmt in imports:
        exec(stmt, ns)  # noqa: S102 (the notebook's own import statements)
    ns.update(lab=lab, rec=lab.rec)
    found = []
    for text, tree in hints(src):
        missing = sorted(n for n in free_names(tree) if n not in names and not hasattr(builtins, n))
        absent = sorted(a for a in lab_attrs(tree) if not hasattr(lab, a))
        if missing or absent:
            found.append(f"{text!r}: not defined in the notebook: {missing + [f'lab.{a}' for a in absent]}")
            continue
        later = {n for n in free_names(tree) if isinstance(ns.get(n), _Later)}
        if later or GPU_HINT.search(text) or any(isinstance(n, ast.Constant) and n.value is Ellipsis
                                                 for n in ast.walk(tree)):
            continue  # a run-it-here value, a GPU exercise or a template ("..."): its names were checked above
        try:
            exec(compile(tree, f"<{src.stem} hint>", "exec"), dict(ns))  # noqa: S102
        except Exception as e:  # noqa: BLE001 (every failure is reported with its hint)
            found.append(f"{text!r}: {type(e).__name__}: {e}")
    return found


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem[:2])
def test_every_hint_runs_in_its_notebook(src):
    assert not (found := problems(src)), "\n".join(found)


def test_a_hint_naming_what_the_notebook_lacks_fails(tmp_path):
    src = tmp_path / "01_fake.py"
    src.write_text('# %%\nfrom minivllm_labs import open_lab\nlab = open_lab("01")\nrec = lab.rec\n\n'
                   '# %% [markdown]\n# Try `from minivllm_labs import grade; print(grade(lab01.Q1, "C")[1])`,\n'
                   '# `lab.no_such_view(rec)` and `print(grade(lab.Q1, "C"))`.\n')
    found = problems(src)
    assert len(found) == 3 and "['lab01']" in found[0] and "lab.no_such_view" in found[1], found
    assert "['grade']" in found[2], found
