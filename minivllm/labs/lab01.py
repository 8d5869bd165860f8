"""Lab 01, "Why CUDA graphs": the measurements, shared by the notebook and `minivllm.labs.record lab01`.

The handbook says a launch costs 5-10 us, a big model launches 1000+ kernels per step, and so 25-50% of a
20 ms decode step is overhead a graph removes. The measurements here check each step of that argument:

a) launch_overhead: N tiny ops issued eagerly vs one replay of the same ops captured in a CUDA graph.
b) kernel_census:   how many ops (CPU) / kernels (CUDA) one decode step of the engine issues, per layer.
c) bound_sweep:     per batch size, the CPU time to enqueue an eager forward, the GPU time to run it, the
                    eager step and the graph replay. Launches are asynchronous, so a graph saves only the CPU
                    time the GPU had to wait for: max(0, enqueue - GPU), not the whole enqueue time.
d) engine_tpot:     the engine's time per output token, eager vs CUDA graphs.

Every function runs on CUDA and on the CPU (where the graph parts are skipped), so the same code path is
exercised by the notebook on any machine and by the tests.
"""

from __future__ import annotations

import gc
import statistics
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from minivllm.labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm.labs.quiz import Question

LAYER_TAG = "lab01.layer"
MAX_MODEL_LEN = 256  # enough for every measurement here; small so KV blocks stay cheap


def _cuda() -> bool:
    return torch.cuda.is_available()


def _sync() -> None:
    if _cuda():
        torch.cuda.synchronize()


