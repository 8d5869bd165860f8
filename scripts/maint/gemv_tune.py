"""Choose the Triton GEMV's block sizes by the decode step's TPOT inside the FULL
CUDA graph, and optionally ship them for this GPU model.

Why: Triton's autotuner times each config of each shape alone, after flushing L2. In a decode step the GEMVs
run back to back inside one graph with programmatic dependent launch, each starting while the previous one
drains, so what wins alone need not win in the step. Among configs that tie alone, fresh autotunes pick
differently, and H200 batch-1 TPOT followed the pick from 0.977 to 1.066 ms. This bench starts from the
autotuner's picks and, one shape at a time (coordinate descent), re-captures the batch-1 (or batch-2) graph
with each candidate config and measures TPOT through `LLM.generate`; the best few are re-measured before
one is kept. It ends with an interleaved A/B of the autotuner's picks against the tuned ones. `--save`
writes the faster set to minivllm/kernels/configs/gemv/<GPU>.json, which the engine then uses on that GPU
model for these shapes (kernels/gemv_configs.py), as vLLM ships tuned fused-MoE configs per device.

    python scripts/maint/gemv_tune.py --model .ckpt/qwen3-0.6b --json gemv_tune.json [--save]

--start shipped starts from the configs in use today (this GPU's shipped file, the autotuner for the shapes
it lacks) instead of fresh autotuner picks; --legacy-autotune keeps the LOOP_STAGES configs out of that
autotune, as before they existed. The A/B then reads as before/after: the start, the tuned set, and the
tuned set with each LOOP_STAGES pick replaced by the best plain config (whether pipelining earned its
place), each with the step's byte floor at the copy bandwidth. `--summary A.json B.json` prints several
runs (one per model) as one table.

A maintenance tool, not part of the engine: it runs when a GPU model or the GEMV's configs change, and what
it finds ships as data (minivllm/kernels/configs/gemv/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm

from minivllm.bench.common import int_list, model_dir, print_table, provenance, random_prompts, write_json
from minivllm.config import CUDAGraphMode
from minivllm.engine_args import EngineArgs
from minivllm.sampling_params import SamplingParams
from minivllm.worker.graph_capture import capture_graphs

Measure = Callable[[dict, int], float]  # (pins {shape: config}, batch) -> TPOT in ms


def recapture_full(runner, n: int) -> None:
    """Capture the FULL graph of batch size n again, replacing the old one (its pool memory is reused): a graph
    keeps the kernels it was captured with, so a change of a kernel's block sizes needs it."""
    d, step = runner.cudagraph_dispatcher, runner.full_graph
    if d is None or step is None or n not in d.full_sizes:
        raise ValueError(f"no FULL CUDA graph of batch size {n} to re-capture (captured: "
                         f"{sorted(d.full_sizes) if d is not None else []})")
    step.graphs.pop(n, None)
    torch.cuda.synchronize()
    capture_graphs(runner, CUDAGraphMode.FULL, [n], step, [step], runner.graph_pool, any_batch=False)


def rows_of(shape: str) -> int:
    """The batch size whose decode step runs this shape: its padded row count ("N=4096 K=1024 M_PAD=1 ...")."""
    return int(shape.split("M_PAD=")[1].split()[0])


def weight_elements(shape: str) -> int:
    """N * K of a shape name: its weight's size, which is what a GEMV's time follows at batch 1."""
    fields = dict(f.split("=") for f in shape.split() if "=" in f)
    return int(fields["N"]) * int(fields["K"])


