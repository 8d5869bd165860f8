"""Sampler and stop conditions through the whole engine."""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers import random_prompts, tiny_checkpoint


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    return LLM(str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("s")))), max_model_len=128)


def gen(llm, prompts, params):
    return llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)


def test_seed_gives_same_tokens_whatever_the_batch(llm):
    V = llm.engine.model_config.vocab_size
    target = random_prompts(V, [9], seed=11)[0]
    others = random_prompts(V, [3, 20, 7], seed=12)
    seeded = SamplingParams(temperature=1.0, seed=1234, max_tokens=10, ignore_eos=True)
    alone = gen(llm, [target], seeded)[0].outputs[0].token_ids
    mixed = gen(llm, others + [target], [SamplingParams(temperature=0.8, max_tokens=6, ignore_eos=True)] * 3
                + [seeded])[-1].outputs[0].token_ids
    assert alone == mixed
    other_seed = gen(llm, [target], SamplingParams(temperature=1.0, seed=99, max_tokens=10, ignore_eos=True))
    assert other_seed[0].outputs[0].token_ids != alone


def test_unseeded_sampling_varies_and_greedy_limits_agree(llm):
    V = llm.engine.model_config.vocab_size
    p = random_prompts(V, [8], seed=13)
    greedy = gen(llm, p, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))[0].outputs[0].token_ids
    runs = {tuple(gen(llm, p, SamplingParams(temperature=1.5, max_tokens=8, ignore_eos=True))[0].outputs[0].token_ids)
            for _ in range(4)}
    assert len(runs) > 1
    top1 = gen(llm, p, SamplingParams(temperature=1.0, top_k=1, max_tokens=8, ignore_eos=True))[0]
    tiny_p = gen(llm, p, SamplingParams(temperature=1.0, top_p=1e-6, max_tokens=8, ignore_eos=True))[0]
    assert top1.outputs[0].token_ids == greedy
    assert tiny_p.outputs[0].token_ids == greedy


def test_stop_token_ids_max_tokens_and_metrics(llm):
    V = llm.engine.model_config.vocab_size
    p = random_prompts(V, [8], seed=14)
    greedy = gen(llm, p, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))[0].outputs[0]
    stop_at = greedy.token_ids[3]
    first = greedy.token_ids.index(stop_at)
    out = gen(llm, p, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, stop_token_ids=[stop_at]))[0]
    assert out.outputs[0].token_ids == greedy.token_ids[:first + 1]
    assert out.outputs[0].finish_reason == "stop" and out.outputs[0].stop_reason == stop_at
    assert greedy.finish_reason == "length" and len(greedy.token_ids) == 8
    m = out.metrics
    assert m.ttft is not None and m.ttft >= 0 and m.finished_time >= m.first_token_time


def test_stop_string_is_cut_from_text(llm):
    tok = llm.get_tokenizer()
    V = llm.engine.model_config.vocab_size
    prompts = random_prompts(min(V, len(tok)), [6, 9, 12], seed=15)
    base = gen(llm, prompts, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True))
    for p, b in zip(prompts, base):
        text = b.outputs[0].text
        if len(text.strip()) < 4:
            continue
        stop = text.strip()[2:4]
        out = gen(llm, [p], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop=stop))[0].outputs[0]
        assert out.finish_reason == "stop" and out.stop_reason == stop
        assert stop not in out.text and text.startswith(out.text)
        return
    pytest.fail("no prompt produced enough text to test stop strings")


def test_eos_stops_unless_ignored(llm):
    eos = llm.engine.model_config.eos_token_ids[0]
    # Bias: make EOS the greedy choice by asking for a stop on whatever comes first, then check ignore_eos.
    llm.engine.eos_token_ids.add(-1)
    V = llm.engine.model_config.vocab_size
    p = random_prompts(V, [5], seed=16)
    g = gen(llm, p, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))[0].outputs[0].token_ids
    llm.engine.eos_token_ids.add(g[1])
    try:
        stopped = gen(llm, p, SamplingParams(temperature=0, max_tokens=6))[0].outputs[0]
        ignored = gen(llm, p, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))[0].outputs[0]
    finally:
        llm.engine.eos_token_ids.discard(g[1])
        llm.engine.eos_token_ids.discard(-1)
    assert stopped.finish_reason == "stop" and stopped.token_ids == g[: g.index(g[1]) + 1]
    assert ignored.token_ids == g
    assert eos in llm.engine.eos_token_ids
