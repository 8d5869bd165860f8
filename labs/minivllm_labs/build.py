"""Regenerate every lab notebook from its Python source, executed, keeping outputs and execution counts.

    python -m minivllm_labs.build             # every labs/src/*.py -> labs/*.ipynb, executed (make labs)
    python -m minivllm_labs.build 01 03       # only the labs whose file name contains "01" or "03"
    python -m minivllm_labs.build 05 --cell-times 5   # and print its 5 slowest cells (what to speed up first)
    python -m minivllm_labs.build --check     # exit 1 if a notebook's cells no longer match its source
    python -m minivllm_labs.build --gpu OUT   # on a CUDA machine: run every notebook end to end, GPU-only
                                              # cells included, into OUT/ (make labs-gpu); fails on any error

Why sources: a .ipynb is JSON with outputs inside, painful to review and to edit by hand. Each lab is written
as a plain Python file in jupytext's "percent" format, read with jupytext:

    # %% [markdown] tags=["lang-en"]
    # ## A heading
    # %% tags=["nbval-ignore-output"]
    code ...
    # %% tags=["nbval-skip"] id="gpu-sweep"
    code ...

A cell header may carry `tags=[...]` and `id="..."` (the cell id). Cells without an id get `<lab>-<nn>`, so
ids are stable from build to build; a `nbval-skip` cell must name its id, because
tests/nbval_skip_allowlist.txt refers to it. A leading block of comment lines is the file's header, not a
cell. The notebook is then executed with nbclient in labs/ (where nbval runs it too) and written back.

The committed notebooks are executed with GPUs hidden (their stored outputs are what CI, a CPU, reproduces)
and with quiz_show.STATIC_ENV set (quizzes stored as static HTML: no widget model outlives the build's kernel).
--gpu is the other way round: GPUs visible, nothing skipped, written elsewhere, for checking that every cell
runs on real hardware.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat

from minivllm_labs.common import REPO_ROOT
from minivllm_labs.figures import render
from minivllm_labs.language import mark_cell
from minivllm_labs.quiz_show import STATIC_ENV

LABS_DIR = REPO_ROOT / "labs"
SRC_DIR = LABS_DIR / "src"
#: The lab standard's aim for a whole notebook's Run All on a 2-core CPU (kernel start included), in seconds.
RUN_ALL_AIM_S = 90
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def parse_source(text: str, slug: str) -> list[nbformat.NotebookNode]:
    """Read a percent-format source (jupytext) into cells with stable ids and their tags."""
    import jupytext

    cells = jupytext.reads(text, fmt="py:percent").cells
    if cells and cells[0].cell_type == "code" and all(
            line.startswith("#") for line in cells[0].source.splitlines()):
        cells = cells[1:]  # the file's header comment
    out = []
    for n, cell in enumerate(cells):
        tags = list(cell.metadata.get("tags", []))
        explicit = cell.metadata.get("id")
        if "nbval-skip" in tags and not explicit:
            first = cell.source.splitlines()[0] if cell.source else ""
            raise ValueError(f"{slug}: a cell tagged nbval-skip needs an explicit id (first line: {first!r})")
        text = cell.source.strip("\n")
        if cell.cell_type == "markdown":  # {rec}`<file>.json:<key>` roles become the recorded number (figures.py)
            text = render(text)
        if cell.cell_type == "markdown":  # JupyterLab's language switch hides a cell by this marker
            text = mark_cell(text, tags)
        new = (nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell)(text)
        new.id = explicit or f"{slug}-{n:02d}"
        if tags:
            new.metadata["tags"] = tags
        out.append(new)
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{slug}: duplicate cell ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return out


def build_notebook(src: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = parse_source(src.read_text(), src.stem.split("_")[0])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 600, gpu: bool = False,
            cell_times: list | None = None) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel in labs/ (nbval's working directory), like a learner would.

    gpu=False (the committed notebooks): GPUs hidden, quizzes static. gpu=True: the machine as it is, every
    cell run (nbclient ignores nbval tags) and the first error raised as nbclient.CellExecutionError.
    cell_times: a list that receives (seconds, cell id, first line) per code cell."""
    from nbclient import NotebookClient

    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": _pythonpath()}
    if not gpu:
        env.update({"CUDA_VISIBLE_DEVICES": "", STATIC_ENV: "1"})
    timed = gpu or cell_times is not None
    NotebookClient(nb, timeout=timeout, kernel_name=KERNELSPEC["name"], store_widget_state=False,
                   record_timing=timed, resources={"metadata": {"path": str(LABS_DIR)}}).execute(env=env)
    if cell_times is not None:
        cell_times += _cell_seconds(nb)
    if not gpu:  # no per-cell timing metadata in the committed notebooks: it would change on every rebuild
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
    return nb


