"""Every config.json field that changes the math is implemented (and matches transformers) or refused by
name; wrong types and shapes name the field, or the tensor and its file; sizes that cannot fit are refused
before anything is allocated; one RoPE table per engine, sized by max_model_len."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from minivllm import LLM, SamplingParams
from minivllm.layers.rotary import RotaryEmbedding
from minivllm.tools.make_random_checkpoint import make_random_checkpoint
from tests.helpers import edit_config, hf_greedy, tiny_checkpoint


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("ckpt")))


@pytest.fixture
def ckpt(src, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(src, dst)
    return dst


def load(ckpt, **kw):
    return LLM(str(ckpt), max_model_len=64, device="cpu", **kw)


# ---- refused: fields the engine does not implement -------------------------------------------------------
@pytest.mark.parametrize("changes, match", [
    (dict(hidden_act="gelu"), "'hidden_act' 'gelu' is not supported"),
    (dict(hidden_act="gelu_pytorch_tanh"), "'hidden_act'"),
    # published Qwen configs have no layer_types: transformers derives them from max_window_layers
    (dict(use_sliding_window=True, sliding_window=4, max_window_layers=0, layer_types=None),
     "sliding-window attention"),
    (dict(use_sliding_window=True, sliding_window=4, max_window_layers=1, layer_types=None),
     "sliding-window attention"),
    (dict(layer_types=["full_attention", "sliding_attention"], sliding_window=4), "sliding-window attention"),
    (dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "rope_type 'dynamic' is not supported"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}),
     "rope_type 'yarn'"),
    (dict(rope_scaling=None, rope_parameters={"rope_type": "longrope", "rope_theta": 1e6, "factor": 2.0}),
     "rope_parameters.rope_type 'longrope'"),
    (dict(rope_scaling={"type": "su", "factor": 2.0}), "rope_type 'su'"),
    (dict(partial_rotary_factor=0.5), "'partial_rotary_factor' 0.5 is not supported"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25}),
     "'partial_rotary_factor'"),
    (dict(quantization_config={"quant_method": "gptq", "bits": 4}), "'quantization_config'"),
    (dict(num_key_value_heads=3), "must be a multiple of 'num_key_value_heads'"),
    (dict(head_dim=15), "must be even for RoPE"),
])
def test_unimplemented_fields_are_refused_by_name(ckpt, changes, match):
    edit_config(ckpt, **changes)
    with pytest.raises(ValueError, match=match):
        load(ckpt)


def test_mistral_style_sliding_window_on_llama_is_refused(tmp_path):
    path = tiny_checkpoint("llama-gqa4-d32", str(tmp_path))
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "sliding_window": 4}))
    with pytest.raises(ValueError, match="sliding-window attention is not supported"):
        load(path)


@pytest.mark.parametrize("changes", [
    dict(use_sliding_window=True, sliding_window=4, max_window_layers=2, layer_types=None),  # no layer >= 2
    dict(use_sliding_window=False, sliding_window=4),  # the published Qwen configs: window off
    dict(sliding_window=4096),  # Qwen without use_sliding_window: off
    dict(layer_types=["full_attention", "full_attention"]),
    dict(attention_dropout=0.1),  # dropout is off at inference
    dict(hidden_act="silu", pretraining_tp=2),  # tp slicing is the same matmul (transformers 5 ignores it)
])
def test_fields_without_effect_here_are_accepted(ckpt, changes):
    edit_config(ckpt, **changes)
    llm = load(ckpt)
    assert len(llm.generate({"prompt_token_ids": [5, 6]}, SamplingParams(temperature=0, max_tokens=2),
                            use_tqdm=False)[0].outputs[0].token_ids) == 2


# ---- wrong types name the field ----------------------------------------------------------------------------
@pytest.mark.parametrize("changes, match", [
    (dict(rms_norm_eps="1e-6"), r"config.json: 'rms_norm_eps' must be a positive number .*a string"),
    (dict(rms_norm_eps=-1.0), "'rms_norm_eps' must be a positive number"),
    (dict(rope_theta="abc"), "config.json: 'rope_theta' must be a positive number"),
    (dict(rope_theta=None, rope_parameters={"rope_type": "default", "rope_theta": "abc"}),
     "rope_parameters.rope_theta must be a positive number"),
    (dict(rope_scaling="linear"), "config.json: 'rope_scaling' must be an object"),
    (dict(rope_parameters=[1, 2]), "config.json: 'rope_parameters' must be an object"),
    (dict(rope_scaling={"rope_type": "linear"}), "rope_type 'linear' needs a 'factor'"),
    (dict(rope_scaling={"rope_type": "linear", "factor": "2"}), "rope_scaling.factor must be a positive number"),
    (dict(attention_bias="yes"), "'attention_bias' must be true or false"),
    (dict(tie_word_embeddings=1), "'tie_word_embeddings' must be true or false"),
    (dict(layer_types="full_attention"), "'layer_types' must be a list"),
])
def test_wrong_types_name_the_field(ckpt, changes, match):
    edit_config(ckpt, **changes)
    with pytest.raises(ValueError, match=match):
        load(ckpt)


# ---- wrong tensors name the tensor and the file -----------------------------------------------------------
def _rewrite(ckpt, edit):
    f = ckpt / "model.safetensors"
    tensors = load_file(str(f))
    edit(tensors)
    save_file(tensors, str(f), metadata={"format": "pt"})


def test_wrong_shaped_weight_names_tensor_and_file(ckpt):
    name = "model.layers.0.mlp.down_proj.weight"
    _rewrite(ckpt, lambda t: t.__setitem__(name, t[name][:, :-1].contiguous()))
    with pytest.raises(ValueError, match=rf"model.safetensors: tensor '{name}': .*shape \(64, 127\)"):
        load(ckpt)


def test_wrong_shaped_packed_shard_names_tensor_and_file(ckpt):
    name = "model.layers.1.self_attn.k_proj.weight"
    _rewrite(ckpt, lambda t: t.__setitem__(name, t[name][:-1].contiguous()))
    with pytest.raises(ValueError, match=rf"model.safetensors: tensor '{name}': .*shape \(31, 64\)"):
        load(ckpt)


@pytest.mark.parametrize("name", ["model.layers.0.self_attn.q_proj.weight", "model.norm.weight",
                                  "model.embed_tokens.weight"])
def test_zero_dim_weight_names_tensor_and_file(ckpt, name):
    _rewrite(ckpt, lambda t: t.__setitem__(name, torch.tensor(1.0)))
    with pytest.raises(ValueError, match=rf"model.safetensors: tensor '{name}' has 0 dimension"):
        load(ckpt)


# ---- sizes that cannot fit are refused before allocating --------------------------------------------------
def test_huge_vocab_is_refused_before_allocating(ckpt):
    edit_config(ckpt, vocab_size=10**9)
    with pytest.raises(ValueError, match=r"config.json: vocab_size asks for [\d,.]+ GiB for the embedding .* "
                                         r"available on cpu"):
        load(ckpt)


def test_huge_max_position_embeddings_is_refused_before_allocating(ckpt):
    edit_config(ckpt, max_position_embeddings=10**10)
    with pytest.raises(ValueError, match=r"max_position_embeddings asks for [\d,.]+ GiB for the RoPE table .* "
                                         r"\(pass a smaller max_model_len"):
        LLM(str(ckpt), device="cpu")
    llm = load(ckpt)  # with an explicit max_model_len the same checkpoint runs
    assert llm.config.max_model_len == 64


# ---- implemented: the same tokens as transformers ----------------------------------------------------------
PROMPTS = [[5, 17, 33, 2 + 7, 91, 120], [300, 4, 4, 8]]


@pytest.mark.parametrize("shape, overrides", [
    ("tiny-llama", dict(rope_scaling={"rope_type": "linear", "factor": 4.0})),
    ("tiny-llama", dict(attention_bias=True)),
    ("tiny-llama", dict(mlp_bias=True)),
    ("tiny", dict(attention_bias=True)),  # Qwen3: bias on q/k/v and o
    ("tiny-qwen2", dict(rope_scaling={"rope_type": "linear", "factor": 2.0})),
])
def test_implemented_fields_match_transformers(tmp_path, shape, overrides):
    path = make_random_checkpoint(shape, tmp_path / "m", dtype="float32", seed=1, **overrides)
    llm = LLM(str(path), max_model_len=128, device="cpu", enforce_eager=True)
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    for p, out in zip(PROMPTS, outs):
        assert out.outputs[0].token_ids == hf_greedy(str(path), p, 8)


# ---- RoPE: one table per engine, sized by max_model_len ----------------------------------------------------
def test_one_rope_table_per_engine_sized_by_max_model_len(src):
    llm = LLM(str(src), max_model_len=40, device="cpu")
    ropes = [m for m in llm.model_runner.model.modules() if isinstance(m, RotaryEmbedding)]
    assert len(ropes) == 2
    tables = {r.cos_sin_cache.data_ptr() for r in ropes}
    assert len(tables) == 1  # shared by the layers
    table = ropes[0].cos_sin_cache
    assert table.dtype == torch.float32 and table.shape == (48, 16)  # 40 positions in whole blocks of 16
    other = LLM(str(src), max_model_len=40, device="cpu")
    assert next(m for m in other.model_runner.model.modules()
                if isinstance(m, RotaryEmbedding)).cos_sin_cache.data_ptr() not in tables  # per engine
