"""The engine's light tokenizer (tokenizers over tokenizer.json) must encode and decode exactly like
transformers' AutoTokenizer on the same checkpoint; checkpoints that ask transformers to rewrite the
tokenizer get AutoTokenizer itself."""

from __future__ import annotations

import json
import random

import pytest

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.loader import FastTokenizer, load_hf_tokenizer, load_tokenizer
from tests.helpers import tiny_checkpoint

TEXTS = ["Q: 17+96= A:", "Q: reverse t o r c h A:", "Hello, world!  Two  spaces.", "ünïcödé ✓ 中文 🙂",
         "<s>literal special</s> tokens", "\n\ttabs and\nnewlines\n", "a" * 300, " leading space"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tok"))
    return [DEFAULT_MODEL, str(tiny_checkpoint("llama-gqa4-d32", root)), str(tiny_checkpoint("qwen2-mha-d16", root))]


def test_fast_tokenizer_equals_transformers(checkpoints):
    from pathlib import Path

    for path in map(Path, checkpoints):
        fast, hf = load_tokenizer(path), load_hf_tokenizer(path)
        assert isinstance(fast, FastTokenizer)
        assert fast.eos_token_id == hf.eos_token_id
        for text in TEXTS:
            assert fast.encode(text) == hf.encode(text), (path.name, text)
        rng = random.Random(0)
        for _ in range(20):
            ids = [rng.randrange(fast.vocab_size) for _ in range(rng.randint(1, 40))]
            assert fast.decode(ids) == hf.decode(ids, skip_special_tokens=True), (path.name, ids)


def test_transformers_specific_config_gets_autotokenizer(tmp_path):
    import shutil

    ckpt = tmp_path / "m"
    shutil.copytree(DEFAULT_MODEL, ckpt)
    cfg = json.loads((ckpt / "tokenizer_config.json").read_text())
    cfg["add_bos_token"] = True
    (ckpt / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert not isinstance(load_tokenizer(ckpt), FastTokenizer)


def test_get_tokenizer_returns_the_transformers_tokenizer():
    llm = LLM(DEFAULT_MODEL, max_model_len=64)
    assert isinstance(llm.tokenizer, FastTokenizer)
    before = llm.generate("Q: 17+96= A:", SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    tok = llm.get_tokenizer()
    assert not isinstance(tok, FastTokenizer) and hasattr(tok, "apply_chat_template")
    after = llm.generate("Q: 17+96= A:", SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    assert before[0].outputs[0].text == after[0].outputs[0].text
    assert before[0].prompt_token_ids == after[0].prompt_token_ids


def _without_tokenizer(src, dst):
    """A checkpoint as model.save_pretrained alone writes it: config, generation config, weights."""
    import shutil

    dst.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(src / name, dst / name)
    return dst


@pytest.mark.parametrize("shape", ["qwen3-gqa2-d16", "llama-gqa4-d32"])
def test_checkpoint_without_tokenizer_runs_on_token_ids(tmp_path, shape, caplog):
    path = _without_tokenizer(tiny_checkpoint(shape, str(tmp_path)), tmp_path / "no-tok")
    with caplog.at_level("WARNING", logger="minivllm"):
        llm = LLM(str(path), max_model_len=64)
    warned = [r for r in caplog.records if "no tokenizer files" in r.getMessage()]
    assert len(warned) == 1
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    out = llm.generate({"prompt_token_ids": [5, 6, 7]}, params, use_tqdm=False)[0]
    assert len(out.outputs[0].token_ids) == 4 and out.outputs[0].text == ""
    with pytest.raises(ValueError, match=r"prompts\[0\].*no tokenizer files.*--skip-tokenizer-init"):
        llm.generate("Hello", params, use_tqdm=False)
    assert llm.generate({"prompt_token_ids": [5, 6, 7]}, params, use_tqdm=False)[0].outputs[0].token_ids == \
        out.outputs[0].token_ids


def test_skip_tokenizer_init_gives_ids_and_no_text(tmp_path):
    path = tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))
    params = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    with_tok = LLM(str(path), max_model_len=64).generate({"prompt_token_ids": [4, 5, 6]}, params, use_tqdm=False)
    llm = LLM(str(path), max_model_len=64, skip_tokenizer_init=True)
    out = llm.generate({"prompt_token_ids": [4, 5, 6]}, params, use_tqdm=False)[0]
    assert out.outputs[0].token_ids == with_tok[0].outputs[0].token_ids and out.outputs[0].text == ""
    with pytest.raises(ValueError, match="skip_tokenizer_init=True"):
        llm.generate(["a", "b"], params, use_tqdm=False)


def test_lone_surrogate_names_the_prompt(tmp_path):
    llm = LLM(str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path))), max_model_len=64)
    with pytest.raises(ValueError, match=r"prompts\[1\] is not valid Unicode text: surrogates not allowed"):
        llm.generate(["fine", "bad \ud800 text"], SamplingParams(max_tokens=2), use_tqdm=False)
    out = llm.generate("fine", SamplingParams(temperature=0, max_tokens=2), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 2
