"""The built book in a real browser: headless Chromium (Debian's `chromium`) driven by playwright.

What a reader would notice, checked on the pages the build wrote: every plot has drawn (plotly made its SVG),
every quiz answers a click with feedback, the EN/ZH switch shows one language and remembers it, the Mermaid
flowchart and the search work, no request leaves localhost and no page logs a console error. The book is
built first when it is missing or older than its sources (CI runs `make test` only). Screenshots of three
pages go to book/_build/screenshots/ for a person to look at.

Chromium must be installed (.ci/run installs it); this test fails, never skips, without it: a skipped
browser test would let a blank plot ship.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
HTML = BOOK / "_build" / "html"
SHOTS = BOOK / "_build" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
HANDBOOK = ["what_graphs_remove", "graphs_in_the_engine", "torch_compile", "startup_and_cache", "debugging",
            "when_to_turn_off", "interview", "self_test"]

pytestmark = pytest.mark.slow


def _sources() -> list[Path]:
    globs = [BOOK.glob("*.md"), BOOK.glob("*.yml"), BOOK.glob("*.yaml"), (BOOK / "handbook").glob("*.md"),
             (BOOK / "_ext").glob("*.py"), (BOOK / "_static").glob("*.*"), (ROOT / "labs").glob("*.ipynb"),
             (ROOT / "assets" / "results").rglob("*.json"), (ROOT / "minivllm").rglob("*.py")]
    return [p for g in globs for p in g if p.name not in ("_toc.yml", "results.md")]


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it): "
                    "the book's browser test cannot run")
    return path


@pytest.fixture(scope="module")
def html() -> Path:
    index = HTML / "index.html"
    if not index.exists() or max(p.stat().st_mtime for p in _sources()) > index.stat().st_mtime:
        sys.path.insert(0, str(BOOK / "_ext"))
        import book_build as build

        try:
            build.build()
        except SystemExit as e:  # the build's own message: which output or link does not render
            pytest.fail(f"the book did not build: {e}")
    return HTML


@pytest.fixture(scope="module")
def server(html):
    handler = functools.partial(_QuietHandler, directory=str(html))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
    """A browser page that refuses and records every request off localhost, and records console errors."""

    def __init__(self, browser, base: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.base, self.outside, self.errors = base, [], []
        self.context.route("**/*", self._route)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route) -> None:
        url = urlparse(route.request.url)
        if url.scheme in ("data", "blob", "about") or url.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def open(self, path: str) -> Page:
        self.page.goto(f"{self.base}/{path}", wait_until="load")
        self.page.wait_for_load_state("networkidle")
        return self

    def check_clean(self, what: str) -> None:
        assert not self.outside, f"{what}: requests left localhost: {self.outside[:5]}"
        assert not self.errors, f"{what}: console errors: {self.errors[:5]}"

    def close(self) -> None:
        self.context.close()


def lab_pages(html: Path) -> list[str]:
    return sorted(f"labs/{p.name}" for p in (html / "labs").glob("[0-9][0-9]_*.html"))


def _expected_outputs(lab_html: str) -> tuple[int, int]:
    """(plots, quizzes) stored in the notebook the page was built from."""
    nb = json.loads((BOOK / "labs" / (Path(lab_html).stem + ".ipynb")).read_text())
    plots = quizzes = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/html", ""))
            plots += text.count("Plotly.newPlot(")
            quizzes += text.count('class="mv-quiz')  - text.count('class="mv-quiz-')
    return plots, quizzes


def test_every_page_offline_without_console_errors(html, server, browser):
    pages = ["index.html", "intro.html", "results.html", "code/index.html",
             "code/minivllm/worker/graph_capture.html"] + [f"handbook/{n}.html" for n in HANDBOOK] + lab_pages(html)
    for path in pages:
        assert (html / path).exists(), f"{path} was not built"
        p = Page(browser, server).open(path)
        p.check_clean(path)
        p.close()


def test_lab_plots_draw_and_quizzes_answer(html, server, browser):
    labs = lab_pages(html)
    assert labs, "no lab page was built"
    SHOTS.mkdir(parents=True, exist_ok=True)
    for path in labs:
        plots, quizzes = _expected_outputs(path)
        p = Page(browser, server).open(path)
        page = p.page
        divs = page.locator(".plotly-graph-div")
        assert divs.count() == plots, f"{path}: {divs.count()} plot divs, the notebook stores {plots}"
        for i in range(divs.count()):
            divs.nth(i).locator("svg.main-svg").first.wait_for(state="attached", timeout=15000)
        if path == labs[0] and plots:
            divs.first.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "lab_plot.png"))
        roots = page.locator(".mv-quiz")
        assert roots.count() == quizzes, f"{path}: {roots.count()} quizzes on the page, the notebook has {quizzes}"
        for i in range(roots.count()):
            root = roots.nth(i)
            qid = root.get_attribute("data-qid")
            if root.locator("details.mv-quiz-option").count():
                option = root.locator("details.mv-quiz-option").nth(1)
                option.locator("summary").click()
                feedback = option.locator(".mv-quiz-feedback:visible")
                assert feedback.count() == 1 and feedback.inner_text().strip(), f"{path} {qid}: no feedback"
            else:
                root.locator("input").fill("1")
                root.locator("button").click()
                result = root.locator(".mv-quiz-result .mv-quiz-feedback:visible")
                assert result.count() == 1 and result.inner_text().strip(), f"{path} {qid}: no feedback"
        p.check_clean(path)
        if path == labs[0] and roots.count():
            roots.first.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "lab_quiz.png"))
        p.close()


def test_language_switch_shows_one_language_and_remembers(html, server, browser):
    p = Page(browser, server).open("handbook/what_graphs_remove.html")
    page = p.page
    en, zh = page.locator(".lang-en").first, page.locator(".lang-zh").first
    assert en.is_visible() and not zh.is_visible(), "English must show first"
    page.locator('#lang-switch button[data-lang="zh"]').click()
    assert zh.is_visible() and not en.is_visible(), "the switch did not show the Chinese text"
    assert page.locator("article h1 .lang-zh").is_visible(), "the title did not switch"
    page.reload()
    assert page.locator(".lang-zh").first.is_visible(), "the choice was not remembered"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "handbook_zh.png"))
    for lab in lab_pages(html):  # notebook cells tagged lang-en / lang-zh follow the same switch
        p.open(lab)
        zh_p, en_p = page.locator("article p.lang-zh"), page.locator("article p.lang-en")
        assert zh_p.count() and en_p.count(), f"{lab}: no prose marked by language"
        assert zh_p.first.is_visible() and not en_p.first.is_visible(), f"{lab}: English prose shows in 中文 mode"
    p.open("handbook/what_graphs_remove.html")
    page.locator('#lang-switch button[data-lang="en"]').click()
    assert en.is_visible() and not zh.is_visible()
    p.check_clean("language switch")
    p.close()


def test_mermaid_flowchart_and_search_work_offline(html, server, browser):
    p = Page(browser, server).open("handbook/when_to_turn_off.html")
    p.page.locator(".mermaid svg").first.wait_for(state="attached", timeout=15000)
    p.page.locator(".mermaid").first.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    p.page.screenshot(path=str(SHOTS / "fallback_ladder.png"))
    p.open("search.html?q=PIECEWISE")
    p.page.locator("#search-results li").first.wait_for(timeout=15000)
    assert p.page.locator("#search-results li").count() >= 3
    p.check_clean("mermaid + search")
    p.close()
