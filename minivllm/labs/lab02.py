"""Lab 02, "Inside a CUDA graph": the measurements, shared by the notebook and `minivllm.labs.record lab02`.

The handbook (§1.2-1.4) shows capture/replay, lists three limits (fixed addresses, no data-dependent branch,
no allocation inside a graph), and says vLLM captures several batch sizes and pads a batch of 5 to the size-8
graph. The article adds "150 MB per graph", "replay reuses the capture's seed" and "--max-num-seqs is the
number of graphs". Each is measured here:

a) graph_limits:   the snippet run, then one cell per limit that breaks (or does not) on a raw torch graph.
b) capture sizes:  what the engine captures for a given max_num_seqs / max_cudagraph_capture_size.
c) padding:        replay time of the size-1, 5, 8 and 256 graphs (median and spread), and engine TPOT with
                   vLLM-style sizes vs one graph for the largest size only.
d) pool memory:    ten sizes captured into one shared pool (largest first) vs ten separate pools.
e) rng_in_graph:   a sampling step replayed three times.
f) graph modes:    NONE / FULL / PIECEWISE / FULL_AND_PIECEWISE on the engine: TPOT, TTFT, which path ran
                   each step, prefill included (interview question 3).

Engine internals this lab reads (the dispatcher's graphs and counters) are touched only in this file.
The questions, tables and plots are in lab02_views.py.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch

from minivllm.labs.common import max_positions, quiet_engine_logs, round_floats

MODES = ("NONE", "FULL", "PIECEWISE", "FULL_AND_PIECEWISE")
PAD_SIZES = [1, 2, 4, 5, 8, 16, 32, 64, 128, 256]  # 5 captured too, so "exact" and "padded" can be compared
POOL_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]  # ten graphs: the article's "10 graphs = 1.5 GB"
MODE_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def _cuda() -> bool:
    return torch.cuda.is_available()


def _spread(xs: list[float]) -> dict:
    """Median and min-max of repeated measurements (the lab states a difference only beyond the spread)."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


# ---- a) the handbook's snippet and its three limits, on a raw torch graph --------------------------------
def _toy(dev: str = "cuda"):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64, device=dev)
    return lin, torch.randn(8, 64, device=dev)


@torch.inference_mode()
def capture_replay() -> dict:
    """The handbook's snippet: capture once on a static input, then copy_ new data in and replay."""
    if not _cuda():
        return {"device": "cpu"}
    model, static_input = _toy()
    model(static_input)  # warm-up outside the capture: cuBLAS creates its handle and workspace here
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_output = model(static_input)
    real = torch.randn_like(static_input)
    static_input.copy_(real)  # the input copied into the fixed tensor
    g.replay()
    diff = (static_output - model(real)).abs().max().item()
    return {"device": "cuda", "replay_matches_eager": diff < 1e-5, "max_abs_diff": diff}


@torch.inference_mode()
def limit_fixed_address() -> dict:
    """Limit 1: rebinding the Python name instead of copy_ - the graph still reads the old tensor."""
    if not _cuda():
        return {"device": "cpu"}
    model, static_input = _toy()
    old = static_input.clone()
    model(static_input)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_output = model(static_input)
    static_input = torch.randn_like(old)  # a NEW tensor at a new address; the graph never sees it
    g.replay()
    new_ok = torch.allclose(static_output, model(static_input), atol=1e-5)
    old_ok = torch.allclose(static_output, model(old), atol=1e-5)
    return {"device": "cuda", "output_is_for_new_input": new_ok, "output_is_for_old_input": old_ok,
            "error_raised": False}


@torch.inference_mode()
def limit_branch() -> dict:
    """Limit 2: a branch decided on the host (here a CPU flag, like a Python int of the batch metadata)
    is taken once, at capture. Replay runs the captured branch whatever the flag says now: no error."""
    if not _cuda():
        return {"device": "cpu"}
    x = torch.ones(4, device="cuda")
    use_add = torch.tensor([1])  # CPU tensor: reading it is not a device sync

    def step() -> torch.Tensor:
        return x + 1 if use_add.item() == 1 else x - 1

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    use_add[0] = 0  # the data now says "subtract"
    g.replay()
    return {"device": "cuda", "eager_result": step().tolist(), "replay_result": out.tolist(),
            "replay_matches_eager": torch.equal(out, step()), "error_raised": False}


