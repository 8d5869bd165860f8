"""On the CPU, decoding costs memory for the tokens held, not for max_model_len: the PyTorch attention
gathers the blocks in use, not every sequence's whole block table (at max_model_len=32768, 64 one-token
prompts gathered 0.8 GiB per layer call).

The measure is the largest allocation any aten op makes while the engine decodes, from torch.profiler's
memory records (the CPU allocator has no statistics of its own), at two max_model_len values."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from minivllm import LLM, SamplingParams
from tests.helpers import edit_config, tiny_checkpoint

PROMPTS = [{"prompt_token_ids": [3 + i]} for i in range(64)]
PARAMS = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c")))
    edit_config(path, max_position_embeddings=8192)
    return str(path)


def _largest_allocation(llm: LLM) -> tuple[int, list]:
    llm.generate(PROMPTS[:2], PARAMS, use_tqdm=False)  # warm-up: first-call allocations out of the way
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        outs = llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    sizes = [e.cpu_memory_usage for e in prof.events() if e.name.startswith("aten::")]
    return max(sizes), [o.outputs[0].token_ids for o in outs]


def test_decode_memory_does_not_grow_with_max_model_len(ckpt):
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        got = {}
        for max_len in (256, 8192):
            with LLM(ckpt, max_model_len=max_len, max_num_seqs=64) as llm:
                got[max_len] = _largest_allocation(llm)
    finally:
        torch.set_num_threads(n)
    (small, tokens_small), (large, tokens_large) = got[256], got[8192]
    assert tokens_small == tokens_large
    # Today's gather was 32x larger at 8192 (64 rows x 8192 tokens x 2 heads x 16 x 4 bytes = 64 MiB)
    assert large <= small * 1.25 + 64 * 1024, (small, large)
