"""One check for every code link in the labs: a link names a file that exists and, when it names a definition
(`Name` or `Class.member`), that definition is in the file. Used for the notebooks' markdown links (labs/src) and
for the `code:` fields of the question banks (labs/minivllm_labs/data/*.yaml)."""

import ast
import re
from functools import cache
from pathlib import Path

import yaml
from minivllm_labs.common import REPO_ROOT

LINK = re.compile(r"\[[^\]]*\]\(\.\./((?:minivllm|labs)/[^)#]+\.py)\)")
NAME = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`")
# the names that follow a link stop at the next link, sentence or clause
STOP = re.compile(r"\[|\.\s|;|；|。|\n#?\s*\n")


@cache
def _tree(path: str) -> ast.Module:
    return ast.parse((REPO_ROOT / path).read_text())


def _defined(node: ast.AST) -> set[str]:
    """Names a node defines at any depth: functions, classes, assignments, dataclass fields, `self.x = ...`."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                for e in ast.walk(t):
                    if isinstance(e, ast.Name):
                        names.add(e.id)
                    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        names.add(e.attr)
    return names


def missing(path: str, name: str = "") -> str | None:
    """Why `path` (relative to the repository) does not define `name`, or None when it does. `Class.member` needs
    a top-level class with that member; a bare name may be defined anywhere in the file (a method named alone)."""
    if not (REPO_ROOT / path).is_file():
        return f"{path}: no such file"
    if not name:
        return None
    tree = _tree(path)
    head, _, member = name.partition(".")
    if not member:
        return None if head in _defined(tree) else f"{path} defines no `{head}`"
    top = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == head), None)
    if top is None:
        return f"{path} has no class `{head}`"
    return None if member in _defined(top) else f"{path}: `{head}` has no `{member}`"


def markdown_links(text: str) -> list[tuple[str, str]]:
    """(path, name) for each link into the code and each `Name` that follows it; (path, "") for a bare link."""
    out = []
    for m in LINK.finditer(text):
        rest = text[m.end():m.end() + 300]
        stop = STOP.search(rest)
        names = NAME.findall(rest[:stop.start() if stop else len(rest)])
        out += [(m.group(1), n) for n in names] or [(m.group(1), "")]
    return out


def yaml_code_fields(node) -> list[str]:
    """Every `code:` value (path or path::Name) anywhere in a loaded YAML document."""
    if isinstance(node, dict):
        here = [node["code"]] if isinstance(node.get("code"), str) else []
        return here + [c for v in node.values() for c in yaml_code_fields(v)]
    if isinstance(node, list):
        return [c for v in node for c in yaml_code_fields(v)]
    return []


def lab_links() -> list[tuple[str, str, str]]:
    """(where, path, name) for every code link in every lab source and every question bank."""
    out = []
    for src in sorted((REPO_ROOT / "labs" / "src").glob("*.py")):
        out += [(src.name, p, n) for p, n in markdown_links(src.read_text())]
    for data in sorted((REPO_ROOT / "labs" / "minivllm_labs" / "data").glob("*.yaml")):
        for code in yaml_code_fields(yaml.safe_load(data.read_text())):
            path, _, name = code.partition("::")
            out.append((data.name, path, name))
    return out


def lab_sources() -> list[Path]:
    return sorted((REPO_ROOT / "labs" / "src").glob("[0-9][0-9]_*.py"))
