"""Drafts by prompt lookup, vLLM's "ngram" method (vllm/v1/spec_decode/ngram_proposer.py).

Why this works without a draft model: text that repeats itself (code being edited, a document being
quoted, a list with a fixed shape) continues the way it continued before. The newest n tokens of a
sequence are looked up earlier in the same sequence (prompt and output); where they occurred, the tokens
that followed are the draft. The longest n in [prompt_lookup_min, prompt_lookup_max] that matches wins,
and among equally long matches the earliest occurrence, as vLLM's KMP search picks it. On the CPU with
numpy, as vLLM's (it runs between steps, on token ids the CPU already has).
"""

from __future__ import annotations

import numpy as np

from minivllm.config import SpeculativeConfig


def propose_ngram(token_ids: np.ndarray, min_n: int, max_n: int, k: int) -> list[int]:
    """Up to k draft tokens for a sequence of tokens `token_ids` (1-D ints); [] when no suffix of
    min_n..max_n tokens occurred earlier.

    Candidates are the earlier positions p holding the newest token (a match must end there, with a token
    after it); each is extended backwards token by token up to max_n, all candidates at once."""
    L = len(token_ids)
    ends = np.flatnonzero(token_ids[:L - 1] == token_ids[L - 1])
    if ends.size == 0:
        return []
    match = np.ones(ends.size, dtype=bool)
    length = np.ones(ends.size, dtype=np.int64)
    for j in range(1, min(max_n, L - 1)):
        ok = ends >= j
        match &= ok
        match[ok] &= token_ids[ends[ok] - j] == token_ids[L - 1 - j]
        if not match.any():
            break
        length += match
    best = int(length.max())
    if best < min_n:
        return []
    start = int(ends[np.argmax(length == best)]) + 1  # the earliest of the longest matches
    return token_ids[start:start + k].tolist()


class NgramProposer:
    """The engine's proposer: one draft per decoding request, each capped by what the request may still hold."""

    def __init__(self, config: SpeculativeConfig) -> None:
        self.k = config.num_speculative_tokens
        self.min_n, self.max_n = config.prompt_lookup_min, config.prompt_lookup_max

    def propose(self, token_ids: list[int], max_len: int) -> list[int]:
        """A draft of at most min(k, max_len) tokens for a sequence whose tokens are `token_ids`."""
        k = min(self.k, max_len)
        if k <= 0 or len(token_ids) <= self.min_n:
            return []
        return propose_ngram(np.asarray(token_ids, dtype=np.int64), self.min_n, self.max_n, k)
