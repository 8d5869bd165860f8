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

A maintenance tool, not part of the engine: it runs when a GPU model or the GEMV's configs change, and what
it finds ships as data (minivllm/kernels/configs/gemv/).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Callable

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
    d, step = runner.cudagraph_dispatcher, runner.full_step
    if d is None or step is None or n not in d.full_sizes:
        raise ValueError(f"no FULL CUDA graph of batch size {n} to re-capture (captured: "
                         f"{sorted(d.full_sizes) if d is not None else []})")
    step.graphs.pop(n, None)
    torch.cuda.synchronize()
    capture_graphs(runner, CUDAGraphMode.FULL, [n], step, [step], runner.graph_pool)


def rows_of(shape: str) -> int:
    """The batch size whose decode step runs this shape: its padded row count ("N=4096 K=1024 M_PAD=1 ...")."""
    return int(shape.split("M_PAD=")[1].split()[0])


def coordinate_descent(start: dict[str, dict], candidates: list[dict], measure: Measure, finalists: int = 3,
                       repeats: int = 2, bar=None) -> tuple[dict[str, dict], list[dict]]:
    """For each shape in turn, every candidate config is measured once with the other shapes fixed at their
    best so far; the incumbent and the `finalists` fastest are measured `repeats` more times, interleaved,
    and the lowest mean wins, the incumbent on a tie (one TPOT reading moves by about 0.5%, the size of the
    differences sought). Returns the tuned configs and every trial."""
    best, trials = dict(start), []
    for shape in start:
        batch = rows_of(shape)
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

    batches = int_list(args.batch_sizes)
    if not batches or any(b < 1 or b > triton_gemv.DISPATCH_MAX_M for b in batches):
        raise ValueError(f"--batch-sizes: the GEMV runs batches of 1..{triton_gemv.DISPATCH_MAX_M} rows; "
                         f"got {args.batch_sizes!r}")
    path = model_dir(args)
    gemv_configs.set_pins({}, label="autotune")  # start from what Triton's autotuner picks here
    llm = engine_for_mode(args, "FULL_DECODE_ONLY", cudagraph_capture_sizes=batches, max_num_seqs=max(batches),
                          max_model_len=args.input_len + args.output_len + 32)
    start = {s: c for s, c in triton_gemv.autotuned_configs().items() if rows_of(s) in batches}
    if not start:
        raise SystemExit("no Triton GEMV ran in the FULL graphs (custom op 'gemv' off, or no GPU support)")
    candidates = [gemv_configs.config_dict(c) for c in triton_gemv._configs()]
    measure = _engine_measure(llm, args.input_len, args.output_len)
    finalists, repeats = 3, 2
    total = len(start) * (len(candidates) + repeats * (finalists + 1)) + 2 * len(batches) * args.ab_repeats
    bar = tqdm(total=total, desc="gemv-tune")
    tuned, trials = coordinate_descent(start, candidates, measure, finalists, repeats, bar)
    ab = interleaved_ab({"autotune": start, "tuned": tuned}, batches, measure, args.ab_repeats)
    bar.update(2 * len(batches) * args.ab_repeats)
    bar.close()
    gemv_configs.set_pins(None)

    summary = {b: {name: statistics.median(ab[name][b]) for name in ab} for b in batches}
    faster = "tuned" if sum(s["tuned"] for s in summary.values()) <= sum(s["autotune"] for s in summary.values()) \
        else "autotune"
    device = torch.cuda.get_device_name()
    result = {"bench": "gemv_tune", "provenance": provenance(args, path), "device": device,
              "settings": {"batch_sizes": batches, "input_len": args.input_len, "output_len": args.output_len,
                           "ab_repeats": args.ab_repeats, "finalists": finalists, "repeats": repeats},
              "autotune_configs": start, "tuned_configs": tuned, "trials": trials,
              "ab_tpot_ms": {name: {str(b): v for b, v in per.items()} for name, per in ab.items()},
              "median_tpot_ms": {str(b): s for b, s in summary.items()}, "kept": faster,
              "gemv_configs": tuned if faster == "tuned" else start}
    print_table("GEMV block sizes: the autotuner's pick vs the pick by TPOT inside the FULL graph",
                ["shape", "autotuner", "tuned"],
                [[s, _cfg(start[s]), _cfg(tuned[s])] for s in start])
    print_table(f"TPOT ms, median of {args.ab_repeats} interleaved runs ({args.output_len} new tokens)",
                ["batch", "autotuner picks", "tuned picks", "autotuner / tuned"],
                [[b, s["autotune"], s["tuned"], s["autotune"] / s["tuned"]] for b, s in summary.items()],
                spec=".3f")
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


def _cfg(c: dict) -> str:
    return f"N{c['BLOCK_N']} K{c['BLOCK_K']} w{c['num_warps']} s{c['num_stages']}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    EngineArgs.add_cli_args(parser)
    parser.add_argument("--batch-sizes", default="1,2", help="decode batch sizes whose GEMV shapes are tuned (1-2)")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128, help="new tokens per timed generate")
    parser.add_argument("--ab-repeats", type=int, default=5, help="runs per set in the final autotuner-vs-tuned A/B")
    parser.add_argument("--save", action="store_true",
                        help="write the faster set to minivllm/kernels/configs/gemv/<GPU name>.json")
    parser.add_argument("--json", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    tune(parse_args(sys.argv[1:]))
