"""`make demo`: the embedded model answers checkable questions, then the engine's modes race on this machine.

The answers are judged by a program (minivllm.tools.tiny_task.check), so "is the output right?" has a
yes/no answer. The table then shows the modes this machine has: eager and torch.compile everywhere, CUDA
graphs (FULL and piecewise) only on a GPU. The engines' INFO lines (startup, memory, capture) appear only with
`--verbose` (or MINIVLLM_DEMO_VERBOSE=1): without it a progress bar runs while the engines start and the table
stands alone, with a footnote written for the device it ran on.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from pathlib import Path

import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.tools import tiny_task


def _tokens_per_s(llm: LLM) -> float:
    prompts = [p for p, _ in tiny_task.make_examples(16, seed=1, split="test")]
    params = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - t0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The demo's flags (the `minivllm demo` subcommand and `python -m minivllm.demo`)."""
    p.add_argument("--skip-modes", action="store_true", help="only the generation part")
    p.add_argument("--verbose", action="store_true", help="show the engines' INFO log lines")


def verbose(args: argparse.Namespace) -> bool:
    return args.verbose or os.environ.get("MINIVLLM_DEMO_VERBOSE", "") not in ("", "0")


def footnote(cuda: bool, device: str, n_params: int) -> str:
    """What the table means on the device it ran on."""
    size = f"{n_params / 1e6:.1f}M-parameter" if n_params else "tiny"
    if not cuda:
        return (f"  (16 prompts x 32 tokens on a CPU: a {size} model is bound by Python overhead and there are no "
                f"CUDA graphs, so the GPU figures in assets/results/h200/ are the ones that teach)")
    return (f"  (16 prompts x 32 tokens on {device}: a {size} model gives the GPU almost no work per kernel, so "
            f"each step is bound by launching kernels, which is what CUDA graphs remove and compilation alone "
            f"does not. A real-size model: assets/results/h200/latency.json, or your GPU's records after "
            f"`make labs-record`)")


def _params(model: str) -> int:
    """Parameters in the checkpoint's safetensors files (0 if they cannot be read)."""
    from safetensors import safe_open

    n = 0
    try:
        for f in Path(model).glob("*.safetensors"):
            with safe_open(str(f), "pt") as st:
                n += sum(math.prod(st.get_slice(k).get_shape()) for k in st.keys())  # noqa: SIM118 (not a dict)
    except OSError:
        return 0
    return n


def main(args: argparse.Namespace) -> int:
    model = DEFAULT_MODEL
    if not verbose(args):  # the engines' startup lines would bury the table
        from minivllm.logger import init_logger

        init_logger().setLevel(logging.WARNING)
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
    if args.skip_modes:
        return 0
    cuda = torch.cuda.is_available()
    modes = [("eager", dict(enforce_eager=True)),
             ("torch.compile (mode 3)", dict(enforce_eager=False, cudagraph_mode="NONE",
                                             compilation_config={"mode": 3}))]
    if cuda:  # mode 0 has no split trace, so its graphs are FULL_DECODE_ONLY (as in vLLM)
        modes += [("CUDA graphs (mode 0, FULL_DECODE_ONLY)", dict(enforce_eager=False, compilation_config={"mode": 0})),
                  ("default: mode 3 + FULL_AND_PIECEWISE", dict(enforce_eager=False))]
    device = torch.cuda.get_device_name() if cuda else ""
    where = f"CUDA: {device}" if cuda else "CPU, no CUDA graphs"
    rows = []
    from tqdm.auto import tqdm

    bar = tqdm(modes, desc="starting engines", unit="engine", file=sys.stderr, leave=False,
               disable=verbose(args))
    for name, kw in bar:
        bar.set_postfix_str(name)
        m = LLM(model, **kw)
        rows.append((name, _tokens_per_s(m)))
        m.shutdown()
        del m
    bar.close()
    print(f"\n== Modes on this machine ({where}) ==")
    print(f"  {'mode':<40}{'output tok/s':>14}{'vs eager':>10}")
    base = rows[0][1]
    for name, tps in rows:
        print(f"  {name:<40}{tps:>14.1f}{tps / base:>9.2f}x")
    print(footnote(cuda, device, _params(model)))
    return 0


if __name__ == "__main__":
    _p = argparse.ArgumentParser(prog="python -m minivllm.demo", description=__doc__.splitlines()[0])
    add_arguments(_p)
    raise SystemExit(main(_p.parse_args()))
