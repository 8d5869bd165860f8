"""Sweep the attention kernels' launch configs on the GPU: the decode kernel's split-KV count and the prefill
kernel's tiles, timed as `minivllm bench kernels` times them (same shapes, timers and reference checks).

    python scripts/maint/attention_sweep.py [--decode] [--prefill] [--json sweep.json]

A maintenance tool, not part of the engine: its findings are recorded where the configs are chosen
(choose_num_splits in minivllm/kernels/triton_decode.py, prefill_tile_config in triton_prefill.py), and it
runs again only when a kernel or the GPU changes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import kernel_bench as kb  # beside this script
import torch

# Every split count on the shapes the engine's decode steps have (latency bench contexts ~256-384 tokens in a
# 512-token max_model_len; the throughput workload's batch ~128 at ~1k tokens).
DECODE_SWEEP = [(1, 512), (8, 512), (64, 256), (64, 512), (64, 2048), (128, 1024), (256, 512)]
SWEEP_SPLITS = (1, 2, 3, 4, 8, 16)
# (BLOCK_M, BLOCK_N, num_warps, num_stages, K_ROWS); the first is the default for long prompts
# (128-row tiles with 8 warps and 2-3 stages were slower in a wider sweep).
PREFILL_SWEEP = [(64, 64, 4, 2, True), (64, 64, 4, 3, True), (64, 64, 4, 1, True), (64, 32, 4, 2, True),
                 (64, 128, 4, 2, True), (64, 64, 4, 2, False), (128, 64, 4, 2, True), (128, 128, 8, 2, True),
                 (128, 64, 8, 2, False)]


def sweep_prefill(configs=PREFILL_SWEEP) -> list[dict]:
    """Each of bench kernels' prefill shapes under every tile config, against the same SDPA time."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for batch, length in kb.PREFILL_CASES:
        run, sdpa, out = kb.prefill_case(batch, length, gen)
        ref = sdpa().transpose(1, 2).reshape(batch * length, kb.HEADS, kb.HEAD_DIM)
        s_ms = kb._ms_graph(sdpa)
        for cfg in configs:
            row = {"batch": batch, "seq_len": length, "config": list(cfg), "sdpa_ms": s_ms}
            try:
                out.fill_(float("nan"))
                run(cfg)
                row["rel_err"] = err = kb._rel_err(out, ref)
                if err <= 2e-2:
                    row["ms"] = ms = kb._ms_graph(lambda cfg=cfg: run(cfg))
                    row["speed_vs_sdpa"] = s_ms / ms
            except Exception as exc:  # e.g. out of shared memory for this tile shape
                row["error"] = f"{type(exc).__name__}: {exc}"[:200]
            rows.append(row)
    return rows


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", action="store_true", help="every split-KV count on the engine's shapes")
    parser.add_argument("--prefill", action="store_true", help="every prefill tile config")
    parser.add_argument("--json", default=None)
    a = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("attention_sweep.py needs a CUDA GPU")
    result: dict = {"provenance": kb._provenance()}
    if a.decode:
        result["copy_GBps"] = copy_gbps = kb.copy_bandwidth_gbps()
        result["decode"] = kb.bench_decode(copy_gbps, DECODE_SWEEP, SWEEP_SPLITS)
        print(f"{'batch':>6}{'ctx':>7}{'splits':>8}{'graph ms':>10}{'of copy':>9}")
        for r in result["decode"]:
            print(f"{r['batch']:>6}{r['context']:>7}{r['num_splits']:>8}{r['ms_graph']:>10.4f}"
                  f"{r['frac_of_copy_graph']:>9.1%}" + ("  auto" if r["auto"] else ""))
    if a.prefill:
        result["prefill"] = sweep_prefill()
        for r in result["prefill"]:
            print(f"{r['batch']:>6}{r['seq_len']:>7}  {str(r['config']):<28} "
                  + (f"{r['ms']:.3f} ms  {r['speed_vs_sdpa']:.2f}x" if "ms" in r else
                     r.get("error", f"rel err {r.get('rel_err')}")[:60]))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {a.json}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
