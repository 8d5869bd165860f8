"""Bad input gets a ValueError/TypeError naming the field and its allowed range, and the same LLM then
serves a good request with no KV block leaked."""

from __future__ import annotations

import json
import math

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers import tiny_checkpoint


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "async"])
def llm(tmp_path_factory, request):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("bad")))
    return LLM(str(path), max_model_len=64, async_scheduling=request.param)


def serves_good_request(llm):
    bm = llm.engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and llm.engine.inflight is None
    out = llm.generate({"prompt_token_ids": [5, 6, 7]}, SamplingParams(temperature=0, max_tokens=3), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 3
    assert bm.num_free_blocks == bm.num_blocks and not llm.engine.has_unfinished_requests()


@pytest.mark.parametrize("prompts, match", [
    ("", "empty"),
    ({"prompt_token_ids": []}, "empty"),
    ({"prompt_token_ids": list(range(3, 70))}, "max_model_len"),
    ({"prompt_token_ids": [1, 10**9]}, r"vocabulary range \[0, "),
    ({"prompt_token_ids": [1, -1]}, r"vocabulary range"),
    ([{"prompt_token_ids": [4, 5]}, {"prompt_token_ids": [99999999]}], r"prompts\[1\]"),
])
def test_bad_prompts(llm, prompts, match):
    with pytest.raises(ValueError, match=match):
        llm.generate(prompts, SamplingParams(max_tokens=2), use_tqdm=False)
    serves_good_request(llm)


@pytest.mark.parametrize("kwargs, field", [
    (dict(max_tokens=0), "max_tokens"),
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=-2), "top_k"),
    (dict(top_k=1.5), "top_k"),
    (dict(stop=[""]), "stop"),
    (dict(stop_token_ids=[-3]), "stop_token_ids"),
])
def test_bad_sampling_params(llm, kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)
    serves_good_request(llm)


def test_wrong_number_of_sampling_params(llm):
    with pytest.raises(ValueError, match="sampling_params has 3 entries but there are 2 prompts"):
        llm.generate(["a b", "c"], [SamplingParams()] * 3, use_tqdm=False)
    with pytest.raises(TypeError, match="prompts"):
        llm.generate(42, use_tqdm=False)
    serves_good_request(llm)


def test_bad_model_dirs(tmp_path, llm):
    with pytest.raises(ValueError, match="no such local directory"):
        LLM(str(tmp_path / "missing"))
    bad_arch = tmp_path / "arch"
    bad_arch.mkdir()
    (bad_arch / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(ValueError, match="unsupported architecture 'GPT2LMHeadModel'"):
        LLM(str(bad_arch))
    pickled = tmp_path / "pickle"
    pickled.mkdir()
    src = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    (pickled / "config.json").write_text((src / "config.json").read_text())
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ValueError, match="safetensors only"):
        LLM(str(pickled))
    serves_good_request(llm)


@pytest.mark.parametrize("kwargs, field", [
    (dict(block_size=7), "block_size"),
    (dict(gpu_memory_utilization=1.5), "gpu_memory_utilization"),
    (dict(max_num_seqs=0), "max_num_seqs"),
    (dict(max_model_len=10**7), "max_model_len"),
    (dict(dtype="int8"), "dtype"),
    (dict(attention_backend="cuda-magic"), "attention_backend"),
    (dict(compilation_config={"level": 7}), "level"),
    (dict(compilation_config='{"level": '), "not valid JSON"),
])
def test_bad_engine_args(kwargs, field, tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match=field):
        LLM(str(path), **kwargs)
