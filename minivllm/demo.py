"""`make demo`: the embedded model answers checkable questions, then the engine's modes race on this machine.

The answers are judged by a program (minivllm.tools.tiny_task.check), so "is the output right?" has a
yes/no answer. The table then shows the modes this machine has: eager and torch.compile everywhere, CUDA
graphs (FULL and piecewise) only on a GPU.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.tools import tiny_task


def _tokens_per_s(llm: LLM, n_prompts: int = 16, max_tokens: int = 32) -> float:
    prompts = [p for p, _ in tiny_task.make_examples(n_prompts, seed=1, split="test")]
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - t0)


def main(args: argparse.Namespace | None = None) -> int:
    model = DEFAULT_MODEL
    if not Path(model).is_dir():
        raise SystemExit(f"the embedded model is missing at {model}; retrain it with "
                         f"`python scripts/maint/train_tiny.py --out {model}`")
    llm = LLM(model, enforce_eager=True)
    greedy = SamplingParams(temperature=0, max_tokens=16)
    outs = llm.generate(tiny_task.DEMO_PROMPTS, greedy, use_tqdm=False)
    print("\n== The embedded model (greedy) ==")
    right = 0
    for o in outs:
        ok = tiny_task.check(o.prompt, o.outputs[0].text)
        right += ok
        verdict = "right" if ok else f"WRONG (expected {tiny_task.answer(o.prompt)})"
        print(f"  {o.prompt:<28} -> {o.outputs[0].text.strip():<14} {verdict}")
    print(f"  {right}/{len(outs)} right")
    if args is not None and getattr(args, "skip_modes", False):
        return 0
    cuda = torch.cuda.is_available()
    modes = [("eager", dict(enforce_eager=True)),
             ("torch.compile (mode 3)", dict(enforce_eager=False, cudagraph_mode="NONE",
                                             compilation_config={"mode": 3}))]
    if cuda:  # mode 0 has no split trace, so its graphs are FULL_DECODE_ONLY (as in vLLM)
        modes += [("CUDA graphs (mode 0, FULL_DECODE_ONLY)", dict(enforce_eager=False, compilation_config={"mode": 0})),
                  ("default: mode 3 + FULL_AND_PIECEWISE", dict(enforce_eager=False))]
    where = f"CUDA: {torch.cuda.get_device_name()}" if cuda else "CPU, no CUDA graphs"
    print(f"\n== Modes on this machine ({where}) ==")
    print(f"  {'mode':<36}{'output tok/s':>14}{'vs eager':>10}")
    base = None
    for name, kw in modes:
        m = LLM(model, **kw)
        tps = _tokens_per_s(m)
        base = base or tps
        print(f"  {name:<36}{tps:>14.1f}{tps / base:>9.2f}x")
        del m
    print("  (16 prompts x 32 tokens; a tiny model on a CPU is bound by Python overhead, so the GPU figures in "
          "assets/results/h200/ are the ones that teach)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
