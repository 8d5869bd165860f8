"""Turning what a user passes as a prompt into token ids, with errors that name the prompt.

Why a module of its own (vLLM: vllm/inputs/): `LLM.generate` accepts text or token ids, and both arrive
from notebooks in forms the engine must not trip over: numpy integers out of an array, a string with a
lone surrogate (the tokenizer's Rust side raises a TypeError that names nothing), or text when the
checkpoint has no tokenizer. Each case becomes a ValueError saying which prompt and what to do.
"""

from __future__ import annotations

import numbers
from typing import Any


def token_ids_from(ids: Any, where: str) -> list[int]:
    """A list of Python ints from any sequence of integers (numpy's included); range checks stay with the
    engine, which knows the vocabulary."""
    out = []
    for t in ids:
        if isinstance(t, numbers.Integral) and not isinstance(t, bool):
            out.append(int(t))
        else:
            raise ValueError(f"{where}['prompt_token_ids'] must hold ints, got {t!r} ({type(t).__name__})")
    return out


def encode_prompt(tokenizer, text: str, where: str) -> list[int]:
    """The tokenizer's ids for `text`; invalid Unicode or a missing tokenizer is a ValueError naming `where`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where} is not valid Unicode text: {e.reason} at position {e.start} "
                         f"({text[max(0, e.start - 20):e.start + 20]!r}); a lone surrogate such as '\\ud800' "
                         f"usually comes from text decoded with errors='surrogateescape'") from None
    try:
        return tokenizer.encode(text)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
