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


def test_temperature_below_eps_is_greedy(llm):
    """1e-38 would overflow logits / temperature to inf (the sampler then picks token 0); below vLLM's 1e-5
    the params are greedy."""
    p = random_prompts(llm.engine_vocab, [8], seed=17)
    greedy = gen(llm, p, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))[0].outputs[0].token_ids
    for t in (1e-38, 1e-6):
        sp = SamplingParams(temperature=t, top_k=5, top_p=0.5, max_tokens=6, ignore_eos=True)
        assert sp.greedy and (sp.temperature, sp.top_k, sp.top_p) == (0.0, -1, 1.0)
        assert gen(llm, p, sp)[0].outputs[0].token_ids == greedy
    assert not SamplingParams(temperature=1e-4).greedy


def test_sampling_params_cannot_be_made_invalid_after_construction():
    import dataclasses

    sp = SamplingParams(temperature=0.5, max_tokens=4, stop=["x"], stop_token_ids=[3])
    for name, value in (("temperature", -1), ("max_tokens", -5), ("top_p", 7.0)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(sp, name, value)
    assert (sp.temperature, sp.max_tokens, sp.top_p) == (0.5, 4, 1.0)
    with pytest.raises(AttributeError):
        sp.stop.append("")  # stored as tuples: not changeable in place either
    with pytest.raises(ValueError, match="max_tokens"):
        dataclasses.replace(sp, max_tokens=-5)  # a changed copy is checked again


@pytest.mark.parametrize("kwargs, field", [
    (dict(seed=2**64), r"seed must be None or an int in \[-2\*\*63"),
    (dict(seed=-(2**63) - 1), "seed"),
    (dict(seed=True), "seed"),
    (dict(ignore_eos="no"), "ignore_eos must be True or False"),
    (dict(ignore_eos=1), "ignore_eos"),
    (dict(max_tokens=True), "max_tokens"),
    (dict(top_k=True), "top_k"),
    (dict(temperature=True), "temperature"),
    (dict(temperature="0.5"), "temperature"),
    (dict(stop_token_ids=[False]), "stop_token_ids"),
])
def test_sampling_params_types(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


def test_numpy_numbers_are_numbers(llm):
    np = pytest.importorskip("numpy")
    sp = SamplingParams(temperature=np.float32(0.5), top_p=np.float64(0.9), top_k=np.int64(3),
                        max_tokens=np.int32(4), seed=np.int64(7), stop_token_ids=[np.int64(2)], ignore_eos=True)
    assert (type(sp.temperature), type(sp.top_p), type(sp.top_k), type(sp.max_tokens), type(sp.seed)) == \
        (float, float, int, int, int)
    p = random_prompts(llm.engine_vocab, [6], seed=18)[0]
    plain = gen(llm, [p], sp)[0].outputs[0].token_ids
    as_numpy = llm.generate({"prompt_token_ids": [np.int64(t) for t in p]}, sp, use_tqdm=False)
    assert as_numpy[0].outputs[0].token_ids == plain and as_numpy[0].prompt_token_ids == p
    assert all(type(t) is int for t in as_numpy[0].prompt_token_ids)
    with pytest.raises(ValueError, match=r"prompts\[0\]\['prompt_token_ids'\] must hold ints"):
        llm.generate({"prompt_token_ids": [1, 2.0]}, sp, use_tqdm=False)


def test_seed_at_the_int64_limits_samples(llm):
    p = random_prompts(llm.engine_vocab, [5], seed=19)
    for seed in (2**63 - 1, -(2**63)):
        out = gen(llm, p, SamplingParams(temperature=1.0, seed=seed, max_tokens=3, ignore_eos=True))
        assert len(out[0].outputs[0].token_ids) == 3
