"""Build the book: `python book/_ext/book_build.py` (what `make book` and tests/book/test_book.py run).

Why a script and not only `jupyter-book build`: the book shows files that live outside book/ (the labs'
notebooks, the engine's source, the recorded results), and Sphinx reads only files under its source folder.
So the build first lays generated copies into book/ (all gitignored, see book_prepare.py), then runs Jupyter Book
with warnings kept in a log, and fails on any warning: a skipped output (a plot stored only as JSON, a widget
with no static form), a broken link or a missing record key each leaves a hole in a page a learner reads.
Last, the handbook's pages are printed to one PDF per language (book_pdf.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BOOK / "_ext"))

import book_pdf as pdf
import book_prepare as prepare


def build(clean: bool = False) -> Path:
    """Prepare the sources, run Jupyter Book, fail on fatal warnings; return the html folder."""
    t0 = time.time()
    prepare.prepare()
    html = BOOK / "_build" / "html"
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(BOOK), "--builder", "html"]
    if clean:
        cmd.append("--all")
    env = {**os.environ, "PLOTLY_RENDERER": "notebook"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)  # the log says why
    log = proc.stdout + proc.stderr
    (BOOK / "_build").mkdir(exist_ok=True)
    (BOOK / "_build" / "build.log").write_text(log)
    warnings = [ln for ln in log.splitlines() if "WARNING" in ln or "ERROR" in ln]
    for ln in warnings:
        print(ln)
    if proc.returncode != 0 or not (html / "index.html").exists():
        print(log[-4000:])
        raise SystemExit(f"book build failed (exit {proc.returncode}); log: {BOOK / '_build' / 'build.log'}")
    if warnings:  # an output MyST-NB skipped, a broken link, a bad record key: each is a hole in a page
        raise SystemExit(f"book build: {len(warnings)} warning(s), listed above; log: "
                         f"{BOOK / '_build' / 'build.log'}")
    for own in (BOOK / "_static").iterdir():  # an incremental build keeps the old copy of an edited lang.js
        shutil.copyfile(own, html / "_static" / own.name)
    chromium = pdf.find_chromium()
    if chromium:
        pdf.build_pdfs(html, chromium)
    else:
        print("the handbook's PDF was not made: Debian's chromium is not installed (make test-deps installs it)")
    print(f"book built in {time.time() - t0:.0f} s: {html / 'index.html'}")
    return html


if __name__ == "__main__":
    build(clean="--all" in sys.argv)
