"""Which GPU path makes the chunked-prefill logprobs differ from transformers' fp32 reference.

    PYTHONPATH=.:labs python scripts/maint/chunked_logprobs_diag.py [--model qwen3-gqa2-d16] [--variants a,b]

Runs tests/engine/test_logprobs.py::test_logprobs_match_hf_with_chunked_prefill's generation (greedy) under
engine variants that each turn one GPU-only path off, and prints per step how it ran (eager, FULL or
PIECEWISE graph, padded size) and, per prompt, the error of each generated token's logprob and the largest
error of its prompt logprobs. The variant whose errors drop to ~1e-6 names the path; the step whose token
is wrong names the batch shape. The CPU passes the same checks, also with the Triton kernels forced on under
TRITON_INTERPRET=1 (real metadata, async, graph-size padding, compile mode 3), so what is left is GPU-only.

Suggested order on the GPU (a cold compile per distinct compilation_config costs ~10-20 s):
  1. --variants default,eager,torch-attn,sync      eager (no compile, no graphs) fixed -> compile or graphs;
                                                    torch-attn fixed but eager not -> a Triton kernel's codegen
  2. CUDA_LAUNCH_BLOCKING=1 ... --variants eager   fixed -> an ordering race (PDL, async copies)
  3. --variants no-graphs,no-pdl,no-gemv,no-custom-ops
  4. pytest -q tests/kernels/test_chunked_steps.py  (the attention kernels alone on these steps, seconds)
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from minivllm import LLM, SamplingParams
from minivllm.worker.model_runner import ModelRunner
from tests.engine.test_logprobs import hf_logprobs
from tests.helpers import random_prompts, tiny_checkpoint

VARIANTS: dict[str, dict] = {
    "default": {},
    "sync": {"async_scheduling": False},
    "no-graphs": {"compilation_config": {"cudagraph_mode": "NONE"}},
    "eager": {"enforce_eager": True},  # no compile, no graphs; the same Triton kernels
    "no-pdl": {"compilation_config": {"custom_ops": ["all", "-pdl", "-decode_prefetch"]}},
    "no-gemv": {"compilation_config": {"custom_ops": ["all", "-gemv", "-gemv_norm"]}},
    "no-custom-ops": {"compilation_config": {"custom_ops": ["none"]}},  # Triton attention only
    "torch-attn": {"attention_backend": "torch", "enforce_eager": True},  # no Triton at all
}


def run(path: str, kw: dict) -> None:
    steps: list[str] = []
    orig = ModelRunner.execute_model

    def traced(self, sched, prev=None):
        before = dict(self.cudagraph_dispatcher.counts) if self.cudagraph_dispatcher else {}
        out = orig(self, sched, prev)
        after = self.cudagraph_dispatcher.counts if self.cudagraph_dispatcher else {}
        mode = next((k for k in after if after[k] != before.get(k)), "eager")
        seqs = " ".join(f"s{s.seq.seq_id}@{s.seq.num_computed_tokens}+{s.num_new_tokens}" for s in sched.scheduled)
        steps.append(f"{len(steps)}: {mode:9s} {seqs}")
        return out

    ModelRunner.execute_model = traced
    try:
        llm = LLM(path, max_model_len=128, max_num_batched_tokens=7, **kw)
        prompts = random_prompts(llm.engine.model_config.vocab_size, [19, 2, 9], seed=11)
        sp = SamplingParams(max_tokens=6, ignore_eos=True, logprobs=3, prompt_logprobs=2, temperature=0)
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    finally:
        ModelRunner.execute_model = orig
    print("  matmul fp32 precision:", torch.get_float32_matmul_precision(),
          "allow_tf32:", torch.backends.cuda.matmul.allow_tf32)
    print("  steps:\n    " + "\n    ".join(steps))
    for i, (p, o) in enumerate(zip(prompts, outs)):
        c = o.outputs[0]
        ref = hf_logprobs(path, p + c.token_ids)
        gen = [abs(c.logprobs[j][t].logprob - ref[len(p) - 1 + j, t].item()) for j, t in enumerate(c.token_ids)]
        pr = [abs(o.prompt_logprobs[j][p[j]].logprob - ref[j - 1, p[j]].item()) for j in range(1, len(p))]
        worst = max(range(len(pr)), key=pr.__getitem__) + 1 if pr else None
        print(f"  prompt {i} ({len(p)} tokens): generated " + " ".join(f"{e:.1e}" for e in gen)
              + (f" | prompt max {max(pr):.1e} at position {worst}" if pr else ""))
    llm.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-gqa2-d16", choices=["qwen3-gqa2-d16", "llama-gqa4-d32"])
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}")
    args = ap.parse_args()
    path = str(tiny_checkpoint(args.model, tempfile.mkdtemp()))
    for name in args.variants.split(","):
        print(f"== {name} {VARIANTS[name]}", flush=True)
        run(path, VARIANTS[name])


if __name__ == "__main__":
    main()
