"""Async scheduling changes when the CPU reads tokens, never which tokens come out.

Step n+1 is launched before step n's tokens are read, so its pending input ids are gathered on the device
from step n's sampler output. If that gather were wrong (or skipped), the decode would read a stale token
and these comparisons would fail. The same run on a CPU exercises every bookkeeping path: pending tokens,
preemption while a token is in flight, sequences that stop (EOS, stop strings, max_tokens) while their next
step is already launched, and an error in the middle of a run.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from tests.helpers import hf_greedy, random_prompts, tiny_checkpoint


def _tokens(outs):
    return [(o.outputs[0].token_ids, o.outputs[0].finish_reason, o.outputs[0].text) for o in outs]


def _all_free(llm) -> bool:
    bm = llm.engine.block_manager
    return bm.num_free_blocks == bm.num_blocks and all(b.ref_count == 0 for b in bm.blocks)


@pytest.fixture(scope="module")
def engines():
    common = dict(max_num_seqs=4, num_gpu_blocks_override=16, max_model_len=128, block_size=8)
    return {a: LLM(DEFAULT_MODEL, async_scheduling=a, **common) for a in (False, True)}


def test_async_equals_sync_with_stops_and_preemption(engines):
    from minivllm.tools import tiny_task

    prompts = [p for p, _ in tiny_task.make_examples(10, seed=7, split="test")]
    # EOS stops (the model ends its answers), max_tokens from 1 up, a stop string, and one long greedy run.
    params = [SamplingParams(temperature=0, max_tokens=90, ignore_eos=True, stop=["99"]),
              SamplingParams(temperature=0, max_tokens=60, ignore_eos=True)]  # together 19 blocks: preemption
    params += [SamplingParams(temperature=0, max_tokens=1 + 3 * i, ignore_eos=i % 2 == 0) for i in range(8)]
    outs = {a: llm.generate(prompts, params, use_tqdm=False) for a, llm in engines.items()}
    assert _tokens(outs[True]) == _tokens(outs[False])
    assert {o.outputs[0].finish_reason for o in outs[True]} == {"stop", "length"}
    assert engines[True].engine.async_scheduling and not engines[False].engine.async_scheduling
    assert engines[True].engine.stats["preemptions"] > 0  # 16 blocks of 8 for 4 growing sequences
    for llm in engines.values():
        assert _all_free(llm) and llm.engine.inflight is None


def test_async_seeded_sampling_equals_sync(engines):
    prompts = [{"prompt_token_ids": p} for p in random_prompts(500, [5, 9, 13], seed=11)]
    sp = [SamplingParams(temperature=1.0, top_p=0.9, max_tokens=20, ignore_eos=True, seed=s) for s in (1, 2, 3)]
    outs = {a: llm.generate(prompts, sp, use_tqdm=False) for a, llm in engines.items()}
    assert _tokens(outs[True]) == _tokens(outs[False])


def test_error_mid_run_leaves_async_engine_usable(engines, monkeypatch):
    llm = engines[True]
    prompts = [{"prompt_token_ids": p} for p in random_prompts(500, [6, 11], seed=12)]
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    ref = _tokens(llm.generate(prompts, sp, use_tqdm=False))
    runner, calls = llm.model_runner, {"n": 0}
    orig = runner.execute_model

    def failing(sched, prev=None):
        calls["n"] += 1
        if calls["n"] == 5:  # a decode step, with the previous one still in flight
            raise RuntimeError("injected failure")
        return orig(sched, prev)

    monkeypatch.setattr(runner, "execute_model", failing)
    with pytest.raises(RuntimeError, match="injected"):
        llm.generate(prompts, sp, use_tqdm=False)
    monkeypatch.undo()
    assert _all_free(llm) and llm.engine.inflight is None and not llm.engine.has_unfinished_requests()
    assert _tokens(llm.generate(prompts, sp, use_tqdm=False)) == ref


def test_async_chunked_prefill_and_preemption_match_hf(tmp_path):
    path = tiny_checkpoint("llama-gqa4-d32", str(tmp_path))
    llm = LLM(str(path), max_model_len=48, block_size=8, num_gpu_blocks_override=6, max_num_batched_tokens=7,
              async_scheduling=True, dtype="float32")  # fp32 on a GPU too: the reference is fp32
    prompts = random_prompts(llm.engine.model_config.vocab_size, [20, 14, 25, 9], seed=5)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts],
                        SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), use_tqdm=False)
    assert llm.engine.stats["preemptions"] > 0
    for p, o in zip(prompts, outs):
        assert o.outputs[0].token_ids == hf_greedy(str(path), p, 12)
    assert _all_free(llm)


_CKPT: dict = {}


def _tiny_ckpt(tmp_path_factory) -> str:
    if "p" not in _CKPT:
        _CKPT["p"] = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("rand"))))
    return _CKPT["p"]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), num_blocks=st.integers(8, 24), budget=st.integers(4, 48),
       max_seqs=st.integers(1, 5), caching=st.booleans())
def test_random_workloads_async_equals_sync(tmp_path_factory, seed, num_blocks, budget, max_seqs, caching):
    """Random batches (shared prefixes, stop tokens, EOS on/off, tiny caches that force preemption): the
    async engine returns exactly the sync engine's tokens and finish reasons, and frees every block."""
    import random as _random

    rng = _random.Random(seed)
    shared = [rng.randrange(1, 500) for _ in range(rng.randint(0, 12))]
    prompts = [{"prompt_token_ids": shared + [rng.randrange(1, 500) for _ in range(rng.randint(1, 20))]}
               for _ in range(rng.randint(1, 6))]
    params = [SamplingParams(temperature=0, max_tokens=rng.randint(1, 24), ignore_eos=rng.random() < 0.5,
                             stop_token_ids=[rng.randrange(1, 500)] if rng.random() < 0.3 else None)
              for _ in prompts]
    common = dict(max_model_len=64, block_size=8, num_gpu_blocks_override=num_blocks,
                  max_num_batched_tokens=budget, max_num_seqs=max_seqs, enable_prefix_caching=caching)
    outs = {}
    for a in (False, True):
        llm = LLM(_tiny_ckpt(tmp_path_factory), async_scheduling=a, **common)
        outs[a] = _tokens(llm.generate(prompts, params, use_tqdm=False))
        assert _all_free(llm) and llm.engine.inflight is None
    assert outs[True] == outs[False]
