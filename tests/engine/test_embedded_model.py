"""The shipped default model (assets/models/minivllm-tiny) answers held-out tiny_task prompts correctly.

This pins the reference: transformers, fp32, CPU, greedy. The engine's own tests compare against it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import minivllm
from minivllm.tools import tiny_task

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "maint"))
from train_tiny import greedy_complete  # noqa: E402 - transformers' generate, the reference

MODEL_DIR = Path(minivllm.DEFAULT_MODEL)


@pytest.fixture(scope="module")
def shipped():
    torch.set_num_threads(min(2, torch.get_num_threads()))
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(MODEL_DIR)


def test_size_limits(shipped):
    model, _ = shipped
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert sum(p.numel() for p in model.parameters()) <= 20_000_000
    assert sum(f.stat().st_size for f in MODEL_DIR.glob("*.safetensors")) <= 40 * 2**20
    assert (MODEL_DIR / "MODEL_CARD.md").exists()


def test_tokenizer_format(shipped):
    _, tok = shipped
    ids = tok("Q: 12+34= A:").input_ids
    assert ids[0] == tok.bos_token_id and tok.eos_token_id not in ids
    assert tok.decode(ids, skip_special_tokens=True) == "Q: 12+34= A:"


def test_held_out_accuracy(shipped):
    model, tok = shipped
    prompts = [p for p, _ in tiny_task.make_examples(200, seed=0, split="test")]
    start = time.time()
    completions = greedy_complete(model, tok, prompts)
    acc = tiny_task.score(prompts, completions)
    wrong = [(p, c) for p, c in zip(prompts, completions) if not tiny_task.check(p, c)]
    assert acc >= 0.95, f"accuracy {acc:.3f}; first mistakes: {wrong[:5]}"
    assert time.time() - start < 60


def test_demo_prompts_stop_at_eos(shipped):
    model, tok = shipped
    completions = greedy_complete(model, tok, tiny_task.DEMO_PROMPTS)
    assert tiny_task.score(tiny_task.DEMO_PROMPTS, completions) >= 5 / 6, completions


def test_task_split_and_checker():
    train = {p for p, _ in tiny_task.make_examples(3000, seed=0)}
    test = [p for p, _ in tiny_task.make_examples(200, seed=0, split="test")]
    assert not train & set(test) and len(set(test)) == 200
    assert tiny_task.check("Q: 37+45= A:", " 82") and tiny_task.check("Q: 37+45= A:", " 82</s>")
    assert not tiny_task.check("Q: 37+45= A:", " 82 Q:") and not tiny_task.check("Q: 37+45= A:", " 8")
    assert tiny_task.check("Q: reverse a b c A:", " c b a") and tiny_task.check("Q: sort c a b A:", " a b c")
    assert tiny_task.score(["Q: 1+1= A:", "Q: 1+2= A:"], [" 2", " 4"]) == 0.5
