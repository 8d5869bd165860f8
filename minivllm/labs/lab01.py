"""Lab 01, "Why CUDA graphs": the measurements, shared by the notebook and `minivllm.labs.record lab01`.

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
code path is exercised by the notebook on any machine and by the tests. Tables, plots, the questions and the
claims are in lab01_report.py.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from minivllm.labs.catalog import LabInfo
from minivllm.labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm.labs.lab01_questions import CLAIMS, Q1, Q4, q1_evidence, q4_evidence  # noqa: F401
from minivllm.labs.lab01_report import (  # noqa: F401
    bound_table,
    bound_verdict,
    census_table,
    launch_table,
    padding_cost,
    per_op_gap,
    plot_bound,
    plot_launch,
    plot_tpot,
    snippet_text,
    tpot_table,
    verdict_table,
)

LAYER_TAG = "lab01.layer"
MAX_MODEL_LEN = 256  # enough for every measurement here; small so KV blocks stay cheap


def _cuda() -> bool:
    return torch.cuda.is_available()


def _sync() -> None:
    if _cuda():
        torch.cuda.synchronize()


def _times_s(fn: Callable[[], object], reps: int, sync_after: bool = True) -> list[float]:
    """Seconds of `fn()` over `reps` runs, each started from an idle device.

    sync_after=False times only the host side (how long the CPU takes to enqueue the work)."""
    times = []
    for _ in range(reps):
        _sync()
        t0 = time.perf_counter()
        fn()
        if sync_after:
            _sync()
        times.append(time.perf_counter() - t0)
    _sync()
    return times


def _median_s(fn: Callable[[], object], reps: int, sync_after: bool = True) -> float:
    return statistics.median(_times_s(fn, reps, sync_after))


def _stat(times: list[float], scale: float) -> tuple[float, list[float]]:
    """(median, [min, max]) of `times`, scaled (1e3: ms, 1e6: us)."""
    return statistics.median(times) * scale, [min(times) * scale, max(times) * scale]


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send the process's C-level stderr (fd 2) to /dev/null for a moment: the profiler's library prints
    "USDT: ... profiler_start" lines there, which a notebook would show in a red box."""
    import sys

    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


# ---- a) launch overhead ------------------------------------------------------------------------------
def launch_overhead(n_ops: int = 1000, reps: int = 20) -> dict:
    """Cost per tiny op (`x.add_(1)` on one element): eager; and on CUDA, inside one graph replay.

    The op does almost no work, so eager time per op is the launch path (Python, dispatcher, driver). In a
    graph the CPU submits all N kernels with one call; what is left per op is the GPU's cost per kernel."""
    dev = "cuda" if _cuda() else "cpu"
    x = torch.zeros(1, device=dev)

    def ops() -> None:
        for _ in range(n_ops):
            x.add_(1.0)

    ops()
    med, rng = _stat(_times_s(ops, reps), 1e6 / n_ops)
    res = {"device": dev, "n_ops": n_ops, "reps": reps, "eager_us_per_op": med, "eager_us_range": rng}
    if dev == "cuda":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops()
        graph.replay()
        replay = _median_s(graph.replay, reps)
        res.update(graph_us_per_op=replay / n_ops * 1e6, graph_replay_us=replay * 1e6,
                   graph_launch_us=_median_s(graph.replay, reps, sync_after=False) * 1e6)
        del graph
        res.update(triton_launch(n_ops, reps))
    return round_floats(res)


def triton_launch(n_ops: int = 1000, reps: int = 20) -> dict:
    """Cost per call of one of the engine's Triton kernels (RMSNorm of one 1024-wide row), as the engine calls
    it: the Python wrapper (shape and stride maths, the grid) plus Triton's launcher. CUDA only.

    Next to `eager_us_per_op` this explains why an engine step costs far more per op than a tiny ATen op:
    most of the engine's ops are Triton kernels launched from Python."""
    from minivllm.kernels.triton_norm import rms_norm

    x = torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)

    def calls() -> None:
        for _ in range(n_ops):
            rms_norm(x, w, 1e-6)

    calls()  # compile the kernel first
    med, rng = _stat(_times_s(calls, reps), 1e6 / n_ops)
    return {"triton_us_per_op": med, "triton_us_range": rng, "triton_kernel": "minivllm rms_norm (1 x 1024)"}


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
        kw.update(cudagraph_mode="FULL", cudagraph_capture_sizes=capture_sizes or [1, 2, 4, 8, 16])
    return LLM(model=model, enforce_eager=not graphs, **kw)


def free_memory() -> None:
    """Give the GPU memory of dropped engines back (call after `del llm`, before building the next one)."""
    gc.collect()
    if _cuda():
        torch.cuda.empty_cache()


def _prompts(llm, batch: int, length: int) -> list[dict]:
    vocab = min(llm.engine.model_config.vocab_size, 500)
    return [{"prompt_token_ids": [3 + (7 * i + 13 * j) % (vocab - 3) for j in range(length)]}
            for i in range(batch)]


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


# ---- b) kernel census ------------------------------------------------------------------------------------
@contextmanager
def _layer_ranges(model: torch.nn.Module) -> Iterator[int]:
    """Wrap each decoder layer's forward in a profiler range `lab01.layer<i>` (hooks, removed on exit)."""
    layers, handles, open_ranges = decoder_layers(model), [], {}

    def pre(i):
        def hook(_mod, _args):
            open_ranges[i] = torch.profiler.record_function(f"{LAYER_TAG}{i}")
            open_ranges[i].__enter__()
        return hook

    def post(i):
        def hook(_mod, _args, _out):
            open_ranges.pop(i).__exit__(None, None, None)
        return hook

    for i, layer in enumerate(layers):
        handles += [layer.register_forward_pre_hook(pre(i)), layer.register_forward_hook(post(i))]
    try:
        yield len(layers)
    finally:
        for h in handles:
            h.remove()


