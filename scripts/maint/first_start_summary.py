"""Summarise gpu_check.sh's `first-start` stage (issue 42): is a first start on a shape the H200's GEMV file
lacks within 1.5x of a shipped shape's, and is its batch-1 TPOT within 3% of the full search's pick?

    python scripts/maint/first_start_summary.py RESULTS_DIR

Reads first_start_{qwen3,llama}.json (`bench startup`: cold = empty caches) and
first_start_tpot_{rule,autotune}_N.json (`bench latency` at batch 1, a fresh process and Triton cache each),
prints the table and writes first_start.json beside them, with the provenance of the runs it read.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

START_GOAL = 1.5  # first start of an unshipped shape / a shipped one (issue 42)
TPOT_GOAL = 0.03  # the rule's pick vs the full search's, batch-1 TPOT


def _tpot_ms(path: Path) -> float:
    rows = json.loads(path.read_text())["rows"]
    return next(r["tpot_s"] * 1e3 for r in rows if r.get("batch") == 1 and r.get("system") != "hf")


def _autotune_s(path: Path) -> float:
    modes = json.loads(path.read_text())["modes"]
    return sum(m["startup"]["phases_s"].get("gemv_autotune", 0.0) for m in modes.values())


def summarise(res: Path) -> dict:
    starts = {name: json.loads((res / f"first_start_{name}.json").read_text()) for name in ("qwen3", "llama")}
    cold = {name: s["cold"]["phases_s"] for name, s in starts.items()}
    out = {"bench": "first_start", "start_goal": START_GOAL, "tpot_goal": TPOT_GOAL,
           "provenance": starts["llama"]["provenance"],
           "cold_total_s": {n: c["total"] for n, c in cold.items()},
           "cold_gemv_autotune_s": {n: c.get("gemv_autotune", 0.0) for n, c in cold.items()},
           "warm_total_s": {n: s["warm"]["phases_s"]["total"] for n, s in starts.items()}}
    out["llama_over_qwen3_cold"] = cold["llama"]["total"] / cold["qwen3"]["total"]
    tp = {who: sorted(res.glob(f"first_start_tpot_{who}_*.json")) for who in ("rule", "autotune")}
    out["tpot_ms"] = {who: [_tpot_ms(f) for f in files] for who, files in tp.items()}
    out["startup_gemv_autotune_s"] = {who: [_autotune_s(f) for f in files] for who, files in tp.items()}
    out["gemv_configs"] = {who: json.loads(files[0].read_text())["modes"].popitem()[1].get("gemv_configs")
                           for who, files in tp.items() if files}
    if tp["rule"] and tp["autotune"]:
        r, a = statistics.median(out["tpot_ms"]["rule"]), statistics.median(out["tpot_ms"]["autotune"])
        out["rule_over_full_tpot"] = r / a
    print(f"cold start: Qwen3-0.6B (shipped) {cold['qwen3']['total']:.1f} s, Llama-3.2-1B shape (rule) "
          f"{cold['llama']['total']:.1f} s of which GEMV autotune {cold['llama'].get('gemv_autotune', 0):.1f} s: "
          f"{out['llama_over_qwen3_cold']:.2f}x (goal <= {START_GOAL})")
    print(f"GEMV autotune inside a start: rule {out['startup_gemv_autotune_s']['rule']} s, full search "
          f"{out['startup_gemv_autotune_s']['autotune']} s")
    if "rule_over_full_tpot" in out:
        print(f"batch-1 TPOT (ms): rule {out['tpot_ms']['rule']}, full search {out['tpot_ms']['autotune']}: "
              f"rule / full = {out['rule_over_full_tpot']:.3f} (goal within {TPOT_GOAL:.0%})")
    (res / "first_start.json").write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    summarise(Path(sys.argv[1]))
