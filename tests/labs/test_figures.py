"""Every number with a unit in the labs' questions and claims (data/*.yaml), in the labs' markdown cells
(labs/src/*.py), in the book's pages (book/*.md, book/reference/*.md, book/handbook/*.md) and in the results
pages' prose (assets/results/*/index.yaml) is read from a record ({rec}`file.json:key`) or
is a constant declared with its source in data/constants.yaml (a seed's claim, a datasheet figure, a formula's
input). Hand-typed figures drift from their records; this test is what stops new ones.

The figures typed before this rule are listed in tests/labs/figures_pending.txt (file, figure, count): the
test fails on any figure not listed there, and on a listed one that is gone (convert it, then drop its
line: `python tests/labs/test_figures.py --write` rewrites the list from the text as it is). The list only
shrinks.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from minivllm_labs import figures as F
from minivllm_labs.common import REPO_ROOT

PENDING = Path(__file__).with_name("figures_pending.txt")
#: Book pages written at build time by book/_ext/book_prepare.py (from index.yaml, git and the labs), not by hand.
GENERATED_PAGES = {"results.md", "version.md", "labs_missing.md"}
#: Data fields that hold names, paths and keys, not prose.
NOT_PROSE = {"file", "key", "code", "lab", "link", "evidence_key", "evidence_file", "id", "topic", "source",
             "evidence", "seed", "verdict", "correct"}
#: The prose of a results folder's index.yaml (book_results.PROSE: shown on the results pages); its other fields
#: (file, command, commit, date, gpu, source, topic) name files and provenance.
INDEX_PROSE = ("what", "what_zh", "result", "result_zh")


def _strings(obj, key=""):
    if isinstance(obj, str):
        if key not in NOT_PROSE:
            yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v, key)


def _markdown(path: Path) -> str:
    import jupytext

    return "\n".join(c.source for c in jupytext.reads(path.read_text(encoding="utf-8"), fmt="py:percent").cells
                     if c.cell_type == "markdown")


def texts() -> dict[str, str]:
    """Every scanned file (repository-relative) -> its prose."""
    import yaml

    out = {}
    for p in sorted((REPO_ROOT / "labs" / "minivllm_labs" / "data").glob("lab*.yaml")):
        out[str(p.relative_to(REPO_ROOT))] = "\n".join(_strings(yaml.safe_load(p.read_text(encoding="utf-8"))))
    for p in sorted((REPO_ROOT / "labs" / "src").glob("*.py")):
        out[str(p.relative_to(REPO_ROOT))] = _markdown(p)
    book = REPO_ROOT / "book"
    for p in sorted([*book.glob("*.md"), *(book / "reference").glob("*.md"), *(book / "handbook").glob("*.md")]):
        if p.name not in GENERATED_PAGES:
            out[str(p.relative_to(REPO_ROOT))] = p.read_text(encoding="utf-8")
    for p in sorted((REPO_ROOT / "assets" / "results").glob("*/index.yaml")):
        index = yaml.safe_load(p.read_text(encoding="utf-8"))
        out[str(p.relative_to(REPO_ROOT))] = "\n".join(
            e[k] for section in ("files", "archive", "rows") for e in index.get(section) or []
            for k in INDEX_PROSE if isinstance(e.get(k), str))
    return out


def records(file: str) -> Path:
    """The results folder a scanned file's roles read: a results folder's index reads its own folder."""
    return (REPO_ROOT / file).parent if file.startswith("assets/results/") else F.RECORDS


def hand_typed(all_texts: dict[str, str]) -> Counter:
    """(file, figure) -> count, for figures neither rendered nor declared."""
    declared = F.declared()
    return Counter((f, x) for f, t in all_texts.items() for x in F.figures(t) if x not in declared)


def pending() -> Counter:
    c = Counter()
    for line in PENDING.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            f, x, n = line.split("\t")
            c[(f, x)] = int(n)
    return c


@pytest.fixture(scope="module")
def all_texts():
    return texts()


def test_no_new_hand_typed_figure(all_texts):
    found, allowed = hand_typed(all_texts), pending()
    new = {k: n - allowed[k] for k, n in found.items() if n > allowed[k]}
    roles = sum(len(F.ROLE.findall(t)) for t in all_texts.values())
    print(f"\nfigures: {roles} read from records, {sum(len(F.figures(t)) for t in all_texts.values()) - sum(found.values())}"
          f" declared constants, {sum(found.values())} hand-typed still pending")
    assert not new, ("figures neither read from a record ({rec}`file.json:key:fmt`) nor declared in "
                     f"data/constants.yaml: {sorted(new)}")


def test_pending_list_only_shrinks(all_texts):
    found, allowed = hand_typed(all_texts), pending()
    stale = {k: n - found[k] for k, n in allowed.items() if found[k] < n}
    assert not stale, f"converted figures still listed in {PENDING.name} (drop them): {sorted(stale)}"


def test_every_record_role_resolves(all_texts):
    bad = {f: F.broken_roles(t, records(f)) for f, t in all_texts.items() if F.broken_roles(t, records(f))}
    assert not bad, bad


def test_constants_are_named_once_with_a_source():
    names = [c["name"] for c in F.constants().values()]
    assert len(F.constants()) >= 10 and len(set(names)) == len(names)
    for c in F.constants().values():
        assert c["source"].strip() and c["forms"], c["name"]


def test_the_scanner_finds_figures_and_skips_roles_and_code():
    assert F.figures("TPOT 0.93 ms, capture 8.7 s, 72% of copy, about 10 times, 1.66 GiB, 5–10 µs") == \
        ["0.93ms", "8.7s", "72%", "10times", "1.66GiB", "5-10us"]
    assert F.figures("{rec}`lab02.json:padding.capture.seconds:.2f` s, `sleep 5 s`, 64 x 8 programs, 35 sizes") == []
    assert F.figures("显存池 150MB显存，1.8倍") == ["150MB", "1.8倍"]
    assert F.figures("约减少10%至15%, 5% to 8%") == ["10-15%", "5-8%"]
    assert F.figures("2 x layers x heads, 2 × 层数, 127 x TPOT; 3.74x slower, 1.6 x 1.25 ms") == ["3.74x", "1.25ms"]


def test_every_results_index_is_scanned(all_texts):
    assert "assets/results/h200/index.yaml" in all_texts
    prose = all_texts["assets/results/h200/index.yaml"]
    assert "Lab 01" in prose and "scripts/gpu_check.sh" not in prose  # what/result, never a command


def test_every_book_page_is_scanned(all_texts):
    pages = {f for f in all_texts if f.startswith("book/")}
    assert {"book/differs_from_vllm.md", "book/reference/knobs.md", "book/handbook/workshop.md"} <= pages
    assert not any(Path(f).name in GENERATED_PAGES or "/_build/" in f or "/code/" in f for f in pages)


def test_archive_members_are_reached_by_their_file_name():
    # archive.json folds old records under files.<name>.json; a member's name holds dots and is matched whole
    member = next(iter(F.value("archive.json", "files")))
    assert F.value("archive.json", f"files.{member}") is F.value("archive.json", "files")[member]
    assert F.render("{rec}`archive.json:files.kernels_40cba88.json.decode[batch=64,context=2048].frac_of_copy*100:.1f`") \
        == format(F.value("archive.json", "files")["kernels_40cba88.json"]["decode"][0]["frac_of_copy"] * 100, ".1f")


def test_a_ratio_is_read_from_its_two_keys():
    num, den = F.value("lab02.json", "padding.capture.seconds"), F.value("lab02.json", "rng.distinct")
    assert F.value("lab02.json", "padding.capture.seconds/rng.distinct") == num / den
    assert F.render("{rec}`lab02.json:padding.capture.seconds/rng.distinct*100:.3f`") == format(num / den * 100, ".3f")
    assert F.figures("{rec}`lab02.json:padding.capture.seconds/rng.distinct:.2f`x") == []
    # a key that holds a slash is read whole, never as a ratio
    us = F.value("profile_prefetch.json", "runs.0.categories.rope (+q/k norm).us")
    assert us == F.value("profile_prefetch.json", "runs.0.categories")["rope (+q/k norm)"]["us"]


def test_render_reads_the_given_results_folder(tmp_path):
    (tmp_path / "lab02.json").write_text('{"rng": {"distinct": 7}}')
    assert F.render("{rec}`lab02.json:rng.distinct` / {rec}`lab02.json:rng.distinct`", tmp_path) == "7 / 7"
    assert F.broken_roles("{rec}`lab02.json:padding.capture.seconds`", tmp_path)


def test_render_reads_the_record_and_never_raises():
    assert F.render("{rec}`lab02.json:rng.distinct`") == str(F.value("lab02.json", "rng.distinct"))
    assert F.render("{rec}`lab02.json:padding.capture.seconds*1000:.0f` ms").endswith(" ms")
    assert F.render("{rec}`nope.json:a.b`") == "n/a (nope.json:a.b)"


if __name__ == "__main__" and "--write" in sys.argv:
    sys.path.insert(0, str(REPO_ROOT / "labs"))
    found = hand_typed(texts())
    lines = ["# Hand-typed figures not yet read from a record (file, figure, count); see test_figures.py."]
    lines += [f"{f}\t{x}\t{n}" for (f, x), n in sorted(found.items())]
    PENDING.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{PENDING}: {sum(found.values())} figures in {len(found)} lines")
