"""Lab 09, "The floor of a decode step": how far a batch-1 decode step is from the bytes it must read, and
where the rest of its time goes, kernel by kernel.

At batch 1 a decode step reads every weight once (plus the K/V of its context), so bytes / copy bandwidth is
the least it can take. The recorder measures that floor and the engine's step on two real model shapes
(random bf16 weights: speed depends on shapes, not values), profiles one CUDA-graph replay kernel by kernel
with `minivllm bench profile`'s own functions (scripts/maint/gpu_profile.py), gives each weight-reading kernel
its bytes, and times the same step with programmatic dependent launch off and at larger batches. On a CPU
the same code measures the embedded tiny model (no kernels: the floor and the step only).

Bytes per kernel come from the model, not from a counter: the k-th GEMM kernel of a step reads the k-th
linear weight in forward order (qkv, o, gate_up, down per layer, then lm_head), and each decode-attention
kernel reads one layer's K/V. Every other kernel moves activations only (kilobytes). When the count of GEMM
kernels and linear weights differ (a kernel split in two), the GEMMs get no bytes and the record says so.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path

import torch

from minivllm_labs.common import round_floats

RESULTS = "assets/results/h200/lab09.json"
SHAPES = ("qwen3-0.6b", "llama-3.2-1b")  # minivllm.tools.make_random_checkpoint.SHAPES
CONTEXT = 256  # prompt tokens of the profiled request (the KV it reads)
STEPS = 8  # profiled steps (4x as many are timed without the profiler first)
REPEATS = 5  # the batch-1 step is timed this many times (a new request each): median and [min, max]
SWEEP = (1, 16, 64, 128, 256, 512)  # batch sizes of the step-time sweep (captured as FULL graphs)
SWEEP_CONTEXT = 16  # short prompts in the sweep: its step reads weights, hardly any KV
PEAK_BF16_FLOPS = {"NVIDIA H200": 989e12}  # datasheet dense bf16 (a constant, not a measurement)
NO_PDL = ["all", "-pdl", "-decode_prefetch"]  # custom_ops without programmatic dependent launch
COPY = "copy / fill"  # scripts/maint/gpu_profile.py's category of the step's host-to-device input copies


def shape_of(model: str) -> str:
    """The record's key for a checkpoint: its SHAPES name without dots (evidence keys are dotted paths:
    "llama-32-1b"), else its folder's name, or "tiny" for the lab model."""
    from minivllm import DEFAULT_MODEL

    if Path(model).resolve() == Path(DEFAULT_MODEL).resolve():  # no SHAPES entry is this small: skip importing
        return "tiny"  # make_config, whose module loads transformers' model classes (seconds on a CPU)
    from minivllm.tools.make_random_checkpoint import make_config

    cfg = json.loads((Path(model) / "config.json").read_text())
    keys = ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size")
    for shape in SHAPES:
        ref = make_config(shape).to_dict()
        if all(cfg.get(k) == ref.get(k) for k in keys):
            return shape.replace(".", "")
    return Path(model).name.replace(".", "")


@functools.cache
def _profiler():
    """`minivllm bench profile`'s code (scripts/maint/gpu_profile.py): the same per-kernel profile the bench
    prints, reused here rather than copied."""
    from minivllm.bench.common import maint_script

    return maint_script("gpu_profile")


def copy_gbps() -> float:
    """This device's copy bandwidth in GB/s: the bench's own on CUDA, Lab 07's on a CPU."""
    bw = _profiler().copy_bandwidth_gbps()
    if bw is None:
        from minivllm_labs.lab07 import copy_bandwidth

        bw = copy_bandwidth(reps=5)["bytes_per_s"] / 1e9
    return bw


def engine(model: str, pdl: bool = True, batches: tuple[int, ...] = (1,), context: int = CONTEXT):
    """An engine for decode steps of `batches`: FULL_AND_PIECEWISE graphs captured at those sizes on CUDA
    (the engine's default mode), eager on a CPU."""
    from minivllm import LLM

    kwargs = dict(max_model_len=context + 6 * STEPS + 16, max_num_seqs=max(batches))
    if torch.cuda.is_available():
        kwargs.update(cudagraph_mode="FULL_AND_PIECEWISE", cudagraph_capture_sizes=sorted(set(batches)))
    if not pdl:
        kwargs["compilation_config"] = {"custom_ops": NO_PDL}
    return LLM(model, **kwargs)


