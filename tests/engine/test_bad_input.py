"""Bad input gets a ValueError/TypeError naming the field and its allowed range, and the same LLM then
serves a good request with no KV block leaked."""

from __future__ import annotations

import json
import math

import pytest

from minivllm import LLM, SamplingParams
from minivllm.config import CompilationConfig, CUDAGraphMode
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
    (dict(compilation_config={"level": True}), "level"),
    (dict(cudagraph_mode="BOGUS"), "cudagraph_mode must be one of"),
    (dict(compilation_config={"cudagraph_mode": "BOGUS"}), "cudagraph_mode must be one of"),
    (dict(cudagraph_capture_sizes=[-3]), "cudagraph_capture_sizes must be a list of positive ints"),
    (dict(cudagraph_capture_sizes=[True]), "cudagraph_capture_sizes"),
    (dict(max_cudagraph_capture_size=-5), "max_cudagraph_capture_size must be an int >= 1"),
    (dict(seed=2**70), r"seed must be an int in \[-2\*\*63"),
    (dict(seed=1.5), "seed"),
    (dict(enforce_eager="yes"), "enforce_eager must be True or False"),
    (dict(enable_prefix_caching="no"), "enable_prefix_caching must be True or False"),
    (dict(enable_chunked_prefill=1), "enable_chunked_prefill must be True or False"),
    (dict(skip_tokenizer_init="no"), "skip_tokenizer_init must be True or False"),
    (dict(max_num_seqs=True), "max_num_seqs"),
    (dict(max_num_batched_tokens=False), "max_num_batched_tokens"),
    (dict(block_size=True), "block_size"),
    (dict(gpu_memory_utilization=True), "gpu_memory_utilization"),
])
def test_bad_engine_args(kwargs, field, tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match=field):
        LLM(str(path), **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(cudagraph_mode="BOGUS"), "cudagraph_mode must be one of"),
    (dict(cudagraph_mode=3), "cudagraph_mode must be one of"),
    (dict(cudagraph_capture_sizes=[-3]), "cudagraph_capture_sizes"),
    (dict(cudagraph_capture_sizes="1,2"), "cudagraph_capture_sizes"),
    (dict(max_cudagraph_capture_size=-5), "max_cudagraph_capture_size"),
    (dict(max_cudagraph_capture_size=True), "max_cudagraph_capture_size"),
])
def test_bad_compilation_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompilationConfig(**kwargs)
    with pytest.raises(ValueError, match=match):
        CompilationConfig.from_any(kwargs)


def test_cudagraph_mode_is_the_enum():
    c = CompilationConfig(cudagraph_mode="FULL_AND_PIECEWISE", cudagraph_capture_sizes=(4, 1))
    assert c.cudagraph_mode is CUDAGraphMode.FULL_AND_PIECEWISE and c.cudagraph_mode == "FULL_AND_PIECEWISE"
    assert c.cudagraph_mode.has_full and c.cudagraph_mode.has_piecewise and c.cudagraph_capture_sizes == [4, 1]
    assert not CUDAGraphMode.PIECEWISE.has_full and not CUDAGraphMode.FULL.has_piecewise
    assert not CUDAGraphMode.NONE.has_full and not CUDAGraphMode.NONE.has_piecewise


def test_triton_backend_without_cuda_is_refused_at_construction(tmp_path, monkeypatch):
    """Without a GPU, Triton fails at the first generate ("0 active drivers") and breaks Triton for every
    later engine of the process; so it is refused before anything is loaded."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match="attention_backend='triton' needs a CUDA GPU.*'torch'"):
        LLM(str(path), attention_backend="triton", device="cpu", max_model_len=64)
