"""Drafts by prompt lookup, vLLM's "ngram" method (vllm/v1/spec_decode/ngram_proposer.py).

Why this works without a draft model: text that repeats itself (code being edited, a document being
quoted, a list with a fixed shape) continues the way it continued before. The newest n tokens of a
sequence are looked up earlier in the same sequence (prompt and output); where they occurred, the tokens
that followed are the draft. The longest n in [prompt_lookup_min, prompt_lookup_max] that matches wins,
and among equally long matches the earliest occurrence, as vLLM's KMP search picks it. On the CPU with
numpy's help, as vLLM's (it runs between steps, on token ids the CPU already has).
"""

from __future__ import annotations

import numpy as np

from minivllm.config import SpeculativeConfig


def propose_ngram(token_ids: np.ndarray, min_n: int, max_n: int, k: int) -> list[int]:
    """Up to k draft tokens for a sequence of tokens `token_ids` (1-D ints below 2**31); [] when no suffix of
    min_n..max_n tokens occurred earlier.

    The tokens as int32 bytes: bytes.find (C speed) gives the earliest occurrence of the suffix that ends before
    the last token; a hit off a 4-byte boundary spans two tokens and is skipped. A step proposes for every
    decoding request, so this runs once per request per step: on repeated text about 10x faster than a numpy
    scan of the candidate positions (64 sequences of 200 tokens, a 2-core CPU)."""
    L = len(token_ids)
    buf = np.ascontiguousarray(token_ids, dtype=np.int32).tobytes()
    limit = 4 * (L - 1)  # a match must end before the last token: a token must follow it
    for n in range(min(max_n, L - 1), min_n - 1, -1):
        pattern = buf[4 * (L - n):]
        at = buf.find(pattern, 0, limit)
        while at != -1 and at % 4:
            at = buf.find(pattern, at + 1, limit)
        if at != -1:
            start = at // 4 + n
            return token_ids[start:start + k].tolist()
    return []


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
        return propose_ngram(np.asarray(token_ids, dtype=np.int32), self.min_n, self.max_n, k)
