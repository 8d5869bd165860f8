"""Kernel micro-benchmarks for the H200: are the attention kernels near the hardware's limits?

* Decode attention is memory-bound, so it is judged by achieved bandwidth (bytes of K/V read, plus q and
  out) as a fraction of what a plain device-to-device copy reaches on the same GPU, in the same run.
  Batch 1 and 8 with long contexts show what split-KV buys (auto vs forced 1 split).
* Prefill attention is compute-bound, so it is judged in TFLOP/s against PyTorch's own fused attention
  (scaled_dot_product_attention, causal) on the same unpaged shapes, in the same run.

Every configuration is checked against a reference before it is timed. Times are medians of
triton.testing.do_bench, which also flushes L2 between runs so small contexts are not served from cache.
do_bench times a call from the host: when the launcher's Python (argument binding, two launches with
split-KV) takes longer than the flush before it, the GPU waits for the host and the time is the host's.
So each decode row also has `ms_graph`, the same call captured in a CUDA graph and replayed (as the
engine runs it), and `host_us`, the launcher's CPU time per call: `ms` above `ms_graph` by about
host_us means the row measured the host. The prefill and GEMV tables are timed from graph replay only
(their `*_ms`), with the launchers' CPU time per call in their own `*_host_us` columns.

Run: minivllm bench kernels [--gemv] [--json results.json], or this file with the same flags. It sits beside
the tile and split sweeps that chose the kernels' configs (attention_sweep.py) and the bisect probe
(decode_kernel_probe.py), which share its cases and its two GPU timers (gpu_ms, graph_replay_ms): the probe
compares trees by timing each tree's kernel with this code, so a difference is never the timer's. Nothing of
minivllm is imported at the top, so the probe can load this checkout's copy while it imports another tree's
minivllm.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

# Qwen3-0.6B attention layout
HEADS, KV_HEADS, HEAD_DIM, BLOCK_SIZE, DTYPE = 16, 8, 128, 16, torch.bfloat16
DECODE_CASES = [(64, 2048), (1, 2048), (1, 8192), (8, 2048), (8, 8192)]  # (batch, context)
PREFILL_CASES = [(8, 1024), (1, 4096)]  # (prompts, tokens each)


def _provenance() -> dict:
    import triton

    from minivllm.bench.common import git_info

    commit = git_info()["commit"]
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": commit}


def gpu_ms(fn: Callable[[], object]) -> float:
    """The median GPU time of fn (triton's do_bench: L2 flushed before each call, 25 ms warm-up, 200 ms)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def graph_replay_ms(fn: Callable[[], object]) -> float:
    """The median GPU time of fn replayed from a CUDA graph, L2 flushed before each replay. fn runs once on a
    side stream first (the warm-up a capture needs: lazy init, autotuning) and is then captured once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return gpu_ms(graph.replay)


_ms, _ms_graph = gpu_ms, graph_replay_ms


def _host_us(fn, calls: int = 100) -> float:
    """CPU time per call of fn's launcher (the GPU never makes it wait: 100 calls fit the launch queue)."""
    import time

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def _paged(batch: int, context: int, gen: torch.Generator):
    """A cache holding `batch` sequences of `context` tokens in shuffled blocks, plus its block tables."""
    blocks_per_seq = context // BLOCK_SIZE
    num_blocks = batch * blocks_per_seq + 1
    shape = (num_blocks, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    k_cache = torch.randn(shape, generator=gen, device="cuda", dtype=DTYPE)
    v_cache = torch.randn(shape, generator=gen, device="cuda", dtype=DTYPE)
    perm = torch.randperm(num_blocks - 1, generator=gen, device="cuda") + 1
    block_tables = perm.view(batch, blocks_per_seq).to(torch.int32)
    return k_cache, v_cache, block_tables


def copy_bandwidth_gbps() -> float:
    """Bytes read + written per second by a 1 GiB device-to-device copy: the practical bandwidth ceiling."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _ms(lambda: dst.copy_(src))
    return 2 * src.numel() / ms / 1e6


def bench_decode(copy_gbps: float, cases=DECODE_CASES, extra_splits: tuple[int, ...] = ()) -> list[dict]:
    """Each (batch, context) case at the split count the engine picks, at 1 split, and at `extra_splits`."""
    from minivllm.kernels.torch_ref import paged_decode_attention_ref
    from minivllm.kernels.triton_decode import choose_num_splits, paged_decode_attention

    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for batch, context in cases:
        k_cache, v_cache, block_tables = _paged(batch, context, gen)
        seq_lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        q = torch.randn(batch, HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=DTYPE)
        out = torch.empty_like(q)
        scale = HEAD_DIM ** -0.5
        auto = choose_num_splits(batch, KV_HEADS, block_tables.shape[1] * BLOCK_SIZE, q.device)
        ref = paged_decode_attention_ref(q, k_cache, v_cache, block_tables, seq_lens, scale)
        elem = q.element_size()
        nbytes = 2 * batch * context * KV_HEADS * HEAD_DIM * elem + 2 * q.numel() * elem
        for n in sorted({1, auto, *extra_splits}):
            paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens, scale, out=out, num_splits=n)
            err = _rel_err(out, ref)
            assert err <= 1e-2, f"decode batch={batch} ctx={context} splits={n}: rel err {err:.2e}"

            def fn(splits=n):
                paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens, scale, out=out,
                                       num_splits=splits)

            ms, ms_graph, host_us = _ms(fn), _ms_graph(fn), _host_us(fn)
            gbps = nbytes / ms / 1e6
            rows.append({"batch": batch, "context": context, "num_splits": n, "auto": n == auto,
                         "ms": ms, "GBps": gbps, "frac_of_copy": gbps / copy_gbps, "rel_err": err,
                         "ms_graph": ms_graph, "frac_of_copy_graph": nbytes / ms_graph / 1e6
                         / copy_gbps, "host_us": host_us})
    return rows


def prefill_case(batch: int, length: int, gen: torch.Generator):
    """One prefill shape's inputs in a paged cache: (run, sdpa, out), where run(tile_config=None) writes the
    Triton kernel's result to out and sdpa() returns PyTorch's on the same (unpaged, GQA-expanded) inputs."""
    from minivllm.kernels.triton_prefill import paged_prefill_attention
    from minivllm.kernels.triton_store_kv import store_kvcache

    k_cache, v_cache, block_tables = _paged(batch, length, gen)
    T = batch * length
    q = torch.randn(T, HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=DTYPE)
    k = torch.randn(T, KV_HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=DTYPE)
    v = torch.randn(T, KV_HEADS, HEAD_DIM, generator=gen, device="cuda", dtype=DTYPE)
    pos = torch.arange(length, device="cuda")
    slots = (block_tables.long()[:, pos // BLOCK_SIZE] * BLOCK_SIZE + pos % BLOCK_SIZE).reshape(-1)
    store_kvcache(k, v, k_cache, v_cache, slots)
    query_start = torch.arange(0, T + 1, length, dtype=torch.int32, device="cuda")
    seq_lens = torch.full((batch,), length, dtype=torch.int32, device="cuda")
    scale = HEAD_DIM ** -0.5
    out = torch.empty_like(q)

    def dense(x: torch.Tensor) -> torch.Tensor:  # [T, h, D] -> [B, H, L, D], GQA expanded
        x = x.view(batch, length, -1, HEAD_DIM)
        return x.repeat_interleave(HEADS // x.shape[2], 2).transpose(1, 2).contiguous()

    qd, kd, vd = dense(q), dense(k), dense(v)

    def run(tile_config=None):
        paged_prefill_attention(q, k_cache, v_cache, block_tables, query_start, seq_lens, length, scale,
                                out=out, tile_config=tile_config)

    def sdpa():
        return F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, scale=scale)

    return run, sdpa, out


def bench_prefill() -> list[dict]:
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for batch, length in PREFILL_CASES:
        triton_fn, sdpa_fn, out = prefill_case(batch, length, gen)
        triton_fn()
        ref = sdpa_fn().transpose(1, 2).reshape(batch * length, HEADS, HEAD_DIM)
        err = _rel_err(out, ref)
        assert err <= 2e-2, f"prefill batch={batch} len={length}: rel err {err:.2e} vs SDPA"
        flops = 2 * 2 * batch * HEADS * length * length * HEAD_DIM / 2  # QK^T and PV, causal half
        t_ms, s_ms = _ms_graph(triton_fn), _ms_graph(sdpa_fn)  # the kernels, replayed (see run_gemv_bench)
        rows.append({"batch": batch, "seq_len": length, "triton_ms": t_ms, "triton_tflops": flops / t_ms / 1e9,
                     "sdpa_ms": s_ms, "sdpa_tflops": flops / s_ms / 1e9, "speed_vs_sdpa": s_ms / t_ms,
                     "rel_err": err, "timer": "graph replay", "triton_host_us": _host_us(triton_fn),
                     "sdpa_host_us": _host_us(sdpa_fn)})
    return rows


# Qwen3-0.6B's decode matmuls (N, K): qkv, o_proj, gate_up, down (the LM head stays on cuBLAS)
GEMV_SHAPES = {"qkv_proj": (4096, 1024), "o_proj": (1024, 2048), "gate_up_proj": (6144, 1024),
               "down_proj": (1024, 3072)}


def run_gemv_bench(out_json: str | None = None, rows: tuple[int, ...] = (1, 2, 4, 8)) -> dict:
    """The Triton GEMV (autotuned) against cuBLAS (F.linear) on the decode shapes: ms and achieved GB/s
    (weight bytes read / time). Also the down projection with SiLU-and-mul fused vs kernel + cuBLAS."""
    from minivllm.kernels.triton_activation import silu_and_mul
    from minivllm.kernels.triton_gemv import gemv

    if not torch.cuda.is_available():
        raise SystemExit("minivllm bench kernels --gemv: needs a CUDA GPU")
    copy_gbps = copy_bandwidth_gbps()
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = []
    for name, (N, K) in GEMV_SHAPES.items():
        w = torch.randn(N, K, generator=gen, device="cuda", dtype=DTYPE) / K ** 0.5
        for M in rows:
            fused = name == "down_proj"
            x = torch.randn(M, 2 * K if fused else K, generator=gen, device="cuda", dtype=DTYPE)
            if fused:
                ref_fn = lambda x=x, w=w: F.linear(silu_and_mul(x), w)  # noqa: E731
                tri_fn = lambda x=x, w=w: gemv(x, w, silu_mul=True)  # noqa: E731
            else:
                ref_fn = lambda x=x, w=w: F.linear(x, w)  # noqa: E731
                tri_fn = lambda x=x, w=w: gemv(x, w)  # noqa: E731
            err = _rel_err(tri_fn(), ref_fn())
            # the kernels' time: replayed from a CUDA graph, as the engine runs them (timed from the host, a
            # Python launcher's own CPU time would be counted: 62 us for Triton's qkv_proj at M=1 against a
            # ~14 us kernel); the launchers' CPU time is its own column
            t_ms, c_ms = _ms_graph(tri_fn), _ms_graph(ref_fn)
            gb = w.numel() * w.element_size() / 1e9
            out.append({"name": name + (" (+silu_mul)" if fused else ""), "N": N, "K": K, "M": M,
                        "triton_ms": t_ms, "cublas_ms": c_ms, "triton_GBps": gb / t_ms * 1e3,
                        "cublas_GBps": gb / c_ms * 1e3, "speedup": c_ms / t_ms, "rel_err": err,
                        "timer": "graph replay", "triton_host_us": _host_us(tri_fn),
                        "cublas_host_us": _host_us(ref_fn)})
    result = {"provenance": _provenance(), "copy_GBps": copy_gbps, "gemv": out}
    print(f"device copy bandwidth: {copy_gbps:8.1f} GB/s; kernel times replayed from CUDA graphs, host us = "
          f"the launcher's CPU time per call\n")
    print(f"{'matmul':<24}{'M':>3}{'triton us':>11}{'GB/s':>8}{'cuBLAS us':>11}{'GB/s':>8}{'speedup':>9}"
          f"{'rel err':>9}{'host us T':>11}{'host us C':>11}")
    for r in out:
        print(f"{r['name']:<24}{r['M']:>3}{r['triton_ms'] * 1e3:>11.2f}{r['triton_GBps']:>8.0f}"
              f"{r['cublas_ms'] * 1e3:>11.2f}{r['cublas_GBps']:>8.0f}{r['speedup']:>9.2f}{r['rel_err']:>9.1e}"
              f"{r['triton_host_us']:>11.1f}{r['cublas_host_us']:>11.1f}")
    if out_json:
        Path(out_json).write_text(json.dumps(result, indent=2))
        print(f"wrote {out_json}")
    return result


def run_kernel_bench(out_json: str | None = None) -> dict:
    """Benchmark copy bandwidth, decode and prefill attention; print a table, optionally write JSON."""
    if not torch.cuda.is_available():
        raise SystemExit("minivllm bench kernels: no CUDA GPU found; these benchmarks only make sense on a "
                         "GPU (the kernels' CPU correctness tests are in tests/kernels/test_kernels.py).")
    result = {"provenance": _provenance(),
              "layout": {"heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "block_size": BLOCK_SIZE,
                         "dtype": str(DTYPE)}}
    copy_gbps = copy_bandwidth_gbps()
    result["copy_GBps"] = copy_gbps
    result["decode"] = bench_decode(copy_gbps)
    result["prefill"] = bench_prefill()
    main_row = next(r for r in result["decode"] if r["batch"] == 64 and r["context"] == 2048 and r["auto"])
    result["headline"] = {
        "decode_b64_ctx2048_frac_of_copy": main_row["frac_of_copy"],
        "decode_b64_ctx2048_frac_of_copy_graph": main_row["frac_of_copy_graph"],
        "prefill_speed_vs_sdpa": [r["speed_vs_sdpa"] for r in result["prefill"]],
    }

    p = result["provenance"]
    print(f"{p['gpu']}  torch {p['torch']}  triton {p['triton']}  commit {p['git_commit']}  {p['date']}")
    print(f"device copy bandwidth: {copy_gbps:8.1f} GB/s (read + write)\n")
    print(f"{'decode':<12}{'batch':>6}{'ctx':>7}{'splits':>8}{'ms':>9}{'GB/s':>9}{'of copy':>9}"
          f"{'graph ms':>10}{'of copy':>9}{'host us':>9}")
    for r in result["decode"]:
        tag = "auto" if r["auto"] else ""
        print(f"{tag:<12}{r['batch']:>6}{r['context']:>7}{r['num_splits']:>8}{r['ms']:>9.4f}{r['GBps']:>9.1f}"
              f"{r['frac_of_copy']:>9.1%}{r['ms_graph']:>10.4f}{r['frac_of_copy_graph']:>9.1%}"
              f"{r['host_us']:>9.1f}")
    print(f"\n{'prefill':<8}{'batch':>6}{'len':>7}{'triton ms':>11}{'TFLOP/s':>9}{'sdpa ms':>9}{'TFLOP/s':>9}"
          f"{'ratio':>7}{'host us T':>11}{'host us S':>11}   (kernel times replayed from CUDA graphs)")
    for r in result["prefill"]:
        print(f"{'':<8}{r['batch']:>6}{r['seq_len']:>7}{r['triton_ms']:>11.3f}{r['triton_tflops']:>9.1f}"
              f"{r['sdpa_ms']:>9.3f}{r['sdpa_tflops']:>9.1f}{r['speed_vs_sdpa']:>7.2f}"
              f"{r['triton_host_us']:>11.1f}{r['sdpa_host_us']:>11.1f}")
    h = result["headline"]
    print(f"\ndecode, batch 64 x 2048 tokens: {h['decode_b64_ctx2048_frac_of_copy']:.1%} of the copy bandwidth "
          f"({h['decode_b64_ctx2048_frac_of_copy_graph']:.1%} replayed from a CUDA graph); prefill vs SDPA in "
          f"this run: " + ", ".join(f"{x:.2f}x" for x in h["prefill_speed_vs_sdpa"]))
    if out_json:
        Path(out_json).write_text(json.dumps(result, indent=2))
        print(f"wrote {out_json}")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--gemv", action="store_true", help="only the Triton GEMV vs cuBLAS on the decode matmuls")
    a = ap.parse_args()
    run_gemv_bench(a.json) if a.gemv else run_kernel_bench(a.json)
