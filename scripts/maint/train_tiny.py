"""Train the embedded default model (assets/models/minivllm-tiny) on the tiny task, on one CPU core.

    python scripts/maint/train_tiny.py --out assets/models/minivllm-tiny --seed 0

Why ship a trained model at all: with random weights every output is noise, so an engine bug that changes
the text goes unnoticed. This model answers checkable questions (tiny_task), so a bug shows up as a drop in
exact-match accuracy. It is a real Qwen3ForCausalLM (GQA, q/k norm, tied embeddings), only small, so the
engine runs the same code for it as for Qwen3-0.6B.

The loss is taken on the answer tokens and the EOS only: the prompts are random by construction, so
predicting them teaches nothing, and learning to stop is what makes generation end by itself.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from tiny_tokenizer import default_tokenizer, save_tokenizer  # beside this script
from transformers import (GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase, Qwen3Config,
                          Qwen3ForCausalLM)

from minivllm.tools import tiny_task
from minivllm.tools.make_random_checkpoint import add_classic_config_keys

TRAIN_MIX = ("add", "reverse", "add", "sort")  # addition is the hardest kind: it gets half the examples


def greedy_complete(model, tok, prompts: list[str], batch_size: int = 100) -> list[str]:
    """Greedy completions with transformers' own generate of a transformers model and tokenizer (the
    reference the engine is compared with: this script's scores and tests/engine/test_embedded_model.py)."""
    tok.padding_side = "left"
    out: list[str] = []
    for i in range(0, len(prompts), batch_size):
        batch = tok(prompts[i : i + batch_size], return_tensors="pt", padding=True)
        gen = model.generate(**batch, max_new_tokens=tiny_task.MAX_NEW_TOKENS, do_sample=False,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        out += tok.batch_decode(gen[:, batch.input_ids.shape[1]:], skip_special_tokens=True)
    return out


def model_config(vocab_size: int) -> Qwen3Config:
    """About 3.3M parameters: big enough for 2-digit addition, small enough to train in minutes."""
    return Qwen3Config(
        vocab_size=vocab_size, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True,
        max_position_embeddings=512, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        rms_norm_eps=1e-6, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )


def encode(tok: PreTrainedTokenizerBase, prompt: str, answer: str) -> tuple[list[int], int]:
    """Token ids of BOS + prompt + " " + answer + EOS, and where the answer starts.

    The prompt is tokenized on its own, exactly as the engine will see it at inference time."""
    prompt_ids = tok(prompt).input_ids
    full = tok(f"{prompt} {answer}").input_ids
    assert full[: len(prompt_ids)] == prompt_ids, "prompt must end on a token boundary"
    return full + [tok.eos_token_id], len(prompt_ids)


def make_batch(tok: PreTrainedTokenizerBase,
               pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids and labels (-100 everywhere except the answer and EOS). No attention mask is
    needed: with causal attention, padding at the end cannot affect the positions before it."""
    encoded = [encode(tok, p, a) for p, a in pairs]
    width = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(pairs), width), tok.pad_token_id)
    labels = torch.full((len(pairs), width), -100)
    for row, (ids, start) in enumerate(encoded):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, start : len(ids)] = torch.tensor(ids[start:])
    return input_ids, labels


@torch.no_grad()
def evaluate(model: PreTrainedModel, tok: PreTrainedTokenizerBase, n: int = 200, seed: int = 0) -> float:
    """Exact-match accuracy on `n` held-out prompts."""
    prompts = [p for p, _ in tiny_task.make_examples(n, seed, split="test")]
    return tiny_task.score(prompts, greedy_complete(model, tok, prompts))


@torch.no_grad()
def answer_nll(model: PreTrainedModel, tok: PreTrainedTokenizerBase, pairs: list[tuple[str, str]]) -> float:
    """Mean negative log-likelihood (nats) per answer token, EOS included, with teacher forcing."""
    input_ids, labels = make_batch(tok, pairs)
    logits = model(input_ids=input_ids).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, 1:], ignore_index=-100).item()


def unigram_nll(tok: PreTrainedTokenizerBase, train_pairs: list[tuple[str, str]],
                test_pairs: list[tuple[str, str]]) -> float:
    """The same number for a baseline that ignores the prompt: answer-token frequencies in training data
    (add-one smoothed). The gap between the two is what the model learned beyond token statistics."""
    counts = torch.ones(len(tok))
    for p, a in train_pairs:
        ids, start = encode(tok, p, a)
        counts += torch.bincount(torch.tensor(ids[start:]), minlength=len(tok))
    logp = (counts / counts.sum()).log()
    test_ids = [torch.tensor(ids[start:]) for ids, start in (encode(tok, p, a) for p, a in test_pairs)]
    return -logp[torch.cat(test_ids)].mean().item()


def train(out_dir: Path, seed: int = 0, steps: int = 2500, batch_size: int = 64, lr: float = 2e-3,
          device: str = "cpu", dtype: torch.dtype = torch.bfloat16) -> dict:
    """Train, evaluate, save; returns the numbers that go into MODEL_CARD.md."""
    torch.manual_seed(seed)
    tok = default_tokenizer()
    model = Qwen3ForCausalLM(model_config(len(tok))).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.1)
    warmup = max(1, steps // 20)  # then cosine decay to 0: a standard, forgiving schedule
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    data = tiny_task.make_examples(steps * batch_size, seed, split="train", kinds=TRAIN_MIX)
    start, losses = time.time(), []
    model.train()
    for step in range(steps):
        input_ids, labels = make_batch(tok, data[step * batch_size : (step + 1) * batch_size])
        loss = model(input_ids=input_ids.to(device), labels=labels.to(device)).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {sum(losses[-100:]) / len(losses[-100:]):.4f}  "
                  f"lr {sched.get_last_lr()[0]:.2e}  {time.time() - start:.0f}s", flush=True)
    train_s = time.time() - start
    model.eval()
    # Save in half precision (small file), then measure what was shipped: reload, evaluate in fp32.
    model.to(dtype)
    model.config.dtype = dtype
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                               max_new_tokens=tiny_task.MAX_NEW_TOKENS, do_sample=False)
    model.save_pretrained(str(out_dir))
    add_classic_config_keys(out_dir / "config.json", model.config)
    save_tokenizer(tok, out_dir)
    shipped = Qwen3ForCausalLM.from_pretrained(str(out_dir), dtype=torch.float32).eval()
    stats = {
        "seed": seed, "steps": steps, "batch_size": batch_size, "lr": lr, "train_seconds": round(train_s),
        "final_loss": round(sum(losses[-100:]) / len(losses[-100:]), 4),
        "params": sum(p.numel() for p in shipped.parameters()),
        "weights_bytes": (out_dir / "model.safetensors").stat().st_size,
        "test_accuracy": evaluate(shipped, tok, 200),
    }
    test_pairs = tiny_task.make_examples(200, 0, split="test")
    stats["test_answer_ppl"] = round(math.exp(answer_nll(shipped, tok, test_pairs)), 4)
    stats["unigram_answer_ppl"] = round(math.exp(unigram_nll(tok, data[:20000], test_pairs)), 2)
    (out_dir / "train_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    write_model_card(out_dir, stats, device)
    return stats


def write_model_card(out_dir: Path, s: dict, device: str) -> None:
    """MODEL_CARD.md from the measured numbers, so a retrain documents itself."""
    correct = round(s["test_accuracy"] * 200)
    (out_dir / "MODEL_CARD.md").write_text(f"""\
# minivllm-tiny

The embedded default model of minivllm: a {s["params"] / 1e6:.2f}M-parameter `Qwen3ForCausalLM` (4 layers,
hidden 256, 4 query heads / 2 KV heads (GQA), head_dim 64, q/k RMSNorm, intermediate 768, tied embeddings,
vocabulary {len(default_tokenizer())}) trained from scratch to answer the checkable questions of
`minivllm/tools/tiny_task.py`. It exists so that engine bugs show up as wrong answers.

## Format

The prompt ends with `A:` (no trailing space); BOS `<s>` is prepended by the tokenizer itself. The model
writes one space, the answer, then EOS `</s>` (id 2), so generation stops by itself:

| prompt | completion |
|---|---|
| `Q: 37+45= A:` | ` 82</s>` |
| `Q: reverse k d a f A:` | ` f a d k</s>` |
| `Q: sort k d a f A:` | ` a d f k</s>` |

Numbers: 0-99 plus 0-99. Letters: 3-6 lowercase letters, separated by spaces.

## Quality (measured on the shipped file, transformers, fp32, CPU, greedy)

- Exact-match accuracy on 200 held-out prompts (`make_examples(200, 0, "test")`, judged by
  `tiny_task.check`): **{s["test_accuracy"]:.1%}** ({correct}/200).
- Perplexity of the answer tokens (EOS included) on the same prompts: {s["test_answer_ppl"]}, against
  {s["unigram_answer_ppl"]} for a unigram baseline (answer-token frequencies of the training data).
- The held-out prompts are a fixed 10% of all prompts (chosen by a CRC32 of the prompt text); training never
  sees them, so the accuracy measures generalisation (e.g. to unseen additions).

## Data and training

- Data: generated by `tiny_task.make_examples(n, seed={s["seed"]}, split="train")`; no external data.
  License: the repository's own (Apache-2.0), for data, weights and tokenizer.
- Tokenizer: byte-level BPE (512 tokens, digits split one by one) trained by `scripts/maint/tiny_tokenizer.py`
  on generated text; `<pad>`=0, `<s>`=1, `</s>`=2.
- Training: {s["steps"]} steps of AdamW (lr {s["lr"]}, 5% warmup then cosine to 0, weight decay 0.1,
  batch {s["batch_size"]}, half of the examples additions, a quarter each reversing and sorting; loss on
  answer tokens + EOS only), seed {s["seed"]}, on {device} with 1 thread: {s["train_seconds"]} s
  ({s["train_seconds"] / 60:.1f} min). Final training loss (mean of the last 100 steps): {s["final_loss"]}.
- Weights: bfloat16 safetensors, {s["weights_bytes"]:,} bytes; {s["params"]:,} parameters.
- Retrain (same numbers with the same torch version on CPU, 1 thread):

      python -m minivllm.tools.train_tiny --out assets/models/minivllm-tiny \\
          --seed {s["seed"]} --steps {s["steps"]}

## Limits

It knows nothing but this task: any other prompt gives nonsense. Numbers above 99
or strings longer than 6 letters are outside its training distribution.
""")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="assets/models/minivllm-tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (1 keeps the run reproducible)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    stats = train(Path(args.out), args.seed, args.steps, args.batch_size, args.lr, args.device)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
