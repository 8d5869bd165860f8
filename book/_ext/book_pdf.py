"""The handbook as a PDF to take away, one file per language: `book/_build/html/pdf/minivllm-handbook-{en,zh}.pdf`.

Why this way: Jupyter Book's own routes need what an offline machine lacks (`pdfhtml` downloads a Chromium
through pyppeteer; `pdflatex` needs a TeX installation with CJK fonts). The built HTML pages already look
right, so Debian's chromium (the one `make test` installs for the browser test) prints them, through
playwright, one language at a time (the reader's language choice, as lang.js reads it), and pypdf joins the
pages into one file with a bookmark per page. Without chromium the book still builds and says so in one line.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

from book_prepare import HANDBOOK

LANGS = {"en": "English", "zh": "中文"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PDF_DIR = "pdf"  # under the html folder, so the book's pages link it as pdf/<name>


def pdf_name(lang: str) -> str:
    return f"minivllm-handbook-{lang}.pdf"


def find_chromium() -> str | None:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return path if Path(path).exists() else None


def build_pdfs(html: Path, chromium: str) -> list[Path]:
    """Print the handbook's pages in each language and join them; return the PDFs written."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    out_dir = html / PDF_DIR
    out_dir.mkdir(exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for lang in LANGS:
                context = browser.new_context()
                # the stored choice lang.js reads before the page is drawn; nothing leaves the machine
                context.add_init_script(f"try {{ localStorage.setItem('minivllm-book-lang', '{lang}'); }} "
                                        "catch (e) {}")
                context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                              else route.abort())
                page = context.new_page()
                writer = PdfWriter()
                for name in HANDBOOK:
                    page.goto((html / "handbook" / f"{name}.html").as_uri(), wait_until="load")
                    page.wait_for_timeout(300)  # mermaid draws its diagrams after load
                    title = page.title().split(" — ")[0]
                    start = len(writer.pages)
                    for pdf_page in PdfReader(io.BytesIO(page.pdf(format="A4", print_background=True,
                                                                  margin={"top": "14mm", "bottom": "14mm",
                                                                          "left": "12mm", "right": "12mm"}))).pages:
                        writer.add_page(pdf_page)
                    writer.add_outline_item(title=_one_language(title, lang), page_number=start)
                writer.add_metadata({"/Title": f"minivllm handbook ({LANGS[lang]})", "/Author": "minivllm"})
                path = out_dir / pdf_name(lang)
                with open(path, "wb") as f:
                    writer.write(f)
                written.append(path)
                context.close()
        finally:
            browser.close()
    return written


def _one_language(title: str, lang: str) -> str:
    """'What graphs remove · 图去掉了什么' -> the side in `lang` (titles are written English · 中文)."""
    parts = [t.strip() for t in title.split(" · ")]
    return parts[-1] if lang == "zh" and len(parts) > 1 else parts[0]