def _is_op(e) -> bool:
    return "::" in e.name and not e.name.startswith(LAYER_TAG)


def _is_copy(name: str) -> bool:
    return name.startswith(("Memcpy", "Memset", "memcpy", "memset"))


def _ops_under(e) -> int:
    """Ops dispatched from Python under event `e`: outermost `ns::op` events (an aten::linear that calls
    aten::addmm counts once, because Python paid for one call)."""
    return sum(1 if _is_op(c) else _ops_under(c) for c in e.cpu_children)


def _kernels_under(e) -> int:
    """GPU kernels launched anywhere under `e` (each is attached to the innermost op that launched it)."""
    own = sum(1 for k in e.kernels if not _is_copy(k.name) and not k.name.startswith(LAYER_TAG))
    return own + sum(_kernels_under(c) for c in e.cpu_children)


def kernel_census(llm) -> dict:
    """Profile one decode step of the engine (`engine.step()` with one running request).

    Counts the ops Python dispatches (any device) and, on CUDA, the kernels and copies the GPU runs: per
    step, and per decoder layer (through profiler ranges around each layer)."""
    from torch.profiler import ProfilerActivity, profile

    from minivllm import SamplingParams

    engine = llm.engine
    prompt = _prompts(llm, 1, 16)[0]["prompt_token_ids"]
    engine.add_request(engine.next_request_id(), prompt, SamplingParams(temperature=0, max_tokens=8,
                                                                         ignore_eos=True))
    engine.step()  # prefill
    engine.step()  # one decode step to warm up
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if _cuda() else [])
    with quiet_stderr(), _layer_ranges(llm.model_runner.model) as n_layers, profile(activities=acts) as prof:
        engine.step()
        _sync()
    while engine.has_unfinished_requests():
        engine.step()
    events = prof.events()
    roots = [e for e in events if e.cpu_parent is None and e.device_type.name == "CPU"]
    layer_events = [e for e in events if e.name.startswith(LAYER_TAG) and e.device_type.name == "CPU"]
    ops_step = sum(1 if _is_op(e) else _ops_under(e) for e in roots)
    res = {"device": "cuda" if _cuda() else "cpu", "num_layers": n_layers, "ops_per_step": ops_step,
           "ops_per_layer": _per_layer([_ops_under(e) for e in layer_events], n_layers)}
    if _cuda():
        gpu = [e for e in events if e.device_type.name == "CUDA" and not e.name.startswith(LAYER_TAG)]
        res["kernels_per_step"] = sum(1 for e in gpu if not _is_copy(e.name))
        res["copies_per_step"] = sum(1 for e in gpu if _is_copy(e.name))
        res["kernels_per_layer"] = _per_layer([_kernels_under(e) for e in layer_events], n_layers)
    return res


def _per_layer(counts: list[int], n_layers: int) -> float | None:
    """Mean over layers (all layers run the same code, so counts agree; None if nothing was attributed)."""
    if len(counts) != n_layers or n_layers == 0 or sum(counts) == 0:
        return None
    return round(sum(counts) / n_layers, 2)


# ---- c) CPU-bound vs GPU-bound ---------------------------------------------------------------------------
def _decode_inputs(runner, batch: int, context: int):
    """Fill the runner's persistent buffers with `batch` decode rows, each with `context` cached tokens.

    Row i owns blocks i*nb .. i*nb+nb-1; the new token goes to slot `context` of its table. Returns the
    attention metadata (views of the persistent buffers, so a graph captured on it can be replayed)."""
    from minivllm.attention.metadata import AttentionMetadata

    ib, bs = runner.input_batch, runner.block_size
    nb = context // bs + 1
    if batch > ib.max_num_seqs or batch * nb > runner.kv_cache.shape[2]:
        raise ValueError(f"batch {batch} x {nb} blocks does not fit the engine "
                         f"(max_num_seqs={ib.max_num_seqs}, {runner.kv_cache.shape[2]} KV blocks)")
    dev = ib.device
    table = torch.arange(batch * nb, dtype=torch.int32, device=dev).view(batch, nb)
    ib.input_ids[:batch].copy_(torch.arange(batch, device=dev) % 97 + 3)
    ib.positions[:batch].fill_(context)
    ib.block_tables[:batch].zero_()
    ib.block_tables[:batch, :nb].copy_(table)
    ib.slot_mapping[:batch].copy_(table[:, context // bs].long() * bs + context % bs)
    ib.seq_lens[:batch].fill_(context + 1)
    ib.query_start_loc[:batch + 1].copy_(torch.arange(batch + 1, dtype=torch.int32, device=dev))
    return AttentionMetadata(slot_mapping=ib.slot_mapping[:batch],
                             query_start_loc=ib.query_start_loc[:batch + 1], seq_lens=ib.seq_lens[:batch],
                             block_tables=ib.block_tables[:batch], max_query_len=1,
                             max_seq_len=runner.config.max_model_len, decode_only=True,
                             query_start_loc_cpu=list(range(batch + 1)), seq_lens_cpu=[context + 1] * batch)


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
                return runner.forward_fn(ib.input_ids[:b], ib.positions[:b])

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
            runner.forward_fn(ib.input_ids[:b], ib.positions[:b])
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

    from minivllm.labs.plots import figure

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
    code=("minivllm/worker/cuda_graph.py", "minivllm/worker/model_runner.py", "minivllm/kernels/triton_norm.py"))
