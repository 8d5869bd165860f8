"""Do the Triton kernels and the PyTorch reference give the same greedy tokens end to end? (issue 4)

Runs the same prompts through two engines that differ only in attention_backend and reports, per prompt,
whether the first N tokens match and where they first diverge. In bf16 an early divergence on random
weights is usually a near-tie flipped by rounding (the kernels accumulate in a different order), so the
report gives where each pair first diverges (late and rare: rounding; early or everywhere: a kernel bug).
"""

from __future__ import annotations

import argparse

import torch

from minivllm.bench.common import free_engine, print_table, provenance, random_prompts, write_json


def main(args: argparse.Namespace) -> dict:
    from minivllm import DEFAULT_MODEL, LLM, SamplingParams

    model = args.model or DEFAULT_MODEL
    params = SamplingParams(temperature=0, max_tokens=args.num_tokens, ignore_eos=True)
    runs = {}
    for backend in ("triton", "torch"):
        llm = LLM(model, dtype=args.dtype, attention_backend=backend, enforce_eager=True, max_model_len=256,
                  max_num_seqs=16, max_num_batched_tokens=256, gpu_memory_utilization=0.5)
        if not runs:
            vocab = min(llm.engine.model_config.vocab_size, 10_000)
            prompts = [{"prompt_token_ids": p} for p in random_prompts(args.num_prompts, 64, vocab, seed=0)]
        runs[backend] = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
        free_engine(llm)
    rows = []
    for i, (a, b) in enumerate(zip(runs["triton"], runs["torch"])):
        first = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
        rows.append({"prompt": i, "identical": first is None, "first_divergence": first})
    matched = sum(r["identical"] for r in rows)
    print_table(f"triton vs torch attention, greedy, first {args.num_tokens} tokens ({args.dtype}): "
                f"{matched}/{len(rows)} identical", ["prompt", "identical", "first divergence"],
                [[r["prompt"], r["identical"], r["first_divergence"]] for r in rows])
    result = {"bench": "backends", "provenance": provenance(args, model), "rows": rows, "identical": matched,
              "prompts": len(rows), "tokens": args.num_tokens, "dtype": args.dtype}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--dtype", default="bfloat16" if torch.cuda.is_available() else "float32")
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--num-tokens", type=int, default=32)
    p.add_argument("--json", default=None)
    main(p.parse_args())
