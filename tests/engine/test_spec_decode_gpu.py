"""Speculative decoding under CUDA graphs (skipped without CUDA; run by `scripts/gpu_check.sh spec`).

In every graph mode, greedy tokens with n-gram speculation equal those of the eager engine without it: the
verify steps replay the decode graphs of 1 + k tokens per request (FULL_DECODE_ONLY, FULL_AND_PIECEWISE),
the PIECEWISE graphs by token count, or FULL's graphs of any batch. The decode graphs run the unified
attention kernel where plain decoding runs the split-KV decode kernel: two reduction orders, so as in
tests/engine/test_cuda_graphs_gpu.py the comparison is exact in fp32 (the random Qwen3-0.6B shape) and
bounded in bf16 (the embedded model: at most 5% of the sequences may differ, from a near-tied greedy choice;
a broken verify step changes most of them). The graphs themselves are compared exactly with the same engine
once its FULL graphs are dropped (the same steps and kernels, run eagerly).
"""

from __future__ import annotations

import os

import pytest
import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

MODES = ["FULL_DECODE_ONLY", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL"]
# decode graphs: requests (of 1 + k tokens), up to max_num_seqs (32); the others: tokens. 128: the prefills (36
# tokens a request) and the verify steps past the largest decode graph (17 x 4 tokens) replay PIECEWISE graphs
SIZES = [1, 2, 4, 8, 16, 128]
BATCHES = (1, 3, 8, 17)  # 17 requests: past the largest decode graph
K = 3


def _models() -> list[str]:
    return [DEFAULT_MODEL] + ([os.environ["MINIVLLM_GPU_MODEL"]] if os.environ.get("MINIVLLM_GPU_MODEL") else [])


def _prompts(vocab: int, batch: int) -> list[dict]:
    """Runs of random tokens repeated, then half a run: n-gram lookup proposes the run's rest. Batch 1 has a
    14-token prompt (a prefill within the 16-token size), the others 36 tokens (within the 128-token size)."""
    g = torch.Generator().manual_seed(batch)
    n = 4 if batch == 1 else 8
    runs = torch.randint(3, vocab, (batch, n), generator=g).tolist()
    return [{"prompt_token_ids": r * (3 if batch == 1 else 4) + r[:n // 2]} for r in runs]


def _run(llm: LLM, batches: dict) -> dict:
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    return {b: [o.outputs[0].token_ids for o in llm.generate(p, params, use_tqdm=False)] for b, p in batches.items()}


def _differences(got: dict, ref: dict) -> list[str]:
    return [f"batch {b} seq {i}" for b in got for i, (g, r) in enumerate(zip(got[b], ref[b])) if g != r]


@pytest.mark.parametrize("model", _models())
def test_speculation_gives_plain_greedy_tokens_in_every_graph_mode(model):
    dtype = "bfloat16" if model == DEFAULT_MODEL else "float32"
    common = dict(model=model, max_model_len=512, max_num_seqs=32, dtype=dtype, seed=0, gpu_memory_utilization=0.3,
                  enable_prefix_caching=False)  # no cache hits on the second pass: the same steps again
    eager = LLM(**common, enforce_eager=True)
    V = min(eager.engine.model_config.vocab_size, 5000)
    batches = {b: _prompts(V, b) for b in BATCHES}
    ref = _run(eager, batches)
    eager.shutdown()
    total = sum(len(p) for p in batches.values())
    failures = []
    for mode in MODES:
        llm = LLM(**common, cudagraph_mode=mode, cudagraph_capture_sizes=SIZES,
                  speculative_config={"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min": 2,
                                      "prompt_lookup_max": 4})
        runner = llm.model_runner
        ptrs = {k: v.data_ptr() for k, v in runner.input_batch.buffers().items()}
        got = _run(llm, batches)
        assert ptrs == {k: v.data_ptr() for k, v in runner.input_batch.buffers().items()}
        counts, stats = runner.cudagraph_dispatcher.counts, llm.spec_decoding_stats()
        print(f"{mode}: dispatch {counts}; drafts {stats.num_drafts}, acceptance {stats.acceptance_rate:.2f}, "
              f"mean acceptance length {stats.mean_acceptance_length:.2f}")
        assert stats.num_drafts > 0
        if model == DEFAULT_MODEL:
            assert stats.num_accepted_tokens > 0
        if mode != "PIECEWISE":
            assert counts["full"] > 0, counts
        if mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
            assert counts["piecewise"] > 0, counts
        if runner.full_graph is not None:  # the same steps and kernels without the FULL graphs: exactly equal
            runner.full_graph.clear()
            failures += [f"{mode} graphs vs the same kernels eagerly: {d}" for d in _differences(_run(llm, batches), got)]
        diff = _differences(got, ref)
        print(f"{mode} with speculation vs eager without ({dtype}): {len(diff)} of {total} sequences differ", *diff)
        if dtype == "float32" or len(diff) > total // 20:
            failures += [f"{mode} vs eager: {d}" for d in diff]
        llm.shutdown()
    assert not failures, f"{len(failures)} differences: {failures[:10]}"
