"""A synthetic task whose answers a program can check: the training data of the embedded model.

Why synthetic: a model trained on it in minutes on one CPU core writes text that is *right or wrong*,
so "did my engine change the output?" becomes "did the exact-match accuracy drop?", not a matter of taste.
It needs no download, and the data license is the repo's own (Apache-2.0).

Three kinds of question, all ending in " A:"; the answer follows after one space, then EOS:

    Q: 37+45= A: 82
    Q: reverse k d a f A: f a d k
    Q: sort k d a f A: a d f k

Letters are written with spaces between them so that each letter is one token (BPE never merges across
a space), which keeps reversing and sorting a matter of moving tokens around. The tokenizer splits digits
one by one for the same reason. A fixed 10% of all possible prompts (chosen by a hash of the prompt text)
is the test split: training never sees them, so test accuracy measures generalisation, not memory.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence

KINDS = ("add", "reverse", "sort")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
MIN_LETTERS, MAX_LETTERS = 3, 6
MAX_NEW_TOKENS = 8  # the longest answer, " f e d c b a" + EOS, is 7 tokens
EOS_TEXT = "</s>"  # the tokenizer's eos token, seen in text only when decoding keeps special tokens

#: A handful of held-out prompts (none is in the training split) for `make demo` and the README.
DEMO_PROMPTS = [
    "Q: 17+96= A:",
    "Q: 11+54= A:",
    "Q: reverse t o r c h A:",
    "Q: reverse t i n y A:",
    "Q: sort k e r n e l A:",
    "Q: sort b l o c k A:",
]

_ADD = re.compile(r"^Q: (\d+)\+(\d+)= A:$")
_LETTER_OP = re.compile(r"^Q: (reverse|sort) ((?:[a-z] )*[a-z]) A:$")


def is_test_prompt(prompt: str) -> bool:
    """The fixed held-out 10%: decided by the prompt text alone, so no seed leaks a test prompt into
    training."""
    return zlib.crc32(prompt.encode()) % 10 == 0


def answer(prompt: str) -> str:
    """Compute the expected answer by parsing the prompt (the checker is a program, not a lookup table)."""
    if m := _ADD.match(prompt):
        return str(int(m[1]) + int(m[2]))
    if m := _LETTER_OP.match(prompt):
        letters = m[2].split(" ")
        return " ".join(reversed(letters) if m[1] == "reverse" else sorted(letters))
    raise ValueError(f"not a tiny_task prompt: {prompt!r}")


def _random_prompt(rng: random.Random, kind: str) -> str:
    if kind == "add":
        return f"Q: {rng.randrange(100)}+{rng.randrange(100)}= A:"
    letters = " ".join(rng.choice(LETTERS) for _ in range(rng.randint(MIN_LETTERS, MAX_LETTERS)))
    return f"Q: {kind} {letters} A:"


def make_examples(n: int, seed: int = 0, split: str = "train",
                  kinds: Sequence[str] = KINDS) -> list[tuple[str, str]]:
    """`n` (prompt, answer) pairs, taking `kinds` in turn (repeat a kind to give it more weight). Test
    prompts are distinct; train prompts may repeat (there are only 10,000 additions). The answer has no
    leading space and no EOS: the model writes " " + answer + EOS after the prompt."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    rng = random.Random(f"{split}:{seed}")
    want_test = split == "test"
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    while len(out) < n:
        prompt = _random_prompt(rng, kinds[len(out) % len(kinds)])
        if is_test_prompt(prompt) != want_test or (want_test and prompt in seen):
            continue
        seen.add(prompt)
        out.append((prompt, answer(prompt)))
    return out


def check(prompt: str, completion: str) -> bool:
    """True when the completion is exactly the answer (surrounding spaces aside), optionally followed by
    the EOS text. Anything after the answer fails: the model must stop by itself."""
    completion = completion.split(EOS_TEXT, 1)[0] if EOS_TEXT in completion else completion
    return completion.strip() == answer(prompt)


def score(prompts: Sequence[str], completions: Sequence[str]) -> float:
    """Exact-match accuracy in [0, 1]."""
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    if not prompts:
        return 0.0
    return sum(check(p, c) for p, c in zip(prompts, completions)) / len(prompts)
