"""Host time of one forward per execution path: eager, compiled without graphs, PIECEWISE, (on CUDA) FULL.

Why: issue 42 measured a 512-token prefill at 17.9 ms eager and 26.8 ms under FULL_DECODE_ONLY, whose
prefill runs mode 3's compiled forward with no graph: eager is host-bound there, so the compiled path spent
more HOST time per forward than eager. And PIECEWISE's batch-1 step is 2-3x the full graphs': the host time
between the pieces. Both are host time, which a CPU measures when the model is tiny: the Qwen3-0.6B layer
count (28, so each per-layer cost shows) with narrow layers (host time does not depend on their width).

Each path is one engine; one step of it is hooked (its scheduled batch, prepared as the runner does), and
its forward alone (no sampling, no scheduler) is timed `--repeats` times: `host_ms` until the call returns
(on CUDA the kernels are queued, not finished: that is the host's time), `wall_ms` after a synchronize,
`cpu_ms` this process's CPU time (a shared CPU makes wall time noisy), and `host_ms_outside_attention` the
host time less the attention op's (the same op in every path; on a CPU its PyTorch reference computes, which
would hide the rest): what is left is what compiling changes, the pieces, their wrappers and the split
graph's Python. `--profile` adds a cProfile of the paths it names: the top functions by own and cumulative
time per forward, and the watched ones (Inductor's runtime asserts, module calls, forward-context lookups,
Dynamo frames and guards, the graph wrappers, AOTAutograd's runtime wrapper).

  compiled   the default compile mode (3 on CUDA; asked for on a CPU) with cudagraph_mode NONE: the split
             forward, pieces run by their compiled code; what FULL_DECODE_ONLY runs for a prefill and any mode
             runs for a size it did not capture
  piecewise  the same with PIECEWISE graphs. On a CPU there are no CUDA graphs, so each piece's graph is
             "captured" with a stand-in whose replay does nothing (outputs stay those of the capture): what
             is timed is the host time around the replays (the split graph's Python, the wrappers, the
             attention calls), which is what PIECEWISE adds to FULL on a GPU
  full_decode_only, full   (CUDA only) the full graphs

    # CPU (a tiny random checkpoint is made in a temp dir):
    PYTHONPATH=$PWD OMP_NUM_THREADS=1 python scripts/maint/host_time.py --profile compiled --json /tmp/host_time.json
    # GPU (the Qwen3-0.6B-shape checkpoint scripts/gpu_check.sh makes; its stage host-time runs this):
    python scripts/maint/host_time.py --model /tmp/ckpt/qwen3-0.6b --dtype bfloat16 --profile compiled \
        --paths eager,compiled,full_decode_only,piecewise,full --json host_time.json

`--paired` keeps every path's engine alive and alternates their prefill forwards instead, `--repeats` rounds in a
rotated order, and gives each path's ratio to the first path within each round: host time drifts on a shared
host, and paths timed one after the other compare the host's moments (gpu_check: HOST_TIME_PAIRED=1).

A maintenance tool: the engine does not need it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from host_profile import profile_calls  # scripts/maint, beside this file

from minivllm.bench.common import jsonable, print_table, provenance, random_prompts, sync, write_json

# path -> LLM keyword arguments (besides the command line's). The compile mode is the default one (mode 3 on
# CUDA, with the hand-written kernels as custom ops: what issue 42 measured); on a CPU, whose default is mode 0,
# mode 3 is asked for. --compilation-config '{"mode": 3}' measures an asked-for mode 3 (Inductor's own ops).
PATHS = {
    "eager": {"enforce_eager": True},
    "compiled": {"compilation_config": {"cudagraph_mode": "NONE"}},
    "piecewise": {"compilation_config": {"cudagraph_mode": "PIECEWISE"}},
    "full_decode_only": {"compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"}},
    "full": {"compilation_config": {"cudagraph_mode": "FULL"}},
}


class AttentionClock:
    """Time spent inside the attention op (minivllm.attention.layer.unified_attention_impl), which eager and
    compiled forwards run alike: on a CPU it is the PyTorch reference's compute, which would hide the host
    time the compile changes. Installed before an engine is built, so the split graph calls it too."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextlib.contextmanager
    def installed(self):
        from minivllm.attention import layer

        inner = layer.unified_attention_impl

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        layer.unified_attention_impl = timed
        try:
            yield
        finally:
            layer.unified_attention_impl = inner


CLOCK = AttentionClock()


