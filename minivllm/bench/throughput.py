"""`minivllm bench throughput`: nano-vllm's offline workload, output tokens per second.

Why this workload: it is the number nano-vllm and vLLM publish (256 requests, random prompts of 100-1024
tokens, 100-1024 output tokens each, EOS ignored), so ours can be put next to theirs. Besides tokens/s it
reports what explains the number: steps per second, how full the batches were, how the time splits between
prefill-containing and pure decode steps, preemptions, and per-request TTFT / TPOT percentiles.

The end prints minivllm's tok/s next to each baseline that ran (transformers, async scheduling off) and
the ratio.

    minivllm bench throughput --model .ckpt/qwen3-0.6b --compare hf --check-correctness --json thr.json
"""

from __future__ import annotations

import gc
import random
import statistics
import time

import torch

from minivllm.bench.common import (
    engine_kwargs,
    free_engine,
    int_list,
    jsonable,
    maint_script,
    model_dir,
    percentiles,
    print_table,
    provenance,
    random_prompts,
    str_list,
    sync,
    try_baseline,
    write_json,
)
from minivllm.sampling_params import SamplingParams

HF_STATIC_BATCH, HF_STATIC_NEW_TOKENS = 32, 128
CHECK_REQUESTS, CHECK_TOKENS = 16, 32


def workload(num: int, in_range: list[int], out_range: list[int], high: int, seed: int = 0):
    """nano-vllm's bench.py, draw for draw (random.seed(0); lengths and ids with randint, bounds included), so
    the same seed gives the same requests. `high` caps the ids at the vocabulary (10000 for real models)."""
    rng = random.Random(seed)
    prompts = [[rng.randint(0, high) for _ in range(rng.randint(*in_range))] for _ in range(num)]
    max_tokens = [rng.randint(*out_range) for _ in range(num)]
    return prompts, max_tokens


def run_engine(llm, prompts, max_tokens, temperature: float, high: int, logprobs: int | None = None) -> dict:
    """One short warm-up, then the whole workload in ONE llm.generate call, timed end to end."""
    warm = random_prompts(2, 16, high, seed=12345)
    llm.generate([{"prompt_token_ids": p} for p in warm], SamplingParams(max_tokens=16), use_tqdm=False)
    runner, engine = llm.model_runner, llm.engine
    steps0, engine0 = dict(runner.step_stats), dict(engine.stats)
    params = [SamplingParams(temperature=temperature, max_tokens=n, ignore_eos=True, logprobs=logprobs)
              for n in max_tokens]
    sync()
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=True)
    sync()
    wall = time.perf_counter() - t0
    st = {k: v - steps0.get(k, 0) for k, v in runner.step_stats.items()}
    es = {k: v - engine0.get(k, 0) for k, v in engine.stats.items()}
    out_tokens, prompt_tokens = sum(len(o.outputs[0].token_ids) for o in outs), sum(map(len, prompts))
    busy = st["prefill_time"] + st["decode_time"]
    n_dec, n_steps = max(st["decode_steps"], 1), max(es["steps"], 1)
    cpu = es["schedule_time"] + st["cpu_launch_time"] + es["process_time"]
    return {
        "async_scheduling": llm.config.async_scheduling,
        "decode_wall_ms_per_step": st["decode_time"] / n_dec * 1e3,
        "decode_gpu_ms_per_step": st["decode_gpu_time"] / n_dec * 1e3 if torch.cuda.is_available() else None,
        "cpu_ms_per_step": cpu / n_steps * 1e3, "wait_ms_per_step": es["wait_time"] / n_steps * 1e3,
        "cpu_ms_per_step_parts": {"schedule": es["schedule_time"] / n_steps * 1e3,
                                  "prepare_and_launch": st["cpu_launch_time"] / n_steps * 1e3,
                                  "process_tokens": es["process_time"] / n_steps * 1e3},
        "wall_s": wall, "finished_requests": sum(o.finished for o in outs), "output_tokens": out_tokens,
        "prompt_tokens": prompt_tokens, "output_tok_s": out_tokens / wall,
        "total_tok_s": (out_tokens + prompt_tokens) / wall,
        "steps": es["steps"], "steps_per_s": es["steps"] / wall,
        "mean_batch_seqs": es["scheduled_seqs"] / max(es["steps"], 1),
        "mean_batch_tokens": es["scheduled_tokens"] / max(es["steps"], 1),
        "prefill_steps": st["prefill_steps"], "decode_steps": st["decode_steps"],
        "prefill_time_frac": st["prefill_time"] / busy if busy else None,
        "decode_time_frac": st["decode_time"] / busy if busy else None,
        "preemptions": es["preemptions"],
        "ttft_s": percentiles([o.metrics.ttft for o in outs]),
        "tpot_s": percentiles([o.metrics.tpot for o in outs]),
    }