@torch.inference_mode()
def alloc_inside_capture() -> dict:
    """Limit 3 as the handbook states it ("no allocation inside a graph"): allocate inside a capture.
    It works: the caching allocator serves it from the graph's private pool, at the same address every
    replay."""
    if not _cuda():
        return {"device": "cpu"}
    x = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tmp = torch.empty(4 << 20, device="cuda")  # 16 MiB, allocated inside the capture
        tmp.fill_(2.0)
        y = x * tmp[: x.numel()].view_as(x)  # and another new tensor for the result
    x.copy_(torch.randn_like(x))
    g.replay()
    ok = torch.allclose(y, x * 2)
    return {"device": "cuda", "capture_ok": True, "replay_correct": ok,
            "pool_mib": (torch.cuda.memory_reserved() - before) / 2**20}


_SYNC_CHILD = """
import json, torch
x = torch.ones(4, device="cuda")
x + 1
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
res = {"device": "cuda", "error_raised": False}
try:
    with torch.cuda.graph(g):
        if (x.sum() > 0).item():   # a host sync: the CPU waits for a GPU value
            y = x * 2
except Exception as e:
    chain, err = [], e
    while err is not None and len(chain) < 3:   # the sync's own error, and what ending the capture said
        msg = str(err).strip().splitlines()
        chain.append({"type": type(err).__name__, "message": msg[0] if msg else ""})
        err = err.__context__
    root = chain[-1]
    res.update(error_raised=True, error_type=root["type"], message=root["message"], chain=chain)
print("RESULT" + json.dumps(res))
"""


def host_sync_inside_capture(timeout_s: int = 180) -> dict:
    """What does fail: `.item()` of a CUDA tensor inside a capture. Run in a child process, because a
    failed capture can leave the CUDA context (and the RNG) unusable for the rest of this one."""
    if not _cuda():
        return {"device": "cpu"}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run([sys.executable, "-c", _SYNC_CHILD], capture_output=True, text=True, timeout=timeout_s,
                       env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
    if not lines:
        return {"device": "cuda", "error_raised": True, "error_type": "child process failed",
                "message": (p.stderr.strip().splitlines() or [""])[-1]}
    return json.loads(lines[-1][len("RESULT"):])


@torch.inference_mode()
def rng_in_graph(replays: int = 3) -> dict:
    """The article: "replay reuses the capture's RNG seed, so results never change". A sampling step
    (the exponential-race sampler vLLM uses: argmax(p / q), q ~ Exp(1)) captured once, replayed 3 times."""
    if not _cuda():
        return {"device": "cpu"}
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(4, 1000, device="cuda"), dim=-1)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q = torch.empty_like(probs).exponential_()
        sample = (probs / q).argmax(dim=-1)
    samples = []
    for _ in range(replays):
        g.replay()
        samples.append(sample.tolist())
    distinct = len({tuple(s) for s in samples})
    return {"device": "cuda", "samples": samples, "distinct": distinct, "replays": replays}


def graph_limits() -> dict:
    """Every cell of section a), in the order the notebook shows them (the host sync last)."""
    return {"snippet": capture_replay(), "fixed_address": limit_fixed_address(), "branch": limit_branch(),
            "alloc": alloc_inside_capture(), "host_sync": host_sync_inside_capture()}


# ---- b) capture sizes ------------------------------------------------------------------------------------
def capture_sizes_for(max_num_seqs: int = 256, max_cudagraph_capture_size: int | None = None,
                      cudagraph_capture_sizes: list[int] | None = None) -> list[int]:
    """The sizes the engine captures for these knobs (the engine's own rule: EngineConfig.capture_sizes)."""
    from minivllm.config import CompilationConfig, EngineConfig, SchedulerConfig

    comp = CompilationConfig(cudagraph_capture_sizes=cudagraph_capture_sizes,
                             max_cudagraph_capture_size=max_cudagraph_capture_size)
    return EngineConfig(model="", scheduler=SchedulerConfig(max_num_seqs=max_num_seqs),
                        compilation=comp).capture_sizes()