class _ReplayNothing:
    """torch.cuda.CUDAGraph on a CPU: capture records nothing, replay does nothing."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def replay(self) -> None:
        pass


@contextlib.contextmanager
def cpu_graph_stand_in():
    """Let CUDAGraphWrapper capture and replay on a CPU (see the module docstring: piecewise)."""
    from minivllm.compilation import cuda_graph

    saved = torch.cuda.CUDAGraph, torch.cuda.graph, cuda_graph.weak_ref
    torch.cuda.CUDAGraph = _ReplayNothing
    torch.cuda.graph = lambda graph, pool=None: contextlib.nullcontext()
    cuda_graph.weak_ref = lambda x: x  # the captured outputs themselves (there is no graph pool)
    try:
        yield
    finally:
        torch.cuda.CUDAGraph, torch.cuda.graph, cuda_graph.weak_ref = saved


def engine_settings(path: str, args: argparse.Namespace) -> dict:
    """The path's LLM keyword arguments; --compilation-config (JSON) adds to those of the compiled paths,
    which compile into --cache-dir (default: a fresh directory, so no earlier run's entry is loaded)."""
    kw = dict(PATHS[path])
    if "compilation_config" in kw:
        kw["compilation_config"] = {**kw["compilation_config"], "cache_dir": args.cache_dir,
                                    **({"mode": 3} if args.device == "cpu" else {}),
                                    **json.loads(args.compilation_config or "{}")}
    return kw


def build_llm(model: str, path: str, args: argparse.Namespace, **extra):
    """The path's engine with the command line's settings (one prompt of --prefill tokens fits in one step)."""
    from minivllm import LLM

    return LLM(model=model, device=args.device, dtype=args.dtype, max_model_len=args.max_model_len,
               max_num_seqs=args.max_num_seqs, max_num_batched_tokens=max(args.prefill, 2048),
               async_scheduling=False, **extra, **engine_settings(path, args))


def tiny_checkpoint(directory: Path) -> str:
    """Qwen3-0.6B's structure (28 layers, q/k norm, GQA) with narrow layers: host time shows, compute does not."""
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    return str(make_random_checkpoint("qwen3-0.6b", directory / "ckpt", dtype="float32", seed=0, hidden_size=64,
                                      intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                                      head_dim=16, vocab_size=1024))


def prepared(runner, sched):
    """The step's batch as execute_model prepares it (the dispatcher's pick, the same padding), and its mode."""
    from minivllm.config import CUDAGraphMode

    pick = runner.cudagraph_dispatcher.dispatch(sched.num_tokens, len(sched.scheduled), sched.is_uniform_decode)
    unified = pick.mode is CUDAGraphMode.FULL and (not pick.uniform_decode or runner.config.uniform_decode_query_len > 1)
    return runner.input_batch.prepare(sched, pick.num_padded_tokens, pick.num_padded_seqs, None, unified=unified), \
        pick.mode


def time_forward(runner, sched, repeats: int, profile: bool, stand_in: bool) -> dict:
    """The step's forward as execute_model runs it (the dispatcher's pick, the same padding), `repeats` times."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm.config import CUDAGraphMode

    batch, mode = prepared(runner, sched)
    n = batch.num_padded_tokens
    if stand_in:  # piecewise on a CPU: capture this size with the stand-in graphs, then replay them
        mode = CUDAGraphMode.PIECEWISE
        ib = runner.input_batch
        with set_forward_context(batch.attn_metadata, runner.backend, runner.kv_caches, mode, n, capturing=True):
            runner.compiled.forward(ib.input_ids[:n], ib.positions[:n])
    for _ in range(3):  # warm: lazy initialisation, Triton's launch caches
        runner.run_forward(batch, mode)
    sync()
    host, wall, cpu, outside = [], [], [], []
    for _ in range(repeats):
        CLOCK.seconds = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        runner.run_forward(batch, mode)
        t1, c1 = time.perf_counter(), time.process_time()
        sync()
        host.append((t1 - t0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
        outside.append((t1 - t0 - CLOCK.seconds) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    out = {"tokens": sched.num_tokens, "padded_tokens": n, "graph_mode": mode.value,
           "host_ms": statistics.median(host), "host_ms_min": min(host), "wall_ms": statistics.median(wall),
           "cpu_ms": statistics.median(cpu), "host_ms_outside_attention": statistics.median(outside),
           "host_ms_outside_attention_min": min(outside)}
    if profile:
        out["profile"] = cprofile(lambda: runner.run_forward(batch, mode), max(repeats // 2, 3))
    return out


# what a compiled forward may spend host time on besides the work: Inductor's runtime asserts, module calls
# around pieces, forward-context lookups, Dynamo (guards, a recompile), the CUDA graph wrappers
WATCHED = ("assert_size_stride", "assert_alignment", "_call_impl", "get_forward_context", "eval_frame",
           "convert_frame", "guards", "cuda_graph.py", "gen_alias_from_base", "runtime_wrapper")


def cprofile(fn, calls: int, top: int = 25) -> dict:
    python_calls, rows = profile_calls(fn, calls)
    sync()
    watched = [r for r in rows if any(w in r["function"] for w in WATCHED)]
    return {"python_calls": python_calls, "watched": sorted(watched, key=lambda r: -r["own_us"]),
            "top_own": sorted(rows, key=lambda r: -r["own_us"])[:top],
            "top_cum": sorted(rows, key=lambda r: -r["cum_us"])[:top]}


def measure(model: str, path: str, args: argparse.Namespace) -> dict:
    """Build the path's engine, time a `--prefill`-token prefill and a 1-token decode of one request."""
    from minivllm.layers.custom_op import CustomOpSelection
    from minivllm.sampling_params import SamplingParams

    stand_in = path == "piecewise" and args.device == "cpu"
    with cpu_graph_stand_in() if stand_in else contextlib.nullcontext(), CLOCK.installed():
        t0 = time.perf_counter()
        llm = build_llm(model, path, args)
        startup_s = time.perf_counter() - t0
        engine, runner = llm.engine, llm.model_runner
        results, profile = {}, path in args.profile

        def hook_next_step(kind: str) -> None:
            real = runner.execute_model

            def hooked(sched, prev=None):
                with torch.inference_mode():
                    results[kind] = time_forward(runner, sched, args.repeats, profile, stand_in)
                return real(sched, prev)

            runner.execute_model = hooked
            try:
                engine.step()
            finally:
                del runner.execute_model

        vocab = min(runner.model_config.vocab_size, 1000)
        prompt = random_prompts(1, args.prefill, vocab, seed=0)[0]
        engine.add_request(engine.next_request_id(), prompt, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
        hook_next_step("prefill")  # the whole prompt in one step (max_num_batched_tokens >= --prefill)
        hook_next_step("decode")
        while engine.has_unfinished_requests():
            engine.step()
        info = runner.compiled.info
        config = {"compile_mode": int(llm.config.compile_mode), "cudagraph_mode": llm.config.cudagraph_mode.value,
                  "custom_ops": sorted(CustomOpSelection.for_engine(llm.config).enabled),  # none without Triton
                  "compile_cache_warm": info.get("cache_warm")}
        llm.shutdown()
    return {"path": path, "startup_s": round(startup_s, 2), **config, **results}


def paired(model: str, paths: list[str], args: argparse.Namespace) -> dict:
    """Every path's engine alive at once, their prefill forwards timed in turn, `--repeats` rounds.

    Why: on a shared host the same forward's host time drifts by tens of percent within a minute (on the
    H200 host, one path's identical 512-token prefill took 14.2 ms in one run and 17.3 ms in the next), so
    paths timed one after the other compare the host's moments, not the paths. Alternating them, each
    round in a rotated order, gives every path the same moments: the ratio of each round's pair is the
    comparison, and its median and spread say how sure it is."""
    from minivllm.sampling_params import SamplingParams

    engines, batches = {}, {}
    for path in paths:
        # every engine stays alive: a small KV cache each, not gpu_memory_utilization's share of the GPU
        llm = build_llm(model, path, args, num_gpu_blocks_override=max(2 * args.max_model_len // 16, 64))
        engine, runner = llm.engine, llm.model_runner
        real = runner.execute_model

        def hooked(sched, prev=None, path=path, runner=runner, real=real):
            batches[path] = (runner, *prepared(runner, sched))  # its buffers keep this batch: no later step runs
            return real(sched, prev)

        prompt = random_prompts(1, args.prefill, min(runner.model_config.vocab_size, 1000), seed=0)[0]
        engine.add_request(engine.next_request_id(), prompt, SamplingParams(temperature=0, max_tokens=2))
        runner.execute_model = hooked
        try:
            engine.step()  # the whole prompt in one step
        finally:
            del runner.execute_model
        engines[path] = llm
    times: dict[str, list[float]] = {p: [] for p in paths}
    with torch.inference_mode():
        for runner, batch, mode in batches.values():
            for _ in range(3):
                runner.run_forward(batch, mode)
        sync()
        for i in range(args.repeats):
            order = paths[i % len(paths):] + paths[:i % len(paths)]
            for path in order:
                runner, batch, mode = batches[path]
                t0 = time.perf_counter()
                runner.run_forward(batch, mode)
                times[path].append((time.perf_counter() - t0) * 1e3)
                sync()
    for llm in engines.values():
        llm.shutdown()
    base = paths[0]
    out = {"base": base, "tokens": args.prefill, "rounds": args.repeats, "paths": {}}
    for path in paths:
        ratios = sorted(t / b for t, b in zip(times[path], times[base]))
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        out["paths"][path] = {"host_ms": statistics.median(times[path]), "host_ms_min": min(times[path]),
                              "over_base": statistics.median(ratios), "over_base_q1_q3": [q[0], q[2]],
                              "rounds_at_or_below_base": sum(r <= 1 for r in ratios)}
    print_table(f"{args.prefill}-token prefill forward, paths alternated ({args.repeats} rounds): host ms and the "
                f"ratio to {base} within each round",
                ["path", "host ms", "min", f"/ {base} median", "q1", "q3", f"rounds <= {base}"],
                [[p, r["host_ms"], r["host_ms_min"], r["over_base"], *r["over_base_q1_q3"],
                  r["rounds_at_or_below_base"]] for p, r in out["paths"].items()], ".3f")
    return out


def run(args: argparse.Namespace) -> dict:
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = set(paths) - set(PATHS)
    if unknown:
        sys.exit(f"unknown path(s) {sorted(unknown)}: choose from {list(PATHS)}")
    if args.device == "cpu":
        paths = [p for p in paths if p not in ("full", "full_decode_only")]  # no CUDA graphs to stand in for
    args.profile = [p.strip() for p in args.profile.split(",") if p.strip()]
    tmp = tempfile.TemporaryDirectory()
    model = args.model or tiny_checkpoint(Path(tmp.name))
    args.cache_dir = args.cache_dir or str(Path(tmp.name) / "compile_cache")
    def head() -> dict:  # after the runs, as the provenance's date says when they ended
        return {"provenance": provenance(args, model if args.model else None),
                "model": "tiny qwen3-0.6b structure (random)" if not args.model else args.model}

    if args.paired:
        measured = paired(model, paths, args)
        result = {"bench": "host_time_paired", **head(), **measured}
        write_json(args.json, jsonable(result))
        tmp.cleanup()
        return result
    rows = []
    for p in paths:
        rows.append(measure(model, p, args))
        gc.collect()  # the engine is gone before the next one is built
    for r in rows:
        print(f"{r['path']}: compile mode {r['compile_mode']}, cudagraph_mode {r['cudagraph_mode']}, custom ops "
              f"{','.join(r['custom_ops']) or 'none'}, startup {r['startup_s']} s")
    eager = next((r for r in rows if r["path"] == "eager"), None)
    table = []
    for r in rows:
        for kind in ("prefill", "decode"):
            m = r[kind]
            ratio = m["host_ms"] / eager[kind]["host_ms"] if eager else None
            table.append([r["path"], kind, m["padded_tokens"], m["graph_mode"], m["host_ms"], m["cpu_ms"],
                          m["wall_ms"], ratio, m["host_ms_outside_attention"], m["host_ms_outside_attention_min"]])
    print_table(f"One forward per path on {args.device} (median of {args.repeats}; 'outside attention': the "
                f"host time less the attention op's)",
                ["path", "step", "tokens", "graphs", "host ms", "cpu ms", "wall ms", "host / eager",
                 "outside attn ms", "min"], table, ".3f")
    for r in rows:
        for kind in ("prefill", "decode"):
            prof = r[kind].get("profile")
            if prof:
                print_table(f"{r['path']} {kind}: {prof['python_calls']:.0f} Python calls per forward, by own time",
                            ["function", "calls", "own us", "cum us"],
                            [[p["function"][-70:], p["calls"], p["own_us"], p["cum_us"]] for p in prof["top_own"][:15]],
                            ".1f")
                print_table(f"{r['path']} {kind}: watched functions", ["function", "calls", "own us", "cum us"],
                            [[p["function"][-70:], p["calls"], p["own_us"], p["cum_us"]] for p in prof["watched"]],
                            ".1f")
    result = {"bench": "host_time", **head(), "paths": rows}
    write_json(args.json, jsonable(result))
    tmp.cleanup()
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint dir (default: a tiny Qwen3-0.6B-structured one)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--paths", default="eager,compiled,piecewise,full_decode_only,full")
    ap.add_argument("--compilation-config", default=None,
                    help='JSON added to the compiled paths\' compilation_config, e.g. \'{"custom_ops": ["all"]}\'')
    ap.add_argument("--cache-dir", default=None, help="compile cache (default: a fresh temporary directory)")
    ap.add_argument("--prefill", type=int, default=512, help="prompt tokens of the timed prefill")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--profile", default="", help="paths to cProfile, e.g. compiled,eager")
    ap.add_argument("--paired", action="store_true",
                    help="keep every path's engine and alternate their prefill forwards (the first path is the base)")
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
