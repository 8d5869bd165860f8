"""Lab 01, "Why CUDA graphs": the measurements, shared by the notebook and `minivllm_labs.record lab01`.

The handbook says a launch costs 5-10 us, a big model launches 1000+ kernels per step, and so 25-50% of a
20 ms decode step is overhead a graph removes. The measurements here check each step of that argument:

a) launch_overhead: N tiny ops issued eagerly vs one replay of the same ops captured in a CUDA graph; on
                    CUDA also N launches of one of the engine's Triton kernels (its Python wrapper included).
b) kernel_census:   how many ops (CPU) / kernels (CUDA) one decode step of the engine issues, per layer.
c) bound_sweep:     per batch size, the CPU time to enqueue an eager forward, the GPU time to run it, the
                    eager step and the graph replay. Launches are asynchronous, so a graph saves only the CPU
                    time the GPU had to wait for: max(0, enqueue - GPU), not the whole enqueue time.
d) engine_tpot:     the engine's time per output token, eager vs CUDA graphs.

e) capture_replay_demo: the handbook's own 10-line capture / replay snippet, run.

Every timing is a median over repeats, stored with its range (min-max) so a notebook can say when a difference
is within noise. Every function runs on CUDA and on the CPU (where the graph parts are skipped), so the same
code path is exercised by the notebook on any machine and by the tests. The parts live in lab01_timing.py (a,
and the timing helpers) and lab01_census.py (b); what is shown (tables, plots, noise statements, the questions'
evidence) in lab01_views.py, the questions and claims in data/lab01.yaml. Everything is importable from here.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Callable

import torch

from minivllm_labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm_labs.lab01_census import LAYER_TAG, _prompts, decoder_layers, kernel_census  # noqa: F401
from minivllm_labs.lab01_timing import (  # noqa: F401
    _cuda,
    _median_s,
    _stat,
    _sync,
    _times_s,
    launch_overhead,
    quiet_stderr,
    triton_launch,
)
from minivllm_labs.lab01_views import (  # noqa: F401
    CLAIMS,
    Q1,
    Q4,
    bound_table,
    bound_verdict,
    census_table,
    launch_table,
    padding_cost,
    per_op_gap,
    plot_bound,
    plot_launch,
    plot_tpot,
    q1_evidence,
    q4_evidence,
    snippet_text,
    tpot_table,
    verdict_table,
)
from minivllm_labs.lab_info import LabInfo

MAX_MODEL_LEN = 256  # enough for every measurement here; small so KV blocks stay cheap


# ---- engines ---------------------------------------------------------------------------------------------
def make_llm(model: str, graphs: bool, max_num_seqs: int = 16, capture_sizes: list[int] | None = None):
    """An engine for these measurements: eager, or FULL CUDA graphs for the decode batch sizes we use.

    KV blocks are sized from max_num_seqs (not from free GPU memory), so two engines fit side by side."""
    from minivllm import LLM

    quiet_engine_logs()
    max_len = min(MAX_MODEL_LEN, max_positions(model))
    blocks = max_num_seqs * ((max_len + 15) // 16) + 8
    kw = dict(max_num_seqs=max_num_seqs, max_model_len=max_len, num_gpu_blocks_override=blocks,
              enable_prefix_caching=False)
    if graphs and _cuda():
        kw.update(cudagraph_mode="FULL_DECODE_ONLY", cudagraph_capture_sizes=capture_sizes or [1, 2, 4, 8, 16])
    return LLM(model=model, enforce_eager=not graphs, **kw)


def free_memory() -> None:
    """Give the GPU memory of dropped engines back (call after `del llm`, before building the next one)."""
    gc.collect()
    if _cuda():
        torch.cuda.empty_cache()


# ---- c) CPU-bound vs GPU-bound ---------------------------------------------------------------------------
def decode_batch(ib, n: int, context: int, num_kv_blocks: int | None):
    """n decode rows with `context` cached tokens each, written into an InputBatch's persistent buffers (the
    buffers the engine's steps and graphs read). Returns the attention metadata (views of the buffers, so a
    graph captured on it can be replayed). context 0 is the engine's own dummy batch, the one its graph
    capture uses (InputBatch.dummy_decode); context > 0, which only the labs need, gives row i the blocks
    i*nb .. i*nb+nb-1 (nb = context // block_size + 1) of a KV cache of num_kv_blocks blocks, its new token
    going to slot `context`."""
    from minivllm.attention.metadata import AttentionMetadata

    if context == 0:
        return ib.dummy_decode(n)
    dev, bs = ib.device, ib.block_size
    nb = context // bs + 1
    if n > ib.max_num_seqs or nb > ib.max_blocks_per_seq or num_kv_blocks is None or n * nb > num_kv_blocks:
        raise ValueError(f"batch {n} x {nb} blocks does not fit the engine (max_num_seqs={ib.max_num_seqs}, "
                         f"{ib.max_blocks_per_seq} blocks per sequence, {num_kv_blocks} KV blocks)")
    table = torch.arange(n * nb, dtype=torch.int32, device=dev).view(n, nb)
    ib.input_ids[:n].copy_(torch.arange(n, device=dev) % 97 + 3)
    ib.positions[:n].fill_(context)
    ib.block_tables[:n].zero_()
    ib.block_tables[:n, :nb].copy_(table)
    ib.slot_mapping[:n].copy_(table[:, context // bs].long() * bs + context % bs)
    ib.seq_lens[:n].fill_(context + 1)
    ib.query_start_loc[:n + 1].copy_(torch.arange(n + 1, dtype=torch.int32, device=dev))
    ib.row_owner[:n] = [(-1, 0, 0)] * n  # the next real step rewrites these block-table rows
    return AttentionMetadata(ib.slot_mapping[:n], ib.query_start_loc[:n + 1], ib.seq_lens[:n],
                             ib.block_tables[:n], max_query_len=1, max_seq_len=context + 1, decode_only=True,
                             query_start_loc_cpu=list(range(n + 1)), seq_lens_cpu=[context + 1] * n)


def _decode_inputs(runner, batch: int, context: int):
    """`batch` decode rows with `context` cached tokens each, in the runner's persistent buffers."""
    return decode_batch(runner.input_batch, batch, context, num_kv_blocks=runner.kv_cache.shape[2])


def _gpu_times_s(fn: Callable[[], object], enqueue_s: float, reps: int) -> list[float]:
    """GPU time of `fn`'s kernels run back to back: park the GPU in a spin kernel long enough for the CPU
    to enqueue everything, then time between two events around `fn` (the GPU never waits for the CPU)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000)  # the first call loads the kernel: keep that out of the calibration below
    torch.cuda.synchronize()  # (a slow calibration parks the GPU too briefly: seen as GPU 24.7 ms at batch 1)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    torch.cuda.synchronize()
    ms_per_mcycle = max(start.elapsed_time(end), 1e-3)
    cycles = int((2 * enqueue_s * 1e3 + 1.0) / ms_per_mcycle * 1e6)
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


@torch.inference_mode()
def bound_sweep(llm, batch_sizes: tuple[int, ...] = (1, 2, 4, 5, 8, 16, 32, 64, 128, 256), context: int = 128,
                reps: int = 20) -> dict:
    """Per batch size: enqueue (CPU) ms, GPU ms, eager step ms; on CUDA also graph replay ms and capture cost.

    Uses an eager engine's model and persistent buffers directly (one decode forward, no scheduler or
    sampler), so eager and graph run exactly the same kernels on the same inputs."""
    from minivllm.attention.metadata import set_forward_context

    runner = llm.model_runner
    ib = runner.input_batch
    cols = {k: [] for k in ("batch", "enqueue_ms", "gpu_ms", "eager_ms", "graph_ms", "graph_launch_ms",
                            "capture_s", "capture_mib", "enqueue_ms_range", "gpu_ms_range", "eager_ms_range",
                            "graph_ms_range")}
    for b in batch_sizes:
        meta = _decode_inputs(runner, b, context)

        def forward(b=b, meta=meta):
            with set_forward_context(meta, runner.backend, runner.kv_caches):
                return runner.compiled.forward(ib.input_ids[:b], ib.positions[:b])

        for _ in range(3):
            forward()
        cols["batch"].append(b)
        for key, sync in (("enqueue_ms", False), ("eager_ms", True)):
            med, rng = _stat(_times_s(forward, reps, sync_after=sync), 1e3)
            cols[key].append(med)
            cols[f"{key}_range"].append(rng)
        if not _cuda():
            continue
        med, rng = _stat(_gpu_times_s(forward, cols["enqueue_ms"][-1] / 1e3, max(reps // 2, 5)), 1e3)
        cols["gpu_ms"].append(med)
        cols["gpu_ms_range"].append(rng)
        torch.cuda.synchronize()
        reserved, t0 = torch.cuda.memory_reserved(), time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with set_forward_context(meta, runner.backend, runner.kv_caches), torch.cuda.graph(graph):
            runner.compiled.forward(ib.input_ids[:b], ib.positions[:b])
        torch.cuda.synchronize()
        cols["capture_s"].append(time.perf_counter() - t0)
        cols["capture_mib"].append((torch.cuda.memory_reserved() - reserved) / 2**20)
        graph.replay()
        med, rng = _stat(_times_s(graph.replay, reps), 1e3)
        cols["graph_ms"].append(med)
        cols["graph_ms_range"].append(rng)
        cols["graph_launch_ms"].append(_median_s(graph.replay, reps, sync_after=False) * 1e3)
        del graph
        torch.cuda.empty_cache()
    res = {k: v for k, v in cols.items() if v}
    res.update(context=context, reps=reps, device="cuda" if _cuda() else "cpu")
    if "graph_ms" in res:  # what a graph saved, next to what the CPU/GPU split predicts it can save
        res["saved_ms"] = [e - g for e, g in zip(res["eager_ms"], res["graph_ms"])]
        res["exposed_cpu_ms"] = [max(0.0, c - g) for c, g in zip(res["enqueue_ms"], res["gpu_ms"])]
    return round_floats(res)


# ---- d) engine TPOT --------------------------------------------------------------------------------------
def measure_tpot_ms(llm, batch: int = 1, new_tokens: int = 64, prompt_len: int = 16) -> float:
    """The engine's mean time per output token (ms) for `batch` requests generated together."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    outs = llm.generate(_prompts(llm, batch, prompt_len), sp, use_tqdm=False)
    return statistics.median(o.metrics.tpot for o in outs) * 1e3


