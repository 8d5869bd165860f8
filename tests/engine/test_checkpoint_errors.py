"""Every way a checkpoint directory can be broken gives a ValueError that names the file and what is wrong
(never a bare SafetensorError, KeyError, AttributeError or JSONDecodeError), and weights are read from
safetensors only."""

from __future__ import annotations

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from minivllm import LLM
from tests.helpers import edit_config, tiny_checkpoint


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("ckpt")))


@pytest.fixture
def ckpt(src, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(src, dst)
    return dst


def load(ckpt):
    return LLM(str(ckpt), max_model_len=64, device="cpu")


@pytest.mark.parametrize("content, match", [
    (b"", "model.safetensors: not a readable safetensors file"),
    (b"garbage, not a header at all", "model.safetensors: not a readable safetensors file"),
    ("truncate", "model.safetensors: not a readable safetensors file"),
])
def test_broken_safetensors(ckpt, content, match):
    f = ckpt / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2] if content == "truncate" else content)
    with pytest.raises(ValueError, match=match):
        load(ckpt)


def test_safetensors_path_that_is_a_directory(ckpt):
    (ckpt / "model.safetensors").unlink()
    (ckpt / "model.safetensors").mkdir()
    with pytest.raises(ValueError, match="model.safetensors: is a directory"):
        load(ckpt)


@pytest.mark.parametrize("text, match", [
    ("[1, 2]", "config.json: must hold a JSON object"),
    ("null", "config.json: must hold a JSON object"),
    ('{"architectures": ', r"config.json: not valid JSON"),
])
def test_config_json_not_an_object(ckpt, text, match):
    (ckpt / "config.json").write_text(text)
    with pytest.raises(ValueError, match=match):
        load(ckpt)


@pytest.mark.parametrize("changes, match", [
    (dict(architectures="Qwen3ForCausalLM"), r"config.json: 'architectures' must be a list .* got the string"),
    (dict(architectures=[3]), "'architectures' must be a list of class names"),
    (dict(max_position_embeddings=1), "'max_position_embeddings' must be an int >= 2"),
    (dict(max_position_embeddings=-4), "'max_position_embeddings' must be an int >= 2"),
    (dict(max_position_embeddings="4096"), "'max_position_embeddings'"),
    (dict(eos_token_id="</s>"), "'eos_token_id' must be a non-negative int"),
    (dict(eos_token_id=[2, None]), "'eos_token_id'"),
    (dict(eos_token_id=True), "'eos_token_id'"),
    (dict(hidden_size=0), "'hidden_size' must be a positive int"),
    (dict(vocab_size=64.0), "'vocab_size' must be a positive int"),
])
def test_bad_config_fields(ckpt, changes, match):
    edit_config(ckpt, **changes)
    with pytest.raises(ValueError, match=match):
        load(ckpt)


def _sharded(ckpt, weight_map):
    (ckpt / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.mark.parametrize("index, match", [
    ({"metadata": {}}, "index.json: must be a JSON object with a non-empty 'weight_map'"),
    ([], "index.json: must be a JSON object"),
    ({"weight_map": None}, "'weight_map'"),
    ("{not json", r"index.json: not valid JSON"),
    ({"weight_map": {"x": 5}}, "'weight_map' values must be file names"),
])
def test_bad_index(ckpt, index, match):
    f = ckpt / "model.safetensors.index.json"
    f.write_text(index if isinstance(index, str) else json.dumps(index))
    with pytest.raises(ValueError, match=match):
        load(ckpt)


@pytest.mark.parametrize("where", ["../outside.safetensors", "/tmp/outside.safetensors"])
def test_index_pointing_outside_the_model_dir_is_refused(ckpt, where):
    outside = ckpt.parent / "outside.safetensors"
    shutil.copy(ckpt / "model.safetensors", outside)
    target = where if where.startswith("..") else str(outside)
    tensors = load_file(str(ckpt / "model.safetensors"))
    _sharded(ckpt, {name: target for name in tensors})
    with pytest.raises(ValueError, match="points outside the model directory .*; refused"):
        load(ckpt)


def test_sharded_checkpoint_inside_the_dir_loads(ckpt):
    tensors = load_file(str(ckpt / "model.safetensors"))
    names = sorted(tensors)
    (ckpt / "model.safetensors").unlink()
    save_file({n: tensors[n] for n in names[::2]}, str(ckpt / "a.safetensors"))
    save_file({n: tensors[n] for n in names[1::2]}, str(ckpt / "sub-b.safetensors"))
    _sharded(ckpt, {n: ("a.safetensors" if i % 2 == 0 else "sub-b.safetensors") for i, n in enumerate(names)})
    assert load(ckpt).engine_vocab > 0


def test_nan_and_inf_weights_warn_with_the_tensor_name(ckpt, caplog):
    f = ckpt / "model.safetensors"
    tensors = load_file(str(f))
    name = next(n for n in sorted(tensors) if n.endswith("mlp.down_proj.weight"))
    tensors[name][0, 0] = float("nan")
    other = next(n for n in sorted(tensors) if n.endswith("input_layernorm.weight"))
    tensors[other][1] = float("inf")
    save_file(tensors, str(f))
    with caplog.at_level("WARNING", logger="minivllm"):
        load(ckpt)
    msgs = [r.getMessage() for r in caplog.records if "NaN or inf" in r.getMessage()]
    assert len(msgs) == 1 and name in msgs[0] and other in msgs[0] and "2 tensor(s)" in msgs[0]


def test_finite_weights_do_not_warn(ckpt, caplog):
    with caplog.at_level("WARNING", logger="minivllm"):
        load(ckpt)
    assert not [r for r in caplog.records if "NaN or inf" in r.getMessage()]
