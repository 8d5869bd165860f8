"""What the attention op needs to know about one step's batch, and where the model finds it.

Why a forward context: the model's forward signature stays `forward(input_ids, positions)` like a plain
Hugging Face model, while every attention layer reads the same batch description (slot mapping, block
tables, lengths). vLLM does the same with `set_forward_context`; it also keeps the metadata out of the
traced graph, so torch.compile and CUDA graphs see only tensors at fixed addresses.

The context also carries the step's CUDA-graph decision (mode and padded size, picked by the dispatcher),
which every CUDAGraphWrapper reads. It is thread-local and set only for the duration of one forward, so
two engines (or two threads) never see each other's batch.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Iterator

import torch

from minivllm.config import CUDAGraphMode


@dataclass
class AttentionMetadata:
    """A batch of sequences, each contributing `query_len` new tokens after `seq_len - query_len` cached ones.

    Layout (T tokens packed over S sequences):
      slot_mapping    [T] int64   cache slot (block_id * block_size + offset) for each new token; -1 = padding
      query_start_loc [S+1] int32 cumulative query lengths (cu_seqlens_q)
      seq_lens        [S] int32   total context length of each sequence including this step's tokens;
                                  0 marks a padded row (its output is zeros and is discarded)
      block_tables    [S, M] int32 physical block ids of each sequence, padded with 0 past its last block
      max_query_len / max_seq_len: host-side upper bounds (kernels use them for grid sizes)
      decode_only:    every sequence has query_len == 1 (T > S only in a PIECEWISE step: its padding tokens,
                      which belong to no sequence)
      unified:        laid out for the unified kernel (FULL graphs keyed by token count): the three
                      per-sequence tensors are the whole persistent buffers (max_num_seqs rows, unused rows
                      query_len 0 and seq_len 0) and tokens past query_start_loc[-1] are padding
    """

    slot_mapping: torch.Tensor
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_tables: torch.Tensor
    max_query_len: int
    max_seq_len: int
    decode_only: bool
    # Host copies for the pure-PyTorch prefill path (None inside CUDA graphs).
    query_start_loc_cpu: list[int] | None = None
    seq_lens_cpu: list[int] | None = None
    unified: bool = False
    # The attention launches, built by a step's first layer (attention/layer.py), by layer shape and stream:
    # this step's own, or the InputBatch's, kept across steps (valid while the tensors above never move).
    launch_plans: dict = field(default_factory=dict, repr=False, compare=False)
    # The same launches with one layer's addresses written in, by (layer, graph size, sequences, stream): for
    # PIECEWISE steps, whose attention inputs are graph outputs at fixed addresses (attention/layer.py).
    layer_plans: dict = field(default_factory=dict, repr=False, compare=False)
    # Zeroed int32, one per (sequence, kv head), that the one-launch decode kernel counts finished splits in
    # and leaves zeroed (the InputBatch's; None, metadata built without one: a merge kernel merges the splits).
    split_counters: torch.Tensor | None = None


@dataclass
class ForwardContext:
    attn_metadata: AttentionMetadata | None
    backend: str = "torch"  # "torch" | "triton" | "unregistered"
    # (k_cache, v_cache) per layer. The attention op finds its cache here by layer index instead of taking
    # it as an argument, so a compiled graph never has the (huge) KV cache as an input it must copy back.
    kv_caches: list | None = None
    # Which CUDA graphs run this step (NONE: eager) and at which padded token count: the dispatcher's pick
    # (vLLM's name; the engine's setting is EngineConfig.cudagraph_mode, which the dispatcher never reads).
    cudagraph_runtime_mode: CUDAGraphMode = CUDAGraphMode.NONE
    num_padded_tokens: int | None = None
    capturing: bool = False  # the capture pass: a wrapper without a graph of this size records one
    stream: int | None = None  # the step's CUDA stream, read by its first attention layer (attention/layer.py)


class _Local(threading.local):
    context: ForwardContext | None = None


_local = _Local()


def get_forward_context() -> ForwardContext:
    ctx = _local.context
    if ctx is None:
        raise RuntimeError("attention called outside set_forward_context(): no batch metadata is set")
    return ctx


@contextlib.contextmanager
def set_forward_context(attn_metadata: AttentionMetadata | None, backend: str, kv_caches: list | None = None,
                        cudagraph_runtime_mode: CUDAGraphMode = CUDAGraphMode.NONE,
                        num_padded_tokens: int | None = None, capturing: bool = False) -> Iterator[None]:
    local = _local
    prev = local.context
    local.context = ForwardContext(attn_metadata, backend, kv_caches, cudagraph_runtime_mode, num_padded_tokens,
                                   capturing)
    try:
        yield
    finally:
        local.context = prev