def engine_tpot(llms: dict, batch_sizes: tuple[int, ...] = (1, 8), new_tokens: int = 64, repeats: int = 3) -> dict:
    """TPOT (ms) per engine mode ({"eager": llm, "graphs": llm}) and batch size, after one warm-up run: the
    median over `repeats` generations, with its range.

    For the graphs engine it also keeps what capturing cost at startup, and how many steps really replayed a
    graph (if none did, the "graphs" numbers would silently be eager ones)."""
    res = {"batch": list(batch_sizes), "new_tokens": new_tokens, "repeats": repeats}
    for mode, llm in llms.items():
        measure_tpot_ms(llm, 1, 8)  # warm-up: first-call costs (Triton JIT, allocator) are not TPOT
        runs = [[measure_tpot_ms(llm, b, new_tokens) for _ in range(repeats)] for b in batch_sizes]
        res[f"{mode}_ms"] = [statistics.median(r) for r in runs]
        res[f"{mode}_ms_range"] = [[min(r), max(r)] for r in runs]
        cg = llm.startup_report().cudagraph.get("FULL")
        if cg:
            res["capture"] = {"sizes": cg.get("sizes"), "seconds": cg.get("total_seconds"),
                              "mib": cg.get("total_mib"), "pool_mib": cg.get("pool_mib")}
        dispatcher = getattr(llm.model_runner, "cudagraph_dispatcher", None)
        if dispatcher is not None:
            res[f"{mode}_steps_by_path"] = dict(dispatcher.counts)
    return round_floats(res)


