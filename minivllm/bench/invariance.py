"""`minivllm bench invariance`: does a request get the same numbers alone and in a batch? The default engine
against batch_invariant=True, in the same run.

(a) greedy tokens of N prompts batched vs one by one: how many are identical, where the others part;
(b) the sampled tokens' logprobs of one prompt at batch 1 vs inside a batch of B (the other B-1 prompts of
    other lengths): how many are bitwise equal and the largest |gap|, the check of vLLM's
    tests/v1/determinism/test_batch_invariance.py
    (https://github.com/vllm-project/vllm/blob/main/tests/v1/determinism/test_batch_invariance.py);
(c) what it costs: TPOT at batch 1 and B, and output tokens/s at batch B (bench latency's measurement).
"""

from __future__ import annotations

import torch

from minivllm import LLM, SamplingParams
from minivllm.bench.common import (engine_kwargs, free_engine, model_dir, print_table, provenance, str_list,
                                   write_json)
from minivllm.bench.latency import measure


def _prompts(n: int, lengths: tuple[int, int], high: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(lengths[0], lengths[1] + 1, (n,), generator=g).tolist()
    return [{"prompt_token_ids": torch.randint(0, high, (n_,), generator=g).tolist()} for n_ in lens]


def batched_vs_single(llm, prompts: list[dict], tokens: int) -> dict:
    sp = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
    batched = [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]
    single = [llm.generate([p], sp, use_tqdm=False)[0].outputs[0].token_ids for p in prompts]
    first = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None) for x, y in zip(batched, single)]
    return {"requests": len(prompts), "tokens": tokens, "identical": sum(f is None for f in first),
            "first_difference": first}


def logprobs_alone_vs_batch(llm, prompt: dict, others: list[dict], tokens: int) -> dict:
    """The sampled tokens' logprobs of `prompt` alone and as one of 1 + len(others); positions up to the first
    differing token are compared (past it the two runs condition on different text)."""
    sp = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, logprobs=1)

    def run(batch: list[dict]) -> tuple[list[int], list[float]]:
        out = llm.generate(batch, sp, use_tqdm=False)[0].outputs[0]
        return out.token_ids, [lp[t].logprob for t, lp in zip(out.token_ids, out.logprobs)]

    (t1, lp1), (tb, lpb) = run([prompt]), run([prompt] + others)
    n = next((i for i, (a, b) in enumerate(zip(t1, tb)) if a != b), len(t1))
    gaps = [abs(a - b) for a, b in zip(lp1[:n], lpb[:n])]
    return {"batch": 1 + len(others), "tokens": tokens, "tokens_identical": t1 == tb, "compared": n,
            "bitwise_equal": sum(g == 0.0 for g in gaps), "max_abs_gap": max(gaps, default=0.0)}


def main(args) -> dict:
    path = model_dir(args)
    result: dict = {"provenance": provenance(args, path), "modes": {}}
    B, L = args.batch, args.input_len
    for mode in str_list(args.modes):
        llm = LLM(**engine_kwargs(args, batch_invariant=mode == "batch_invariant"))
        high = llm.engine_vocab
        prompts = _prompts(args.num_prompts, (L // 2, L), high, seed=1)
        pool = _prompts(B, (L // 2, L), high, seed=2)
        result["modes"][mode] = {
            "batch_invariant": llm.config.batch_invariant, "cudagraph_mode": str(llm.config.cudagraph_mode),
            "batched_vs_single": batched_vs_single(llm, prompts, args.check_tokens),
            "logprobs": logprobs_alone_vs_batch(llm, pool[0], pool[1:], args.check_tokens),
            "latency": {str(b): measure(llm, b, L, args.output_len, high) for b in (1, B)},
        }
        free_engine(llm)
    _report(result, B)
    write_json(args.json, result)
    return result


def _report(result: dict, B: int) -> None:
    rows = []
    for mode, m in result["modes"].items():
        a, lp, lat = m["batched_vs_single"], m["logprobs"], m["latency"]
        rows.append([mode, f"{a['identical']}/{a['requests']}", f"{lp['bitwise_equal']}/{lp['compared']}",
                     lp["max_abs_gap"], lat["1"]["tpot_s"] * 1e3, lat[str(B)]["tpot_s"] * 1e3,
                     lat[str(B)]["output_tok_s"]])
    print_table(f"Batch invariance: greedy batched vs one by one, logprobs at batch 1 vs {B}, and the cost",
                ["mode", "identical", "logprobs bitwise", "max |gap|", "TPOT b1 ms", f"TPOT b{B} ms",
                 f"tok/s b{B}"], rows, spec=".4g")