def coordinate_descent(start: dict[str, dict], candidates: list[dict], measure: Measure, finalists: int = 3,
                       repeats: int = 2, bar=None, budget_s: float | None = None,
                       ) -> tuple[dict[str, dict], list[dict]]:
    """For each shape in turn, every candidate config is measured once with the other shapes fixed at their
    best so far; the incumbent and the `finalists` fastest are measured `repeats` more times, interleaved,
    and the lowest mean wins, the incumbent on a tie (one TPOT reading moves by about 0.5%, the size of the
    differences sought). Past `budget_s` seconds the shapes not yet started keep their start config (a trial
    "skipped" says so): the caller orders the shapes by weight size, where the time is. Returns the tuned
    configs and every trial."""
    best, trials = dict(start), []
    t0 = time.monotonic()
    for i, shape in enumerate(start):
        batch = rows_of(shape)
        if i and budget_s is not None and time.monotonic() - t0 > budget_s:  # the first shape always runs
            trials.append({"shape": shape, "batch": batch, "config": best[shape], "round": "skipped"})
            continue
        once = []
        for cfg in candidates:
            t = measure({**best, shape: cfg}, batch)
            trials.append({"shape": shape, "batch": batch, "config": cfg, "tpot_ms": t, "round": "scan"})
            once.append((t, cfg))
            if bar is not None:
                bar.update(1)
        ranked = [cfg for _, cfg in sorted(once, key=lambda tc: tc[0])]
        pool = [best[shape]] + [c for c in ranked[:finalists] if c != best[shape]]  # a tie keeps the incumbent
        readings: dict[int, list[float]] = {i: [] for i in range(len(pool))}
        for _ in range(repeats):
            for i, cfg in enumerate(pool):
                t = measure({**best, shape: cfg}, batch)
                readings[i].append(t)
                trials.append({"shape": shape, "batch": batch, "config": cfg, "tpot_ms": t, "round": "final"})
                if bar is not None:
                    bar.update(1)
        means = {i: statistics.mean(r) for i, r in readings.items()}
        best[shape] = pool[min(means, key=means.get)]
    return best, trials


def interleaved_ab(sets: dict[str, dict], batches: list[int], measure: Measure, repeats: int) -> dict:
    """TPOT of each named config set per batch, the sets alternating `repeats` times: {name: {batch: [ms]}}."""
    out: dict[str, dict[int, list[float]]] = {name: {b: [] for b in batches} for name in sets}
    for _ in range(repeats):
        for b in batches:
            for name, pins in sets.items():
                out[name][b].append(measure(pins, b))
    return out


def decode_gemv_shapes(cfg, batches: list[int]) -> dict[str, bool]:
    """The GEMV shapes a decoder layer's decode step runs at these batch sizes (names as in the config
    files), each with whether it has a bias: qkv_proj and gate_up_proj carry the RMSNorm and run the GEMV
    only up to NORM_MAX_M rows (more: the norm kernel, then cuBLAS), down_proj SiLU-and-mul. `cfg` is the
    model's ModelConfig."""
    from minivllm.kernels import gemv_configs, triton_gemv

    hidden, q, kv = cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes = {}
    for m in batches:
        projections = [(hidden, q, False, False, cfg.o_bias),
                       (hidden, cfg.intermediate_size, True, False, cfg.mlp_bias)]
        if m <= triton_gemv.NORM_MAX_M:
            projections += [(q + 2 * kv, hidden, False, True, cfg.qkv_bias),
                            (2 * cfg.intermediate_size, hidden, False, True, cfg.mlp_bias)]
        for n, k, silu, norm, bias in projections:
            shapes[gemv_configs.shape_name(n, k, triton_gemv.next_power_of_2(m), silu, norm)] = bias
    return shapes


