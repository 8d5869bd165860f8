"""Run every test `make test` promises and say where the time went.

Why a script and not three lines in the Makefile: the three parts (pytest over tests/, the book's browser test,
nbval over the labs) each run to the end even when an earlier one fails, so one red part never hides another,
and the run ends with one short table (seconds and counts per part, the slowest files) so a part that got
slower is seen at once against the 12-minute budget. Each part's counts come from its JUnit XML.

    python scripts/test_all.py            # what `make test` runs
    python scripts/test_all.py pytest     # one part (or several: pytest browser nbval)
    python scripts/test_all.py pytest -- -x -k logprobs   # pytest options after --, given to each part

Each process runs torch on one thread (OMP_NUM_THREADS=1 unless set): two xdist workers share the two cores,
and the tiny CPU models' ops are too small to split, so a second thread per process only spins (measured:
two engine tests took 25 s of CPU with two threads, 10 s with one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 12 * 60  # issue 40: the whole `make test` on a 2-core CPU box, after the venv exists
WORKERS = os.environ.get("MINIVLLM_TEST_WORKERS", "2")  # pytest-xdist processes for pytest and nbval ("0": none)
COMMON = ["-q", "-p", "no:cacheprovider"]
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


def parts() -> dict[str, list[str]]:
    xdist = ["-n", WORKERS, "--dist", "loadfile"] if WORKERS not in ("", "0") else []
    return {
        # tests/book builds the book once in a module fixture: one process, never split across workers.
        "pytest": [*COMMON, *xdist, "tests", "--ignore=tests/book"],
        "browser": [*COMMON, "-p", "no:xdist", "tests/book"],
        # loadfile keeps each notebook's cells, which share one kernel, in order on one worker.
        "nbval": [*COMMON, *xdist, *NBVAL, "labs/"],
    }


def run_part(name: str, args: list[str], xml: Path) -> tuple[int, float]:
    cmd = [sys.executable, "-m", "pytest", *args, f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    print(f"\n== {name}: {' '.join(cmd[1:])}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t0 = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
    return rc, time.monotonic() - t0


def read_junit(xml: Path) -> tuple[dict[str, int], dict[str, float], float]:
    """(counts by outcome, seconds by file, the longest fixture set-up) from a JUnit XML report; set-up times
    come from the setup_s property tests/conftest.py records."""
    counts: dict[str, int] = defaultdict(int)
    by_file: dict[str, float] = defaultdict(float)
    longest_setup = 0.0
    if not xml.exists():
        return counts, by_file, longest_setup
    for case in ET.parse(xml).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        outcome = ("errors" if "error" in tags else "failed" if "failure" in tags
                   else "skipped" if "skipped" in tags else "passed")
        counts[outcome] += 1
        where = case.get("file") or case.get("classname", "?").replace(".", "/") + ".py"
        by_file[where] += float(case.get("time") or 0.0)
        for prop in case.iter("property"):
            if prop.get("name") == "setup_s":
                longest_setup = max(longest_setup, float(prop.get("value")))
    return counts, by_file, longest_setup


def summary(counts: dict[str, int]) -> str:
    order = ("passed", "skipped", "failed", "errors")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "no tests ran"


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    table = {name: args + extra for name, args in parts().items()}
    chosen = argv or list(table)
    unknown = [a for a in chosen if a not in table]
    if unknown:
        print(f"unknown part(s) {unknown}; choose from {list(table)}", file=sys.stderr)
        return 2
    rows, slow, failed = [], [], []
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="minivllm-test-") as tmp:
        for name in chosen:
            xml = Path(tmp) / f"{name}.xml"
            rc, seconds = run_part(name, table[name], xml)
            counts, by_file, setup = read_junit(xml)
            if rc != 0:
                failed.append(name)
            what = summary(counts) + ("" if rc == 0 else f"  (exit {rc})")
            if name == "browser" and setup:  # the html fixture builds the book when it is missing or stale
                what += f"; of which book build {setup:.0f} s"
            rows.append((name, seconds, what))
            slow += [(s, name, f) for f, s in by_file.items()]
    total = time.monotonic() - t_all
    print("\n== make test: where the time went (wall seconds; a file's seconds are its tests' own, summed)")
    for name, seconds, what in rows:
        print(f"  {name:<8} {seconds:6.0f} s   {what}")
    over = "" if total <= BUDGET_S else f"  OVER the {BUDGET_S // 60}-minute budget"
    print(f"  {'total':<8} {total:6.0f} s   budget {BUDGET_S} s{over}")
    top = sorted(slow, reverse=True)[:5]
    print("  slowest files: " + ", ".join(f"{f} {s:.0f} s" for s, _, f in top))
    if failed:
        print(f"  FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
