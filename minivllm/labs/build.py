"""Regenerate every lab notebook from its Python source, executed, keeping outputs and execution counts.

    python -m minivllm.labs.build             # every labs/src/*.py -> labs/*.ipynb, executed
    python -m minivllm.labs.build 01          # only the labs whose file name contains "01"
    python -m minivllm.labs.build --check     # exit 1 if a notebook's cells no longer match its source

Why sources: a .ipynb is JSON with outputs inside, painful to review and to edit by hand. Each lab is
written as a plain Python file in "percent" format (the format of jupytext and VS Code):

    # %% [markdown]
    # ## A heading
    # %% tags=["nbval-ignore-output"]
    code ...
    # %% tags=["nbval-skip"] id="gpu-sweep"
    code ...

A cell header may carry `tags=[...]` (nbval tags) and `id="..."` (the cell id). Cells without an id get
`<lab>-<n>`; a `nbval-skip` cell must name its id, because tests/nbval_skip_allowlist.txt refers to it.
The notebook is then executed with nbclient in labs/ (where nbval runs it too) and written back.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat

from minivllm.labs.common import REPO_ROOT

LABS_DIR = REPO_ROOT / "labs"
SRC_DIR = LABS_DIR / "src"
_HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?P<attrs>.*)$")
_ATTR = re.compile(r'(\w+)=(\[[^\]]*\]|"[^"]*")')
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def parse_source(text: str, slug: str) -> list[nbformat.NotebookNode]:
    """Split a percent-format source into notebook cells (markdown lines lose their leading '# ')."""
    cells, header, body = [], None, []

    def flush():
        if header is None:
            return
        src = "\n".join(body).strip("\n")
        attrs = {k: json.loads(v) for k, v in _ATTR.findall(header.group("attrs"))}
        tags = attrs.get("tags", [])
        cid = attrs.get("id") or f"{slug}-{len(cells):02d}"
        if "nbval-skip" in tags and "id" not in attrs:
            raise ValueError(f"{slug}: a cell tagged nbval-skip needs an explicit id (first line: "
                             f"{src.splitlines()[0] if src else ''!r})")
        if header.group("md"):
            src = "\n".join(re.sub(r"^# ?", "", line) for line in src.splitlines())
            cell = nbformat.v4.new_markdown_cell(src)
        else:
            cell = nbformat.v4.new_code_cell(src)
        cell.id = cid
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            flush()
            header, body = m, []
        elif header is not None:
            body.append(line)
    flush()
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{slug}: duplicate cell ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return cells


def build_notebook(src: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = parse_source(src.read_text(), src.stem.split("_")[0])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 600) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel in labs/ (nbval's working directory), like a learner would.

    GPUs are hidden from the kernel: the stored outputs must be the ones CI (a CPU) reproduces, whatever
    machine regenerates them."""
    from nbclient import NotebookClient

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false"}
    NotebookClient(nb, timeout=timeout, kernel_name=KERNELSPEC["name"],
                   resources={"metadata": {"path": str(LABS_DIR)}}).execute(env=env)
    return nb


def sources(pattern: str = "") -> list[Path]:
    return [p for p in sorted(SRC_DIR.glob("*.py")) if pattern in p.stem]


def cells_match(src: Path, nb_path: Path) -> list[str]:
    """Differences between the source's cells and the notebook's (sources, tags, ids); [] if in sync."""
    if not nb_path.exists():
        return [f"{nb_path.name} does not exist"]
    want, have = build_notebook(src).cells, nbformat.read(nb_path, as_version=4).cells
    if len(want) != len(have):
        return [f"{nb_path.name}: {len(have)} cells, source has {len(want)}"]
    diffs = []
    for i, (a, b) in enumerate(zip(want, have)):
        pairs = (("type", a.cell_type, b.cell_type), ("source", a.source, b.source),
                 ("tags", a.metadata.get("tags", []), b.metadata.get("tags", [])), ("id", a.id, b.id))
        for key, va, vb in pairs:
            if va != vb:
                diffs.append(f"{nb_path.name} cell {i} ({a.id}): {key} differs")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minivllm.labs.build", description=__doc__.splitlines()[0])
    ap.add_argument("pattern", nargs="?", default="", help="only labs whose source name contains this")
    ap.add_argument("--check", action="store_true", help="only check notebooks match their sources")
    ap.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args(argv)
    srcs = sources(args.pattern)
    if not srcs:
        ap.error(f"no lab source matches {args.pattern!r} in {SRC_DIR}")
    if args.check:
        diffs = [d for s in srcs for d in cells_match(s, LABS_DIR / f"{s.stem}.ipynb")]
        print("\n".join(diffs) or f"{len(srcs)} lab notebook(s) match their sources")
        return 1 if diffs else 0
    for src in srcs:
        out = LABS_DIR / f"{src.stem}.ipynb"
        t0 = time.perf_counter()
        nb = build_notebook(src)
        if not args.no_execute:
            execute(nb, args.timeout)
        nbformat.validate(nb)
        nbformat.write(nb, out)
        print(f"wrote {out.relative_to(REPO_ROOT)} ({len(nb.cells)} cells, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