def warm_one(job: tuple[str, bool, dict, str]) -> str:
    """Run one (shape, config) once, so that Triton compiles it into its disk cache, and check it against
    F.linear; the engine's re-captures then load the binary instead of compiling it one at a time. A norm
    shape runs with and without the residual (the first layer has none). Returns "" or what went wrong."""
    import torch.nn.functional as F

    from minivllm.kernels import gemv_configs, triton_gemv

    shape, bias, cfg, dtype = job
    f = dict(x.split("=") for x in shape.split() if "=" in x)
    n, k, m = int(f["N"]), int(f["K"]), int(f["M_PAD"])
    silu, norm = shape.endswith(" silu_mul"), shape.endswith(" norm")
    dev, dt = ("cuda" if torch.cuda.is_available() else "cpu"), getattr(torch, dtype)
    g = torch.Generator(device=dev).manual_seed(0)
    w = torch.randn(n, k, device=dev, dtype=dt, generator=g) / k ** 0.5
    b = torch.randn(n, device=dev, dtype=dt, generator=g) if bias else None
    x = torch.randn(m, 2 * k if silu else k, device=dev, dtype=dt, generator=g)
    gemv_configs.set_pins({shape: cfg}, label="warm")
    triton_gemv.forget_picks()
    try:
        if norm:
            nw = torch.ones(k, device=dev, dtype=dt)
            for r in (None, torch.randn_like(x)):
                out = triton_gemv.gemv(x, w, b, norm_weight=nw, eps=1e-6, residual=r, use_pdl=True)
            out, xin = out[0], out[1].float()
            xin = (xin * torch.rsqrt(xin.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dt).float()
        else:
            out = triton_gemv.gemv(x, w, b, silu_mul=silu, use_pdl=True)
            xin = (F.silu(x[:, :k].float()).to(dt).float() * x[:, k:].float()) if silu else x.float()
        ref = F.linear(xin.to(dt).float(), w.float(), None if b is None else b.float())
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        return "" if err < 2e-2 else f"{shape} {cfg}: relative error {err:.3g}"
    except Exception as e:  # noqa: BLE001 - reported with its config, the others still run
        return f"{shape} {cfg}: {type(e).__name__}: {e}"


def warm(shapes: dict[str, bool], candidates: list[dict], dtype: str, workers: int) -> list[tuple[dict, str]]:
    """warm_one for every (shape, candidate) in `workers` processes (compiling is CPU-bound and serial in
    one process); (config, error) of each failure."""
    import concurrent.futures
    import multiprocessing

    jobs = [(s, bias, c, dtype) for s, bias in shapes.items() for c in candidates]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = pool.map(warm_one, jobs, chunksize=max(1, len(jobs) // (4 * workers)))
        return [(job[2], e) for job, e in zip(jobs, errors) if e]


def _engine_measure(llm, input_len: int, output_len: int) -> Measure:
    """A Measure on a live engine: set the pins, re-capture the batch's FULL graph, time one generate."""
    from minivllm.kernels import gemv_configs, triton_gemv

    high = min(llm.model_runner.model_config.vocab_size, 10_000)
    greedy = SamplingParams(max_tokens=output_len, temperature=0.0, ignore_eos=True)
    calls = [0]

    def measure(pins: dict, batch: int) -> float:
        gemv_configs.set_pins(pins)
        triton_gemv.forget_picks()
        recapture_full(llm.model_runner, batch)
        calls[0] += 1
        prompts = [{"prompt_token_ids": p} for p in random_prompts(batch, input_len, high, seed=calls[0])]
        outs = llm.generate(prompts, greedy, use_tqdm=False)
        return statistics.mean(o.metrics.tpot for o in outs) * 1e3

    return measure


def tune(args: argparse.Namespace) -> dict:
    if not torch.cuda.is_available():
        raise SystemExit("gemv_tune needs a CUDA GPU: the Triton GEMV is tuned and used only there "
                         "(on a CPU the decode linears run in PyTorch)")
    from minivllm.bench.latency import engine_for_mode
    from minivllm.kernels import gemv_configs, triton_gemv

    t_start = time.monotonic()
    batches = int_list(args.batch_sizes)
    if not batches or any(b < 1 or b > triton_gemv.DISPATCH_MAX_M for b in batches):
        raise ValueError(f"--batch-sizes: the GEMV runs batches of 1..{triton_gemv.DISPATCH_MAX_M} rows; "
                         f"got {args.batch_sizes!r}")
    path = model_dir(args)
    failed: list[dict] = []  # configs that fail against F.linear on a shape: never tried, never shipped
    if args.warm_workers:
        from minivllm.loader import load_model_config

        cfg = load_model_config(Path(path))
        t0 = time.monotonic()
        cands = [gemv_configs.config_dict(c) for c in triton_gemv._configs()]
        errors = warm(decode_gemv_shapes(cfg, batches), cands,
                      str(cfg.torch_dtype or torch.bfloat16).removeprefix("torch."), args.warm_workers)
        print(f"warmed every GEMV config of {path} in {time.monotonic() - t0:.0f} s ({args.warm_workers} processes)")
        for c, e in errors:
            print(f"FAILS against F.linear, left out: {e}")
            failed += [c] if c not in failed else []
    if args.start == "autotune":
        gemv_configs.set_pins({}, label="autotune")  # start from what Triton's autotuner picks here
    if args.legacy_autotune:
        _autotune_without_loop_stages()
    llm = engine_for_mode(args, "FULL_DECODE_ONLY", cudagraph_capture_sizes=batches, max_num_seqs=max(batches),
                          max_model_len=args.input_len + args.output_len + 32)
    start = {s: c for s, c in triton_gemv.autotuned_configs().items() if rows_of(s) in batches}
    if not start:
        raise SystemExit("no Triton GEMV ran in the FULL graphs (custom op 'gemv' off, or no GPU support)")
    candidates = [c for c in map(gemv_configs.config_dict, triton_gemv._configs()) if c not in failed]
    measure = _engine_measure(llm, args.input_len, args.output_len)
    finalists, repeats = 3, 2
    total = len(start) * (len(candidates) + repeats * (finalists + 1)) + 3 * len(batches) * args.ab_repeats
    bar = tqdm(total=total, desc="gemv-tune")
    start = dict(sorted(start.items(), key=lambda kv: -weight_elements(kv[0])))  # the big shapes first
    left = None if args.budget_s is None else args.budget_s - (time.monotonic() - t_start)
    tuned, trials = coordinate_descent(start, candidates, measure, finalists, repeats, bar, left)
    sets = {args.start: start, "tuned": tuned}
    plain = without_loop_stages(tuned, trials)
    if plain != tuned:
        sets[PLAIN] = plain
    ab = interleaved_ab(sets, batches, measure, args.ab_repeats)
    bar.update(len(sets) * len(batches) * args.ab_repeats)
    bar.close()
    gemv_configs.set_pins(None)

    summary = {b: {name: statistics.median(ab[name][b]) for name in ab} for b in batches}
    faster = min(sets, key=lambda name: sum(s[name] for s in summary.values()))  # a tie: the first, the start
    device = torch.cuda.get_device_name()
    floor = _step_floor(llm, args.input_len + args.output_len // 2)
    result = {"bench": "gemv_tune", "provenance": provenance(args, path), "device": device,
              "settings": {"batch_sizes": batches, "input_len": args.input_len, "output_len": args.output_len,
                           "ab_repeats": args.ab_repeats, "finalists": finalists, "repeats": repeats,
                           "start": args.start, "legacy_autotune": args.legacy_autotune},
              "autotune_configs": start, "tuned_configs": tuned, "plain_configs": plain, "trials": trials,
              "ab_tpot_ms": {name: {str(b): v for b, v in per.items()} for name, per in ab.items()},
              "median_tpot_ms": {str(b): s for b, s in summary.items()}, "kept": faster, "floor": floor,
              "failed_configs": failed,
              "gemv_configs": sets[faster]}
    print_table(f"GEMV block sizes: the start ({args.start}) vs the pick by TPOT inside the FULL graph",
                ["shape", args.start, "tuned", "tuned, no LOOP_STAGES"],
                [[s, _cfg(start[s]), _cfg(tuned[s]), _cfg(plain[s])] for s in start])
    print_table(f"TPOT ms, median of {args.ab_repeats} interleaved runs ({args.output_len} new tokens)",
                ["batch", *sets, f"{args.start} / tuned"],
                [[b, *s.values(), s[args.start] / s["tuned"]] for b, s in summary.items()], spec=".3f")
    if floor and 1 in summary:
        print(f"batch 1: {floor['weight_mb']:.0f} MB weights + {floor['kv_mb']:.0f} MB KV at "
              f"{floor['copy_gbps']:.0f} GB/s = {floor['bytes_ms']:.3f} ms floor; % of copy bandwidth: "
              + ", ".join(f"{n} {floor['bytes_ms'] / t:.1%}" for n, t in summary[1].items()))
    if args.save:  # merged into this GPU's file: shapes of other models tuned before are kept
        target = gemv_configs.device_config_path(device)
        target.parent.mkdir(parents=True, exist_ok=True)
        kept = gemv_configs.read_config_file(target) if target.exists() else {}
        write_json(str(target), {"gemv_configs": dict(sorted({**kept, **result["gemv_configs"]}.items())),
                                 "provenance": {
            **result["provenance"], "note": f"{faster} picks of scripts/maint/gemv_tune.py (median TPOT ms per "
                                            f"batch: {result['median_tpot_ms']})"}})
        result["saved_to"] = str(target)
        print(f"kept the {faster} picks: {target}")
    write_json(args.json, result)
    return result


PLAIN = "tuned, no LOOP_STAGES"


def without_loop_stages(tuned: dict[str, dict], trials: list[dict]) -> dict[str, dict]:
    """The tuned set with each pipelined pick (LOOP_STAGES) replaced by that shape's fastest plain config
    in the scan: the A/B against it says whether pipelining the loads earned its place."""
    plain = dict(tuned)
    for shape, cfg in tuned.items():
        if cfg.get("LOOP_STAGES", 1) > 1:
            scanned = [t for t in trials if t["shape"] == shape and t["round"] == "scan"
                       and t["config"].get("LOOP_STAGES", 1) == 1]
            plain[shape] = min(scanned, key=lambda t: t["tpot_ms"])["config"]
    return plain


def _autotune_without_loop_stages() -> None:
    """The autotuner as before the LOOP_STAGES configs existed: they are pruned unless a shape is pinned to
    one. Set before the kernel's first launch, which hands the filter to triton.autotune."""
    from minivllm.kernels import gemv_configs, triton_gemv

    assert triton_gemv._autotuned is None, "set before the GEMV's first launch"
    pinned = gemv_configs.use_pinned

    def legacy(configs: list, named_args: dict, **kwargs) -> list:
        kept = pinned(configs, named_args, **kwargs)
        return kept if len(kept) == 1 else [c for c in kept if "LOOP_STAGES" not in c.kwargs]

    gemv_configs.use_pinned = legacy


def _step_floor(llm, context: int) -> dict | None:
    """Bytes of a batch-1 decode step (weights + KV at `context`) and their time at the copy bandwidth."""
    from minivllm.bench.common import maint_script

    profile = maint_script("gpu_profile")
    bw = profile.copy_bandwidth_gbps()
    return {**profile.byte_floor(llm, 1, context, bw), "copy_gbps": bw} if bw else None


def summarize(paths: list[str]) -> list[list]:
    """One before/after row per tune JSON (one per model): batch-1 TPOT of each set, and the % of copy
    bandwidth the byte floor gives it."""
    rows, shipped = [], []
    for p in paths:
        if not Path(p).exists():  # a tune that ran out of time wrote nothing
            print(f"{p}: missing")
            continue
        with open(p) as f:
            r = json.load(f)
        med, floor = r["median_tpot_ms"].get("1"), r.get("floor") or {}
        if med is None:
            continue
        start = r["settings"].get("start", "autotune")
        bound = floor.get("bytes_ms")
        pct = [f"{bound / med[n]:.1%}" if bound and n in med else "-" for n in (start, "tuned")]
        n_stages = sum(c.get("LOOP_STAGES", 1) > 1 for c in r["tuned_configs"].values())
        shipped += r["gemv_configs"].values()
        for c in r.get("failed_configs", []):
            print(f"{p}: {c} FAILED against F.linear (left out: the kernel has a bug there)")
        rows.append([Path(r["provenance"]["args"].get("model") or "default").name, f"{med[start]:.3f}",
                     f"{med['tuned']:.3f}", f"{med[PLAIN]:.3f}" if PLAIN in med else "=tuned",
                     f"{bound:.3f}" if bound else "-", *pct, f"{n_stages}/{len(r['tuned_configs'])}", r["kept"]])
    print_table("batch-1 TPOT ms before (start) / after (tuned), and % of copy bandwidth (byte floor / TPOT)",
                ["model", "before", "tuned", PLAIN, "floor", "% before", "% tuned", "LOOP_STAGES picks", "kept"],
                rows)
    code = "the pipelined configs in triton_gemv._configs()"
    used = sum(c.get("LOOP_STAGES", 1) > 1 for c in shipped)
    print(f"LOOP_STAGES: in {used} of the {len(shipped)} kept configs -> "
          + (f"keep {code}" if used else f"no kept config uses it: {code} can go (measured, not faster)"))
    return rows


def _cfg(c: dict) -> str:
    return f"N{c['BLOCK_N']} K{c['BLOCK_K']} w{c['num_warps']} s{c['num_stages']}" + (
        f" L{c['LOOP_STAGES']}" if "LOOP_STAGES" in c else "")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    EngineArgs.add_cli_args(parser)
    parser.add_argument("--batch-sizes", default="1,2", help="decode batch sizes whose GEMV shapes are tuned (1-2)")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128, help="new tokens per timed generate")
    parser.add_argument("--ab-repeats", type=int, default=5, help="runs per set in the final autotuner-vs-tuned A/B")
    parser.add_argument("--save", action="store_true",
                        help="write the faster set to minivllm/kernels/configs/gemv/<GPU name>.json")
    parser.add_argument("--start", choices=("autotune", "shipped"), default="autotune",
                        help="start from fresh autotuner picks, or from the configs in use (shipped file + autotune)")
    parser.add_argument("--legacy-autotune", action="store_true",
                        help="the start's autotune leaves out the LOOP_STAGES configs (as before they existed)")
    parser.add_argument("--warm-workers", type=int, default=0,
                        help="first compile and check every config of this model's shapes in this many processes")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="no shape search starts after this many seconds of the run (the rest keep the start)")
    parser.add_argument("--json", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summarize(sys.argv[2:])
    else:
        tune(parse_args(sys.argv[1:]))
