"""`minivllm bench latency`: TTFT and TPOT per batch size, eager vs CUDA-graph modes, vs transformers.

Why: at small batch a decode step is bound by the CPU launching kernels one by one, not by the GPU; CUDA
graphs replay the whole step with one launch. This bench shows how much that buys, per graph mode and batch
size, next to transformers' eager `generate` and its static-cache + torch.compile recipe, run in the same
process on the same checkpoint and prompts.

Rows are labelled by what ran: a graph mode that could not run (no CUDA, or FULL without the Triton
attention backend) is shown as the mode that did, with the reason, and a duplicate of a mode already
measured is skipped. The end prints the batch-1 comparison with hf-compile and the graph memory pool.

    minivllm bench latency --model .ckpt/qwen3-0.6b --compare hf,hf-compile --json latency.json
"""

from __future__ import annotations

import gc
import json
import statistics

import torch
from tqdm.auto import tqdm

from minivllm.bench.common import (
    engine_kwargs,
    fmt,
    free_engine,
    int_list,
    jsonable,
    maint_script,
    model_dir,
    print_table,
    provenance,
    random_prompts,
    str_list,
    timed,
    try_baseline,
    write_json,
)
from minivllm.sampling_params import SamplingParams

# A mode may end in @L<level> ("FULL@L3") and in +sync or +async ("FULL@L2+sync": async scheduling off).
GRAPH_MODES = ("NONE", "FULL", "FULL_DECODE_ONLY", "PIECEWISE", "FULL_AND_PIECEWISE")
BASELINES = ("hf", "hf-compile")


def _as_prompts(ids: list[list[int]]) -> list[dict]:
    return [{"prompt_token_ids": p} for p in ids]


PROMPT_KINDS = ("random", "repeat")


