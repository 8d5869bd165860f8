"""Lay the generated sources of the book into book/ before Sphinx reads it (all of them gitignored).

- book/labs/NN_slug.ipynb: copies of the labs/*.ipynb that exist now, with their stored outputs (the book
  never executes a notebook), and labs/README.md (the lab standard) when it exists. Sphinx reads only files under its source folder, and a copy (not a symlink)
  behaves the same on every file system.
- book/_toc.yml: the handbook pages, then one entry per lab notebook found, the results page and the engine
  source pages. Generated, so a lab that is not written yet is simply absent instead of breaking the build.
- book/results.md and book/results/<topic>.md: the recorded H200 results, one page per topic, one row per
  figure (book_results.py).
- book/code/**: the engine's source as pages (book_codepages.py), so links into the code work offline.
- book/_extra/vendor/plotly.min.js: plotly.js from the installed plotly package (never a CDN).
- book/_extra/notebooks/: each lab's notebook and its GPU-executed copies, linked from the lab's page.
- book/version.md: the commit and date the book was built from, and the GPU records' commits.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import book_codepages as codepages
import book_devices as devices
import book_results as results
from book_codepages import write_if_changed

BOOK = Path(__file__).resolve().parents[1]
ROOT = BOOK.parent

HANDBOOK = [  # the chapter's pages, in reading order (book/handbook/<name>.md)
    "what_graphs_remove", "graphs_in_the_engine", "torch_compile", "startup_and_cache", "debugging",
    "when_to_turn_off", "interview", "self_test",
    "workshop",  # for teachers: a shared GPU box, the CPU path, a timed agenda, answers and progress
]


#: The reference a newcomer does not need first, moved from the README (book/reference/<name>.md).
REFERENCE = ["knobs", "checkpoints_and_configs", "headline_results"]


def lab_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))


PLOTLY_JSON = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
EMBEDDED_PLOTLYJS = re.compile(r"<script[^>]*data-minivllm-plotlyjs[^>]*>.*?</script>", re.DOTALL)
#: The notebook's own language switch (minivllm_labs.language: its CSS, three buttons, its script), made for
#: JupyterLab: in the book it would hide by its own stored choice what the book's switch shows, so it goes.
LAB_LANG_SWITCH = re.compile(r"<style>(?:(?!</style>).)*mv-lang-switch.*?</style>\s*"
                             r"<div class=\"mv-lang-switch\".*?</div>\s*<script>.*?</script>", re.DOTALL)


def static_outputs(nb: dict, name: str, labs: list[str] | None = None) -> list[str]:
    """Make every stored output drawable in a static page; return what cannot be (the build fails on it).

    Every plotly figure is drawn again from its stored JSON by the labs' own helper (minivllm_labs.plots:
    finish + figure_html), so the book shows the current figure style (legend below, fixed colours, both
    languages, the modebar without its network buttons) whatever plots.py wrote when the notebook was built;
    plotly.js is served once by the book, not embedded. Links from an output to another lab's notebook
    (`07_claims.ipynb`) go to that lab's page. A widget output needs a static text/html form next to it (the
    labs' quizzes have one); without one the page would show `VBox(...)`, so it is reported."""
    import plotly.graph_objects as go
    from minivllm_labs import plots

    notebooks = re.compile(r"\b(" + "|".join(map(re.escape, labs or [name])) + r")\.ipynb\b")
    problems, n_plot = [], 0
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_JSON in data:
                n_plot += 1
                fig = go.Figure(data[PLOTLY_JSON], skip_invalid=True)
                data["text/html"] = plots.figure_html(plots.finish(fig), f"{name}-plot{n_plot}")
            for mime in ("text/html", "text/markdown"):
                if mime in data:
                    text = "".join(data[mime])
                    text = LAB_LANG_SWITCH.sub("", EMBEDDED_PLOTLYJS.sub("", text))
                    data[mime] = notebooks.sub(r"\1.html" if mime == "text/html" else r"\1.ipynb", text)
            if WIDGET in data and "text/html" not in data:
                cid = cell.get("id", f"#{i}")
                problems.append(f"labs/{name}.ipynb cell {cid}: a widget output with no static text/html "
                                f"form (shows as {''.join(data.get('text/plain', ''))[:40]!r})")
            if "text/html" in data:  # MyST-NB parses every mime type of a bundle and warns on these two
                data.pop(PLOTLY_JSON, None)
                data.pop(WIDGET, None)
    return problems


