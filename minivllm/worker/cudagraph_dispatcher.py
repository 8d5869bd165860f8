"""CudagraphDispatcher: for each step, which CUDA graphs run it and at which padded size (vLLM:
v1/cudagraph_dispatcher.py).

Why padding: a graph is recorded for one exact shape. A batch of S decode sequences replays the FULL graph
of the smallest captured size B >= S, rows S..B-1 padded (slot -1: no KV write; seq_len 0: attention writes
zeros); their outputs are discarded. A batch of T tokens that is not pure decode (prefill, chunks, mixed)
replays the PIECEWISE graphs of the smallest captured token count >= T. Anything larger runs eagerly.

The dispatcher only decides; the model runner publishes its decision in the forward context, where every
CUDAGraphWrapper (compilation/cuda_graph.py) reads it. Sizes become dispatchable only once captured.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from minivllm.config import CUDAGraphMode


@dataclass(frozen=True)
class BatchDescriptor:
    """The dispatcher's pick for one batch: the graph mode and the padded sizes (None: not padded)."""

    mode: CUDAGraphMode
    num_padded_tokens: int | None = None
    num_padded_seqs: int | None = None


EAGER = BatchDescriptor(CUDAGraphMode.NONE)


class CudagraphDispatcher:
    def __init__(self, capture_sizes: list[int], mode: CUDAGraphMode | str) -> None:
        self.mode = CUDAGraphMode(mode)
        self.sizes = sorted(capture_sizes)
        self.full_sizes: set[int] = set()  # batch sizes with a captured FULL graph
        self.piecewise_sizes: list[int] = []  # token counts with captured PIECEWISE graphs
        self._picks: dict[tuple[CUDAGraphMode, int], BatchDescriptor] = {}  # built once, not per step
        self.counts = {"full": 0, "piecewise": 0, "eager": 0}
        self.stats: dict[str, dict] = {}  # capture statistics per mode (CaptureStats.as_dict())

    def activate(self, mode: CUDAGraphMode, sizes: list[int]) -> None:
        """Make the sizes of `mode` dispatchable (after their graphs were captured)."""
        if mode is CUDAGraphMode.FULL:
            self.full_sizes = set(sizes)
        else:
            self.piecewise_sizes = sorted(sizes)
        self._picks = {k: v for k, v in self._picks.items() if k[0] is not mode}
        self._picks.update({(mode, n): BatchDescriptor(mode, n, n if mode is CUDAGraphMode.FULL else None)
                            for n in sizes})

    def dispatch(self, num_tokens: int, num_seqs: int, decode_only: bool) -> BatchDescriptor:
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
