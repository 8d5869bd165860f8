"""`minivllm bench startup`: a cold and a warm engine start, phase by phase.

Why two processes: compiled kernels are cached on disk (MINIVLLM_CACHE_DIR, plus Inductor's and Triton's
own caches, pointed inside it here) and in memory; only a fresh process shows what a second start really
saves. The cold start gets a fresh, empty cache directory; the warm start reuses what the cold one wrote.
Each child prints `llm.startup_report().as_dict()` as JSON; the parent puts the phases side by side.
`minivllm bench startup` runs this file's main() with its flags (minivllm/bench/cli.py).

    minivllm bench startup --model .ckpt/qwen3-0.6b --compilation-config '{"mode": 3}' --json startup.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

MARKER = "MINIVLLM_STARTUP_JSON "


def child(kwargs: dict) -> None:
    """Runs in the subprocess: build the engine, generate one token (some work is lazy), print the report.
    (This module imports only the standard library at the top, so `import` below times torch & co. too.)"""
    t0 = time.perf_counter()
    from minivllm import LLM, SamplingParams

    import_s = time.perf_counter() - t0
    llm = LLM(**kwargs)
    t1 = time.perf_counter()
    llm.generate([{"prompt_token_ids": [1, 2, 3, 4]}], SamplingParams(max_tokens=2, temperature=0),
                 use_tqdm=False)
    report = llm.startup_report().as_dict()
    phases = report["phases_s"]
    named = sum(v for k, v in phases.items() if k != "total")
    phases |= {"other (in total)": round(phases["total"] - named, 4), "import": round(import_s, 4),
               "first_generate": round(time.perf_counter() - t1, 4)}
    for key, label in (("dynamo_s", "  of which Dynamo"), ("backend_s", "  of which AOT + Inductor")):
        if report["compile"].get(key) is not None:
            phases[label] = report["compile"][key]
    # what the parent compares between the starts: a warm start must compute what the cold one did
    outs = llm.generate([{"prompt_token_ids": [1 + i, 7, 3 * i + 2, 5]} for i in range(4)],
                        SamplingParams(max_tokens=16, temperature=0, ignore_eos=True), use_tqdm=False)
    report["greedy_tokens"] = [o.outputs[0].token_ids for o in outs]
    print(MARKER + json.dumps(report, default=str), flush=True)


def run_child(kwargs: dict, cache_dir: str) -> dict:
    from minivllm.bench.common import REPO

    # the child imports the minivllm of this checkout (REPO first on its path), as `python -m` from REPO did
    env = {**os.environ, "MINIVLLM_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
           "TRITON_CACHE_DIR": os.path.join(cache_dir, "triton")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(kwargs)],
                          cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"startup child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    report = json.loads(lines[-1][len(MARKER):])
    report["phases_s"]["process_wall"] = round(wall, 4)
    return report


def main(args) -> dict:
    from tqdm.auto import tqdm

    from minivllm.bench.common import engine_kwargs, model_dir, print_table, provenance, write_json

    path = model_dir(args)
    kwargs = engine_kwargs(args)
    result = {"bench": "startup", "provenance": provenance(args, path), "engine_kwargs": kwargs}
    with tempfile.TemporaryDirectory(prefix="minivllm-startup-") as cache_dir:
        for kind in tqdm(["cold", "warm"], desc="engine starts (subprocesses)"):
            result[kind] = run_child(kwargs, cache_dir)
    cold, warm = result["cold"]["phases_s"], result["warm"]["phases_s"]
    names = list(dict.fromkeys([*cold, *warm]))
    rows = [[n, cold.get(n), warm.get(n), warm[n] / cold[n] if cold.get(n) and n in warm else None]
            for n in names]
    result["ratio_warm_over_cold"] = {r[0]: r[3] for r in rows}
    print_table("Engine startup phases (s): cold = empty compile cache, warm = reusing it",
                ["phase", "cold s", "warm s", "warm/cold"], rows, spec=".3f")
    result["warm_tokens_equal_cold"] = result["warm"].get("greedy_tokens") == result["cold"].get("greedy_tokens")
    print(f"Greedy tokens (4 prompts x 16) of the warm start equal the cold start's: "
          f"{result['warm_tokens_equal_cold']}; Dynamo skipped on the warm start: "
          f"{bool(result['warm'].get('compile', {}).get('dynamo_skipped'))}")
    print(f"Warm start {warm['total']:.2f} s vs cold start {cold['total']:.2f} s: warm / cold = "
          f"{result['ratio_warm_over_cold']['total']:.2f}x")
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: minivllm bench startup ... (this entry point is for its child processes)")
