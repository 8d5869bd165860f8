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
    (dict(compilation_config={"mode": 7}), "mode must be"),
    (dict(compilation_config='{"mode": '), "not valid JSON"),
    (dict(compilation_config={"mode": True}), "mode must be"),
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
    import torch

    from minivllm.config import EngineConfig

    c = CompilationConfig(cudagraph_mode="FULL_AND_PIECEWISE", cudagraph_capture_sizes=(4, 1))
    cfg = EngineConfig.resolve(model="m", device=torch.device("cuda"), compilation=c)  # resolved as on a GPU
    assert cfg.cudagraph_mode is CUDAGraphMode.FULL_AND_PIECEWISE and cfg.cudagraph_mode == "FULL_AND_PIECEWISE"
    assert cfg.cudagraph_mode.has_full and cfg.cudagraph_mode.has_piecewise and cfg.cudagraph_capture_sizes == (1, 4)
    assert not CUDAGraphMode.PIECEWISE.has_full and not CUDAGraphMode.FULL.has_piecewise
    assert not CUDAGraphMode.NONE.has_full and not CUDAGraphMode.NONE.has_piecewise


def test_triton_backend_without_cuda_is_refused_at_construction(tmp_path, monkeypatch):
    """Without a GPU, Triton fails at the first generate ("0 active drivers") and breaks Triton for every
    later engine of the process; so it is refused before anything is loaded."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match="attention_backend='triton' needs a CUDA GPU.*'torch'"):
        LLM(str(path), attention_backend="triton", device="cpu", max_model_len=64)


# ---- sampling and arguments (issue 25) -------------------------------------------------------------------
@pytest.mark.parametrize("top_k", [2**63, 2**31, -2])
def test_top_k_out_of_range_is_refused(top_k):
    with pytest.raises(ValueError, match=r"SamplingParams.top_k must be .*2\*\*31 - 1"):
        SamplingParams(temperature=1.0, top_k=top_k)


def test_top_k_above_the_vocabulary_means_all_tokens(llm):
    prompt = {"prompt_token_ids": [5, 6, 7]}
    big = llm.generate(prompt, SamplingParams(temperature=1.0, top_k=2**31 - 1, seed=3, max_tokens=4),
                       use_tqdm=False)[0].outputs[0].token_ids
    off = llm.generate(prompt, SamplingParams(temperature=1.0, top_k=-1, seed=3, max_tokens=4),
                       use_tqdm=False)[0].outputs[0].token_ids
    assert big == off
    serves_good_request(llm)


def test_stop_strings_without_a_tokenizer_are_refused(tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    llm = LLM(str(path), max_model_len=64, skip_tokenizer_init=True)
    good = {"prompt_token_ids": [5, 6]}
    with pytest.raises(ValueError, match=r"prompts\[1\]: stop=\['\\n'\] needs a tokenizer.*use stop_token_ids"):
        llm.generate([good, {"prompt_token_ids": [5, 6, 7]}],
                     [SamplingParams(max_tokens=2), SamplingParams(stop="\n", max_tokens=2)], use_tqdm=False)
    assert not llm.engine.has_unfinished_requests()  # nothing was queued: no lost request
    serves_good_request(llm)
    out = llm.generate(good, SamplingParams(temperature=0, stop_token_ids=[3], max_tokens=2), use_tqdm=False)
    assert out[0].outputs[0].token_ids


@pytest.mark.parametrize("device", ["gpu", "tpu", "mps", "cuda:x", "cpu:0", 0])
def test_unknown_devices_get_the_engines_error(device, tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match=r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'.*got"):
        LLM(str(path), device=device)


def test_empty_model_name_is_an_error_not_the_embedded_model():
    for bad in ("", "  "):
        with pytest.raises(ValueError, match=r"model=.*: an empty name.*leave model out \(None\)"):
            LLM(bad, device="cpu")


def test_empty_model_flag_is_an_error_in_the_cli(capsys):
    from minivllm.cli import main

    assert main(["generate", "--prompt", "hi", "--model", ""]) == 2
    assert "an empty name" in capsys.readouterr().err


def _capture_sizes(sizes=None, max_size=None, max_num_seqs=256, max_tokens=8192):
    from minivllm.config import EngineConfig, SchedulerConfig

    comp = CompilationConfig(cudagraph_capture_sizes=sizes, max_cudagraph_capture_size=max_size)
    return list(EngineConfig.resolve(model="m", compilation=comp, scheduler=SchedulerConfig(
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_tokens)).cudagraph_capture_sizes)


def test_capture_sizes_follow_vllm():
    assert _capture_sizes(max_size=24)[-3:] == [8, 16, 24]  # only the max: the default list up to it
    assert _capture_sizes([1, 2, 4, 64]) == [1, 2, 4, 64]  # only sizes: the max is theirs
    assert _capture_sizes([1, 2, 4, 64], max_size=64) == [1, 2, 4, 64]  # both, consistent
    assert _capture_sizes([1, 8, 32], max_tokens=16) == [1, 8]  # above max_num_batched_tokens: dropped
    assert _capture_sizes(max_num_seqs=256, max_tokens=100)[-1] == 96  # the default max is capped by it too
    with pytest.raises(ValueError, match=r"max_cudagraph_capture_size \(4\) must equal the largest of "
                                         r"cudagraph_capture_sizes \(16\)"):
        _capture_sizes([1, 2, 4, 8, 16], max_size=4)
    with pytest.raises(ValueError, match="all above max_num_batched_tokens"):
        _capture_sizes([64], max_tokens=32)


def test_inconsistent_capture_sizes_fail_at_construction(tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    with pytest.raises(ValueError, match="max_cudagraph_capture_size"):
        LLM(str(path), max_model_len=64, cudagraph_capture_sizes=[1, 2, 4, 8], max_cudagraph_capture_size=4)


def test_empty_model_flag_is_an_error_in_bench(capsys):
    from minivllm.cli import main

    assert main(["bench", "latency", "--model", "", "--json", "/dev/null"]) == 2
    assert "an empty name" in capsys.readouterr().err
