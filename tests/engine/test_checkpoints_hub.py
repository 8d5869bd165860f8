"""Checkpoints as huggingface_hub leaves them: a `models--org--name/snapshots/<rev>/` directory whose files are
symlinks into `../../blobs/`, loaded by path or by name ("org/name", from the local cache, offline). Symlinks
that leave the model's `models--*` folder, and pickled shards, are still refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from minivllm import LLM, SamplingParams
from tests.helpers import tiny_checkpoint

PROMPT = {"prompt_token_ids": [5, 6, 7, 8]}
GREEDY = SamplingParams(temperature=0, max_tokens=4)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("ckpt")))


@pytest.fixture(scope="module")
def expected(src):
    return generate(src)


def generate(model) -> list[int]:
    llm = LLM(str(model), max_model_len=64, device="cpu")
    return llm.generate(PROMPT, GREEDY, use_tqdm=False)[0].outputs[0].token_ids


def hub_layout(src: Path, cache: Path, repo_id: str = "org/tiny", rev: str = "0123abcd" * 5,
               ref: bool = True) -> Path:
    """The layout snapshot_download writes: weights in two shards with an index, every file a relative
    symlink snapshots/<rev>/<name> -> ../../blobs/<sha256>."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    blobs, snap = repo / "blobs", repo / "snapshots" / rev
    blobs.mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True)
    tensors = load_file(str(src / "model.safetensors"))
    names = sorted(tensors)
    half = len(names) // 2
    staging = cache / f"staging-{rev}"
    staging.mkdir()
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(staging / shard), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (staging / "model.safetensors.index.json").write_text(json.dumps(index))
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, staging / f.name)
    for f in staging.iterdir():
        blob = hashlib.sha256(f.read_bytes()).hexdigest()
        os.replace(f, blobs / blob)
        (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / blob)
    staging.rmdir()
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(rev)
    return snap


def test_sharded_snapshot_of_symlinks_loads(src, expected, tmp_path):
    snap = hub_layout(src, tmp_path / "hub")
    assert (snap / "model-00001-of-00002.safetensors").is_symlink()
    assert generate(snap) == expected


def test_symlink_outside_the_model_folder_is_refused(src, tmp_path):
    snap = hub_layout(src, tmp_path / "hub")
    shard = snap / "model-00002-of-00002.safetensors"
    outside = tmp_path / "elsewhere.safetensors"
    shutil.copy(shard.resolve(), outside)
    shard.unlink()
    shard.symlink_to(outside)
    with pytest.raises(ValueError, match="points outside the model directory"):
        generate(snap)


def test_symlink_into_another_models_folder_is_refused(src, tmp_path):
    snap = hub_layout(src, tmp_path / "hub")
    other = hub_layout(src, tmp_path / "hub", repo_id="org/other")
    shard = snap / "model-00001-of-00002.safetensors"
    shard.unlink()
    shard.symlink_to((other / "model-00001-of-00002.safetensors").resolve())
    with pytest.raises(ValueError, match="points outside the model directory"):
        generate(snap)


def test_symlinked_single_file_outside_is_refused(src, tmp_path):
    model = tmp_path / "m"
    shutil.copytree(src, model)
    outside = tmp_path / "weights.safetensors"
    os.replace(model / "model.safetensors", outside)
    (model / "model.safetensors").symlink_to(outside)
    with pytest.raises(ValueError, match="'model.safetensors' points outside the model directory"):
        generate(model)


def test_index_naming_a_pickle_shard_is_refused(src, tmp_path):
    snap = hub_layout(src, tmp_path / "hub")
    index = json.loads((snap / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "pytorch_model.bin"
    (snap / "model.safetensors.index.json").unlink()
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="'pytorch_model.bin' is not a .safetensors file"):
        generate(snap)


@pytest.fixture
def no_hf_env(monkeypatch):
    for key in ("HF_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_hub_name_from_hf_hub_cache(src, expected, tmp_path, no_hf_env):
    cache = tmp_path / "hub"
    hub_layout(src, cache, rev="1" * 40)
    hub_layout(src, cache, rev="2" * 40, ref=False)  # newer, but refs/main names the first
    (cache / "models--org--tiny" / "refs" / "main").write_text("1" * 40)
    no_hf_env.setenv("HF_HUB_CACHE", str(cache))
    llm = LLM("org/tiny", max_model_len=64, device="cpu")
    assert llm.config.model.endswith("snapshots/" + "1" * 40)
    assert llm.generate(PROMPT, GREEDY, use_tqdm=False)[0].outputs[0].token_ids == expected


def test_hub_name_from_hf_home_without_refs(src, tmp_path, no_hf_env):
    home = tmp_path / "hf"
    only = hub_layout(src, home / "hub", ref=False)
    no_hf_env.setenv("HF_HOME", str(home))
    llm = LLM("org/tiny", max_model_len=64, device="cpu")
    assert Path(llm.config.model) == only


def test_hub_name_not_in_cache_says_where_it_looked(tmp_path, no_hf_env):
    no_hf_env.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ValueError) as info:
        LLM("org/missing", device="cpu")
    msg = str(info.value)
    assert "not in the local Hugging Face cache" in msg and str(tmp_path / "empty" / "models--org--missing") in msg
    no_hf_env.delenv("HF_HUB_CACHE")
    no_hf_env.setenv("HF_HOME", str(tmp_path / "home"))
    with pytest.raises(ValueError, match=str(tmp_path / "home" / "hub" / "models--org--missing")):
        LLM("org/missing", device="cpu")


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_the_shard_bar_follows_the_engine_log_level(src, tmp_path, capsys, level):
    """The shard progress bar is an INFO-level report: an engine logging warnings only (the labs' quiet
    notebooks) draws none."""
    import logging

    snap = hub_layout(src, tmp_path / "hub")
    log = logging.getLogger("minivllm")
    old = log.level
    log.setLevel(level)
    try:
        generate(snap)
    finally:
        log.setLevel(old)
    drawn = "Loading safetensors shards" in capsys.readouterr().err
    assert drawn == (level == "INFO")
