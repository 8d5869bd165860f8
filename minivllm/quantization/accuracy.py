"""What a quantization costs in accuracy, measured through the engine: the log-probability each engine gives
the same token sequences (teacher-forced: prompt logprobs), against a reference engine in fp32.

Why prompt logprobs and not generated text: two engines that sample different tokens stop being comparable
after the first difference, while prompt logprobs score the same tokens at every position. The gap is
|logprob(quantized) - logprob(reference)| per scored token; its max and mean are reported, with the
greedy answers of the embedded model's checkable questions (tools/tiny_task.py) as the end-to-end check.
Used by the tests (tests/engine/test_fp8.py), and by scripts/gpu_check.sh's fp8 stage on the GPU.
"""

from __future__ import annotations

from minivllm.llm import LLM
from minivllm.sampling_params import SamplingParams


def prompt_logprobs(llm: LLM, token_ids: list[list[int]]) -> list[list[float]]:
    """For each sequence, the logprob of every token after the first, given the tokens before it."""
    params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
    outs = llm.generate([{"prompt_token_ids": ids} for ids in token_ids], params, use_tqdm=False)
    return [[entry[tok].logprob for tok, entry in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:])]
            for o in outs]


def logprob_gap(reference: list[list[float]], other: list[list[float]]) -> dict:
    """max and mean |difference| over every scored token, and how many were scored."""
    diffs = [abs(a - b) for ref, oth in zip(reference, other, strict=True) for a, b in zip(ref, oth, strict=True)]
    return {"max": max(diffs), "mean": sum(diffs) / len(diffs), "tokens": len(diffs)}


def compare(model: str | None, token_ids: list[list[int]], variants: dict[str, dict],
            reference: dict | None = None, **engine_kwargs) -> dict:
    """The logprob gap of each variant (LLM keyword arguments, e.g. {"quantization": "fp8"}) against the
    reference engine (default: dtype float32), all on the same sequences."""
    def run(kwargs: dict) -> list[list[float]]:
        llm = LLM(model, **engine_kwargs, **kwargs)
        try:
            return prompt_logprobs(llm, token_ids)
        finally:
            llm.shutdown()

    ref = run(reference or {"dtype": "float32"})
    return {name: logprob_gap(ref, run(kwargs)) for name, kwargs in variants.items()}
