"""Where the CPU's time goes in a few decode steps of one graph mode (cProfile), per function and per step.

    python scripts/maint/host_profile.py --model DIR --max-model-len 512 --mode PIECEWISE --batch-size 1 \
        --steps 8 --json profile_piecewise.json

Why: at batch 1 a step is bound by the host when its Python time exceeds the GPU's, and `minivllm bench
profile` shows only the GPU side. This is the profile that found the per-call cost of torch.library's
custom-op wrapper (minivllm/kernels/op_registry.py). A maintenance tool: the engine does not need it.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

from minivllm.bench.common import (free_engine, jsonable, model_dir, print_table, provenance, random_prompts,
                                   sync, write_json)
from minivllm.bench.latency import engine_for_mode
from minivllm.engine_args import EngineArgs
from minivllm.sampling_params import SamplingParams


def profile_calls(fn, calls: int) -> tuple[float, list[dict]]:
    """cProfile of `calls` calls of fn: Python calls per call, and per function its calls, own and cumulative
    microseconds per call (scripts/maint/host_time.py profiles one forward with it)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    rows = [{"function": f"{file.rsplit('/', 1)[-1]}:{line}:{func}", "calls": nc / calls, "own_us": tt / calls * 1e6,
             "cum_us": ct / calls * 1e6} for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items()]
    return stats.total_calls / calls, rows


def host_profile(engine, steps: int, top: int = 25) -> dict:
    """cProfile of `steps` engine steps: per function, calls, its own time and its time with callees, per step."""
    sync()
    t0 = time.perf_counter()
    _, rows = profile_calls(engine.step, steps)
    sync()
    wall = (time.perf_counter() - t0) / steps
    for r in rows:
        r["calls_per_step"] = r.pop("calls")
    rows.sort(key=lambda r: -r["own_us"])
    return {"step_ms_under_cprofile": wall * 1e3, "top_own": rows[:top],
            "top_cum": sorted(rows, key=lambda r: -r["cum_us"])[:top]}


def run(args: argparse.Namespace) -> dict:
    path = model_dir(args)
    max_len = max(args.max_model_len or 0, args.context + 4 * args.steps + 16)
    llm = engine_for_mode(args, args.mode, max_num_seqs=max(args.max_num_seqs, args.batch_size),
                          max_model_len=max_len)
    engine = llm.engine
    high = min(llm.model_runner.model_config.vocab_size, 10_000)
    params = SamplingParams(temperature=0, max_tokens=3 * args.steps + 8, ignore_eos=True)
    seqs = [engine.add_request(engine.next_request_id(), p, params)
            for p in random_prompts(args.batch_size, args.context, high, seed=args.batch_size)]
    while min(s.num_output_tokens for s in seqs) < 2:  # prefill (maybe chunked), then the first decodes
        engine.step()
    for _ in range(args.steps):  # warm: the first steps of a mode may still compile or capture
        engine.step()
    host = host_profile(engine, args.steps)
    while engine.has_unfinished_requests():
        engine.step()
    free_engine(llm)
    print_table(f"{args.mode}, batch {args.batch_size}: host time per step "
                f"({host['step_ms_under_cprofile']:.3f} ms/step under cProfile)",
                ["function (own time)", "calls/step", "own us/step", "cum us/step"],
                [[r["function"][-60:], r["calls_per_step"], r["own_us"], r["cum_us"]] for r in host["top_own"][:15]])
    result = {"bench": "host_profile", "provenance": provenance(args, path), "mode": args.mode,
              "batch": args.batch_size, "context": args.context, "steps": args.steps, "host": host}
    write_json(args.json, jsonable(result))
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    EngineArgs.add_cli_args(parser)
    parser.add_argument("--mode", default="PIECEWISE", help="as in bench latency, e.g. eager, FULL, FULL@L2")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--context", type=int, default=256, help="prompt tokens per request before decoding")
    parser.add_argument("--steps", type=int, default=8, help="decode steps profiled (as many warm them first)")
    parser.add_argument("--json", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
