"""Which kernels the full decode graphs of sizes 5 and 8 replay, and how long each takes (Lab 02, section c).

Lab 02 records graph 8 replaying faster than graph 5 (1.150 vs 1.226 ms on the H200), which padding cannot
explain: graph 8 does more work. The lab's hypothesis is that the linear layers (cuBLAS at 5 and 8 rows; the
hand-written GEMV takes 1-2 rows) run different GEMM kernels at the two row counts. This probe settles it: it
builds the engine with full decode graphs of the sizes given, replays each under torch.profiler and writes,
per size, the GPU time of one replay and its kernels grouped by name (calls, total microseconds).

    python scripts/maint/padding_kernels.py --model /tmp/ckpt/qwen3-0.6b --sizes 5,8 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

import torch


def kernels_of_replay(graph: torch.cuda.CUDAGraph, replays: int) -> dict:
    """GPU kernels of `replays` back-to-back replays, per replay: name -> calls and microseconds."""
    from torch.profiler import ProfilerActivity, profile

    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            per[ev.name][0] += 1
            per[ev.name][1] += ev.time_range.elapsed_us()  # a kernel event's own span on the GPU
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    return {"kernels_per_replay": sum(c for c, _ in per.values()) / replays,
            "gpu_us_per_replay": round(sum(t for _, t in per.values()) / replays, 2),
            "by_name": [{"name": name, "calls": c / replays, "us": round(t / replays, 2)} for name, (c, t) in rows]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sizes", default="5,8", help="comma-separated batch sizes to capture and compare")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("padding_kernels: needs a CUDA GPU", file=sys.stderr)
        return 2
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    from minivllm import LLM

    # FULL_DECODE_ONLY and mode 0: the same full decode graphs Lab 02's record replayed, nothing compiled
    llm = LLM(model=args.model, max_model_len=256, max_num_seqs=max(sizes), enable_prefix_caching=False,
              compilation_config={"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY",
                                  "cudagraph_capture_sizes": sizes})
    step = llm.model_runner.full_graph
    out = {"sizes": sizes, "replays": args.replays, "graphs": {}}
    for n in sizes:
        out["graphs"][str(n)] = kernels_of_replay(step.graphs[n].graph, args.replays)
        g = out["graphs"][str(n)]
        print(f"graph {n}: {g['gpu_us_per_replay']} us, {g['kernels_per_replay']:.0f} kernels; top: "
              + ", ".join(f"{k['name'][:40]} {k['us']} us" for k in g["by_name"][:4]))
    llm.shutdown()
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