def tpot_toggle_update(state: dict, mode: str, measure: Callable[[str], float],
                       modes: tuple[str, ...] = ("eager", "graphs")) -> list[float | None]:
    """Callback of the live toggle: measure TPOT in `mode` now, remember it, return one bar per mode."""
    state[mode] = round(measure(mode), 3)
    return [state.get(m) for m in modes]


def tpot_toggle(llms: dict, model_name: str, measure: Callable[[str], float] | None = None):
    """ToggleButtons, one per engine in `llms` (eager / graphs), over a bar chart; each click runs the engine
    in that mode. Only the modes that were built are offered. `model_name` is what the chart title says."""
    import ipywidgets as w
    from IPython.display import display

    from minivllm_labs.plots import figure

    modes = tuple(m for m in ("eager", "graphs") if m in llms)
    if not modes:
        raise ValueError(f"llms has no 'eager' or 'graphs' engine: {sorted(llms)}")
    measure = measure or (lambda mode: measure_tpot_ms(llms[mode]))
    state: dict = {}
    toggle = w.ToggleButtons(options=list(modes), value=None, description="Run:")
    out = w.Output()

    def on_change(change):
        if change["new"] is None:
            return
        bars = tpot_toggle_update(state, change["new"], measure, modes)
        with out:
            out.clear_output(wait=True)
            display(figure(list(modes), {"TPOT (ms), batch 1": bars}, kind="bar",
                           title=f"Engine TPOT, measured live: {model_name}", y_title="ms per output token"))

    toggle.observe(on_change, names="value")
    return w.VBox([toggle, out])