def bench_prompts(kind: str, n: int, length: int, high: int, seed: int) -> list[list[int]]:
    """random: uniform token ids (nothing repeats: n-gram lookup finds no draft). repeat: each prompt a random
    run of REPEAT_PERIOD tokens repeated to `length` (copying, lists, code edits: where lookup works)."""
    if kind == "random":
        return random_prompts(n, length, high, seed)
    runs = random_prompts(n, REPEAT_PERIOD, high, seed)
    return [(r * -(-length // REPEAT_PERIOD))[:length] for r in runs]


REPEAT_PERIOD = 16


def measure(llm, batch: int, input_len: int, output_len: int, high: int, logprobs: int | None = None,
            prompt_kind: str = "random") -> dict:
    """A warm-up batch (other prompts: no prefix-cache hits), then the measured batch of `batch` requests
    (each asking for `logprobs` top alternatives per token, if given). Under speculative decoding the row also
    has the measured batch's acceptance counters (vLLM's)."""
    greedy = dict(temperature=0.0, ignore_eos=True, logprobs=logprobs)
    warm = bench_prompts(prompt_kind, batch, input_len, high, seed=10_000 + batch)
    llm.generate(_as_prompts(warm), SamplingParams(max_tokens=min(output_len, 16), **greedy), use_tqdm=False)
    disp = llm.model_runner.cudagraph_dispatcher
    before = dict(disp.counts)
    st0 = dict(llm.model_runner.step_stats)
    llm.spec_decoding_stats(reset=True)
    prompts = _as_prompts(bench_prompts(prompt_kind, batch, input_len, high, seed=batch))
    outs, wall = timed(lambda: llm.generate(prompts, SamplingParams(max_tokens=output_len, **greedy),
                                            use_tqdm=False))
    spec = llm.spec_decoding_stats()
    steps = {k: v - before[k] for k, v in disp.counts.items()}
    tpots = [o.metrics.tpot for o in outs if o.metrics.tpot is not None]
    graph_steps = steps["full"] + steps["piecewise"]
    st = {k: v - st0[k] for k, v in llm.model_runner.step_stats.items()}
    n_dec = max(st["decode_steps"], 1)
    return {"decode_wall_ms_per_step": st["decode_time"] / n_dec * 1e3,
            "decode_gpu_ms_per_step": st["decode_gpu_time"] / n_dec * 1e3 if torch.cuda.is_available() else None,
            "ttft_s": statistics.mean(o.metrics.ttft for o in outs),
            "tpot_s": statistics.mean(tpots) if tpots else None,
            "output_tok_s": sum(len(o.outputs[0].token_ids) for o in outs) / wall, "wall_s": wall,
            "graph_step_frac": graph_steps / max(sum(steps.values()), 1), "dispatch_counts": steps,
            **({} if spec is None else {
                "num_speculative_tokens": spec.num_spec_tokens, "acceptance_rate": spec.acceptance_rate,
                "mean_acceptance_length": spec.mean_acceptance_length, "num_drafts": spec.num_drafts,
                "num_draft_tokens": spec.num_draft_tokens, "num_accepted_tokens": spec.num_accepted_tokens,
                "num_accepted_tokens_per_pos": spec.num_accepted_tokens_per_pos})}


def spec_variants(args) -> list[int | None]:
    """The speculation settings each mode runs with: None (off) and the --speculative-config's k, or every k
    of --spec-tokens (0: off); [None] without --speculative-config."""
    if not args.speculative_config:
        return [None]
    from minivllm.config import SpeculativeConfig

    k = SpeculativeConfig.from_any(args.speculative_config).num_speculative_tokens
    ks = int_list(args.spec_tokens) if args.spec_tokens else [0, k]
    return [k or None for k in ks]


def spec_config(args, k: int | None) -> dict | None:
    """--speculative-config with num_speculative_tokens k (None: speculation off)."""
    if k is None:
        return None
    from dataclasses import asdict

    from minivllm.config import SpeculativeConfig

    return {**asdict(SpeculativeConfig.from_any(args.speculative_config)), "num_speculative_tokens": k}


def parse_mode(mode: str) -> tuple[str, int | None, bool | None]:
    """"FULL@L2+sync" -> ("FULL", 2, False): graph mode (or eager), compile level, async scheduling."""
    rest, _, sched = mode.partition("+")
    graph_mode, _, level = rest.partition("@L")
    if graph_mode not in ("eager", *GRAPH_MODES) or level not in ("", "0", "1", "2", "3") \
            or sched not in ("", "sync", "async"):
        raise ValueError(f"--modes: unknown mode {mode!r}; use eager or {', '.join(GRAPH_MODES)}, optionally "
                         f"followed by @L<0-3> (compile level) and +sync/+async (async scheduling)")
    return graph_mode, int(level) if level else None, {"": None, "sync": False, "async": True}[sched]


def with_level(compilation_config: str | dict | None, level: int) -> dict:
    """The command line's --compilation-config (JSON) with a mode's @L<level> on top (custom_ops etc. kept).
    Options a level does not have are dropped for it, so one run can set them for its level-3 modes and
    still compare against graphs alone: compile_sizes (level 3 only), inductor_compile_config (level >= 1)."""
    cc = json.loads(compilation_config) if isinstance(compilation_config, str) else dict(compilation_config or {})
    if level != 3:
        cc.pop("compile_sizes", None)
    if level == 0:
        cc.pop("inductor_compile_config", None)
    cc.pop("level", None)
    return {**cc, "mode": level}


def engine_for_mode(args, mode: str, **overrides):
    """An LLM for a mode string ("eager", "FULL", "FULL@L2+sync", ...) on top of the command line's settings."""
    from minivllm import LLM

    graph_mode, level, async_sched = parse_mode(mode)
    eager = graph_mode == "eager"
    extra = {"compilation_config": with_level(args.compilation_config, level)} if level is not None else {}
    if async_sched is not None:
        extra["async_scheduling"] = async_sched
    return LLM(**engine_kwargs(args, enforce_eager=eager, cudagraph_mode=None if eager else graph_mode,
                               **extra, **overrides))


def ran_as(llm, mode: str) -> tuple[str, str | None]:
    """The label of what an engine built for `mode` really runs, and why it differs (None: it does not).

    On a CPU no CUDA graph is captured, and FULL graphs need the Triton attention backend; a row labelled
    FULL that ran eagerly would compare eager with eager under another name."""
    graph_mode = parse_mode(mode)[0]
    suffix = mode[len(graph_mode):]  # "@L2+sync" and the like stay as asked
    if graph_mode in ("eager", "NONE"):
        return mode, None
    cfg = llm.config
    if cfg.cudagraph_mode == "NONE":
        why = f"CUDA graphs are unavailable on {cfg.device.type}" + (
            "" if torch.cuda.is_available() else " (no CUDA)")
        return "eager" + suffix, why
    if cfg.cudagraph_downgrade:  # e.g. PIECEWISE at mode 0 (no split trace): vLLM's downgrade, logged at startup
        return cfg.cudagraph_mode.value + suffix, cfg.cudagraph_downgrade
    return mode, None


def _gemv_configs() -> dict:
    """The GEMV block sizes autotuned so far in this process ({} without Triton or off the GPU)."""
    try:
        from minivllm.kernels import triton_gemv
    except ImportError:
        return {}
    return triton_gemv.autotuned_configs()


def _graph_pool_mib(cudagraph: dict) -> float | None:
    """Memory the captured graphs hold, from the startup report: the allocator's segments of the one pool
    FULL and PIECEWISE share, read after the last capture; where that is unknown, the sum of the device
    free-memory drops around each mode's captures (which moves with whatever else the process does)."""
    held = [cudagraph[k].get("pool_mib") for k in ("FULL", "PIECEWISE") if k in cudagraph]
    if held and all(v for v in held):
        return max(held)
    return _free_memory_drop_mib(cudagraph)


def _free_memory_drop_mib(cudagraph: dict) -> float | None:
    parts = [cudagraph[k]["total_mib"] for k in ("FULL", "PIECEWISE") if k in cudagraph]
    return sum(parts) if parts else None


def main(args) -> dict:
    path = model_dir(args)
    batch_sizes, modes, compare = int_list(args.batch_sizes), str_list(args.modes), str_list(args.compare)
    hf_sizes = [b for b in int_list(args.hf_batch_sizes) if b in batch_sizes]
    for m in modes:
        parse_mode(m)
    for c in compare:
        if c not in BASELINES:
            raise ValueError(f"--compare: unknown baseline {c!r}; choose from {', '.join(BASELINES)}")
    from minivllm.config import resolve_device, resolve_dtype
    from minivllm.kernels import gemv_configs
    from minivllm.loader import check_model_dir, load_model_config

    mcfg = load_model_config(check_model_dir(path))
    high = min(mcfg.vocab_size, 10_000)
    max_len = max(args.max_model_len or 0, args.input_len + args.output_len)
    max_seqs = max(args.max_num_seqs, max(batch_sizes))
    result = {"bench": "latency", "provenance": provenance(args, path), "modes": {}, "rows": [],
              "settings": {"batch_sizes": batch_sizes, "input_len": args.input_len,
                           "output_len": args.output_len, "hf_batch_sizes": hf_sizes,
                           "max_num_seqs": max_seqs, "max_model_len": max_len}}
    variants = spec_variants(args)
    if args.prompt_kind not in PROMPT_KINDS:
        raise ValueError(f"--prompt-kind must be one of {PROMPT_KINDS}, got {args.prompt_kind!r}")
    result["settings"]["prompt_kind"] = args.prompt_kind
    if variants != [None]:
        result["settings"]["speculative"] = {"config": spec_config(args, max(k or 0 for k in variants) or None),
                                             "num_speculative_tokens": [k or 0 for k in variants]}
        print(f"speculative decoding: k = {', '.join(str(k or 0) for k in variants)} per mode (0: off); "
              f"prompts: {args.prompt_kind}")
    bar = tqdm(total=len(modes) * len(variants) * len(batch_sizes) + len(compare) * len(hf_sizes), desc="latency")
    for mode, k in ((m, k) for m in modes for k in variants):  # one engine per mode and k, across batch sizes
        if k is not None and mode.endswith("+sync") and mode.removesuffix("+sync") in modes:
            bar.update(len(batch_sizes))  # speculation runs without async scheduling: measured under the mode
            continue
        bar.set_description(f"latency: starting {mode}")
        llm = engine_for_mode(args, mode, max_num_seqs=max_seqs, max_model_len=max_len,
                              speculative_config=spec_config(args, k))
        asked, (mode, why) = mode, ran_as(llm, mode)
        if k is not None:
            asked, mode = f"{asked}+ngram(k={k})", f"{mode}+ngram(k={k})"
        if why is not None:
            result.setdefault("not_run_as_asked", []).append({"asked": asked, "ran": mode, "why": why})
            print(f"\n--modes {asked}: runs as {mode}: {why}")
        if mode in result["modes"]:  # the same engine as a mode already measured
            print(f"--modes {asked}: skipped, {mode} is measured already")
            bar.update(len(batch_sizes))
            free_engine(llm)
            del llm
            continue
        rep = jsonable(llm.startup_report().as_dict())
        result["modes"][mode] = {"asked": asked, "cudagraph_mode": llm.config.cudagraph_mode,
                                 "compile_level": rep["compile"].get("mode", 0),
                                 "attention_backend": llm.config.attention_backend,
                                 "async_scheduling": llm.config.async_scheduling,
                                 "speculative_config": spec_config(args, k),
                                 "uniform_decode_query_len": llm.config.uniform_decode_query_len,
                                 "dtype": str(llm.config.dtype).removeprefix("torch."),
                                 "capture_sizes": rep["cudagraph"].get("capture_sizes", []),
                                 "graph_pool_mib": _graph_pool_mib(rep["cudagraph"]),
                                 "graph_free_memory_drop_mib": _free_memory_drop_mib(rep["cudagraph"]), "startup": rep}
        for b in batch_sizes:
            bar.set_description(f"latency: {mode} batch {b}")
            result["rows"].append({"system": mode, "batch": b,
                                   **measure(llm, b, args.input_len, args.output_len, high,
                                             prompt_kind=args.prompt_kind)})
            if args.logprobs is not None:  # the same engine right after: an A/B of logprobs off vs on
                result["rows"].append({"system": f"{mode}+logprobs={args.logprobs}", "batch": b, **measure(
                    llm, b, args.input_len, args.output_len, high, args.logprobs, args.prompt_kind)})
            bar.update(1)
        result["modes"][mode]["compile_report"] = jsonable(llm.compile_report())  # breaks, recompiles
        picks = _gemv_configs()  # the picks move batch-1 TPOT; source: autotune, this GPU's file or the env
        result["modes"][mode]["gemv_configs"] = picks
        result["modes"][mode]["gemv_configs_source"] = gemv_configs.source() if picks else None
        free_engine(llm)
        del llm
    if compare and hf_sizes:
        hf_baseline = maint_script("hf_baseline")
        dev = resolve_device(args.device)
        model = hf_baseline.load(path, resolve_dtype(args.dtype, mcfg.torch_dtype, dev), dev)
        for kind in compare:
            for b in hf_sizes:
                bar.set_description(f"latency: {kind} batch {b}")
                prompts = random_prompts(b, args.input_len, high, seed=b)
                r = try_baseline(f"{kind} batch {b}", hf_baseline.generate_latency, model, prompts,
                                 args.output_len, static_compile=kind == "hf-compile")
                result["rows"].append({"system": kind, "batch": b, "ttft_s": None, "tpot_s": None,
                                       "output_tok_s": None, **r})
                bar.update(1)
        del model
        gc.collect()
        torch._dynamo.reset()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    bar.close()
    result["comparison"] = _report(result, list(result["modes"]), compare, batch_sizes, args)
    write_json(args.json, result)
    return result


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1e3


def _report(result: dict, modes: list[str], compare: list[str], batch_sizes: list[int], args) -> dict:
    rows = result["rows"]
    print_table("Latency per system and batch size (TTFT: mean over requests; TPOT: mean of per-request)",
                ["system", "batch", "TTFT ms", "TPOT ms", "out tok/s", "graph steps", "decode step ms",
                 "GPU ms/step"],
                [[r["system"], r["batch"], _ms(r["ttft_s"]), _ms(r["tpot_s"]), r["output_tok_s"],
                  f"{r['graph_step_frac']:.0%}" if "graph_step_frac" in r else "-",
                  r.get("decode_wall_ms_per_step"), r.get("decode_gpu_ms_per_step")] for r in rows])
    tpot = {(r["system"], r["batch"]): r["tpot_s"] for r in rows}
    best = {b: min(((tpot[m, b], m) for m in modes if tpot.get((m, b)) is not None), default=(None, None))
            for b in batch_sizes}
    summary = []
    for b in batch_sizes:
        line = [b] + [_ms(tpot.get((s, b))) for s in modes + compare] + [best[b][1]]
        for c in compare:
            line.append(tpot[c, b] / best[b][0] if tpot.get((c, b)) and best[b][0] else None)
        summary.append(line)
    print_table("TPOT ms per batch size; X/best = baseline TPOT / best minivllm TPOT (> 1: minivllm faster)",
                ["batch"] + modes + compare + ["best"] + [f"{c}/best" for c in compare], summary)
    pools = {m: info["graph_pool_mib"] for m, info in result["modes"].items()}
    print_table("Engine per mode (graph pool: the allocator's segments of the pool; free-memory drop: the device's "
                "free memory around the captures, which also moves with what else the process loads or frees)",
                ["mode", "cudagraph_mode", "compile level", "capture sizes", "graph pool MiB", "free-memory drop MiB"],
                [[m, i["cudagraph_mode"], i["compile_level"], len(i["capture_sizes"]), i["graph_pool_mib"],
                  i.get("graph_free_memory_drop_mib")] for m, i in result["modes"].items()])
    last = next(reversed(result["modes"].values()), {})
    picks = last.get("gemv_configs")
    if picks:  # process-wide: the last engine's list holds every shape tuned so far
        print_table(f"GEMV block sizes in use ({last.get('gemv_configs_source')}; fresh autotunes differ among "
                    "near-ties, and batch-1 TPOT follows the pick: assets/results/h200/gemv_autotune_spread.json)",
                    ["shape", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "LOOP_STAGES"],
                    [[k, c.get("BLOCK_N"), c.get("BLOCK_K"), c.get("num_warps"), c.get("num_stages"),
                      c.get("LOOP_STAGES", 1)] for k, c in picks.items()])

    graph_b1 = [(tpot[m, 1], m) for m in modes
                if parse_mode(m.partition("+ngram(")[0])[0] in ("FULL", "PIECEWISE", "FULL_AND_PIECEWISE")
                and tpot.get((m, 1)) is not None]
    b1, b1_mode = min(graph_b1) if graph_b1 else (None, None)
    hfc = tpot.get(("hf-compile", 1))
    measured = [v for m, v in pools.items() if v is not None]
    default_sizes = args.cudagraph_capture_sizes is None and args.max_cudagraph_capture_size is None
    comparison = {
        "batch1_graph_mode": b1_mode,
        "batch1_graph_tpot_ms": _ms(b1),
        "batch1_hf_compile_tpot_ms": _ms(hfc),
        "speedup_vs_hf_compile": hfc / b1 if hfc and b1 else None,
        "max_graph_pool_mib": max(measured) if measured else None,
        "default_capture_sizes": default_sizes,
    }
    if any("acceptance_rate" in r for r in rows):
        comparison["speculative"] = _spec_report(result, modes, batch_sizes)
    print("\nComparison:")
    if args.logprobs is not None:  # the A/B of each batch measured without and with logprobs=K
        lp = f"+logprobs={args.logprobs}"
        comparison["logprobs_tpot_ratio"] = {m: {b: tpot[m + lp, b] / tpot[m, b] for b in batch_sizes
                                                 if tpot.get((m + lp, b)) and tpot.get((m, b))} for m in modes}
        for m, ratios in comparison["logprobs_tpot_ratio"].items():
            print(f"  {m}: TPOT with logprobs={args.logprobs} / without: "
                  + ", ".join(f"batch {b} {r:.3f}x" for b, r in ratios.items()))
    if b1 is None:
        print("  batch 1 with CUDA graphs: not measured (no graph mode ran at batch 1)")
    else:
        print(f"  batch-1 TPOT, {b1_mode}: {fmt(comparison['batch1_graph_tpot_ms'], '.3f')} ms; hf-compile: "
              f"{fmt(comparison['batch1_hf_compile_tpot_ms'], '.3f')} ms; hf-compile / minivllm = "
              f"{fmt(comparison['speedup_vs_hf_compile'], '.2f')}x")
    if measured:
        print(f"  graph memory pool: {max(measured):.1f} MiB for "
              f"{'the default' if default_sizes else 'the given'} capture sizes")
    return comparison


def _spec_report(result: dict, systems: list[str], batch_sizes: list[int]) -> dict:
    """TPOT with speculation against the same mode without it (k = 0), per batch size, with vLLM's acceptance
    counters: {mode: {batch: {k: {...}}}}, and its table."""
    rows = {(r["system"], r["batch"]): r for r in result["rows"]}
    out: dict = {}
    table = []
    for system in systems:
        base, _, spec = system.partition("+ngram(k=")
        k = int(spec.rstrip(")")) if spec else 0
        for b in batch_sizes:
            r, off = rows.get((system, b)), rows.get((base, b))
            if r is None:
                continue
            ratio = r["tpot_s"] / off["tpot_s"] if off and r["tpot_s"] and off["tpot_s"] else None
            sync = rows.get((base + "+sync", b))  # k = 0 without async scheduling, as speculation runs
            entry = {"tpot_ms": _ms(r["tpot_s"]), "tpot_vs_k0": ratio,
                     "tpot_vs_k0_sync": r["tpot_s"] / sync["tpot_s"] if spec and sync and r["tpot_s"]
                     and sync["tpot_s"] else None, "acceptance_rate": r.get("acceptance_rate"),
                     "mean_acceptance_length": r.get("mean_acceptance_length"),
                     "decode_step_ms": r.get("decode_wall_ms_per_step"),
                     "async_scheduling": result["modes"][system]["async_scheduling"]}
            out.setdefault(base, {}).setdefault(b, {})[k] = entry
            table.append([base, b, k, entry["tpot_ms"], ratio, entry["acceptance_rate"],
                          entry["mean_acceptance_length"], entry["decode_step_ms"], entry["async_scheduling"]])
    print_table(f"Speculative decoding (n-gram, {result['settings']['prompt_kind']} prompts): TPOT with / without "
                f"(k = 0) in this run; acceptance = accepted / draft tokens; mean acceptance length = 1 + "
                f"accepted / drafts", ["mode", "batch", "k", "TPOT ms", "vs k=0", "acceptance", "mean acc. len",
                                       "step ms", "async"], table)
    return out
