"""`minivllm bench invariance`: the default engine against batch_invariant=True, in one run.

(a) 16 prompts' greedy tokens batched vs one by one (bench throughput's check); (b) one prompt's sampled-token
logprobs alone vs in a batch of B, bitwise, as vLLM's tests/v1/determinism/test_batch_invariance.py checks
(https://github.com/vllm-project/vllm/blob/v0.33.0/tests/v1/determinism/test_batch_invariance.py); (c) the cost:
TPOT at batch 1 and B, output tok/s at B (bench latency's measurement).
"""

from __future__ import annotations

import torch

from minivllm import LLM, SamplingParams
from minivllm.bench.common import engine_kwargs, free_engine, model_dir, print_table, provenance, str_list, write_json
from minivllm.bench.latency import measure
from minivllm.bench.throughput import CHECK_REQUESTS, check_correctness


def _prompts(n: int, max_len: int, high: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, high, (k,), generator=g).tolist()
            for k in torch.randint(max_len // 2, max_len + 1, (n,), generator=g).tolist()]


def logprobs_alone_vs_batch(llm, prompts: list[list[int]], tokens: int = 32) -> dict:
    """prompts[0]'s logprobs alone, then with the others; compared up to the first differing token."""
    sp = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, logprobs=1)

    def run(batch):
        out = llm.generate([{"prompt_token_ids": p} for p in batch], sp, use_tqdm=False)[0].outputs[0]
        return out.token_ids, [lp[t].logprob for t, lp in zip(out.token_ids, out.logprobs)]

    (t1, lp1), (tb, lpb) = run(prompts[:1]), run(prompts)
    n = next((i for i, (a, b) in enumerate(zip(t1, tb)) if a != b), len(t1))
    gaps = [abs(a - b) for a, b in zip(lp1[:n], lpb[:n])]
    return {"batch": len(prompts), "compared": n, "bitwise_equal": gaps.count(0.0), "max_abs_gap": max(gaps)}


def main(args) -> dict:
    path, B, L = model_dir(args), args.batch, args.input_len
    result: dict = {"provenance": provenance(args, path), "modes": {}}
    for mode in str_list(args.modes):
        llm = LLM(**engine_kwargs(args, batch_invariant=mode == "batch_invariant"))
        high = llm.engine_vocab
        result["modes"][mode] = m = {"batch_invariant": llm.config.batch_invariant,
                                     "cudagraph_mode": str(llm.config.cudagraph_mode)}
        m["batched_vs_single"] = check_correctness(llm, _prompts(CHECK_REQUESTS, L, high, seed=1))
        m["logprobs"] = logprobs_alone_vs_batch(llm, _prompts(B, L, high, seed=2))
        m["latency"] = {str(b): measure(llm, b, L, args.output_len, high) for b in (1, B)}
        free_engine(llm)
    rows = [[mode, f"{m['batched_vs_single']['matching']}/{CHECK_REQUESTS}",
             f"{m['logprobs']['bitwise_equal']}/{m['logprobs']['compared']}", m["logprobs"]["max_abs_gap"],
             m["latency"]["1"]["tpot_s"] * 1e3, m["latency"][str(B)]["tpot_s"] * 1e3,
             m["latency"][str(B)]["output_tok_s"]] for mode, m in result["modes"].items()]
    print_table(f"Batch invariance: greedy batched vs one by one, logprobs at batch 1 vs {B}, and the cost",
                ["mode", "identical", "logprobs bitwise", "max |gap|", "TPOT b1 ms", f"TPOT b{B} ms",
                 f"tok/s b{B}"], rows, spec=".4g")
    write_json(args.json, result)
    return result
