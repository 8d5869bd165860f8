"""Test helpers: random-weight checkpoints made once per session, config edits, the transformers reference."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch

from minivllm.tools.make_random_checkpoint import make_random_checkpoint

# Family, GQA ratio (heads / kv heads) and head size vary across these, as the engine must support them.
TINY_SHAPES = {
    "qwen3-gqa2-d16": ("tiny", dict(num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_size=64)),
    "llama-gqa4-d32": ("tiny-llama", dict(num_attention_heads=8, num_key_value_heads=2, head_dim=32,
                                          hidden_size=128, tie_word_embeddings=False)),
    "qwen2-mha-d16": ("tiny-qwen2", dict(num_attention_heads=4, num_key_value_heads=4, hidden_size=64)),
}


@lru_cache(maxsize=None)
def tiny_checkpoint(name: str, root: str) -> Path:
    shape, overrides = TINY_SHAPES[name]
    return make_random_checkpoint(shape, Path(root) / name, dtype="float32", seed=0, **overrides)


def edit_config(ckpt: Path, **changes) -> None:
    """Change fields of a checkpoint's config.json in place (the tests copy a checkpoint first)."""
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg.update(changes)
    (ckpt / "config.json").write_text(json.dumps(cfg))


@lru_cache(maxsize=None)
def hf_model(path: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def hf_greedy(path: str, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Plain greedy decoding with transformers' forward (no generation-config rules such as EOS handling)."""
    model = hf_model(path)
    ids = torch.tensor([prompt_ids])
    out, past = [], None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            res = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = res.past_key_values
            tok = int(res.logits[0, -1].argmax())
            out.append(tok)
            ids = torch.tensor([[tok]])
    return out


def random_prompts(vocab: int, lengths: list[int], seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]


def run_in_threads(jobs: dict, reps: int, timeout: float = 300.0) -> dict:
    """Call each job (a no-argument callable) `reps` times, one thread per job, all started together.
    Returns {job key: [results]}; raises the first error a thread hit, or if a thread is still running."""
    import threading

    got: dict = {k: [] for k in jobs}
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(key) -> None:
        try:
            start.wait()
            for _ in range(reps):
                got[key].append(jobs[key]())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=timeout)
    if errors:
        raise errors[0]
    if any(th.is_alive() for th in threads):
        raise TimeoutError(f"a thread was still running after {timeout} s")
    return got
