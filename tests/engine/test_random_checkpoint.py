"""make_random_checkpoint writes directories that transformers loads offline, in the published shapes."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from minivllm.tools.make_random_checkpoint import SHAPES, main, make_config, make_random_checkpoint

TINY = ["tiny", "tiny-llama", "tiny-qwen2"]


@pytest.mark.parametrize("shape", TINY)
def test_tiny_shapes_load_and_generate(tmp_path, shape):
    out = make_random_checkpoint(shape, tmp_path / shape, seed=1)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(out)
    ids = tok("Hello, my name is", return_tensors="pt")
    assert ids.input_ids[0, 0].item() == tok.bos_token_id == model.config.bos_token_id
    assert model.config.eos_token_id == tok.eos_token_id
    assert len(tok) <= model.config.vocab_size
    gen = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert gen.shape[1] <= ids.input_ids.shape[1] + 4
    assert torch.isfinite(model(**ids).logits).all()


def test_architectures():
    expect = {"tiny": "qwen3", "tiny-llama": "llama", "tiny-qwen2": "qwen2"}
    for shape, model_type in expect.items():
        assert make_config(shape).model_type == model_type
    assert make_config("tiny-llama").rope_parameters["rope_type"] == "llama3"


def test_overrides_and_classic_keys(tmp_path):
    out = make_random_checkpoint("tiny-llama", tmp_path, dtype="bfloat16", num_hidden_layers=3,
                                 hidden_size=96, num_attention_heads=6, num_key_value_heads=3, head_dim=16,
                                 vocab_size=600, tie_word_embeddings=False)
    cfg = json.loads((out / "config.json").read_text())
    got = (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_key_value_heads"], cfg["vocab_size"])
    assert got == (3, 96, 3, 600)
    assert cfg["rope_theta"] == 500000.0 and cfg["rope_scaling"]["rope_type"] == "llama3"
    assert cfg["torch_dtype"] == "bfloat16"
    weights = load_file(out / "model.safetensors")
    assert weights["lm_head.weight"].shape == (600, 96)  # untied: written separately
    assert weights["model.layers.0.self_attn.k_proj.weight"].shape == (3 * 16, 96)
    assert all(w.dtype == torch.bfloat16 for w in weights.values())
    assert AutoConfig.from_pretrained(out).rope_parameters["factor"] == 32.0


def test_seed_reproducible(tmp_path):
    a = load_file(make_random_checkpoint("tiny", tmp_path / "a", seed=3) / "model.safetensors")
    b = load_file(make_random_checkpoint("tiny", tmp_path / "b", seed=3) / "model.safetensors")
    c = load_file(make_random_checkpoint("tiny", tmp_path / "c", seed=4) / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.embed_tokens.weight"], c["model.embed_tokens.weight"])
    assert "lm_head.weight" not in a  # tied, as in the real small models


def test_qwen2_has_qkv_bias_and_qwen3_has_qk_norm(tmp_path):
    q2 = load_file(make_random_checkpoint("tiny-qwen2", tmp_path / "q2") / "model.safetensors")
    q3 = load_file(make_random_checkpoint("tiny", tmp_path / "q3") / "model.safetensors")
    bias = q2["model.layers.0.self_attn.q_proj.bias"]
    assert bias.abs().sum() > 0  # random, not zero, so a loader that drops the bias is caught
    assert "model.layers.0.self_attn.q_norm.weight" in q3


@pytest.mark.parametrize(
    "shape, want",
    [
        ("qwen3-0.6b", dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                            num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=151936,
                            tie_word_embeddings=True)),
        ("llama-3.2-1b", dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                              num_key_value_heads=8, head_dim=64, intermediate_size=8192, vocab_size=128256,
                              tie_word_embeddings=True)),
        ("qwen2-0.5b", dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                            num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
                            tie_word_embeddings=True)),
    ],
)
def test_published_shapes(shape, want):
    cfg = make_config(shape, "bfloat16")  # config only: the weights are too big for a unit test
    assert {k: getattr(cfg, k) for k in want} == want
    theta = {"qwen3-0.6b": 1e6, "llama-3.2-1b": 5e5, "qwen2-0.5b": 1e6}[shape]
    assert cfg.rope_parameters["rope_theta"] == theta
    if shape == "llama-3.2-1b":
        rope = cfg.rope_parameters
        assert (rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
                rope["original_max_position_embeddings"]) == (32.0, 1.0, 4.0, 8192)


def test_cli(tmp_path, capsys):
    main(["--shape", "tiny-qwen2", "--dtype", "float16", str(tmp_path)])
    assert "Qwen2ForCausalLM" in capsys.readouterr().out
    assert json.loads((tmp_path / "config.json").read_text())["torch_dtype"] == "float16"


def test_unknown_shape(tmp_path):
    with pytest.raises(ValueError, match="shape must be one of"):
        make_random_checkpoint("gpt-5", tmp_path)
    assert set(TINY) <= set(SHAPES)
