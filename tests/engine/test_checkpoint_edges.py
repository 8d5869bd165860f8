"""What a real checkpoint says is honoured or refused, never silently changed: generation_config.json's
eos_token_id (an int or a list) ends generation as in vLLM unless ignore_eos; a float weight stored as an
integer type is refused naming the tensor and the file; a corrupted tokenizer file is named in the error."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from tests.helpers import tiny_checkpoint

PROMPT = "Q: 12+30= A:"  # the embedded model answers in a few tokens, then EOS


@pytest.fixture(scope="module")
def greedy_tokens():
    with LLM(DEFAULT_MODEL, max_model_len=64) as llm:
        out = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True), use_tqdm=False)
    return out[0].outputs[0].token_ids


def _copy(tmp_path, src=DEFAULT_MODEL):
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("form", ["int", "list"])
def test_generation_config_eos_ends_generation(tmp_path, greedy_tokens, form):
    # the first token of the greedy run that is neither config.json's EOS (2) nor an earlier token
    k, stop = next((i, t) for i, t in enumerate(greedy_tokens) if i and t != 2 and t not in greedy_tokens[:i])
    model = _copy(tmp_path)
    gen = json.loads((model / "generation_config.json").read_text())
    gen["eos_token_id"] = stop if form == "int" else [2, 511, stop]
    (model / "generation_config.json").write_text(json.dumps(gen))
    with LLM(str(model), max_model_len=64) as llm:
        out = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=6), use_tqdm=False)[0].outputs[0]
        assert out.token_ids == greedy_tokens[:k + 1]
        assert out.finish_reason == "stop" and out.stop_reason == stop  # as vLLM's stop_token_ids report it
        out = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True),
                           use_tqdm=False)[0].outputs[0]
        assert out.token_ids == greedy_tokens and out.finish_reason == "length"


def test_generation_config_eos_of_the_wrong_type_is_refused(tmp_path):
    model = _copy(tmp_path)
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": "</s>"}))
    with pytest.raises(ValueError, match="generation_config.json: eos_token_id must be a token id"):
        LLM(str(model), max_model_len=64)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.bool])
def test_float_weight_stored_as_integers_is_refused(tmp_path, dtype):
    model = _copy(tmp_path, tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path / "c")))
    file = model / "model.safetensors"
    tensors = load_file(str(file))
    name = "model.layers.0.mlp.down_proj.weight"
    tensors[name] = (tensors[name] * 100).to(dtype)
    save_file(tensors, str(file), metadata={"format": "pt"})
    with pytest.raises(ValueError) as e:
        LLM(str(model), max_model_len=64)
    msg = str(e.value)
    assert str(file) in msg and repr(name) in msg and "floating-point" in msg, msg


@pytest.mark.parametrize("case", ["truncated", "not_a_tokenizer", "truncated_via_transformers", "bad_vocab"])
def test_corrupted_tokenizer_file_is_named(tmp_path, case):
    model = _copy(tmp_path)
    broken = model / "tokenizer.json"
    text = broken.read_text()
    if case in ("truncated", "truncated_via_transformers"):
        broken.write_text(text[: len(text) // 3])
    elif case == "not_a_tokenizer":
        broken.write_text(json.dumps({"version": "1.0", "model": {"type": "NoSuchModel"}}))
    if case == "truncated_via_transformers":  # a tokenizer_config that makes the loader use AutoTokenizer
        cfg = json.loads((model / "tokenizer_config.json").read_text())
        (model / "tokenizer_config.json").write_text(json.dumps({**cfg, "legacy": False}))
    if case == "bad_vocab":  # a slow-tokenizer checkpoint: vocab.json + merges.txt, vocab.json cut short
        broken.unlink()
        broken = model / "vocab.json"
        broken.write_text('{"a": 0, "b"')
        (model / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(ValueError) as e:
        LLM(str(model), max_model_len=64)
    assert str(broken) in str(e.value), str(e.value)