def capture_size_table(seqs: tuple[int, ...] = (1, 8, 16, 64, 256, 512)) -> dict:
    """Per max_num_seqs: how many sizes are captured and the largest (not one graph per sequence)."""
    rows = []
    for n in seqs:
        s = capture_sizes_for(n)
        rows.append({"max_num_seqs": n, "num_graphs": len(s), "largest": max(s), "sizes": s})
    return {"rows": rows, "default_256": capture_sizes_for(256)}


# ---- engines ---------------------------------------------------------------------------------------------
def make_llm(model: str, mode: str = "FULL", sizes: list[int] | None = None, max_num_seqs: int = 16,
             max_len: int = 256, **kw):
    """An engine in one CUDA graph mode ("NONE" = eager). KV blocks sized from max_num_seqs, not from free
    memory, so measurements do not depend on what an earlier engine left behind."""
    from minivllm import LLM

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    quiet_engine_logs()
    max_len = min(max_len, max_positions(model))
    blocks = max_num_seqs * ((max_len + 15) // 16) + 8
    args = dict(max_num_seqs=max_num_seqs, max_model_len=max_len, num_gpu_blocks_override=blocks,
                enable_prefix_caching=False, **kw)
    if mode == "NONE" or not _cuda():
        return LLM(model=model, enforce_eager=True, **args)
    return LLM(model=model, cudagraph_mode=mode, cudagraph_capture_sizes=sizes, **args)


def _prompts(llm, batch: int, length: int) -> list[dict]:
    vocab = min(llm.engine.model_config.vocab_size, 500)
    return [{"prompt_token_ids": [3 + (7 * i + 13 * j) % (vocab - 3) for j in range(length)]}
            for i in range(batch)]


def _dispatch_counts(llm) -> dict:
    d = getattr(llm.model_runner, "cudagraph_dispatcher", None)
    return dict(d.counts) if d is not None else {"full": 0, "piecewise": 0, "eager": 0}


def generate_stats(llm, batch: int, prompt_len: int, new_tokens: int, repeats: int) -> dict:
    """TPOT and TTFT (ms, median and spread over `repeats` runs) and the path of every step that ran."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    tpot, ttft = [], []
    before = _dispatch_counts(llm)
    for _ in range(repeats):
        outs = llm.generate(_prompts(llm, batch, prompt_len), sp, use_tqdm=False)
        ttft.append(statistics.median(o.metrics.ttft for o in outs) * 1e3)
        if new_tokens > 1:
            tpot.append(statistics.median(o.metrics.tpot for o in outs) * 1e3)
    after = _dispatch_counts(llm)
    res = {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens, "ttft_ms": _spread(ttft),
           "steps_by_path": {k: after[k] - before.get(k, 0) for k in after}}
    if tpot:
        res["tpot_ms"] = _spread(tpot)
    return res


def _warm(llm) -> None:
    generate_stats(llm, 1, 16, 4, 1)  # first-call costs (Triton JIT, allocator growth) are not TPOT


# ---- c) padding and the one-graph-only engine ----------------------------------------------------------
def replay_times(llm, sizes: tuple[int, ...] = (1, 5, 8, 256), replays: int = 50, repeats: int = 7) -> dict:
    """GPU time (ms) of one replay of the engine's FULL graph of each size: `replays` back-to-back replays
    timed with CUDA events, `repeats` times. A padded batch of 5 runs the size-8 graph, so graph 8 - graph 5
    is what the 3 padded rows cost."""
    d = getattr(llm.model_runner, "cudagraph_dispatcher", None)
    if d is None or not d.full_graphs:
        return {}
    out = {}
    for n in sizes:
        if n not in d.full_graphs:
            continue
        graph = d.full_graphs[n][0]
        graph.replay()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(replays):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / replays)
        out[str(n)] = _spread(times)
    return out


def padding(model: str, quick: bool = False) -> dict:
    """Replay time per graph size, and engine TPOT at batch 1 / 5 / 8 with vLLM-style sizes (5 captured
    too) vs with one graph of the largest size only (every batch padded to 256)."""
    if not _cuda():
        return {"device": "cpu"}
    reps = 3 if quick else 7
    res: dict = {"device": "cuda", "sizes": PAD_SIZES}
    for name, sizes in (("several", PAD_SIZES), ("largest_only", [max(PAD_SIZES)])):
        llm = make_llm(model, "FULL", sizes, max_num_seqs=max(PAD_SIZES))
        _warm(llm)
        if name == "several":
            res["replay_ms"] = replay_times(llm, repeats=reps)
            res["capture"] = _capture_summary(llm)
        res[f"tpot_{name}"] = {str(b): generate_stats(llm, b, 16, 16 if quick else 32, reps)["tpot_ms"]
                               for b in (1, 5, 8)}
        llm.shutdown()
    return round_floats(res)


def _capture_summary(llm) -> dict:
    cg = llm.startup_report().cudagraph
    full = cg.get("FULL") or {}
    return {"mode": str(cg.get("mode")), "sizes": cg.get("capture_sizes"), "seconds": full.get("total_seconds"),
            "free_drop_mib": full.get("total_mib"), "pool_mib": full.get("pool_mib"),
            "seconds_per_size": full.get("seconds_per_size"), "pool_growth_mib": full.get("pool_growth_mib")}


# ---- d) one shared pool vs separate pools ----------------------------------------------------------------
@torch.inference_mode()
def pool_memory(llm, sizes: list[int] = POOL_SIZES, context: int = 64) -> dict:
    """Capture the model's decode forward for each size twice: into one shared pool, largest first (what
    the engine does), and each into its own private pool. Reports the allocator's reserved MiB per graph
    and in total (graphs kept alive while measuring), and the device's free-memory drop (which adds the
    graph executables the driver keeps outside the pools)."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm.labs.lab01 import _decode_inputs

    runner = llm.model_runner
    ib = runner.input_batch

    def capture(n: int, pool) -> torch.cuda.CUDAGraph:
        meta = _decode_inputs(runner, n, context)
        with set_forward_context(meta, runner.backend, runner.kv_caches):
            runner.forward_fn(ib.input_ids[:n], ib.positions[:n])  # warm-up at this size
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                runner.forward_fn(ib.input_ids[:n], ib.positions[:n])
        return g

    res = {}
    for name in ("shared", "separate"):
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        r0, f0 = torch.cuda.memory_reserved(), torch.cuda.mem_get_info()[0]
        pool = torch.cuda.graph_pool_handle() if name == "shared" else None
        graphs, per = [], {}
        for n in sorted(sizes, reverse=True):
            r = torch.cuda.memory_reserved()
            graphs.append(capture(n, pool))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # warm-up activations cached outside the pool
            per[str(n)] = (torch.cuda.memory_reserved() - r) / 2**20
        res[name] = {"total_mib": (torch.cuda.memory_reserved() - r0) / 2**20, "per_graph_mib": per,
                     "free_drop_mib": (f0 - torch.cuda.mem_get_info()[0]) / 2**20}
        del graphs
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    res.update(sizes=sorted(sizes), num_graphs=len(sizes), context=context)
    return round_floats(res)