#: The handbook's section numbers the labs cite (the chapter they were written against is "chapter 03"): each
#: becomes a link to the page that holds that section now; the table is also on how_to_use_the_labs.md.
SECTIONS = {"1.1": "what_graphs_remove", "1.2": "what_graphs_remove", "1.3": "what_graphs_remove",
            "1.4": "graphs_in_the_engine", "2": "torch_compile", "3": "startup_and_cache",
            "4.5": "when_to_turn_off", "4.6": "when_to_turn_off"}
_SECTION = re.compile(r"(?<![\[\w/])§(\d(?:\.\d)?)(?![\d\]])")


def link_sections(src: str) -> str:
    """"§4.6" in a lab's markdown -> a link to the handbook page of that section (numbers it does not know
    stay text). Code spans are left alone."""
    parts = re.split(r"(`[^`]*`)", src)
    for i in range(0, len(parts), 2):
        parts[i] = _SECTION.sub(lambda m: f"[§{m.group(1)}](../handbook/{SECTIONS[m.group(1)]}.md)"
                                if m.group(1) in SECTIONS else m.group(0), parts[i])
    return "".join(parts)


def mark_language_cells(nb: dict) -> None:
    """MyST-NB renders markdown cells into the page's sections with no element of their own (only code cells
    get a `tag_...` class), so a lang-en / lang-zh markdown cell is bracketed by two empty marker divs;
    lang.js gives every block between them the cell's language class (lang.css then hides the other)."""
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        lang = next((t.removeprefix("lang-") for t in tags if t in ("lang-en", "lang-zh")), None)
        if cell["cell_type"] != "markdown":
            continue
        src = link_sections("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
        src = src.replace(DIFFERS_LINK, f"../{DIFFERS_PAGE}.md")
        cell["source"] = src
        if lang is None:
            continue
        cell["source"] = (f'<div class="lang-cell-start" data-lang="{lang}"></div>\n\n{src}\n\n'
                          '<div class="lang-cell-end"></div>')


def copy_labs() -> list[str]:
    dest = BOOK / "labs"
    dest.mkdir(exist_ok=True)
    names, problems = [], []
    stems = [p.stem for p in lab_notebooks()]
    for nb_path in lab_notebooks():
        nb = json.loads(nb_path.read_text())
        problems += static_outputs(nb, nb_path.stem, stems)
        mark_language_cells(nb)
        devices.add_devices_cell(nb, nb_path.stem)  # every recorded GPU beside the H200 (book_devices.py)
        add_downloads(nb, nb_path)
        write_if_changed(dest / nb_path.name, json.dumps(nb, ensure_ascii=False, indent=1))
        names.append(nb_path.stem)
    if problems:
        raise SystemExit("outputs the book cannot show:\n  " + "\n  ".join(problems))
    for stale in dest.glob("*.ipynb"):
        if stale.stem not in names:
            stale.unlink()
    readme = ROOT / "labs" / "README.md"  # the lab standard: how every lab is written
    if readme.exists():
        write_if_changed(dest / "README.md", contributors_page(readme.read_text()))
    elif (dest / "README.md").exists():
        (dest / "README.md").unlink()
    return names


def add_downloads(nb: dict, nb_path: Path) -> None:
    """A reader takes the lab away: the notebook (CPU outputs, runs anywhere) and, where a GPU ran it end to
    end, that executed copy (assets/results/<gpu>/labs_gpu/), served from the book's notebooks/ folder and
    linked under the lab's title."""
    out = BOOK / "_extra" / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(nb_path, out / nb_path.name)
    links = [(f"../notebooks/{nb_path.name}", "Download the notebook (.ipynb)", "下载 notebook（.ipynb）")]
    for gpu_copy in sorted((ROOT / "assets" / "results").glob(f"*/labs_gpu/{nb_path.name}")):
        gpu = gpu_copy.parts[-3]
        (out / gpu).mkdir(exist_ok=True)
        shutil.copyfile(gpu_copy, out / gpu / nb_path.name)
        links.append((f"../notebooks/{gpu}/{nb_path.name}", f"the copy executed on the {gpu.upper()}",
                      f"在 {gpu.upper()} 上执行过的版本"))
    html = "".join(f'<a class="mv-download" href="{href}" download><span class="lang-en">{en}</span>'
                    f'<span class="lang-zh" lang="zh">{zh}</span></a>' for href, en, zh in links)
    cell = {"cell_type": "markdown", "id": f"{nb_path.stem[:2]}-book-downloads", "metadata": {},
            "source": f'<p class="mv-downloads">{html}</p>'}
    at = next((i + 1 for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"), 0)
    nb["cells"].insert(at, cell)


def version_page() -> str:
    """What the book was built from: the commit and date, and the commit of every GPU record it shows."""
    import subprocess
    from datetime import datetime, timezone

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    built = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for rec in sorted((ROOT / "assets" / "results").glob("*/lab[0-9][0-9].json")) + \
            sorted((ROOT / "assets" / "results").glob("*/labs_gpu.json")):
        p = results.provenance(rec)
        rows.append(f"| `{rec.parts[-2]}` | `{rec.name}` | {p['gpu']} | `{p['commit'] or '-'}` | {p['date'] or '-'} |")
    return "\n".join([
        "# Version · 版本", "",
        ":::{container} lang-en",
        (f"This book was built from commit `{head}`{dirty} on {built}. The labs' GPU records it shows were made "
         "at these commits (each file's own provenance):"), ":::", "",
        ":::{container} lang-zh",
        (f"本书构建自 commit `{head}`{'（含未提交的改动）' if dirty else ''}，构建时间 {built}。书中展示的各实验 GPU "
         "记录产生于下列 commit（取自每个文件自带的来源信息）："), ":::", "",
        "| device · 设备 | file · 文件 | GPU | commit | date · 日期 |", "|---|---|---|---|---|", *rows, "",
        "## The handbook as PDF · 手册的 PDF 版", "",
        ":::{container} lang-en",
        ("The handbook's pages printed from this build, one language per file: "
         '<a href="pdf/minivllm-handbook-en.pdf" download>minivllm-handbook-en.pdf</a>. `make book` prints them '
         "with Debian's chromium (`make test-deps` installs it); without it the book builds and says so."), ":::", "",
        ":::{container} lang-zh",
        ("手册各页由本次构建打印而成，每种语言一个文件："
         '<a href="pdf/minivllm-handbook-zh.pdf" download>minivllm-handbook-zh.pdf</a>。`make book` 用 Debian 的 '
         "chromium 打印（`make test-deps` 会安装它）；没有 chromium 时书照常构建，并打印一行说明。"), ":::", ""])


def contributors_page(text: str) -> str:
    """labs/README.md (the lab standard, written in English for who writes a lab) as the book's contributors'
    page: a bilingual title, a Chinese summary for the 中文 reader, the standard itself in the English view."""
    lines = text.splitlines()
    body = "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines)
    return "\n".join([
        "# For contributors: the lab standard · 贡献者：实验编写规范", "",
        ":::{container} lang-zh",
        ("本页是编写和修改实验时遵循的规范（单元格的顺序、自测题的规则、图与结果文件的要求、测试），面向贡献者，"
         "以英文书写：切换到 **EN** 阅读全文。学习者请看[如何使用这些实验](../how_to_use_the_labs.md)。"),
        ":::", "", "::::{container} lang-en",
        "Readers: [How to use the labs](../how_to_use_the_labs.md) is the learner's page.", "",
        body.replace("\n# ", "\n## "), "::::", ""])


#: The labs link the README's pointer to the table of differences (book/differs_from_vllm.md); in the book the
#: link opens that page.
DIFFERS_LINK = "../README.md#where-minivllm-differs-from-vllm"
DIFFERS_PAGE = "differs_from_vllm"


def copy_plotly_js() -> None:
    import plotly

    src = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not src.exists():
        raise SystemExit(f"plotly.min.js not found in the plotly package at {src}")
    dest = BOOK / "_extra" / "vendor" / "plotly.min.js"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists() or dest.stat().st_size != src.stat().st_size:
        shutil.copyfile(src, dest)


def write_toc(labs: list[str], code_docs: list[str], results_topics: list[str]) -> None:
    lines = ["# Generated by book/_ext/book_prepare.py: edit HANDBOOK there, not this file.",
             "format: jb-book", "root: intro", "parts:",
             "  - caption: Handbook · 手册", "    chapters:"]
    lines += [f"      - file: handbook/{name}" for name in HANDBOOK]
    lines += ["  - caption: Reference · 参考", "    chapters:"]  # moved from the README (book/reference/)
    lines += [f"      - file: {DIFFERS_PAGE}"] + [f"      - file: reference/{name}" for name in REFERENCE]
    lines += ["      - file: version"]
    lines += ["  - caption: Labs · 实验", "    chapters:", "      - file: how_to_use_the_labs"]
    lines += [f"      - file: labs/{name}" for name in labs] or ["      - file: labs_missing"]
    lines += ["  - caption: Results · 测量结果", "    chapters:", "      - file: results", "        sections:"]
    lines += [f"          - file: results/{topic}" for topic in results_topics]
    lines += ["  - caption: Engine source · 引擎源码", "    chapters:", "      - file: code/index",
              "        sections:"]
    lines += [f"          - file: {doc}" for doc in code_docs]
    if (BOOK / "labs" / "README.md").exists():  # the lab standard: for who writes a lab, not who reads one
        lines += ["  - caption: Contributors · 贡献者", "    chapters:", "      - file: labs/README"]
    write_if_changed(BOOK / "_toc.yml", "\n".join(lines) + "\n")


def lab_titles(labs: list[str]) -> dict[str, str]:
    """Lab id ("01") -> the notebook's title line, for the book's lab references."""
    out = {}
    for name in labs:
        nb = json.loads((BOOK / "labs" / f"{name}.ipynb").read_text())
        first = next((c for c in nb["cells"] if c["cell_type"] == "markdown"), None)
        text = "".join(first["source"]) if first else name
        out[name[:2]] = text.strip().splitlines()[0].lstrip("# ").strip()
    return out


def prepare() -> None:
    labs = copy_labs()
    copy_plotly_js()
    code_docs = codepages.write_pages(ROOT, BOOK / "code")
    pages = results.pages(ROOT)
    write_if_changed(BOOK / "results.md", pages.pop("index"))
    (BOOK / "results").mkdir(exist_ok=True)
    for topic, text in pages.items():
        write_if_changed(BOOK / "results" / f"{topic}.md", text)
    for stale in (BOOK / "results").glob("*.md"):
        if stale.stem not in pages:
            stale.unlink()
    write_if_changed(BOOK / "version.md", version_page())
    write_if_changed(BOOK / "_labs.json", json.dumps(lab_titles(labs), ensure_ascii=False, indent=1))
    if not labs:
        write_if_changed(BOOK / "labs_missing.md", "# Labs · 实验\n\nNo lab notebook found in labs/.\n")
    write_toc(labs, code_docs, list(pages))



if __name__ == "__main__":
    prepare()
