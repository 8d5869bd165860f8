"""Batch-invariant mode on a GPU (skipped without CUDA; `bash scripts/gpu_check.sh invariance` on the H200).

vLLM's check (tests/v1/determinism/test_batch_invariance.py): a prompt's logprobs at batch 1 and inside a
bigger batch are bitwise equal. Here in bf16, with CUDA graphs on (padded sizes included: 5 prompts replay
graph 8), under each graph mode and under Inductor (mode 3 with custom ops "none": the norms stay the Triton
kernels), on the embedded model and on MINIVLLM_GPU_MODEL (gpu_check.sh: the Qwen3-0.6B shape).
"""

from __future__ import annotations

import pytest
import torch

from minivllm import LLM, SamplingParams
from tests.engine.test_cuda_graphs_gpu import _models

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CONFIGS = {
    "FULL_AND_PIECEWISE": {},
    "FULL": {"cudagraph_mode": "FULL"},
    "inductor": {"compilation_config": {"mode": 3, "custom_ops": ["none"]}},
    "eager": {"enforce_eager": True},
}


def _prompts(n: int, seed: int, vocab: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(8, 120, (n,), generator=g).tolist()
    return [{"prompt_token_ids": torch.randint(0, vocab, (k,), generator=g).tolist()} for k in lens]


def _run(llm, prompts, index, tokens=24):
    sp = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, logprobs=1)
    out = llm.generate(prompts, sp, use_tqdm=False)[index].outputs[0]
    return out.token_ids, [d[t].logprob for t, d in zip(out.token_ids, out.logprobs)]


# every configuration on the embedded model; the default and FULL on MINIVLLM_GPU_MODEL (compiles are slow)
CASES = [(m, c) for i, m in enumerate(_models()) for c in (CONFIGS if i == 0 else ["FULL_AND_PIECEWISE", "FULL"])]


@pytest.mark.parametrize("model,config", CASES)
def test_bs1_and_bs64_logprobs_are_bitwise_equal(model, config):
    llm = LLM(model, dtype="bfloat16", max_model_len=512, batch_invariant=True, enable_prefix_caching=False,
              **CONFIGS[config])
    try:
        vocab = min(llm.engine_vocab, 30000)
        pool = _prompts(64, seed=1, vocab=vocab)
        alone = _run(llm, pool[17:18], 0)
        # 5 prompts: a padded graph size (graph 8 replays); 64: the size of vLLM's check
        for batch, index in ((pool[15:20], 2), (pool, 17)):
            tokens, logprobs = _run(llm, batch, index)
            assert tokens == alone[0], f"{config}: batch {len(batch)}: greedy tokens differ from batch 1"
            assert logprobs == alone[1], (f"{config}: batch {len(batch)}: max |gap| "
                                          f"{max(abs(a - b) for a, b in zip(logprobs, alone[1]))}")
        prompts = _prompts(16, seed=2, vocab=vocab)
        sp = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
        batched = [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]
        single = [llm.generate([p], sp, use_tqdm=False)[0].outputs[0].token_ids for p in prompts]
        assert sum(a == b for a, b in zip(batched, single)) == 16
    finally:
        llm.shutdown()
