"""CudagraphDispatcher: for each step, which CUDA graphs run it and at which padded size (vLLM:
v1/cudagraph_dispatcher.py).

Why padding: a graph is recorded for one exact shape, so a batch replays the graph of the smallest captured
size at or above its own, padded (slot -1: no KV write; seq_len 0 or no query: attention writes zeros);
the padded rows' outputs are discarded. Which graphs exist depends on the engine's cudagraph_mode:

  FULL                 one graph of the whole forward per TOKEN count, for any batch: prefill, mixed or
                       decode (the unified attention kernel, whose grid depends on the token count only).
  FULL_DECODE_ONLY     one graph of the decode step per BATCH size, for pure-decode batches; the rest eager.
  FULL_AND_PIECEWISE   those decode graphs, and PIECEWISE graphs (by token count) for every other batch.
  PIECEWISE            the pieces between attention ops, by token count, for any batch.
Anything larger than the largest size runs without graphs.

The dispatcher only decides; the model runner publishes its decision in the forward context, where every
CUDAGraphWrapper (compilation/cuda_graph.py) reads it. Sizes become dispatchable only once captured.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from minivllm.config import CUDAGraphMode


@dataclass(frozen=True)
class BatchDescriptor:
    """The dispatcher's pick for one batch: the graph mode and the padded sizes (None: not padded).
    uniform_decode (vLLM's name): a FULL graph of pure-decode batches keyed by batch size; a FULL pick
    without it is a graph of any batch keyed by token count (the engine mode FULL)."""

    mode: CUDAGraphMode
    num_padded_tokens: int | None = None
    num_padded_seqs: int | None = None
    uniform_decode: bool = False


EAGER = BatchDescriptor(CUDAGraphMode.NONE)


class CudagraphDispatcher:
    def __init__(self, capture_sizes: list[int], mode: CUDAGraphMode | str) -> None:
        self.mode = CUDAGraphMode(mode)
        self.sizes = sorted(capture_sizes)
        self.full_sizes: set[int] = set()  # batch sizes with a captured FULL graph of pure decode
        self.full_token_sizes: list[int] = []  # token counts with a captured FULL graph of any batch (mode FULL)
        self.piecewise_sizes: list[int] = []  # token counts with captured PIECEWISE graphs
        self._picks: dict[tuple[CUDAGraphMode, int], BatchDescriptor] = {}  # built once, not per step
        self.counts = {"full": 0, "piecewise": 0, "eager": 0}
        self.stats: dict[str, dict] = {}  # capture statistics per mode (CaptureStats.as_dict())

    @property
    def full_any_batch(self) -> bool:
        """The FULL graphs are vLLM's FULL ones (any batch, by token count), not decode-only ones."""
        return self.mode is CUDAGraphMode.FULL

    def activate(self, mode: CUDAGraphMode, sizes: list[int]) -> None:
        """Make the sizes of runtime `mode` (FULL or PIECEWISE) dispatchable (after their graphs were captured)."""
        decode = mode is CUDAGraphMode.FULL and not self.full_any_batch
        if mode is CUDAGraphMode.FULL and self.full_any_batch:
            self.full_token_sizes = sorted(sizes)
        elif mode is CUDAGraphMode.FULL:
            self.full_sizes = set(sizes)
        else:
            self.piecewise_sizes = sorted(sizes)
        self._picks = {k: v for k, v in self._picks.items() if k[0] is not mode}
        self._picks.update({(mode, n): BatchDescriptor(mode, n, n if decode else None, uniform_decode=decode)
                            for n in sizes})

    def dispatch(self, num_tokens: int, num_seqs: int, decode_only: bool) -> BatchDescriptor:
        if self.full_token_sizes:  # mode FULL: the batch's composition does not matter, only its token count
            i = bisect.bisect_left(self.full_token_sizes, num_tokens)
            if i < len(self.full_token_sizes):
                self.counts["full"] += 1
                return self._picks[(CUDAGraphMode.FULL, self.full_token_sizes[i])]
        if decode_only and self.full_sizes:
            i = bisect.bisect_left(self.sizes, num_seqs)
            if i < len(self.sizes) and self.sizes[i] in self.full_sizes:
                self.counts["full"] += 1
                return self._picks[(CUDAGraphMode.FULL, self.sizes[i])]
        if self.piecewise_sizes:
            i = bisect.bisect_left(self.piecewise_sizes, num_tokens)
            if i < len(self.piecewise_sizes):
                self.counts["piecewise"] += 1
                return self._picks[(CUDAGraphMode.PIECEWISE, self.piecewise_sizes[i])]
        self.counts["eager"] += 1
        return EAGER