def check_correctness(llm, prompts) -> dict:
    """Greedy: the same requests batched together and one at a time must give the same tokens. Batching
    changes which kernels and shapes run, so in bf16 an occasional late divergence can be rounding; an early
    or frequent one is a bug (wrong masking, slots, or positions). The one-by-one pass finds the prompts in
    the prefix cache, so it checks cache hits against full prefills too."""
    sp = SamplingParams(temperature=0.0, max_tokens=CHECK_TOKENS, ignore_eos=True)
    reqs = [{"prompt_token_ids": p} for p in prompts]
    batched = [o.outputs[0].token_ids for o in llm.generate(reqs, sp, use_tqdm=False)]
    single = [llm.generate([r], sp, use_tqdm=False)[0].outputs[0].token_ids for r in reqs]
    pairs = list(zip(batched, single))
    prefix = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), len(x)) for x, y in pairs]
    return {"requests": len(prompts), "tokens_compared": CHECK_TOKENS,
            "matching": sum(x == y for x, y in pairs), "mean_matching_prefix": statistics.mean(prefix),
            "first_divergence": prefix}


def main(args) -> dict:
    from minivllm import LLM
    from minivllm.config import resolve_device, resolve_dtype
    from minivllm.loader import check_model_dir, load_model_config

    path = model_dir(args)
    mcfg = load_model_config(check_model_dir(path))
    in_range, out_range = int_list(args.input_len_range), int_list(args.output_len_range)
    compare = str_list(args.compare)
    if len(in_range) != 2 or len(out_range) != 2:
        raise ValueError("--input-len-range and --output-len-range take two numbers: MIN,MAX")
    if any(c not in ("hf", "sync") for c in compare):
        raise ValueError(f"--compare: choose from hf (transformers), sync (this engine, async scheduling off); "
                         f"got {args.compare!r}")
    high = min(10_000, mcfg.vocab_size - 1)
    prompts, max_tokens = workload(args.num_requests, in_range, out_range, high)
    max_len = max(args.max_model_len or 0, in_range[1] + max(out_range[1], CHECK_TOKENS))
    result = {"bench": "throughput", "provenance": provenance(args, path),
              "settings": {"num_requests": args.num_requests, "input_len_range": in_range,
                           "output_len_range": out_range, "temperature": args.temperature, "logprobs": args.logprobs,
                           "token_id_max": high, "max_model_len": max_len}}
    llm = LLM(**engine_kwargs(args, max_model_len=max_len))
    result["engine"] = {"cudagraph_mode": llm.config.cudagraph_mode, "dtype": str(llm.config.dtype),
                        "attention_backend": llm.config.attention_backend,
                        "max_num_seqs": llm.config.scheduler.max_num_seqs,
                        "max_num_batched_tokens": llm.config.scheduler.max_num_batched_tokens,
                        "startup": jsonable(llm.startup_report().as_dict())}
    result["minivllm"] = run_engine(llm, prompts, max_tokens, args.temperature, high)
    if args.logprobs is not None:  # the same engine, every request asking for logprobs: their cost
        result["minivllm_logprobs"] = run_engine(llm, prompts, max_tokens, args.temperature, high, args.logprobs)
    if args.check_correctness:
        check_prompts, _ = workload(CHECK_REQUESTS, in_range, out_range, high, seed=1)  # fresh: no cache hits
        result["correctness"] = check_correctness(llm, check_prompts)
    dtype = llm.config.dtype
    free_engine(llm)
    del llm
    if args.check_correctness and dtype != torch.float32:
        # The same check in fp32: if bf16 mismatches vanish here, they were rounding on near-tied logits
        # (batched GEMMs and attention splits sum in another order), not wrong slots, masks or positions.
        llm = LLM(**engine_kwargs(args, max_model_len=max_len, dtype="float32"))
        result["correctness_fp32"] = check_correctness(llm, check_prompts)
        free_engine(llm)
        del llm
    if "sync" in compare:  # the same engine with async scheduling off: what the CPU/GPU overlap buys
        llm = LLM(**engine_kwargs(args, max_model_len=max_len, async_scheduling=False))
        result["minivllm_sync"] = run_engine(llm, prompts, max_tokens, args.temperature, high)
        free_engine(llm)
        del llm
    if "hf" in compare:
        hf_baseline = maint_script("hf_baseline")
        dev = resolve_device(args.device)
        model = hf_baseline.load(path, resolve_dtype(args.dtype, mcfg.torch_dtype, dev), dev)
        result["hf_continuous_batching"] = try_baseline(
            "hf continuous batching", hf_baseline.continuous_batching, model, prompts, max_tokens,
            args.temperature, args.hf_time_cap)
        result["hf_static_batch"] = try_baseline(
            "hf static batch", hf_baseline.static_batch, model, prompts[:HF_STATIC_BATCH],
            min(HF_STATIC_NEW_TOKENS, out_range[1]), args.temperature)
        del model
        gc.collect()
        torch._dynamo.reset()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    result["comparison"] = _comparison(result)
    _report(result)
    write_json(args.json, result)
    return result


