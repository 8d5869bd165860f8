"""Do the Triton kernels and the PyTorch reference give the same greedy tokens end to end?

Runs the same prompts through two engines that differ only in attention_backend and reports, per prompt,
whether the first N tokens match and where they first diverge. In bf16 an early divergence on random
weights is usually a near-tie flipped by rounding (the kernels accumulate in a different order), so the
report gives where each pair first diverges (late and rare: rounding; early or everywhere: a kernel bug).

To tell the two apart, every divergence is re-scored in fp32 with transformers on the common prefix: the
logit gap between the two tokens the backends chose. A gap far below bf16's resolution of a logit (about
2^-8 of its size) means the reference itself cannot separate them: a near-tie, not a bug.

    python scripts/maint/backends_check.py [--model DIR] [--dtype bfloat16] [--json backends.json]

A check run when an attention kernel changes (its H200 record: assets/results/h200/backends.json), not part
of the engine; tests/engine/test_bench.py runs it on a CPU.
"""

from __future__ import annotations

import argparse
import sys

import torch

from minivllm.bench.common import free_engine, print_table, provenance, random_prompts, write_json


def main(args: argparse.Namespace) -> dict:
    from minivllm import DEFAULT_MODEL, LLM, SamplingParams

    model = DEFAULT_MODEL if args.model is None else args.model
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
    if args.dtype != "float32" and any(not r["identical"] for r in rows):
        _score_divergences(model, prompts, runs, rows)
    print_table(f"triton vs torch attention, greedy, first {args.num_tokens} tokens ({args.dtype}): "
                f"{matched}/{len(rows)} identical", ["prompt", "identical", "first divergence",
                 "fp32 logit gap (triton vs torch token)", "fp32 gap top1-top2 (typical)"],
                [[r["prompt"], r["identical"], r["first_divergence"], r.get("fp32_gap"), r.get("fp32_top1_gap")]
                 for r in rows])
    result = {"bench": "backends", "provenance": provenance(args, model), "rows": rows, "identical": matched,
              "prompts": len(rows), "tokens": args.num_tokens, "dtype": args.dtype}
    write_json(args.json, result)
    return result


@torch.no_grad()
def _score_divergences(model: str, prompts: list[dict], runs: dict, rows: list[dict]) -> None:
    """fp32 transformers on prompt + common prefix: |logit(triton's token) - logit(torch's token)|, and for
    scale, the mean top-1 minus top-2 gap over all the positions scored."""
    from minivllm.bench.common import maint_script
    from minivllm.config import resolve_device

    hf_baseline = maint_script("hf_baseline")

    hf = hf_baseline.load(model, torch.float32, resolve_device("auto"))
    for r in rows:
        j = r["first_divergence"]
        if j is None:
            continue
        a, b = runs["triton"][r["prompt"]], runs["torch"][r["prompt"]]
        ids = torch.tensor([prompts[r["prompt"]]["prompt_token_ids"] + a[:j]], device=hf.device)
        logits = hf(ids).logits[0].float()
        r["fp32_gap"] = abs(logits[-1, a[j]] - logits[-1, b[j]]).item()
        top2 = logits[-j - 1:].topk(2, dim=-1).values  # the generated positions of the common prefix
        r["fp32_top1_gap"] = (top2[:, 0] - top2[:, 1]).mean().item()
        r["fp32_choice"] = "triton" if logits[-1, a[j]] > logits[-1, b[j]] else "torch"
    del hf


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a checkpoint directory (default: the embedded model)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--num-tokens", type=int, default=32)
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args(sys.argv[1:]))
