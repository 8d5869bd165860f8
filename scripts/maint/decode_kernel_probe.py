"""Time one tree's paged decode attention kernel three ways, for bisecting a change in `bench kernels`.

    python scripts/maint/decode_kernel_probe.py TREE_DIR --commit C --json out.json   (one tree, on a GPU)
    python scripts/maint/decode_kernel_probe.py --summary RESULTS_DIR                 (the table over trees)

TREE_DIR holds a minivllm/ of any commit since 40cba88 (the launcher's signature is the same there); the
timers are this checkout's scripts/maint/kernel_bench.py (the ones `bench kernels` uses), loaded by path for
every tree, so a change between trees is the kernel's or its launcher's, not the benchmark's. Per case (batch,
context, splits, Qwen3-0.6B's attention layout, bf16):
  ms        triton.testing.do_bench of the launcher call, L2 flushed before each, median (as bench kernels)
  ms_graph  the same call captured in a CUDA graph and replayed, L2 flushed before each: the GPU's time
  host_us   CPU time per launcher call (argument binding, launch(es)); when host_us exceeds the flush's
            GPU time, `ms` measures the host instead of the kernel
Trees whose launcher takes the engine's launch choices as arguments add rows (pf = y) with
prefetch_metadata=True, the variant a decode step of the engine launches.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = [(64, 2048, None), (64, 2048, 1), (1, 2048, None), (1, 2048, 1), (8, 2048, None), (64, 256, None)]
HEADS, KV_HEADS, HEAD_DIM, BLOCK_SIZE = 16, 8, 128, 16


def _timers():
    """This checkout's kernel_bench.py timers, loaded by path: the tree under test has its own minivllm."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_minivllm_kernel_bench", ROOT / "scripts/maint/kernel_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gpu_ms, mod.graph_replay_ms


def probe(tree: Path, commit: str) -> dict:
    gpu_ms, graph_replay_ms = _timers()
    sys.path.insert(0, str(tree))
    import torch
    import triton

    import minivllm.kernels.triton_decode as td
    from minivllm.kernels.torch_ref import paged_decode_attention_ref

    assert Path(td.__file__).resolve().is_relative_to(tree.resolve()), (td.__file__, tree)
    src = Path(td.__file__).read_bytes()
    gen = torch.Generator(device="cuda").manual_seed(0)
    src_t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst_t = torch.empty_like(src_t)
    copy_gbps = 2 * src_t.numel() / gpu_ms(lambda: dst_t.copy_(src_t)) / 1e6
    del src_t, dst_t
    rows = []
    cases = [(b, c, f, {}) for b, c, f in CASES]
    if "prefetch_metadata" in inspect.signature(td.paged_decode_attention).parameters:
        # trees where the engine's launch choices are arguments: also time the variant a decode step launches
        cases += [(b, c, f, {"prefetch_metadata": True}) for b, c, f in CASES if f is None]
    for batch, context, forced, extra in cases:
        blocks = context // BLOCK_SIZE
        n = batch * blocks + 1
        k_cache = torch.randn(n, BLOCK_SIZE, KV_HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        bt = (torch.randperm(n - 1, generator=gen, device="cuda") + 1).view(batch, blocks).to(torch.int32)
        seq_lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        q = torch.randn(batch, HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(q)
        splits = forced or td.choose_num_splits(batch, KV_HEADS, bt.shape[1] * BLOCK_SIZE, q.device)

        def fn():
            td.paged_decode_attention(q, k_cache, v_cache, bt, seq_lens, HEAD_DIM ** -0.5, out=out,
                                      num_splits=splits, **extra)

        fn()
        ref = paged_decode_attention_ref(q, k_cache, v_cache, bt, seq_lens, HEAD_DIM ** -0.5)
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        ms = gpu_ms(fn)
        ms_graph = graph_replay_ms(fn)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        host_us = (time.perf_counter() - t0) / 100 * 1e6
        torch.cuda.synchronize()
        nbytes = 2 * batch * context * KV_HEADS * HEAD_DIM * 2 + 2 * q.numel() * 2
        rows.append({"batch": batch, "context": context, "num_splits": splits, "auto": forced is None, **extra,
                     "ms": ms, "ms_graph": ms_graph, "host_us": host_us, "rel_err": err,
                     "frac_of_copy": nbytes / ms / 1e6 / copy_gbps,
                     "frac_of_copy_graph": nbytes / ms_graph / 1e6 / copy_gbps})
    return {"commit": commit, "tree": str(tree), "decode_kernel_sha256": hashlib.sha256(src).hexdigest()[:12],
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "copy_GBps": copy_gbps, "rows": rows}


def summary(res: Path) -> None:
    order = [line.split()[1] for line in (res / "commits.txt").read_text().splitlines()
             if line.startswith("bisect_")] if (res / "commits.txt").exists() else []
    files = {json.loads(f.read_text())["commit"]: f for f in res.glob("bisect_*.json")}
    print(f"{'commit':<10}{'kernel':<14}{'pf':>3}{'batch':>6}{'ctx':>6}{'splits':>7}{'ms':>9}{'of copy':>9}"
          f"{'graph ms':>10}{'of copy':>9}{'host us':>9}")
    for c in order + sorted(set(files) - set(order)):
        if c not in files:
            continue
        d = json.loads(files[c].read_text())
        for r in d["rows"]:
            print(f"{c:<10}{d['decode_kernel_sha256']:<14}{'y' if r.get('prefetch_metadata') else '':>3}{r['batch']:>6}{r['context']:>6}{r['num_splits']:>7}"
                  f"{r['ms']:>9.4f}{r['frac_of_copy']:>9.1%}{r['ms_graph']:>10.4f}{r['frac_of_copy_graph']:>9.1%}"
                  f"{r['host_us']:>9.1f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", nargs="?", type=Path)
    ap.add_argument("--commit", default="?")
    ap.add_argument("--json")
    ap.add_argument("--summary", type=Path, help="print the table of every bisect_*.json in this directory")
    a = ap.parse_args(argv)
    if a.summary:
        summary(a.summary)
        return 0
    result = probe(a.tree, a.commit)
    for r in result["rows"]:
        print(json.dumps(r))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
