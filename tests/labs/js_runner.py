"""Run a piece of the labs' page JavaScript and read back one JSON value: with node when it is installed, else in
headless Chromium (the Debian package the book's tests use), so the Python-vs-JavaScript grader tests run on CI
machines that have either one."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def available() -> bool:
    return bool(shutil.which("node") or _chromium())


def run_js(script: str, expr: str, prefer: str = "node"):
    """Evaluate `script`, then JSON-encode `expr` and return it decoded."""
    if prefer == "node" and shutil.which("node"):
        out = subprocess.run(["node", "-e", f"{script}\nconsole.log(JSON.stringify({expr}));"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return json.loads(out)
    browser = _chromium()
    if browser is None:
        raise RuntimeError("neither node nor chromium is installed")
    page = ('<!doctype html><meta charset="utf-8"><pre id="out"></pre><script>' + script +
            f'\ndocument.getElementById("out").textContent = JSON.stringify({expr});</script>')
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "page.html"
        path.write_text(page, encoding="utf-8")
        dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={d}/profile", "--dump-dom",
                              path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    if not m:
        raise RuntimeError(f"chromium returned no result: {dom[:300]!r}")
    return json.loads(html.unescape(m.group(1)))