def _median_s(fn: Callable[[], object], reps: int, sync_after: bool = True) -> float:
    """Median seconds of `fn()` over `reps` runs, starting each from an idle device.

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
    return statistics.median(times)


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
    res = {"device": dev, "n_ops": n_ops, "eager_us_per_op": _median_s(ops, reps) / n_ops * 1e6}
    if dev == "cuda":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops()
        graph.replay()
        replay = _median_s(graph.replay, reps)
        res.update(graph_us_per_op=replay / n_ops * 1e6, graph_replay_us=replay * 1e6,
                   graph_launch_us=_median_s(graph.replay, reps, sync_after=False) * 1e6)
        del graph
    return round_floats(res)


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
    with _layer_ranges(llm.model_runner.model) as n_layers, profile(activities=acts) as prof:
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


def _gpu_time_s(fn: Callable[[], object], enqueue_s: float, reps: int) -> float:
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
    return statistics.median(times)


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
                            "capture_s", "capture_mib")}
    for b in batch_sizes:
        meta = _decode_inputs(runner, b, context)

        def forward(b=b, meta=meta):
            with set_forward_context(meta, runner.backend, runner.kv_caches):
                return runner.forward_fn(ib.input_ids[:b], ib.positions[:b])

        for _ in range(3):
            forward()
        enqueue = _median_s(forward, reps, sync_after=False)
        cols["batch"].append(b)
        cols["enqueue_ms"].append(enqueue * 1e3)
        cols["eager_ms"].append(_median_s(forward, reps) * 1e3)
        if not _cuda():
            continue
        cols["gpu_ms"].append(_gpu_time_s(forward, enqueue, max(reps // 2, 3)) * 1e3)
        torch.cuda.synchronize()
        reserved, t0 = torch.cuda.memory_reserved(), time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with set_forward_context(meta, runner.backend, runner.kv_caches), torch.cuda.graph(graph):
            runner.forward_fn(ib.input_ids[:b], ib.positions[:b])
        torch.cuda.synchronize()
        cols["capture_s"].append(time.perf_counter() - t0)
        cols["capture_mib"].append((torch.cuda.memory_reserved() - reserved) / 2**20)
        graph.replay()
        cols["graph_ms"].append(_median_s(graph.replay, reps) * 1e3)
        cols["graph_launch_ms"].append(_median_s(graph.replay, reps, sync_after=False) * 1e3)
        del graph
        torch.cuda.empty_cache()
    res = {k: v for k, v in cols.items() if v}
    res.update(context=context, device="cuda" if _cuda() else "cpu")
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


def engine_tpot(llms: dict, batch_sizes: tuple[int, ...] = (1, 8), new_tokens: int = 64) -> dict:
    """TPOT (ms) per engine mode ({"eager": llm, "graphs": llm}) and batch size, after one warm-up run.

    For the graphs engine it also keeps what capturing cost at startup, and how many steps really replayed a
    graph (if none did, the "graphs" numbers would silently be eager ones)."""
    res = {"batch": list(batch_sizes), "new_tokens": new_tokens}
    for mode, llm in llms.items():
        measure_tpot_ms(llm, 1, 8)  # warm-up: first-call costs (Triton JIT, allocator) are not TPOT
        res[f"{mode}_ms"] = [measure_tpot_ms(llm, b, new_tokens) for b in batch_sizes]
        cg = llm.startup_report().cudagraph.get("FULL")
        if cg:
            res["capture"] = {"sizes": cg.get("sizes"), "seconds": cg.get("total_seconds"),
                              "mib": cg.get("total_mib"), "pool_mib": cg.get("pool_mib")}
        dispatcher = getattr(llm.model_runner, "cudagraph_dispatcher", None)
        if dispatcher is not None:
            res[f"{mode}_steps_by_path"] = dict(dispatcher.counts)
    return round_floats(res)


def tpot_toggle_update(state: dict, mode: str, measure: Callable[[str], float]) -> list[float | None]:
    """Callback of the live toggle: measure TPOT in `mode` now, remember it, return [eager, graphs] bars."""
    state[mode] = round(measure(mode), 3)
    return [state.get("eager"), state.get("graphs")]


def tpot_toggle(llms: dict, measure: Callable[[str], float] | None = None):
    """ToggleButtons (eager / graphs) over a bar chart; each click runs the engine in that mode (GPU).

    `measure(mode) -> TPOT ms` defaults to one batch-1 generation with `llms[mode]`."""
    import ipywidgets as w
    from IPython.display import display

    from minivllm.labs.plots import figure

    measure = measure or (lambda mode: measure_tpot_ms(llms[mode]))
    state: dict = {}
    toggle = w.ToggleButtons(options=["eager", "graphs"], value=None, description="Run:")
    out = w.Output()

    def on_change(change):
        if change["new"] is None:
            return
        bars = tpot_toggle_update(state, change["new"], measure)
        with out:
            out.clear_output(wait=True)
            display(figure(["eager", "graphs"], {"TPOT (ms), batch 1": bars}, kind="bar",
                           title="Engine TPOT, measured live", y_title="ms per output token"))

    toggle.observe(on_change, names="value")
    return w.VBox([toggle, out])


# ---- everything, for the recorder ------------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 01's measurements with `model` (a GPU run takes about a minute for a 0.6B model)."""
    sweep = (1, 2, 4, 8) if quick else (1, 2, 4, 5, 8, 16, 32, 64, 128, 256)
    out = {"launch_overhead": launch_overhead(reps=5 if quick else 20)}
    eager = make_llm(model, graphs=False, max_num_seqs=max(sweep))
    out["census"] = kernel_census(eager)
    out["bound"] = bound_sweep(eager, sweep, reps=5 if quick else 20)
    llms = {"eager": eager}
    if _cuda():
        llms["graphs"] = make_llm(model, graphs=True)
    out["tpot"] = engine_tpot(llms, (1, 8), new_tokens=16 if quick else 64)
    del eager, llms
    free_memory()
    return out


# ---- tables and figures (recorded results and run-it-here results alike) ----------------------------------
def plot_launch(res: dict):
    from minivllm.labs.plots import figure

    lo = res["launch_overhead"]
    names = ["eager"] + (["in a CUDA graph"] if "graph_us_per_op" in lo else [])
    vals = [lo["eager_us_per_op"]] + ([lo["graph_us_per_op"]] if "graph_us_per_op" in lo else [])
    return figure(names, {f"us per op ({lo['device']})": vals}, kind="bar", y_title="microseconds per op",
                  title=f"{lo['n_ops']} tiny ops: cost per op")