def weights_in_order(model: torch.nn.Module) -> list[tuple[str, int]]:
    """(name, bytes) of every linear weight, in forward order (module order: qkv, o, gate_up, down per layer,
    then lm_head; a tied lm_head is the embedding read a second time)."""
    return [(name, m.weight.numel() * m.weight.element_size()) for name, m in model.named_modules()
            if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dim() == 2
            and not isinstance(m, torch.nn.Embedding) and "Embedding" not in type(m).__name__]


def timeline(kernels: list[tuple[str, float, float]], steps: int, weights: list[tuple[str, int]],
             kv_bytes_per_layer: int, gbps: float) -> dict:
    """One step's kernels (the last of `steps` profiled steps) as bars: start, own time, bytes, % of bandwidth.

    A kernel's own time runs from the later of its start and the previous kernel's end to its end: with PDL a
    kernel starts while the previous one drains and waits for it, and that wait is the previous kernel's time.
    gap: GPU idle before the kernel; overlap: how much of it ran beside the previous kernel (what PDL hides)."""
    categorize, short_name = _profiler().categorize, _profiler().short_name
    ks = sorted(kernels, key=lambda k: k[1])
    n = len(ks) // steps
    step = ks[len(ks) - n:]
    gemms = [k for k in step if categorize(k[0]) == "gemm"]
    matched = len(gemms) == len(weights)
    gemm_weights = iter(weights)
    t0, prev_end, prev_cat, rows = step[0][1], step[0][1], "", []
    for name, start, dur in step:
        cat = categorize(name)
        nbytes, weight = 0, ""
        if cat == "gemm" and matched:
            weight, nbytes = next(gemm_weights)
        elif cat == "attention" and "decode" in name:
            nbytes = kv_bytes_per_layer
        end = start + dur
        own = max(end - max(start, prev_end), 0.0)
        rows.append({"name": short_name(name, 40), "category": cat, "weight": weight.rsplit(".", 1)[-1],
                     "start_us": start - t0,
                     "own_us": own, "gap_us": max(start - prev_end, 0.0), "overlap_us": max(prev_end - start, 0.0),
                     "bytes": nbytes, "pct_bw": 100 * nbytes / (own * 1e-6) / (gbps * 1e9) if own and nbytes else 0.0,
                     "host": COPY in (cat, prev_cat)})
        prev_end, prev_cat = max(prev_end, end), cat
    return {"kernels": rows, "bytes_matched": matched, "gemm_kernels": len(gemms), "linear_weights": len(weights),
            **where_it_goes(rows, gbps)}


def where_it_goes(rows: list[dict], gbps: float) -> dict:
    """One profiled step split into: the bytes' own time at copy bandwidth, what kernels that read weights
    or KV take beyond it (ramps, tails, SMs left idle), kernels that read no weights, idle gaps between the
    replayed kernels, and idle around the step's host copies (the GPU waiting for the CPU's inputs).
    gap_share: the replay's own gaps over the step (what "a graph saves the launch overhead" leaves)."""
    floor = sum(r["bytes"] for r in rows) / (gbps * 1e3)  # bytes / (GB/s) -> us
    reading = sum(r["own_us"] for r in rows if r["bytes"])
    gaps = sum(r["gap_us"] for r in rows if not r["host"])
    host = sum(r["gap_us"] for r in rows if r["host"])
    span = sum(r["own_us"] for r in rows) + gaps + host
    return {"span_us": span, "floor_us": floor, "excess_reading_us": reading - floor,
            "no_weight_kernels_us": sum(r["own_us"] for r in rows if not r["bytes"]),
            "gaps_us": gaps, "host_gaps_us": host, "gap_share": gaps / span if span else 0.0,
            "overlap_us": sum(r["overlap_us"] for r in rows), "n_kernels": len(rows)}


def measure_here(context: int = CONTEXT, batch: int = 1, model: str | None = None) -> dict:
    """The notebook's run-it-here: one model's floor and step at this context and batch (the lab model on a
    CPU, the Qwen3-0.6B shape on CUDA), with a kernel timeline on CUDA; a record-shaped dict for the views."""
    from minivllm_labs.common import lab_model

    model = model or lab_model("qwen3-0.6b" if torch.cuda.is_available() else None)
    gbps = copy_gbps()
    return round_floats({"copy_gbps": gbps, "context": context,
                         "shapes": {shape_of(model): measure_shape(model, gbps, quick=True, context=context,
                                                                   batch=batch, extras=False)}})


