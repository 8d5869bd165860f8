"""Summarise gpu_check.sh's `ab` stage: the old tree against the new, runs interleaved in one session.

    python scripts/maint/ab_summary.py RESULTS_DIR OLD_COMMIT NEW_COMMIT

Reads ab_latency_{old,new}_N.json (TPOT of the default engine at batch 1, 8, 64) and
ab_throughput_{old,new}_N.json (output tok/s on the standard workload), prints the medians per tree with
new/old, and writes ab.json beside them. Within 2% either way is what "speed unchanged" means here.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

TOLERANCE = 0.02


def _tpot(path: Path) -> dict[int, float]:
    rows = json.loads(path.read_text())["rows"]
    return {r["batch"]: r["tpot_s"] * 1e3 for r in rows if r.get("system") == "FULL_AND_PIECEWISE"}


def _tok_s(path: Path) -> float:
    return json.loads(path.read_text())["minivllm"]["output_tok_s"]


def summarise(res: Path, old: str, new: str) -> dict:
    out: dict = {"old": old, "new": new, "tolerance": TOLERANCE, "tpot_ms": {}, "throughput_tok_s": {}}
    runs = {who: sorted(res.glob(f"ab_latency_{who}_*.json")) for who in ("old", "new")}
    batches = sorted({b for f in runs["old"] + runs["new"] for b in _tpot(f)})
    for b in batches:
        per = {who: [_tpot(f)[b] for f in runs[who] if b in _tpot(f)] for who in ("old", "new")}
        if per["old"] and per["new"]:
            o, n = statistics.median(per["old"]), statistics.median(per["new"])
            out["tpot_ms"][str(b)] = {"old": per["old"], "new": per["new"], "new_over_old": n / o,
                                      "within_tolerance": abs(n / o - 1) <= TOLERANCE}
    thr = {who: [_tok_s(f) for f in sorted(res.glob(f"ab_throughput_{who}_*.json"))] for who in ("old", "new")}
    if thr["old"] and thr["new"]:
        o, n = statistics.median(thr["old"]), statistics.median(thr["new"])
        out["throughput_tok_s"] = {"old": thr["old"], "new": thr["new"], "new_over_old": n / o,
                                   "within_tolerance": abs(n / o - 1) <= TOLERANCE}
    return out


def main(argv: list[str]) -> int:
    res, old, new = Path(argv[0]), argv[1], argv[2]
    out = summarise(res, old, new)
    (res / "ab.json").write_text(json.dumps(out, indent=2))
    print(f"A/B, {old} (old) vs {new} (new), medians of interleaved runs; new/old within "
          f"{TOLERANCE:.0%} counts as unchanged")
    for b, r in out["tpot_ms"].items():
        print(f"  TPOT batch {b:>3}: old {statistics.median(r['old']):.3f} ms, new {statistics.median(r['new']):.3f} ms,"
              f" new/old {r['new_over_old']:.3f}")
    t = out["throughput_tok_s"]
    if t:
        print(f"  throughput: old {statistics.median(t['old']):,.0f} tok/s, new {statistics.median(t['new']):,.0f} "
              f"tok/s, new/old {t['new_over_old']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
