"""A lab in a real JupyterLab: run it, save, restart the server, reopen, and the quiz and the toggle still work.

What a self-study learner does: open a lab, Run All, answer, close everything, come back tomorrow. With
ipywidgets views stored in the notebook every quiz then read "Error displaying widget: model not found"; the
labs' controls are now HTML + JS (quiz_html.py, toggles.toggle_html, kernel_js.py). This test drives JupyterLab
(the labs extras) with Debian's chromium through playwright (the book extras), never a downloaded browser.

The notebook is Lab 01's own cells (built from labs/src like the committed one): its title and first prose
pair, the setup cell, the toggle and the first quiz, so the run takes seconds instead of the whole lab's
minute. The server runs with every Jupyter directory and the progress file in a temporary folder, so the
learner's home is never touched. Set MINIVLLM_SHOTS=DIR to keep screenshots of each stage.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOKEN = "minivllm-test-token"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return path


def lab_notebook(dest: Path) -> Path:
    """The committed Lab 01 cut to what the test needs (outputs as stored: what a learner opens first), written
    under its own file name (the page finds its kernel by it)."""
    import nbformat

    src = next((REPO / "labs").glob("01_*.ipynb"))
    nb = nbformat.read(src, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells = nb.cells[:3] + [next(c for c in code if "open_lab(" in c.source),
                               next(c for c in code if c.source.strip().endswith("lab.toggle()")),
                               next(c for c in code if c.source.startswith("lab.quiz("))]
    path = dest / src.name
    nbformat.write(nb, path)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`jupyter lab` on root, its config, data, runtime and settings directories all under root's parent."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.port = root, _free_port()
        env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / "config"),
               "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
               "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
               "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "IPYTHONDIR": str(home / "ipython"),
               "MINIVLLM_PROGRESS": str(home / "progress.json"), "CUDA_VISIBLE_DEVICES": "",
               "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "labs")])}
        env.pop("MINIVLLM_LAB_STATIC", None)
        self.log = open(home / f"server-{self.port}.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={self.port}", "--ip=127.0.0.1",
             f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={TOKEN}",
             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not start: {(home / f'server-{self.port}.log').read_text()[-2000:]}")

    def url(self, nb: Path) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{nb.name}?token={TOKEN}&reset"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _shot(page, name: str) -> None:
    if os.environ.get("MINIVLLM_SHOTS"):
        out = Path(os.environ["MINIVLLM_SHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out / f"{name}.png"), full_page=False)


def _open(page, url: str) -> None:
    """Open the notebook and wait for its kernel to be idle (the status bar says so)."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="visible", timeout=60_000)
    page.wait_for_function("() => /\\| Idle/.test(document.querySelector('#jp-main-statusbar').innerText)",
                           timeout=60_000)


def _click_quiz_and_toggle(page) -> None:
    quiz = page.locator(".mv-quiz[data-live]").first
    quiz.wait_for(timeout=30_000)
    page.locator(".mv-toggle[data-live]").first.wait_for(timeout=30_000)
    assert "Error displaying widget" not in page.inner_text(".jp-Notebook")
    wrong = quiz.locator("details.mv-quiz-option[data-ok='0'] summary").first
    wrong.click()
    hint = quiz.locator("details.mv-quiz-option[open] .mv-quiz-feedback.lang-en")
    hint.wait_for(timeout=10_000)
    assert "Try another option" in hint.inner_text()
    right = quiz.locator("details.mv-quiz-option[data-ok='1'] summary")
    right.click()
    # the page's radio behaviour closes the wrong option on the toggle event, just after the click
    quiz.locator("details.mv-quiz-option[open] .mv-quiz-feedback.lang-en", has_text="Correct.").wait_for(
        timeout=10_000)
    page.wait_for_function("(q) => q.querySelectorAll('details.mv-quiz-option[open]').length === 1",
                           arg=quiz.element_handle(), timeout=10_000)
    toggle = page.locator(".mv-toggle").first
    toggle.locator("button.mv-toggle-option").first.click()
    page.wait_for_selector(".mv-toggle[data-state='done'], .mv-toggle[data-state='error'], "
                           ".mv-toggle[data-state='failed']", timeout=90_000)
    status = toggle.locator(".mv-toggle-status").inner_text()
    assert toggle.get_attribute("data-state") == "done" and "measured on this machine" in status, status
    assert toggle.locator(".mv-toggle-row").count() >= 1, toggle.inner_html()[-3000:]


@pytest.mark.slow
def test_quiz_and_toggle_survive_save_restart_reopen(tmp_path):
    pytest.importorskip("jupyterlab")
    sync_api = pytest.importorskip("playwright.sync_api")
    root, home = tmp_path / "labs", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    nb = lab_notebook(root)
    server = Server(root, home)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _open(page, server.url(nb))
            _shot(page, "01-before-run")
            page.get_by_role("menuitem", name="Run").click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            # the fresh outputs are trusted, so their scripts run and mark them live (the stored ones were not)
            page.locator(".mv-quiz[data-live]").first.wait_for(timeout=90_000)
            _click_quiz_and_toggle(page)
            _shot(page, "01-after-run")
            page.keyboard.press("Control+s")
            page.wait_for_selector(".jp-mod-current:not(.jp-mod-dirty)", timeout=20_000)
            time.sleep(1)
            browser.close()
        server.stop()
        server = Server(root, home)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _open(page, server.url(nb))
            _click_quiz_and_toggle(page)
            _shot(page, "01-after-reopen")
            assert page.locator(".lm-TabBar-tab.jp-mod-dirty").count() == 0, "a reopened notebook marked changed"
            browser.close()
    finally:
        server.stop()