def measure_shape(model: str, gbps: float, quick: bool = False, context: int = CONTEXT, batch: int = 1,
                  extras: bool = True) -> dict:
    """One model: one step profiled (floor, step, timeline) and, with `extras`, the batch sweep and on CUDA the
    step without PDL."""
    from minivllm.bench.common import free_engine
    profile_decode = _profiler().profile_decode
    from minivllm.loader import check_model_dir, load_model_config
    from minivllm_labs.lab01_timing import quiet_stderr

    cuda = torch.cuda.is_available()
    batches = SWEEP if cuda and not quick else tuple(sorted({1, 2, batch} if extras else {batch}))
    steps = 2 if quick else STEPS
    llm = engine(model, batches=batches, context=context)
    high = min(load_model_config(check_model_dir(model)).vocab_size, 10_000)
    runner = llm.model_runner
    with quiet_stderr():
        run = profile_decode(llm, batch, context, steps, high, gbps, keep_kernels=True)
        walls = [run["step_wall_ms"]] + [profile_decode(llm, batch, context, steps, high, gbps)["step_wall_ms"]
                                         for _ in range(1 if quick else REPEATS - 1)]
        sweep = [profile_decode(llm, b, SWEEP_CONTEXT, steps, high, gbps) for b in batches] if extras else []
    kernels = run.pop("kernel_list")
    wall = statistics.median(walls)
    layers = len(getattr(runner.model.model, "layers", [])) or 1
    kv_layer = runner.kv_bytes_per_block() // runner.block_size * batch * (context + 4 * steps) // layers
    out = {"model": shape_of(model), "batch": batch, "context": context, "copy_gbps": gbps,
           "step_wall_ms": wall, "step_wall_ms_range": [min(walls), max(walls)], "repeats": len(walls),
           "floor": run["floor"], "floor_share": run["floor"]["bytes_ms"] / wall,
           "kernels_per_step": run.get("kernels_per_step", 0),
           "sweep": [{"batch": s["batch"], "step_wall_ms": s["step_wall_ms"], "floor_ms": s["floor"]["bytes_ms"]}
                     for s in sweep]}
    if kernels:
        out["timeline"] = timeline(kernels, steps, weights_in_order(runner.model), kv_layer, gbps)
        out["profile"] = {k: run[k] for k in ("kernel_us_per_step", "busy_us_per_step", "idle_us_per_step",
                                              "window_us_per_step")}
    free_engine(llm)
    if cuda and extras:
        off = engine(model, pdl=False, context=context)
        with quiet_stderr():
            runs = [profile_decode(off, batch, context, steps, high, gbps) for _ in range(REPEATS)]
        walls = [r["step_wall_ms"] for r in runs]
        out["pdl_off"] = {"step_wall_ms": statistics.median(walls), "step_wall_ms_range": [min(walls), max(walls)],
                          **{k: runs[0].get(k) for k in ("kernel_us_per_step", "busy_us_per_step",
                                                         "idle_us_per_step", "window_us_per_step")}}
        free_engine(off)
    return out


def run_all(model: str, quick: bool = False) -> dict:
    """The given model, and on CUDA (unless quick) every lab shape not measured yet, as random bf16 weights."""
    from minivllm_labs.common import lab_model

    gbps = copy_gbps()
    shapes = {shape_of(model): measure_shape(model, gbps, quick)}
    if torch.cuda.is_available() and not quick:
        for shape in SHAPES:
            if shape.replace(".", "") not in shapes:
                shapes[shape.replace(".", "")] = measure_shape(lab_model(shape), gbps, quick)
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    peak = PEAK_BF16_FLOPS.get(gpu)
    roof = {"peak_bf16_flops": peak, "ridge_flops_per_byte": peak / (gbps * 1e9)} if peak else {}
    return round_floats({"copy_gbps": gbps, "context": CONTEXT, "sweep_context": SWEEP_CONTEXT,
                         "roofline": roof, "shapes": shapes})


from minivllm_labs.lab09_views import CLAIMS, QUESTIONS
from minivllm_labs.lab_info import LabInfo

LAB_INFO = LabInfo(
    lab="lab09", notebook="labs/09_decode_floor.ipynb", title="The floor of a decode step",
    title_zh="解码一步的下限", sections=("§1.1", "§1.2", "§5 (CG only removes launch overhead)"),
    questions=tuple(QUESTIONS.values()), claims=CLAIMS,
    code=("scripts/maint/gpu_profile.py", "minivllm/kernels/pdl.py", "minivllm/kernels/triton_gemv.py",
          "minivllm/worker/graph_capture.py"))
