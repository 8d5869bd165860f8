"""minivllm's greedy tokens equal transformers' generate token for token in fp32 (dtype="float32": "auto" would
run these fp32 checkpoints in bf16 on a GPU), in every path that changes how the KV cache is filled: plain
batches, prefix-cache hits, chunked prefill, preemption."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers import TINY_SHAPES, hf_greedy, random_prompts, tiny_checkpoint

GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ckpts"))


def check_against_hf(path, prompts, outs, max_tokens=12):
    for p, o in zip(prompts, outs):
        assert o.outputs[0].token_ids == hf_greedy(str(path), p, max_tokens), f"prompt of {len(p)} tokens differs"
        assert o.outputs[0].finish_reason == "length"


@pytest.mark.parametrize("name", list(TINY_SHAPES))
def test_batch_matches_hf(name, ckpt_root):
    path = tiny_checkpoint(name, ckpt_root)
    llm = LLM(str(path), max_model_len=256, dtype="float32")
    prompts = random_prompts(llm.engine.model_config.vocab_size, [3, 17, 40, 16, 33], seed=1)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], GREEDY, use_tqdm=False)
    check_against_hf(path, prompts, outs)
    assert llm.engine.block_manager.num_free_blocks == llm.engine.block_manager.num_blocks


@pytest.mark.parametrize("name", ["qwen3-gqa2-d16", "llama-gqa4-d32"])
def test_prefix_cache_hits_match_hf(name, ckpt_root):
    path = tiny_checkpoint(name, ckpt_root)
    llm = LLM(str(path), max_model_len=256, block_size=16, dtype="float32")
    V = llm.engine.model_config.vocab_size
    shared = random_prompts(V, [40], seed=2)[0]
    tails = random_prompts(V, [5, 9, 1], seed=3)
    prompts = [shared + t for t in tails] + [shared[:32]]  # the last one is exactly two full cached blocks
    llm.generate([{"prompt_token_ids": prompts[0]}], GREEDY, use_tqdm=False)  # fill the cache
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], GREEDY, use_tqdm=False)
    assert [o.num_cached_tokens for o in outs] == [32, 32, 32, 16]  # one token is always recomputed
    check_against_hf(path, prompts, outs)


@pytest.mark.parametrize("name", ["qwen3-gqa2-d16", "qwen2-mha-d16"])
def test_chunked_prefill_matches_hf(name, ckpt_root):
    path = tiny_checkpoint(name, ckpt_root)
    llm = LLM(str(path), max_model_len=256, max_num_batched_tokens=7, dtype="float32")  # prompts cut into 7-token chunks
    prompts = random_prompts(llm.engine.model_config.vocab_size, [30, 4, 19], seed=4)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], GREEDY, use_tqdm=False)
    check_against_hf(path, prompts, outs)


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_preemption_matches_hf(ckpt_root, prefix_caching):
    path = tiny_checkpoint("llama-gqa4-d32", ckpt_root)
    # 6 blocks of 8 tokens = 48 slots for 4 sequences that grow to 21..37 tokens: preemption is forced.
    llm = LLM(str(path), max_model_len=48, block_size=8, num_gpu_blocks_override=6,
              enable_prefix_caching=prefix_caching, dtype="float32")
    prompts = random_prompts(llm.engine.model_config.vocab_size, [20, 14, 25, 9], seed=5)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], GREEDY, use_tqdm=False)
    assert llm.engine.stats["preemptions"] > 0
    assert sum(o.extra["num_preemptions"] for o in outs) > 0
    check_against_hf(path, prompts, outs)
    bm = llm.engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and all(b.ref_count == 0 for b in bm.blocks)


def test_embedded_model_matches_hf_and_answers():
    from minivllm import DEFAULT_MODEL
    from minivllm.tools import tiny_task

    llm = LLM(DEFAULT_MODEL)
    prompts = [p for p, _ in tiny_task.make_examples(12, seed=3, split="test")]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=10, ignore_eos=True), use_tqdm=False)
    for o in outs:
        assert o.outputs[0].token_ids == hf_greedy(DEFAULT_MODEL, o.prompt_token_ids, 10), o.prompt
    answers = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=16), use_tqdm=False)
    assert tiny_task.score(prompts, [a.outputs[0].text for a in answers]) >= 11 / 12
    assert all(a.outputs[0].finish_reason == "stop" for a in answers)  # the model stops itself with EOS
