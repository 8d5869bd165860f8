"""assets/results/h200/ and its index.yaml agree: every file is listed with what it is, the command that made
it, its commit and date (as the file itself records them); every file the code, the labs or the book read
exists; the folder stays small (at most 45 files, experiments folded into archive.json)."""

from __future__ import annotations

import json
import re
import sys

import pytest
from minivllm_labs.common import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
import book_results

H200 = REPO_ROOT / "assets" / "results" / "h200"
INDEX = book_results.load_index(H200)


def _folder_files() -> set[str]:
    return {p.relative_to(H200).as_posix() for p in H200.rglob("*") if p.is_file()}


def test_the_folder_holds_at_most_45_files():
    assert len(_folder_files()) <= 45, sorted(_folder_files())


def test_every_file_is_in_the_index_and_every_entry_exists():
    listed = [e["file"] for e in INDEX["files"]]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    on_disk = _folder_files() - {book_results.INDEX, book_results.ARCHIVE}
    assert on_disk - set(listed) == set(), "files missing from index.yaml"
    assert set(listed) - on_disk == set(), "index.yaml lists files that do not exist"
    members = set(json.loads((H200 / book_results.ARCHIVE).read_text())["files"])
    archived = {e["file"] for e in INDEX["archive"]}
    assert members == archived, members ^ archived
    assert not members & on_disk, "a file is both in the folder and in the archive"


@pytest.mark.parametrize("entry", INDEX["files"] + INDEX["archive"], ids=lambda e: e["file"])
def test_an_entry_says_what_how_and_when_as_its_file_does(entry):
    for key in ("what", "command", "commit", "date"):
        assert str(entry.get(key) or "").strip(), f"{entry['file']}: no {key}"
    if not entry["file"].endswith(".json"):
        return
    data = book_results.recorded_files(H200)[entry["file"]]
    prov = book_results.provenance_of(data)
    assert entry["commit"] == prov["commit"] and str(entry["date"]) == prov["date"], (entry, prov)


def test_every_row_of_the_results_page_names_recorded_files():
    names = set(book_results.recorded_files(H200))
    for row in INDEX["rows"]:
        assert set(row.get("files") or []) <= names, row["what"]
    page = book_results.page(REPO_ROOT)
    assert "archive.json" in page and "(archive)" in page


def _read_names() -> set[str]:
    """Every results file a reader names: paths in the labs' package and sources, the handbook's {rec} roles
    and links, the README, gpu_check.sh, and the bench files Lab 03 opens by name."""
    names = set()
    texts = [*(REPO_ROOT / "labs" / "minivllm_labs").rglob("*.py"), *(REPO_ROOT / "labs" / "minivllm_labs" /
             "data").glob("*.yaml"), *(REPO_ROOT / "labs" / "src").glob("*.py"),
             *(REPO_ROOT / "book" / "handbook").glob("*.md"), REPO_ROOT / "README.md",
             *(REPO_ROOT / "book" / "reference").glob("*.md"), REPO_ROOT / "book" / "differs_from_vllm.md",
             REPO_ROOT / "book" / "intro.md", *(REPO_ROOT / "minivllm").rglob("*.py")]
    for p in texts:
        t = p.read_text()
        names |= set(re.findall(r"assets/results/h200/([\w.-]+\.json)", t))
        names |= set(re.findall(r"\{rec\}`([\w.-]+\.json):", t))
        names |= {f"{n}.json" for n in re.findall(r"(?:_tpot|bench_value|_bench)\('([\w-]+)'", t)}
    return names


#: Records a lab reads that the H200 has not made yet: the lab shows "not recorded yet" and its CPU run until then.
#: Records written after the last H200 session: Lab 12 (`scripts/gpu_check.sh fp8`, python -m minivllm_labs.record lab12).
AWAITING_GPU: set[str] = set()


def test_every_file_a_reader_names_exists():
    names = _read_names()
    assert {"lab01.json", "latency.json", "attention_unregistered.json"} <= names  # the scan finds them
    assert not AWAITING_GPU & {p.name for p in H200.glob("*.json")}, "recorded now: drop it from AWAITING_GPU"
    missing = sorted(n for n in names - AWAITING_GPU if not (H200 / n).is_file())
    assert not missing, f"read but not in assets/results/h200/: {missing}"