# ---- e) the handbook's capture / replay snippet ---------------------------------------------------------
@torch.inference_mode()
def capture_replay_demo(reps: int = 20) -> dict | None:
    """The handbook's snippet (chapter 03, 1.2), run on a small MLP: capture once, then per step copy the real
    input into the captured (static) input and replay. Checks the replay against eager and times both.
    None on a CPU (no CUDA graphs there)."""
    if not _cuda():
        return None
    cuda, nn = torch.cuda, torch.nn
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).cuda()
    dummy_input, real_input = torch.zeros(4, 256, device="cuda"), torch.randn(4, 256, device="cuda")
    side = cuda.Stream()  # warm up on a side stream before capturing, as PyTorch's docs require
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        model(dummy_input)
    cuda.current_stream().wait_stream(side)
    # -- the handbook's lines --
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        static_out = model(dummy_input)
    dummy_input.copy_(real_input)  # the real input goes into the captured tensor
    g.replay()  # one submission for all the kernels
    # --
    cuda.synchronize()
    eager = model(real_input)
    replay_us = _median_s(g.replay, reps) * 1e6
    eager_us = _median_s(lambda: model(real_input), reps) * 1e6
    return round_floats({"layers": 8, "matches_eager": bool(torch.allclose(static_out, eager)),
                         "max_abs_diff": float((static_out - eager).abs().max()),
                         "replay_us": replay_us, "eager_us": eager_us})


# ---- everything, for the recorder ------------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 01's measurements with `model` (a GPU run takes about a minute for a 0.6B model)."""
    sweep = (1, 2, 4, 8) if quick else (1, 2, 4, 5, 8, 16, 32, 64, 128, 256)
    reps = 5 if quick else 20
    out = {"launch_overhead": launch_overhead(reps=reps)}
    demo = capture_replay_demo(reps)
    if demo is not None:
        out["snippet"] = demo
    eager = make_llm(model, graphs=False, max_num_seqs=max(sweep))
    out["census"] = kernel_census(eager)
    out["bound"] = bound_sweep(eager, sweep, reps=reps)
    llms = {"eager": eager}
    if _cuda():
        llms["graphs"] = make_llm(model, graphs=True)
    out["tpot"] = engine_tpot(llms, (1, 8), new_tokens=16 if quick else 64, repeats=1 if quick else 5)
    del eager, llms
    free_memory()
    return out


LAB_INFO = LabInfo(
    lab="lab01", notebook="labs/01_why_cuda_graphs.ipynb", title="Why CUDA graphs",
    title_zh="为什么需要 CUDA Graph", sections=("§1.1", "§1.2", "§1.4", "self-test 1", "self-test 4"),
    questions=(Q1, Q4), claims=CLAIMS,
    code=("minivllm/worker/graph_capture.py", "minivllm/worker/model_runner.py", "minivllm/kernels/triton_norm.py"))