def _report(result: dict) -> None:
    m, n = result["minivllm"], result["settings"]["num_requests"]
    rows = [["minivllm", m["output_tokens"], m["wall_s"], m["output_tok_s"], f"{m['finished_requests']}/{n}"]]
    y = result.get("minivllm_sync")
    if y is not None:
        rows.append(["minivllm, async scheduling off", y["output_tokens"], y["wall_s"], y["output_tok_s"],
                     f"{y['finished_requests']}/{n}"])
    lp = result.get("minivllm_logprobs")
    if lp is not None:
        rows.append([f"minivllm, logprobs={result['settings']['logprobs']}", lp["output_tokens"], lp["wall_s"],
                     lp["output_tok_s"], f"{lp['finished_requests']}/{n}"])
    h, s = result.get("hf_continuous_batching"), result.get("hf_static_batch")
    if h is not None:
        rows.append(["hf continuous batching" + (" (capped)" if h.get("capped") else ""),
                     h.get("output_tokens"), h.get("wall_s"), h.get("output_tok_s"),
                     h["error"][:40] if "error" in h else f"{h['finished_requests']}/{n}"])
    if s is not None:
        ok = "error" not in s
        rows.append([f"hf static batch {s['batch']}x{s['new_tokens']}" if ok else "hf static batch",
                     s["batch"] * s["new_tokens"] if ok else None, s.get("wall_s"), s.get("output_tok_s"),
                     f"{s['batch']}/{s['batch']}" if ok else s["error"][:40]])
    print_table("Throughput", ["system", "output tokens", "wall s", "output tok/s", "finished"], rows)
    print_table("minivllm: per-request latency (s)", ["metric", "p50", "p90", "p99"],
                [[k, *m[f"{k}_s"].values()] for k in ("ttft", "tpot")], spec=".4f")
    print_table("minivllm: steps", ["steps/s", "mean batch (seqs)", "mean batch (tokens)", "prefill time",
                                    "decode time", "prefill steps", "decode steps", "preemptions"],
                [[m["steps_per_s"], m["mean_batch_seqs"], m["mean_batch_tokens"],
                  _pct(m["prefill_time_frac"]), _pct(m["decode_time_frac"]), m["prefill_steps"],
                  m["decode_steps"], m["preemptions"]]])
    print_table("minivllm: where a decode step's time goes (ms per step)",
                ["async scheduling", "wall / decode step", "GPU / decode step", "CPU / step", "CPU waits / step",
                 "schedule", "prepare+launch", "process tokens"],
                [[str(x["async_scheduling"]), x["decode_wall_ms_per_step"], x["decode_gpu_ms_per_step"],
                  x["cpu_ms_per_step"], x["wait_ms_per_step"], *x["cpu_ms_per_step_parts"].values()]
                 for x in (m, y) if x is not None], spec=".3f")
    for key, label in (("correctness", ""), ("correctness_fp32", ", same check in fp32")):
        if key in result:
            c = result[key]
            print(f"\nCorrectness (greedy, batched vs one by one{label}): {c['matching']}/{c['requests']} "
                  f"requests have identical first {c['tokens_compared']} tokens "
                  f"(mean matching prefix {c['mean_matching_prefix']:.1f})")
    print(f"\nComparison: minivllm {m['output_tok_s']:,.0f} output tok/s")
    for name, ratio in result["comparison"]["minivllm_over"].items():
        print(f"  vs {name}: {result[name]['output_tok_s']:,.0f} tok/s, minivllm / {name} = {ratio:.2f}x")


def _comparison(result: dict) -> dict:
    """minivllm's output tok/s over each baseline's that ran (> 1: minivllm faster)."""
    ours = result["minivllm"]["output_tok_s"]
    over = {}
    for name in ("hf_continuous_batching", "hf_static_batch", "minivllm_sync", "minivllm_logprobs"):
        theirs = (result.get(name) or {}).get("output_tok_s")
        if theirs:
            over[name] = ours / theirs
    return {"output_tok_s": ours, "minivllm_over": over}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"
