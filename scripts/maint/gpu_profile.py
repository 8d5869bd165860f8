"""`minivllm bench profile`: where one decode step's GPU time goes, kernel by kernel, against its floors.

Why: "TPOT is 1.5 ms" says nothing about what to fix. A decode step is bounded from below twice: by the bytes
it must read (every weight once, plus each sequence's K/V) over the memory bandwidth, and by the number of
kernels times the GPU's fixed cost per kernel (even inside a CUDA graph a kernel costs ~1-2 us to start,
fill and drain the SMs). This bench profiles real engine steps (`engine.step()`, scheduler and sampler
included), sums kernel time per category (GEMMs, attention, norms, RoPE, KV store, ...) and prints it next
to both floors, so a learner sees which one binds and which fusion would pay.

CUPTI reports the kernels inside a CUDA-graph replay one by one, so graph modes are profiled as they run.
Step wall time is measured without the profiler (it slows the CPU side). On a CPU there are no kernels:
the bench still reports step time and the byte floor. The host side of a step (cProfile, per function) is
host_profile.py, beside this file; `minivllm bench profile` runs this one with its flags (minivllm/bench/cli.py):

    minivllm bench profile --model .ckpt/qwen3-0.6b --batch-sizes 1,64 --modes eager,FULL --json profile.json
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from typing import Iterable

import torch
from tqdm.auto import tqdm

from minivllm.bench.common import (free_engine, int_list, jsonable, model_dir, print_table,
                                   provenance, random_prompts, str_list, sync, write_json)
from minivllm.bench.latency import engine_for_mode, parse_mode
from minivllm.sampling_params import SamplingParams

# First match wins. Names: our Triton kernels (their @triton.jit function names), Inductor's generated
# kernels (triton_poi/red/per_fused_*), cuBLAS/CUTLASS GEMMs (gemm, gemv, nvjet, sm90_xmma, cutlass), aten.
CATEGORIES: list[tuple[str, str]] = [
    ("gemm", r"gemm|gemv|nvjet|xmma|cutlass|splitk|triton_tem_|_mm_|^mm_|cublas"),
    ("inductor fused", r"^triton_(poi|red|per)_"),
    ("attention", r"_decode_kernel|_merge_splits|_prefill_kernel|_unified_kernel|flash|attention"),
    ("kv store", r"_store_kv"),
    ("rms norm", r"_rms_norm"),
    ("rope (+q/k norm)", r"_rotary"),
    ("silu_and_mul", r"_silu_and_mul"),
    ("sampler", r"argmax|argmin|softmax|topk|sort|exponential|multinomial|distribution|gumbel|cumsum"),
    ("embedding", r"index_?select|embedding|indexing_backward|index_elementwise"),
    ("copy / fill", r"^memcpy|^memset|copy|fill"),
    ("other", r""),
]
_COMPILED = [(name, re.compile(pat, re.IGNORECASE)) for name, pat in CATEGORIES]


def categorize(kernel_name: str) -> str:
    """The CATEGORIES entry a GPU kernel's name falls in."""
    return next(name for name, pat in _COMPILED if pat.search(kernel_name))


def short_name(kernel_name: str, width: int = 60) -> str:
    """A readable kernel name: C++ templates and argument lists dropped."""
    name = re.sub(r"^void ", "", kernel_name)
    depth, out = 0, []
    for ch in name:
        depth += ch == "<"
        if depth == 0 and ch != ">":
            out.append(ch)
        depth -= ch == ">" and depth > 0
    name = "".join(out).split("(")[0]
    return name if len(name) <= width else name[: width - 3] + "..."


def summarize(kernels: Iterable[tuple[str, float, float]], steps: int) -> dict:
    """kernels: (name, start_us, duration_us) of every kernel in a window of `steps` steps.

    Per category and per kernel name: kernels and GPU us per step. Busy = the union of kernel intervals
    (kernels on other streams may overlap); idle = the window minus busy: the GPU waiting (for the CPU, or
    between graph nodes)."""
    ks = sorted(kernels, key=lambda k: k[1])
    if not ks:
        return {"kernels_per_step": 0, "categories": {}, "top_kernels": []}
    cats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    names: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    busy, cur_start, cur_end = 0.0, ks[0][1], ks[0][1]
    for name, start, dur in ks:
        for table, key in ((cats, categorize(name)), (names, short_name(name))):
            table[key][0] += 1
            table[key][1] += dur
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start = start
        cur_end = max(cur_end, start + dur)
    busy += cur_end - cur_start
    window = max(s + d for _, s, d in ks) - ks[0][1]
    total = sum(d for _, _, d in ks)

    def per_step(table: dict) -> dict:
        return {k: {"kernels": n / steps, "us": us / steps, "share": us / total if total else 0.0,
                    "us_per_kernel": us / n} for k, (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])}

    return {"kernels_per_step": len(ks) / steps, "kernel_us_per_step": total / steps,
            "busy_us_per_step": busy / steps, "window_us_per_step": window / steps,
            "idle_us_per_step": (window - busy) / steps, "categories": per_step(cats),
            "top_kernels": [{"name": k, **v} for k, v in list(per_step(names).items())[:12]]}


def byte_floor(llm, batch: int, context: int, copy_gbps: float | None) -> dict:
    """Bytes a decode step must read: every weight once (a tied lm_head shares the embedding), plus each
    sequence's K/V over its context (all layers); with the copy bandwidth, the time that takes."""
    model = llm.model_runner.model
    weight = sum(p.numel() * p.element_size() for p in model.parameters())
    runner = llm.model_runner
    per_token = runner.kv_bytes_per_block() // runner.block_size  # K and V of every layer
    floor = {"weight_mb": weight / 1e6, "kv_mb": batch * context * per_token / 1e6,
             "total_mb": (weight + batch * context * per_token) / 1e6}
    if copy_gbps:
        floor["bytes_ms"] = floor["total_mb"] / copy_gbps  # MB / (GB/s) = ms
    return floor