# ---- f) graph modes on the engine ------------------------------------------------------------------------
def graph_modes(model: str, quick: bool = False, modes: tuple[str, ...] = MODES) -> dict:
    """Per mode: TPOT at batch 1 and 8, TTFT of a 128-token and a 1024-token prompt, the path each step
    took (FULL graph / PIECEWISE graphs / eager), what was captured and how long startup took.

    FULL graphs are keyed by batch size (decode only, attention inside); PIECEWISE graphs by token count up
    to the largest capture size (512 here), attention outside: so a 128-token prefill replays, 1024 does not."""
    if not _cuda():
        modes = ("NONE",)
    reps = 2 if quick else 5
    new = 8 if quick else 32
    long_prompt = 64 if quick else 1024
    res: dict = {"modes": list(modes), "capture_sizes": MODE_SIZES, "long_prompt": long_prompt}
    for mode in modes:
        t0 = time.perf_counter()
        llm = make_llm(model, mode, MODE_SIZES, max_num_seqs=64, max_len=long_prompt + new + 16)
        startup_s = time.perf_counter() - t0
        _warm(llm)
        row = {"startup_s": startup_s, "capture": _capture_summary(llm),
               "pieces": llm.compile_report().get("pieces")}
        cg = llm.startup_report().cudagraph
        row["piecewise_sizes"] = (cg.get("PIECEWISE") or {}).get("sizes")
        row["decode"] = {str(b): generate_stats(llm, b, 16, new, reps) for b in (1, 8)}
        row["prefill_short"] = generate_stats(llm, 1, 128 if not quick else 32, 1, reps)
        row["prefill_long"] = generate_stats(llm, 1, long_prompt, 1, reps)
        res[mode] = row
        llm.shutdown()
        gc.collect()
    return round_floats(res)


