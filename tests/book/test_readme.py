"""The README is a newcomer's page: small, and every link in it and into it leads somewhere.

Why: the reference that grew in the README (the knobs, every config field, the differs-from-vLLM table, the
results) moved to the book (issue 41); the labs and the book still link `README.md#<heading>`, and a link
that lands nowhere is the first thing a newcomer meets. No browser, no build: seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_BYTES = 12 * 1024
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(md: str) -> set[str]:
    """GitHub's (and MyST's) heading anchors of a markdown text."""
    out = set()
    for title in re.findall(r"^#{1,6} (.+)$", md, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, over {MAX_BYTES}: move reference text to the book"
    text = README.read_text()
    for command in ("make demo", "make test", "make book", "make lab"):
        assert command in text, f"the README does not show `{command}`"


def test_readme_links_resolve():
    text = README.read_text()
    links = [u for u in _LINK.findall(text) if not re.match(r"^[a-z]+:", u)]
    assert len(links) >= 6, links  # the scan finds the book pages
    broken = []
    for url in links:
        path, _, anchor = url.partition("#")
        target = (README.parent / path) if path else README
        if not target.exists():
            broken.append(url)
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            broken.append(url)
    assert not broken, f"README links that lead nowhere: {broken}"


def test_links_into_the_readme_land_on_a_heading():
    """Every `README.md#anchor` a lab, a test or a book page writes names a heading the README has."""
    have = anchors(README.read_text())
    sources = [*(ROOT / "labs" / "src").glob("*.py"), *(ROOT / "labs" / "minivllm_labs").rglob("*.py"),
               *(ROOT / "labs" / "minivllm_labs" / "data").glob("*.yaml"), *(ROOT / "book").glob("*.md"),
               *(ROOT / "book" / "handbook").glob("*.md"), *(ROOT / "book" / "reference").glob("*.md"),
               *(ROOT / "book" / "_ext").glob("*.py"), *(ROOT / "tests").rglob("*.py")]
    wanted = {}
    for p in sources:
        if p == Path(__file__).resolve():
            continue
        for a in re.findall(r"(?<![\w/])(?:\.\./)*README\.md#([\w-]+)", p.read_text(errors="replace")):
            wanted.setdefault(a, p.relative_to(ROOT).as_posix())
    assert "where-minivllm-differs-from-vllm" in wanted, "the scan finds the labs' links"
    missing = {a: f for a, f in wanted.items() if a not in have}
    assert not missing, f"README.md has no heading for: {missing}"
