"""What the model runner hands back to the engine for one step (vLLM: v1/outputs.py).

A module of its own because both sides import it: the worker creates a ModelRunnerOutput, the engine reads
its tokens, and neither has to import the other's code.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import torch

from minivllm.layers.sampler import LogprobsTensors

if TYPE_CHECKING:  # the engine's types, named in annotations only: worker/ never imports engine/
    from minivllm.engine.sequence import Sequence


def _to_host(t: torch.Tensor) -> torch.Tensor:
    """A non-blocking copy into pinned host memory (CUDA); the tensor itself on the CPU."""
    if t.device.type != "cuda":
        return t
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return host.copy_(t, non_blocking=True)


class ModelRunnerOutput:
    """One launched step: the sequences that got a token and those tokens, still on the device.

    `start_copy()` queues a non-blocking copy of the tokens to pinned host memory and records an event;
    `token_ids()` waits for that event only, not for the steps queued after this one. Logprobs, when a
    request asked for them, travel the same way (read them after `token_ids()`).
    """

    def __init__(self, seqs: list[Sequence], sampled: torch.Tensor | None, kind: str,
                 logprobs: LogprobsTensors | None = None) -> None:
        self.seqs, self.sampled, self.kind = seqs, sampled, kind
        self.logprobs = logprobs  # rows as `sampled` (only when a request asked for logprobs)
        # Speculative decoding: `sampled` is [S, W] (each sequence's new tokens, -1 after them), logprobs has
        # S * W rows, and this is each sequence's draft length
        self.num_draft_tokens: list[int] | None = None
        # ([(seq, first position, count)], LogprobsTensors): a prefill chunk's prompt logprobs, if asked
        self.prompt_logprobs: tuple[list[tuple[Sequence, int, int]], LogprobsTensors] | None = None
        self.gpu_start: torch.cuda.Event | None = None
        self.done: torch.cuda.Event | None = None
        self._host: torch.Tensor | None = None

    @cached_property
    def row_of(self) -> dict[int, int]:
        """seq_id -> row of its token in `sampled` (only the next async step asks, so built on demand)."""
        return {seq.seq_id: i for i, seq in enumerate(self.seqs)}

    def start_copy(self) -> None:
        self._host = None if self.sampled is None else _to_host(self.sampled)
        if self.logprobs is not None:
            self.logprobs = self.logprobs.apply(_to_host)
        if self.prompt_logprobs is not None:
            self.prompt_logprobs = (self.prompt_logprobs[0], self.prompt_logprobs[1].apply(_to_host))
        if self.gpu_start is not None:  # CUDA: the event doubles as the end of the step's GPU timing
            self.done = torch.cuda.Event(enable_timing=True)
            self.done.record()

    def token_ids(self) -> list[int] | list[list[int]]:
        """One token per sequence; under speculative decoding a list per sequence (-1 past its new tokens)."""
        if self.done is not None:
            self.done.synchronize()
        return [] if self._host is None else self._host.tolist()

    def gpu_seconds(self) -> float | None:
        """GPU time from the step's first copy to its sampled tokens (call after token_ids())."""
        if self.gpu_start is None or self.done is None:
            return None
        return self.gpu_start.elapsed_time(self.done) / 1e3
