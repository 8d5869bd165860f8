"""`minivllm/` holds the engine, its benches and its tools, small enough to read: at most 9,000 lines of Python
(issue 27). The labs' helpers live in labs/minivllm_labs/; maintenance scripts and the benches that measure the
engine from outside (`bench startup|kernels|profile`, the transformers baselines) in scripts/maint/."""

from __future__ import annotations

from pathlib import Path

MAX_LINES = 9_000


def test_the_engine_package_stays_under_its_line_cap():
    root = Path(__file__).resolve().parents[2] / "minivllm"
    lines = {p.relative_to(root).as_posix(): p.read_bytes().count(b"\n") for p in root.rglob("*.py")}  # as wc -l
    total = sum(lines.values())
    largest = sorted(lines.items(), key=lambda kv: -kv[1])[:5]
    assert total <= MAX_LINES, (f"minivllm/ has {total} lines of Python, over the cap of {MAX_LINES}; the largest "
                                f"files: {largest}. Move what only a lab or a maintenance script uses out of it.")
