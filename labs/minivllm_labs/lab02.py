"""Lab 02, "Inside a CUDA graph": the measurements, shared by the notebook and `minivllm_labs.record lab02`.

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
f) graph modes:    NONE / FULL_DECODE_ONLY / FULL / PIECEWISE / FULL_AND_PIECEWISE on the engine: TPOT, TTFT, which path ran
                   each step, prefill included (interview question 3).

Engine internals this lab reads (the dispatcher's graphs and counters) are touched only in this file.
Section a) (raw torch graphs) is in lab02_limits.py, tables, plots and the questions' evidence in
lab02_views.py, the questions and claims in data/lab02.yaml.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import torch

from minivllm_labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm_labs.lab02_limits import (  # noqa: F401
    HOST_SYNC_CODE,
    alloc_inside_capture,
    capture_replay,
    graph_limits,
    host_sync_inside_capture,
    limit_branch,
    limit_fixed_address,
    rng_in_graph,
)

MODES = ("NONE", "FULL_DECODE_ONLY", "FULL", "PIECEWISE", "FULL_AND_PIECEWISE")
PAD_SIZES = [1, 2, 4, 5, 8, 16, 32, 64, 128, 256]  # 5 captured too, so "exact" and "padded" can be compared
POOL_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]  # ten graphs: the article's "10 graphs = 1.5 GB"
MODE_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def _cuda() -> bool:
    return torch.cuda.is_available()


def _spread(xs: list[float]) -> dict:
    """Median and min-max of repeated measurements (the lab states a difference only beyond the spread)."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


# ---- b) capture sizes ------------------------------------------------------------------------------------
def capture_sizes_for(max_num_seqs: int | None = None, max_cudagraph_capture_size: int | None = None,
                      cudagraph_capture_sizes: list[int] | None = None) -> list[int]:
    """The sizes the engine captures for these knobs (the engine's own rule: EngineConfig.resolve;
    max_num_seqs None: the engine's default)."""
    from minivllm.config import CompilationConfig, EngineConfig, SchedulerConfig

    comp = CompilationConfig(cudagraph_capture_sizes=cudagraph_capture_sizes,
                             max_cudagraph_capture_size=max_cudagraph_capture_size)
    sched = SchedulerConfig(max_num_seqs=max_num_seqs or SchedulerConfig.max_num_seqs)
    return list(EngineConfig.resolve(model="", scheduler=sched, compilation=comp).cudagraph_capture_sizes)


def capture_size_table(seqs: tuple[int, ...] = (1, 8, 16, 64, 256, 512)) -> dict:
    """Per max_num_seqs: how many sizes are captured and the largest (not one graph per sequence)."""
    rows = []
    for n in seqs:
        s = capture_sizes_for(n)
        rows.append({"max_num_seqs": n, "num_graphs": len(s), "largest": max(s), "sizes": s})
    return {"rows": rows, "default_256": capture_sizes_for()}  # the default max_num_seqs, 256


# ---- engines ---------------------------------------------------------------------------------------------
def make_llm(model: str, mode: str = "FULL_DECODE_ONLY", sizes: list[int] | None = None, max_num_seqs: int = 16,
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
    if mode == "NONE" or not _cuda():  # the configured sizes are still resolved (llm.config.cudagraph_capture_sizes)
        return LLM(model=model, enforce_eager=True, cudagraph_capture_sizes=sizes, **args)
    return LLM(model=model, cudagraph_mode=mode, cudagraph_capture_sizes=sizes, **args)


def _prompts(llm, batch: int, length: int) -> list[dict]:
    vocab = min(llm.engine.model_config.vocab_size, 500)
    return [{"prompt_token_ids": [3 + (7 * i + 13 * j) % (vocab - 3) for j in range(length)]}
            for i in range(batch)]


def _dispatch_counts(llm) -> dict | None:
    """Steps per path so far (FULL graph / PIECEWISE graphs / eager); None for an engine without graphs."""
    d = getattr(llm.model_runner, "cudagraph_dispatcher", None)
    return dict(d.counts) if d is not None else None


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
    paths = None if after is None else {k: after[k] - before.get(k, 0) for k in after}
    res = {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens, "ttft_ms": _spread(ttft),
           "steps_by_path": paths}
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
    step = getattr(llm.model_runner, "full_graph", None)  # the CUDAGraphWrapper of the FULL graphs
    if step is None or not step.graphs:
        return {}
    out = {}
    for n in sizes:
        if n not in step.graphs:
            continue
        graph = step.graphs[n].graph
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
        llm = make_llm(model, "FULL_DECODE_ONLY", sizes, max_num_seqs=max(PAD_SIZES))
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
    from minivllm_labs.lab01 import _decode_inputs

    runner = llm.model_runner
    ib = runner.input_batch

    def capture(n: int, pool) -> torch.cuda.CUDAGraph:
        meta = _decode_inputs(runner, n, context)
        with set_forward_context(meta, runner.backend, runner.kv_caches):
            runner.compiled.forward(ib.input_ids[:n], ib.positions[:n])  # warm-up at this size
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                runner.compiled.forward(ib.input_ids[:n], ib.positions[:n])
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

    FULL_DECODE_ONLY graphs are keyed by batch size (decode only, attention inside); FULL graphs (any batch,
    attention inside) and PIECEWISE graphs (attention outside) by token count up to the largest capture size
    (512 here): so under them a 128-token prefill replays, 1024 does not."""
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

    from minivllm_labs.plots import figure

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


from minivllm_labs.lab02_views import (  # noqa: E402
    CLAIMS,
    Q1,
    Q2,
    Q3,
    Q4,
    Q5,
    capture_sizes_text,
    limits_text,
    modes_record_text,
    modes_table,
    padding_table,
    piecewise_gap_text,
    plot_modes,
    plot_padding,
    plot_pool,
    pool_table,
    rng_text,
    show,
    show_code,
    show_quiz,
    verdicts_table,
)
from minivllm_labs.lab_info import LabInfo  # noqa: E402

LAB_INFO = LabInfo(
    lab="lab02", notebook="labs/02_inside_a_cuda_graph.ipynb", title="Inside a CUDA graph",
    title_zh="CUDA Graph 内部", sections=("§1.2", "§1.3", "§1.4", "§5"),
    questions=(Q1, Q2, Q3, Q4, Q5), claims=CLAIMS,
    code=("minivllm/worker/graph_capture.py", "minivllm/config.py", "minivllm/compilation/backend.py",
          "minivllm/worker/input_batch.py"),
)

__all__ = [
    "LAB_INFO",
    "Q1",
    "Q2",
    "Q3",
    "Q4",
    "Q5",
    "capture_size_table",
    "capture_sizes_for",
    "capture_sizes_text",
    "generate_stats",
    "graph_limits",
    "graph_modes",
    "limits_text",
    "make_llm",
    "mode_toggle",
    "modes_record_text",
    "modes_table",
    "padding",
    "padding_table",
    "piecewise_gap_text",
    "plot_modes",
    "plot_padding",
    "plot_pool",
    "pool_memory",
    "pool_table",
    "rng_in_graph",
    "rng_text",
    "run_all",
    "show",
    "show_code",
    "show_quiz",
    "verdicts_table",
]
