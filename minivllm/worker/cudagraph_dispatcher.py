"""CudagraphDispatcher: for each step, which CUDA graphs run it and at which padded size (vLLM:
v1/cudagraph_dispatcher.py).

Why padding: a graph is recorded for one exact shape, so a batch replays the graph of the smallest captured
size at or above its own, padded (slot -1: no KV write; seq_len 0 or no query: attention writes zeros);
the padded rows' outputs are discarded. Which graphs exist follows from the engine's cudagraph_mode, which
EngineConfig.resolve turns into capture sizes per kind of graph (and how FULL graphs are keyed) once:

  FULL                 one graph of the whole forward per TOKEN count, for any batch: prefill, mixed or
                       decode (the unified attention kernel, whose grid depends on the token count only).
  FULL_DECODE_ONLY     one graph of the whole forward per BATCH size, for pure-decode batches; the rest eager.
                       Under speculative decoding a decode graph holds 1 + k query tokens per request (vLLM's
                       uniform_decode_query_len) and runs every decode or verify batch that fits it.
  FULL_AND_PIECEWISE   those decode graphs, and PIECEWISE graphs (by token count) for every other batch.
  PIECEWISE            the pieces between attention ops, by token count, for any batch.
Anything larger than the largest size runs without graphs. Every full graph ends at the hidden states: the
LM head runs after it on the sampled rows only.

A step without graphs is still padded to the engine's padding floor (EngineConfig.min_num_tokens: a traced
forward never sees 1 token). The dispatcher only decides; the model runner publishes its pick in the forward
context, where every CUDAGraphWrapper (compilation/cuda_graph.py) reads it. Sizes become dispatchable only
once captured.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from minivllm.config import CUDAGraphMode


@dataclass(frozen=True)
class BatchDescriptor:
    """The dispatcher's pick for one batch: the runtime mode (FULL, PIECEWISE or NONE) and the padded sizes
    (None: not padded). uniform_decode (vLLM's name): a FULL graph of pure-decode batches keyed by batch size;
    a FULL pick without it is a graph of any batch keyed by token count (the engine mode FULL)."""

    mode: CUDAGraphMode
    num_padded_tokens: int | None = None
    num_padded_seqs: int | None = None
    uniform_decode: bool = False


class CudagraphDispatcher:
    """Built from the resolved config's decisions (worker/model_runner.py), not from cudagraph_mode: which sizes
    exist per kind of graph arrives with `activate`, and full_graphs_by_tokens says how FULL graphs are keyed."""

    def __init__(self, full_graphs_by_tokens: bool = False, min_num_tokens: int = 1,
                 uniform_decode_query_len: int = 1) -> None:
        self.by_tokens = full_graphs_by_tokens  # EngineConfig.full_graphs_by_tokens (cudagraph_mode FULL)
        self.min_num_tokens = min_num_tokens
        self.q_len = uniform_decode_query_len  # tokens per request of a decode graph (1 + k: speculation)
        self.full_sizes: list[int] = []  # captured FULL graphs: batch sizes of pure decode, or (mode FULL) tokens
        self.piecewise_sizes: list[int] = []  # token counts with captured PIECEWISE graphs
        self._picks: dict[tuple[CUDAGraphMode, int], BatchDescriptor] = {}  # built once, not per step
        self.counts = {"full": 0, "piecewise": 0, "eager": 0}

    def activate(self, mode: CUDAGraphMode, sizes: list[int]) -> None:
        """Make the sizes of runtime `mode` (FULL or PIECEWISE) dispatchable (after their graphs were captured)."""
        decode = mode is CUDAGraphMode.FULL and not self.by_tokens
        if mode is CUDAGraphMode.FULL:
            self.full_sizes = sorted(sizes)
        else:
            self.piecewise_sizes = sorted(sizes)
        q = self.q_len if decode else 1
        self._picks.update({(mode, n): BatchDescriptor(mode, n * q, n if decode else None, uniform_decode=decode)
                            for n in sizes})

    def dispatch(self, num_tokens: int, num_seqs: int, decode_only: bool) -> BatchDescriptor:
        if self.full_sizes and (decode_only or self.by_tokens):
            # mode FULL: only the token count matters; else a pure-decode batch, by its number of sequences
            # (speculation: q_len tokens per request, so a batch of T tokens fits the graph of ceil(T / q_len)
            # requests; its attention is the unified kernel, which reads the token count only)
            n = num_tokens if self.by_tokens else num_seqs if self.q_len == 1 \
                else -(-num_tokens // self.q_len)
            i = bisect.bisect_left(self.full_sizes, n)
            if i < len(self.full_sizes):
                self.counts["full"] += 1
                return self._picks[(CUDAGraphMode.FULL, self.full_sizes[i])]
        if self.piecewise_sizes:
            i = bisect.bisect_left(self.piecewise_sizes, num_tokens)
            if i < len(self.piecewise_sizes):
                self.counts["piecewise"] += 1
                return self._picks[(CUDAGraphMode.PIECEWISE, self.piecewise_sizes[i])]
        self.counts["eager"] += 1
        if num_tokens < self.min_num_tokens:  # padded rows: slot -1, no sampling
            n = self.min_num_tokens
            return BatchDescriptor(CUDAGraphMode.NONE, n, n if decode_only else None)
        return BatchDescriptor(CUDAGraphMode.NONE)