def _cell_seconds(nb: nbformat.NotebookNode) -> list[tuple[float, str, str]]:
    """(seconds, id, first line) of each executed code cell, from nbclient's timing metadata."""
    from datetime import datetime

    out = []
    for cell in nb.cells:
        t = cell.metadata.get("execution", {})
        if "iopub.execute_input" in t and "shell.execute_reply" in t:
            start, end = (datetime.fromisoformat(t[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            out.append(((end - start).total_seconds(), cell.id, (cell.source.splitlines() or [""])[0][:70]))
    return out


def _pythonpath() -> str:
    """This checkout first, so the kernel imports the minivllm and minivllm_labs being built (not another
    install)."""
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(REPO_ROOT), str(LABS_DIR)] + ([rest] if rest else []))


def sources(patterns: list[str] | str = "") -> list[Path]:
    """The lab sources whose name holds one of the patterns, in the patterns' order (all labs: none given)."""
    patterns = [patterns] if isinstance(patterns, str) else (patterns or [""])
    found: list[Path] = []
    for pattern in patterns:
        found += [p for p in sorted(SRC_DIR.glob("*.py")) if pattern in p.stem and p not in found]
    return found


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


def strip_plotlyjs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The executed copy without its embedded plotly.js (figures keep their data and draw where plotly.js is
    loaded: JupyterLab's renderer, the book)."""
    from minivllm_labs.plots import strip_embedded_plotlyjs

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html")
            if html:
                out["data"]["text/html"] = strip_embedded_plotlyjs("".join(html))
    return nb


def run_on_gpu(srcs: list[Path], out_dir: Path, timeout: int) -> int:
    """Execute each lab end to end on this CUDA machine into out_dir; report every failing notebook."""
    import torch
    from nbclient.exceptions import CellExecutionError

    if not torch.cuda.is_available():
        print("--gpu needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for src in srcs:
        nb, t0 = build_notebook(src), time.perf_counter()
        status = "ok"
        try:
            execute(nb, timeout, gpu=True)
        except CellExecutionError as e:
            failed.append(src.stem)
            status = f"FAILED\n{str(e)[-3000:]}"
        nbformat.write(strip_plotlyjs(nb), out_dir / f"{src.stem}.ipynb")
        print(f"{src.stem}: {status} ({time.perf_counter() - t0:.0f} s) -> {out_dir / (src.stem + '.ipynb')}",
              flush=True)
    print(f"{len(srcs) - len(failed)}/{len(srcs)} notebooks ran without error on "
          f"{torch.cuda.get_device_name()}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.build", description=__doc__.splitlines()[0])
    ap.add_argument("patterns", nargs="*", metavar="pattern",
                    help="only labs whose source name contains one of these, in this order")
    ap.add_argument("--check", action="store_true", help="only check notebooks match their sources")
    ap.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    ap.add_argument("--gpu", metavar="OUT_DIR", help="execute every cell on this CUDA machine into OUT_DIR "
                                                     "(labs/ untouched); exit 1 if any cell fails")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("--cell-times", type=int, default=0, metavar="N",
                    help="also print each lab's N slowest cells (seconds; the notebook keeps no timing)")
    args = ap.parse_args(argv)
    srcs = sources(args.patterns)
    if not srcs:
        ap.error(f"no lab source matches {' '.join(args.patterns)!r} in {SRC_DIR}")
    if args.check:
        diffs = [d for s in srcs for d in cells_match(s, LABS_DIR / f"{s.stem}.ipynb")]
        print("\n".join(diffs) or f"{len(srcs)} lab notebook(s) match their sources")
        return 1 if diffs else 0
    if args.gpu:
        out = Path(args.gpu).resolve()
        if out == LABS_DIR.resolve():
            ap.error("--gpu writes executed copies elsewhere: labs/ holds the CPU-built notebooks")
        return run_on_gpu(srcs, out, args.timeout)
    from minivllm_labs.plots import install_plotlyjs

    install_plotlyjs(LABS_DIR / "_static")  # what the stored figures load in nbconvert HTML exported here
    slow = []
    for src in srcs:
        out = LABS_DIR / f"{src.stem}.ipynb"
        nb = build_notebook(src)
        run_all, times = "", None
        if not args.no_execute:
            t0, times = time.perf_counter(), ([] if args.cell_times else None)
            execute(nb, args.timeout, cell_times=times)
            took = time.perf_counter() - t0
            run_all = f", Run All {took:.0f} s"
            if took > RUN_ALL_AIM_S:
                slow.append(f"{src.stem} ({took:.0f} s)")
                run_all += f": over the {RUN_ALL_AIM_S} s aim"
        nbformat.validate(nb)
        nbformat.write(nb, out)
        print(f"wrote {out.relative_to(REPO_ROOT)} ({len(nb.cells)} cells{run_all})", flush=True)
        for seconds, cid, first in sorted(times or [], reverse=True)[:args.cell_times]:
            print(f"  {seconds:6.1f} s  {cid:12s} {first}")
    if slow:
        print(f"Run All over {RUN_ALL_AIM_S} s on this machine ({os.cpu_count()} CPUs): {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