def census_table(res: dict) -> str:
    c = res["census"]
    per_layer = c.get("kernels_per_layer") or c.get("ops_per_layer")
    unit = "GPU kernels" if c.get("kernels_per_layer") else "ops dispatched"
    lines = [f"One decode step, {c['num_layers']} decoder layers ({c['device']}):",
             f"  ops dispatched from Python: {c['ops_per_layer'] or 'n/a'} per layer (mean), "
             f"{c['ops_per_step']} per step"]
    if "kernels_per_step" in c:
        lines.append(f"  GPU kernels:                {c['kernels_per_layer'] or 'n/a'} per layer, "
                     f"{c['kernels_per_step']} per step (+ {c['copies_per_step']} copies)")
    if per_layer:
        lines.append(f"  an 80-layer model at this rate: about {round(80 * per_layer)} {unit} per step "
                     f"(handbook: '1000+ kernels')")
    return "\n".join(lines)


def plot_bound(res: dict):
    from minivllm.labs.plots import figure

    b = res["bound"]
    names = {"enqueue_ms": "CPU: enqueue eager step", "gpu_ms": "GPU: run its kernels",
             "eager_ms": "eager step (wall)", "graph_ms": "graph replay (wall)"}
    series = {label: b[k] for k, label in names.items() if k in b}
    return figure(b["batch"], series, log_x=True, log_y=True, x_title="decode batch size", y_title="ms",
                  title=f"One decode forward, {b['device']}: where the time goes")


def bound_table(res: dict) -> str:
    b = res["bound"]
    cols = [k for k in ("batch", "enqueue_ms", "gpu_ms", "eager_ms", "graph_ms", "saved_ms", "exposed_cpu_ms")
            if k in b]
    rows = ["  ".join(f"{c.removesuffix('_ms'):>11}" for c in cols)]
    rows += ["  ".join(f"{b[c][i]:>11}" for c in cols) for i in range(len(b["batch"]))]
    return "\n".join(rows) + "\n(ms; saved = eager - graph; exposed cpu = max(0, enqueue - gpu))"


def plot_tpot(res: dict):
    from minivllm.labs.plots import figure

    t = res["tpot"]
    series = {m: t[f"{m}_ms"] for m in ("eager", "graphs") if f"{m}_ms" in t}
    return figure([f"batch {b}" for b in t["batch"]], series, kind="bar", toggle=True,
                  y_title="ms per output token", title=f"Engine TPOT ({t['new_tokens']} new tokens)")


# ---- e) self-test questions 1 and 4 ---------------------------------------------------------------------
def _source(res: dict) -> str:
    prov = res.get("provenance") or {}
    return f"Measured on {prov['gpu']}" if prov.get("gpu") else "Measured here"


def q1_evidence(res: dict | None) -> str:
    """The numbers behind Q1: per-op launch cost, and at batch 1 and the largest batch the CPU/GPU split."""
    if not res:
        return "No measurements available (no recorded GPU results in this checkout)."
    lines = [f"{_source(res)}:"]
    lo = res.get("launch_overhead") or {}
    if "graph_us_per_op" in lo:
        lines.append(f"- one tiny op: {lo['eager_us_per_op']} us eager, "
                     f"{lo['graph_us_per_op']} us inside a graph")
    elif "eager_us_per_op" in lo:
        lines.append(f"- one tiny op costs {lo['eager_us_per_op']} us eagerly on this "
                     f"{lo.get('device', 'device')}")
    c = res.get("census") or {}
    if c:
        what = "kernels" if "kernels_per_step" in c else "ops"
        lines.append(f"- one decode step of the engine: "
                     f"{c.get('kernels_per_step', c['ops_per_step'])} {what} over {c['num_layers']} layers")
    b = res.get("bound") or {}
    if "graph_ms" in b:
        for i in sorted({0, len(b["batch"]) - 1}):
            lines.append(f"- batch {b['batch'][i]}: CPU enqueue {b['enqueue_ms'][i]} ms vs GPU "
                         f"{b['gpu_ms'][i]} ms -> exposed CPU {b['exposed_cpu_ms'][i]} ms; "
                         f"eager {b['eager_ms'][i]} ms, graph "
                         f"{b['graph_ms'][i]} ms: saved {b['saved_ms'][i]} ms")
    t = res.get("tpot") or {}
    if "graphs_ms" in t:
        lines.append(f"- engine TPOT at batch {t['batch'][0]}: {t['eager_ms'][0]} ms eager, "
                     f"{t['graphs_ms'][0]} ms with graphs")
    if len(lines) == 1:
        lines.append("- no graph measurements on this device (CPU); see the recorded GPU results")
    return "\n".join(lines)


