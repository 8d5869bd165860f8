"""Every link into vLLM's source points at a release tag and a path that exists at that tag.

Why: a link to `blob/main` cites code that moves under it (vllm/attention/ops/triton_unified_attention.py moved
to vllm/v1/attention/ops/ after the text was written), so the reader lands on a 404 or on different code. The
paths checked at each tag are kept in tests/labs/vllm_release_paths.txt (how each was checked is written there).
The same holds for vLLM's rendered docs: docs.vllm.ai/en/latest (and /en/stable) is rebuilt from the newest source,
so a sentence citing it is checked against a page that moves; it links the page's source at a tag instead
(blob/v0.33.0/docs/....md), which this file then checks like any other path.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KNOWN = ROOT / "tests" / "labs" / "vllm_release_paths.txt"
LINK = re.compile(r"github\.com/vllm-project/vllm/(?:blob|tree)/([^/\s]+)/([^\s)\"'<>`，。；）\\\]]+)")
TAG = re.compile(r"v\d+\.\d+\.\d+(?:\.\d+|\.post\d+|rc\d+)?")
MOVING_DOCS = re.compile(r"docs\.vllm\.ai/en/(?:latest|stable)\b[^\s)\"'<>`，。；）\\\]]*")


def sources() -> list[Path]:
    """What a reader sees or a maintainer reads: labs (sources, data, generated notebooks), the book's own
    files, the README, the engine and scripts. Not book/_build (generated) nor the recorded GPU notebooks under
    assets/results/*/labs_gpu (a run's record, refreshed by `make labs-gpu`)."""
    globs = ["README.md", "labs/src/*.py", "labs/*.ipynb", "labs/minivllm_labs/*.py", "labs/minivllm_labs/data/*.yaml",
             "book/*.md", "book/handbook/*.md", "book/reference/*.md", "book/_ext/*.py", "book/_static/*",
             "minivllm/**/*.py", "scripts/**/*.py", "scripts/**/*.sh", "assets/results/*/index.yaml"]
    return sorted({p for g in globs for p in ROOT.glob(g) if p.is_file()})


def links(text: str) -> list[tuple[str, str]]:
    """(ref, path) of every vLLM source link in the text, trailing punctuation and #anchors dropped."""
    return [(ref, re.sub(r"#.*$", "", path).rstrip(".,:;")) for ref, path in LINK.findall(text)]


def known() -> set[tuple[str, str]]:
    lines = KNOWN.read_text(encoding="utf-8").splitlines()
    return {tuple(ln.split()) for ln in lines if ln.strip() and not ln.startswith("#")}


def problems(found: dict[tuple[str, str], str], checked: set[tuple[str, str]]) -> list[str]:
    out = []
    for (ref, path), where in sorted(found.items()):
        if not TAG.fullmatch(ref):
            out.append(f"{where}: {ref}/{path} is not at a release tag (pin it, e.g. blob/v0.33.0/...)")
        elif (ref, path) not in checked:
            out.append(f"{where}: {path} is not listed as existing at {ref} in {KNOWN.name}")
    return out


def moving_docs(text: str) -> list[str]:
    """Every link into vLLM's rendered docs at latest or stable: the page it cites changes with each release."""
    return MOVING_DOCS.findall(text)


def test_no_link_to_vllms_moving_docs():
    bad = [f"{p.relative_to(ROOT)}: {url}" for p in sources()
           for url in moving_docs(p.read_text(encoding="utf-8", errors="replace"))]
    assert not bad, (f"{len(bad)} links to docs.vllm.ai latest/stable; link the page's source at a tag "
                     "(github.com/vllm-project/vllm/blob/v0.33.0/docs/<path>.md):\n  " + "\n  ".join(bad[:20]))


def test_every_vllm_link_is_pinned_to_a_tag_that_has_the_file():
    found: dict[tuple[str, str], str] = {}
    for p in sources():
        for link in links(p.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(link, str(p.relative_to(ROOT)))
    assert len(found) >= 20, "the scan found almost no vLLM links: is the pattern still right?"
    bad = problems(found, known())
    assert not bad, f"{len(bad)} vLLM links:\n  " + "\n  ".join(bad[:20])


def test_every_listed_path_is_still_linked():
    """A stale line would let a later link to a path that was never checked pass."""
    used = {link for p in sources() for link in links(p.read_text(encoding="utf-8", errors="replace"))}
    assert not known() - used, f"listed but linked nowhere: {sorted(known() - used)}"


def test_the_check_can_fail():
    text = ("see https://github.com/vllm-project/vllm/blob/main/vllm/envs.py, and "
            "[x](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/no_such.py#L3) or "
            "https://github.com/vllm-project/vllm/tree/v0.33.0/vllm/envs.py）。")
    found = {link: "t" for link in links(text)}
    assert set(found) == {("main", "vllm/envs.py"), ("v0.33.0", "vllm/no_such.py"), ("v0.33.0", "vllm/envs.py")}
    bad = problems(found, {("v0.33.0", "vllm/envs.py")})
    assert len(bad) == 2 and "release tag" in bad[0] + bad[1] and "no_such.py" in bad[0] + bad[1]


def test_the_docs_check_can_fail():
    text = ("[page](https://docs.vllm.ai/en/latest/features/batch_invariance/), see "
            "https://docs.vllm.ai/en/stable/serving/parallelism_scaling.html）。 but not "
            "https://docs.vllm.ai/en/v0.11.0/features/spec_decode.html nor "
            "https://github.com/vllm-project/vllm/blob/v0.33.0/docs/features/batch_invariance.md")
    assert moving_docs(text) == ["docs.vllm.ai/en/latest/features/batch_invariance/",
                                 "docs.vllm.ai/en/stable/serving/parallelism_scaling.html"]
