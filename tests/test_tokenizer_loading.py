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