def q4_evidence(res: dict | None) -> str:
    """The numbers behind Q4: what one capture costs, and what padding a small batch up costs on the GPU."""
    if not res:
        return "No measurements available (no recorded GPU results in this checkout)."
    lines = [f"{_source(res)}:"]
    b = res.get("bound") or {}
    if "capture_s" in b:
        i = 0
        lines.append(f"- capturing the batch-{b['batch'][i]} graph took {b['capture_s'][i]} s "
                     f"(and {b['capture_mib'][i]} MiB); a decode step takes {b['graph_ms'][i]} ms")
        if 5 in b["batch"] and 8 in b["batch"]:
            i5, i8 = b["batch"].index(5), b["batch"].index(8)
            lines.append(f"- GPU time of a decode step: batch 5 {b['gpu_ms'][i5]} ms, "
                         f"batch 8 {b['gpu_ms'][i8]} ms: padding 5 -> 8 costs "
                         f"{round(b['gpu_ms'][i8] - b['gpu_ms'][i5], 4)} ms")
    cap = (res.get("tpot") or {}).get("capture")
    if cap and cap.get("pool_mib") is not None:  # the allocator's pool, and what the driver holds besides
        lines.append(f"- the engine captured sizes {cap['sizes']} at startup in {cap['seconds']} s: a graph pool "
                     f"of {cap['pool_mib']} MiB shared by all sizes; free device memory fell by {cap['mib']} MiB, "
                     f"the rest being the graphs' executables, which the driver keeps outside the pool")
    elif cap:
        lines.append(f"- the engine captured sizes {cap['sizes']} at startup in {cap['seconds']} s, "
                     f"{cap['mib']} MiB")
    if len(lines) == 1:
        lines.append("- graphs cannot be captured on this device (CPU); see the recorded GPU results")
    return "\n".join(lines)


Q1 = Question(
    qid="q1",
    prompt="A decode step takes 20 ms, of which 5 ms is kernel-launch overhead. What can a CUDA graph give?",
    options=(
        ("15 ms: the graph removes the 5 ms of launch overhead, always.",
         "Launches are asynchronous: the CPU enqueues while the GPU computes. Only CPU time the GPU waits "
         "for is lost, so only that can be won back."),
        ("At best about 15 ms, and only if all 5 ms is CPU time the GPU waits on; close to 20 ms (no gain) "
         "if the GPU is the bottleneck.",
         "A graph removes exposed CPU time: max(0, enqueue - GPU time), which shrinks as the batch grows."),
        ("About 10 ms: a graph also fuses kernels, so the 15 ms of compute shrinks too.",
         "A graph replays the very same kernels; fusing them is torch.compile's job, not the graph's."),
        ("Nothing: launches are asynchronous, so graphs never help.",
         "They help when the CPU is slower than the GPU, which is the case at small batch (see batch 1)."),
    ),
    correct=1,
    model_answer="at best ~15 ms, and only if all 5 ms is exposed CPU time; near 0 gain if the GPU is the "
                 "bottleneck.",
    evidence=q1_evidence,
)

Q4 = Question(
    qid="q4",
    prompt="When the batch size changes, why does the engine pad to a captured size instead of re-capturing?",
    options=(
        ("Re-capturing would be as fast; padding is only simpler to code.",
         "A capture runs the forward, synchronises and allocates a memory pool: far slower than one step."),
        ("A graph replays one shape only; capturing costs time and memory and would stall serving, while "
         "padding a memory-bound decode step to the next captured size is cheap.",
         "Decode reads all the weights whatever the batch, so a few padded rows cost little GPU time."),
        ("CUDA graphs cannot be captured once the engine is serving.",
         "They can (nothing forbids it); it is the cost of capturing that rules it out."),
        ("Padding makes the outputs more accurate.",
         "Padded rows are computed and thrown away; they change nothing in the real rows."),
    ),
    correct=1,
    model_answer="a graph replays one shape only; capture costs time and memory and would stall serving; "
                 "padding a memory-bound decode is cheap.",
    evidence=q4_evidence,
)