def mode_toggle(model: str, batch: int = 1):
    """Live toggle (GPU): pick a mode, the engine is built in it and TPOT / TTFT measured now."""
    import ipywidgets as w
    from IPython.display import display

    from minivllm.labs.plots import figure

    state: dict = {}
    toggle = w.ToggleButtons(options=list(MODES), value=None, description="Mode:")
    out = w.Output()

    def on_change(change):
        if change["new"] is None:
            return
        mode = change["new"]
        llm = make_llm(model, mode, MODE_SIZES, max_num_seqs=64, max_len=256)
        _warm(llm)
        s = generate_stats(llm, batch, 128, 32, 3)
        llm.shutdown()
        state[mode] = (s["tpot_ms"]["median"], s["ttft_ms"]["median"])
        with out:
            out.clear_output(wait=True)
            names = [m for m in MODES if m in state]
            display(figure(names, {"TPOT (ms)": [state[m][0] for m in names],
                                   "TTFT, 128-token prompt (ms)": [state[m][1] for m in names]},
                           kind="bar", title=f"Measured live, batch {batch}", y_title="ms"))

    toggle.observe(on_change, names="value")
    return w.VBox([toggle, out])


# ---- everything, for the recorder ------------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 02's measurements (a GPU run with a 0.6B model: about two minutes)."""
    out: dict = {"device": "cuda" if _cuda() else "cpu"}
    out["capture_sizes"] = capture_size_table()
    out["rng"] = rng_in_graph()
    out["padding"] = padding(model, quick)
    if _cuda():
        llm = make_llm(model, "NONE", max_num_seqs=max(POOL_SIZES), max_len=128)
        out["pool"] = pool_memory(llm)
        llm.shutdown()
    out["modes"] = graph_modes(model, quick)
    out["limits"] = graph_limits()  # last: its host-sync cell runs in a child process, but keep it apart
    return round_floats(out)


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call takes (the notebook's run-it-here cells report how long a step was)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


from minivllm.labs.lab02_views import (LAB_INFO, Q1, Q2, Q3, Q4, Q5, capture_sizes_text, limits_text,  # noqa: E402
                                       modes_table, padding_table, plot_modes, plot_padding, plot_pool,
                                       pool_table, rng_text, show, show_quiz, verdicts_table)

__all__ = ["LAB_INFO", "Q1", "Q2", "Q3", "Q4", "Q5", "run_all", "capture_sizes_for", "capture_size_table", "make_llm",
           "generate_stats", "graph_limits", "graph_modes", "padding", "pool_memory", "rng_in_graph",
           "capture_sizes_text", "limits_text", "modes_table", "padding_table", "plot_modes", "plot_padding",
           "plot_pool", "pool_table", "rng_text", "show", "show_quiz", "verdicts_table", "mode_toggle"]
