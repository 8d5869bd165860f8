"""One graph mode in one process: decode TPOT at batch 1 and 64, a 512-token prefill, and greedy tokens.

Why: issue 26 asks for PIECEWISE within 1.3x of FULL at batch 1 (1.2x at batch 64), prefill kept at least
2x faster than eager, and every mode giving eager's greedy tokens in bf16. One process per mode keeps the
modes from sharing Dynamo's caches or the allocator, and one JSON per mode lets a later step compare each
mode's tokens with eager's (`--compare`):

    python scripts/modes_check.py --model CK --mode eager --json OUT/modes_eager.json
    python scripts/modes_check.py --model CK --mode PIECEWISE --json OUT/modes_PIECEWISE.json
    python scripts/modes_check.py --compare OUT/modes_eager.json OUT/modes_*.json --json OUT/modes.json

Modes: eager (enforce_eager) or a cudagraph_mode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY,
FULL_AND_PIECEWISE) at the engine's default compilation mode; "MODE+ops" asks for mode 3 with every custom op.
`--modes eager,FULL_DECODE_ONLY,...` builds them in order in one process instead (a notebook's case).
`--tiny` shrinks every size so the script runs on a CPU in seconds (a check of the script, not a measurement).
Several JSONs of one mode given to `--compare` are rounds (gpu_check.sh's MODES_ROUNDS): see `compare`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _prompts(n: int, length: int, high: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"prompt_token_ids": torch.randint(3, high, (length,), generator=g).tolist()} for _ in range(n)]


def _tpot_ms(llm, batch: int, input_len: int, output_len: int, high: int) -> float:
    from minivllm import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=output_len, ignore_eos=True)
    llm.generate(_prompts(batch, input_len, high, seed=1000 + batch), params, use_tqdm=False)  # warm-up
    outs = llm.generate(_prompts(batch, input_len, high, seed=batch), params, use_tqdm=False)
    return statistics.mean(o.metrics.tpot for o in outs) * 1e3


def _prefill_ms(llm, length: int, high: int, reps: int) -> float:
    """Median wall time of one prompt of `length` tokens, one output token (no prefix-cache hit: new prompts)."""
    from minivllm import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    times = []
    for i in range(reps + 1):
        prompt = _prompts(1, length, high, seed=5000 + i)
        _sync()
        t0 = time.perf_counter()
        llm.generate(prompt, params, use_tqdm=False)
        _sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]) * 1e3  # the first is a warm-up


#: A mode name with "+ops": the mode at an asked-for mode 3 with every custom op (issue 42's fifth engine).
OPS_SUFFIX = "+ops"


def run_mode(args) -> dict:
    from minivllm import LLM, SamplingParams

    eager = args.mode == "eager"
    tiny = args.tiny
    kw = {"max_model_len": args.max_model_len, "seed": 0}
    if not eager:
        kw["cudagraph_mode"] = args.mode.removesuffix(OPS_SUFFIX)
    if args.compilation_config:
        kw["compilation_config"] = json.loads(args.compilation_config)
    if args.mode.endswith(OPS_SUFFIX):
        kw["compilation_config"] = {**kw.get("compilation_config", {}), "mode": 3, "custom_ops": ["all"]}
    t0 = time.perf_counter()
    llm = LLM(args.model, enforce_eager=eager, **kw)
    startup_s = time.perf_counter() - t0
    high = min(llm.model_runner.model_config.vocab_size, 10_000)
    cfg = llm.config
    res = {"mode": args.mode, "cudagraph_mode": cfg.cudagraph_mode.value, "compile_mode": int(cfg.compile_mode),
           "cudagraph_downgrade": cfg.cudagraph_downgrade, "dtype": str(cfg.dtype), "device": cfg.device.type,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
           "torch": torch.__version__, "startup_s": round(startup_s, 2), "tiny": tiny}
    in_len, out_len = (8, 4) if tiny else (128, 64)
    res["tpot_ms"] = {str(b): round(_tpot_ms(llm, b, in_len, out_len, high), 4)
                      for b in ((1, 4) if tiny else (1, 64))}
    prefill_len = 16 if tiny else 512
    res["prefill_ms"] = {str(prefill_len): round(_prefill_ms(llm, prefill_len, high, 2 if tiny else 5), 4)}
    # greedy tokens: prompts of mixed lengths, batched together (prefill, mixed and decode steps)
    g = torch.Generator().manual_seed(26)
    lengths = [int(n) for n in torch.randint(4 if tiny else 16, 24 if tiny else 400, (6 if tiny else 37,),
                                             generator=g)]
    prompts = [{"prompt_token_ids": torch.randint(3, high, (n,), generator=g).tolist()} for n in lengths]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8 if tiny else 32, ignore_eos=True),
                        use_tqdm=False)
    res["tokens"] = [list(o.outputs[0].token_ids) for o in outs]
    disp = llm.model_runner.cudagraph_dispatcher
    res["dispatch_counts"] = dict(disp.counts) if disp else {}
    llm.shutdown()
    return res


def _spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def compare(eager_file: str, files: list[str]) -> dict:
    """Each mode's greedy tokens against eager's: prompts equal, and the first diverging position.

    Several files of one mode are rounds (gpu_check.sh's MODES_ROUNDS: the modes' processes alternate, so a
    drift of the machine's host speed hits every mode alike): the times are then their medians, with
    `*_range` [min, max] over the rounds, and the PIECEWISE / FULL ratio is also given per round (round i's
    PIECEWISE over round i's FULL_DECODE_ONLY). A batch-1 step of PIECEWISE is bound by the host, so one
    process's figure can move by half from one minute to the next; only a ratio whose whole range clears a
    goal says the goal is met."""
    runs: dict[str, list[dict]] = {}
    for f in [eager_file, *files]:
        r = json.loads(Path(f).read_text())
        if "mode" not in r:  # a comparison (modes_together.json) beside the runs
            continue
        if f != eager_file or r["mode"] not in runs:
            runs.setdefault(r["mode"], []).append(r)
    eager_runs = runs.pop("eager", None) or [json.loads(Path(eager_file).read_text())]
    eager = eager_runs[0]

    def times(rs: list[dict], key: str) -> tuple[dict, dict]:
        med = {b: _spread([r[key][b] for r in rs])["median"] for b in rs[0][key]}
        rng = {b: [min(r[key][b] for r in rs), max(r[key][b] for r in rs)] for b in rs[0][key]}
        return med, rng

    out = {"eager": {k: eager[k] for k in ("tpot_ms", "prefill_ms", "startup_s")}, "modes": {}}
    if len(eager_runs) > 1:
        out["eager"]["tpot_ms"], out["eager"]["tpot_ms_range"] = times(eager_runs, "tpot_ms")
        out["eager"]["prefill_ms"], out["eager"]["prefill_ms_range"] = times(eager_runs, "prefill_ms")
        out["eager"]["rounds"] = len(eager_runs)
    for mode, rs in runs.items():
        r = rs[0]
        firsts = []
        for a, b in zip(eager["tokens"], r["tokens"]):
            firsts.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None))
        equal = sum(f is None for f in firsts)
        entry = {k: r[k] for k in ("cudagraph_mode", "compile_mode", "cudagraph_downgrade", "tpot_ms",
                                   "prefill_ms", "startup_s", "dispatch_counts")}
        entry.update(prompts=len(firsts), equal_to_eager=equal,
                     diverged_within_4=sum(f is not None and f < 4 for f in firsts),
                     first_divergence=firsts)
        if len(rs) > 1:
            entry["tpot_ms"], entry["tpot_ms_range"] = times(rs, "tpot_ms")
            entry["prefill_ms"], entry["prefill_ms_range"] = times(rs, "prefill_ms")
            entry["rounds"] = len(rs)
            entry["same_tokens_every_round"] = all(x["tokens"] == r["tokens"] for x in rs)
        ev = out["eager"]
        entry["tpot_vs_eager"] = {b: round(ev["tpot_ms"][b] / v, 3) for b, v in entry["tpot_ms"].items()}
        entry["prefill_vs_eager"] = {n: round(ev["prefill_ms"][n] / v, 3) for n, v in entry["prefill_ms"].items()}
        if len(rs) > 1 and len(eager_runs) == len(rs):  # per round: eager's prefill over this mode's
            entry["prefill_vs_eager_per_round"] = {n: [round(e["prefill_ms"][n] / x["prefill_ms"][n], 3)
                                                       for e, x in zip(eager_runs, rs)] for n in r["prefill_ms"]}
        out["modes"][mode] = entry
    full_mode = "FULL_DECODE_ONLY" if "FULL_DECODE_ONLY" in out["modes"] else "FULL"
    full, pw = out["modes"].get(full_mode), out["modes"].get("PIECEWISE")
    if full and pw:  # the goals: PIECEWISE <= 1.3x FULL at batch 1, <= 1.2x at batch 64
        out["piecewise_over_full_tpot"] = {b: round(pw["tpot_ms"][b] / full["tpot_ms"][b], 3)
                                           for b in pw["tpot_ms"]}
        fr, pr = runs[full_mode], runs["PIECEWISE"]
        if len(pr) > 1 and len(fr) == len(pr):
            out["piecewise_over_full_tpot_per_round"] = {
                b: [round(p["tpot_ms"][b] / f["tpot_ms"][b], 3) for p, f in zip(pr, fr)] for b in pw["tpot_ms"]}
    return out


def run_in_order(args) -> dict:
    """Every mode of --modes built one after another in THIS process, as a notebook builds them (eager first:
    the others' tokens are compared with it), then the same comparison as --compare. Issue 42 found a mode
    built fourth in a process slower than alone; this run and the per-process one (`gpu_check.sh modes`) side
    by side say whether that still holds."""
    import tempfile

    modes = args.modes.split(",")
    if modes[0] != "eager":
        raise SystemExit("--modes starts with eager: the other modes' tokens are compared with it")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for mode in modes:
            res = run_mode(argparse.Namespace(**{**vars(args), "mode": mode}))
            files.append(Path(tmp) / f"{len(files)}_{mode}.json")
            files[-1].write_text(json.dumps(res))
        out = compare(str(files[0]), [str(f) for f in files[1:]])
    out.update(one_process=True, order=modes)
    return out


def together_rounds(files: list[str]) -> dict:
    """Rounds of the one-process order (gpu_check.sh's MODES_TOGETHER_ROUNDS, a new process each): the first
    round's comparison, plus per round, and their medians, the PIECEWISE / full-graph TPOT ratio and each
    mode's prefill against eager's. A ratio measured in one process moves with the host's speed as much as
    one measured across processes does (issue 42), so the one-process goal is read on its range too."""
    rs = [json.loads(Path(f).read_text()) for f in files]
    out = {**rs[0], "rounds": len(rs)}
    if all("piecewise_over_full_tpot" in r for r in rs):
        per = {b: [r["piecewise_over_full_tpot"][b] for r in rs] for b in rs[0]["piecewise_over_full_tpot"]}
        out["piecewise_over_full_tpot_per_round"] = per
        out["piecewise_over_full_tpot"] = {b: round(statistics.median(v), 3) for b, v in per.items()}
    out["prefill_vs_eager_per_round"] = {
        m: {n: [r["modes"][m]["prefill_vs_eager"][n] for r in rs] for n in e["prefill_vs_eager"]}
        for m, e in rs[0]["modes"].items()}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--compilation-config", default=None, help="JSON, e.g. '{\"mode\": 3}'")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes: checks the script on a CPU")
    ap.add_argument("--compare", nargs="+", metavar="JSON", help="eager's JSON, then the other modes' JSONs")
    ap.add_argument("--modes", help="comma-separated modes built in order in this one process (eager first), "
                    "e.g. eager,FULL_DECODE_ONLY,FULL,PIECEWISE,PIECEWISE+ops; writes the comparison")
    ap.add_argument("--together", nargs="+", metavar="JSON", help="rounds of --modes (one JSON each): per-round "
                    "ratios and their medians")
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)
    from minivllm.bench.common import provenance

    if args.compare:
        res = compare(args.compare[0], args.compare[1:])
    elif args.together:
        res = together_rounds(args.together)
    elif args.modes:
        if not args.model:
            ap.error("--model is required to run modes")
        res = run_in_order(args)
        res["provenance"] = provenance(args, args.model)
    else:
        if not args.model:
            ap.error("--model is required to run a mode")
        res = run_mode(args)
    Path(args.json).write_text(json.dumps(res, indent=1))
    shown = {k: v for k, v in res.items() if k != "tokens"}
    if "modes" in shown:
        shown["modes"] = {m: {k: v for k, v in e.items() if k != "first_divergence"} for m, e in res["modes"].items()}
    print(json.dumps(shown, indent=1))
    return res


if __name__ == "__main__":
    sys.exit(main() and 0)