def copy_bandwidth_gbps() -> float | None:
    """Bytes read + written per second by a 1 GiB device-to-device copy, timed as `bench kernels` times it:
    the practical bandwidth ceiling (None without CUDA)."""
    if not torch.cuda.is_available():
        return None
    from triton.testing import do_bench

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median") / 1e6


def profile_decode(llm, batch: int, context: int, steps: int, high: int, copy_gbps: float | None,
                   keep_kernels: bool = False) -> dict:
    """Start `batch` requests with `context`-token prompts, reach steady decode, time `4 * steps` steps
    without the profiler, then profile `steps` more; the requests then run to their end. keep_kernels: also
    return every kernel as (name, start_us, duration_us), for a timeline (Lab 09)."""
    from torch.profiler import ProfilerActivity, profile

    engine = llm.engine
    n_timed = 4 * steps
    params = SamplingParams(temperature=0, max_tokens=n_timed + 2 * steps + 8, ignore_eos=True)
    seqs = [engine.add_request(engine.next_request_id(), p, params)
            for p in random_prompts(batch, context, high, seed=batch)]
    while min(s.num_output_tokens for s in seqs) < 2:  # prefill (maybe chunked), then the first decodes
        engine.step()
    decode0 = llm.model_runner.step_stats["decode_steps"]
    sync()
    t0 = time.perf_counter()
    for _ in range(n_timed):
        engine.step()
    sync()
    wall_ms = (time.perf_counter() - t0) / n_timed * 1e3
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            engine.step()
        sync()
    all_decode = llm.model_runner.step_stats["decode_steps"] - decode0 == n_timed + steps
    while engine.has_unfinished_requests():
        engine.step()
    kernels = [(e.name, e.time_range.start, e.time_range.elapsed_us()) for e in prof.events()
               if e.device_type.name == "CUDA"]
    res = {"batch": batch, "context": context, "steps": steps, "step_wall_ms": wall_ms,
           "all_steps_decode": all_decode, "floor": byte_floor(llm, batch, context + n_timed, copy_gbps)}
    res.update(summarize(kernels, steps) if kernels else {})
    return {**res, "kernel_list": kernels} if keep_kernels else res


def main(args) -> dict:
    path = model_dir(args)
    batch_sizes, modes = int_list(args.batch_sizes), str_list(args.modes)
    for m in modes:
        parse_mode(m)
    from minivllm.loader import check_model_dir, load_model_config

    high = min(load_model_config(check_model_dir(path)).vocab_size, 10_000)
    max_len = max(args.max_model_len or 0, args.context + 6 * args.steps + 16)
    bw = copy_bandwidth_gbps()
    result = {"bench": "profile", "provenance": provenance(args, path), "copy_gbps": bw, "runs": []}
    bar = tqdm(total=len(modes) * len(batch_sizes), desc="profile")
    for mode in modes:
        llm = engine_for_mode(args, mode, max_num_seqs=max(args.max_num_seqs, max(batch_sizes)),
                              max_model_len=max_len)
        for b in batch_sizes:
            bar.set_description(f"profile: {mode} batch {b}")
            run = {"mode": mode, **profile_decode(llm, b, args.context, args.steps, high, bw)}
            result["runs"].append(run)
            _print_run(run, bw)
            bar.update()
        free_engine(llm)
    bar.close()
    _print_summary(result["runs"])
    write_json(args.json, jsonable(result))
    return result


def _print_run(run: dict, bw: float | None) -> None:
    fl = run["floor"]
    head = (f"{run['mode']}, batch {run['batch']}, context {run['context']}: step {run['step_wall_ms']:.3f} ms "
            f"wall; reads {fl['weight_mb']:.0f} MB weights + {fl['kv_mb']:.0f} MB KV")
    if bw:
        head += f" = {fl['bytes_ms']:.3f} ms at {bw:.0f} GB/s"
    if not run.get("categories"):
        print("\n" + head + " (no GPU kernels to break down on this device)")
        return
    rows = [[k, v["kernels"], v["us"], f"{100 * v['share']:.1f}%", v["us_per_kernel"]]
            for k, v in run["categories"].items()]
    rows.append(["all kernels", run["kernels_per_step"], run["kernel_us_per_step"], "100%",
                 run["kernel_us_per_step"] / max(run["kernels_per_step"], 1)])
    rows.append(["GPU idle in step", None, run["idle_us_per_step"], None, None])
    print_table(head, ["category", "kernels/step", "GPU us/step", "share", "us/kernel"], rows)
    print_table("top kernels", ["kernel", "per step", "us/step", "us/kernel"],
                [[k["name"], k["kernels"], k["us"], k["us_per_kernel"]] for k in run["top_kernels"]])


def _print_summary(runs: list[dict]) -> None:
    rows = [[r["mode"], r["batch"], r["step_wall_ms"], r.get("busy_us_per_step", 0) / 1e3 or None,
             r.get("kernels_per_step"), r["floor"].get("bytes_ms")] for r in runs]
    print_table("decode step: wall vs GPU busy vs the byte floor (ms)",
                ["mode", "batch", "step wall", "GPU busy", "kernels", "bytes/bandwidth"], rows, spec=".3f")
