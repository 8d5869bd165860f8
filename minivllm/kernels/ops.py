"""The backend switch of paged attention: the pure-PyTorch reference or the Triton kernels.

The attention layer's op (`minivllm::unified_attention`, attention/layer.py) is what torch.compile sees as
one opaque node; inside it, these functions pick the implementation for this batch: the decode kernel for a
pure-decode batch (one query per sequence, split-KV, CUDA-graph safe; outside a graph one launch that also
stores the step's K/V), the prefill kernel for anything else
(prompts, cached prefixes, chunks, decode rows mixed in), and the unified kernel for a batch laid out for a
FULL graph of any composition (`meta.unified`: one launch whose grid depends on the token count only).
Everything the kernels need is an argument: the batch description, the caches, and the launch choices
(`use_pdl`, `prefetch_metadata`) the layer passes.

Triton is imported lazily, so this module (and the "torch" backend) works on machines without Triton.
"""

from __future__ import annotations

import functools
import importlib.util
import types
from typing import TYPE_CHECKING

import torch

from minivllm.kernels import torch_ref

if TYPE_CHECKING:
    from minivllm.attention.metadata import AttentionMetadata

HAS_TRITON = importlib.util.find_spec("triton") is not None
BACKENDS = ("torch", "triton")


@functools.cache
def _triton() -> types.SimpleNamespace:
    """The Triton launchers, imported on first use (an import statement per call costs ~1 us of host time,
    and an eager PIECEWISE step makes ~60 of these calls)."""
    from minivllm.kernels.triton_decode import invariant_num_splits, paged_decode_attention
    from minivllm.kernels.triton_prefill import invariant_tiles, paged_prefill_attention
    from minivllm.kernels.triton_store_kv import store_kvcache

    return types.SimpleNamespace(store_kvcache=store_kvcache, paged_decode_attention=paged_decode_attention,
                                 paged_prefill_attention=paged_prefill_attention,
                                 invariant_num_splits=invariant_num_splits, invariant_tiles=invariant_tiles)


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention kernel backend {backend!r}; expected one of {BACKENDS}")
    if backend == "triton" and not HAS_TRITON:
        raise RuntimeError("attention backend 'triton' needs Triton, which is not installed")


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, backend: str, use_pdl: bool = False) -> None:
    """Write this step's key/value [T, Hkv, D] into the paged caches (slot -1 = padding, skipped).

    "torch": the reference (boolean indexing, so it syncs with the host: no CUDA graph); "triton": one
    program per token, which skips padding slots on the device.
    """
    _check_backend(backend)
    if backend == "torch":
        torch_ref.store_kvcache_ref(key, value, k_cache, v_cache, slot_mapping)
        return
    _triton().store_kvcache(key, value, k_cache, v_cache, slot_mapping, use_pdl=use_pdl)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                    scale: float, backend: str, out: torch.Tensor | None = None, use_pdl: bool = False,
                    prefetch_metadata: bool = False, batch_invariant: bool = False,
                    new_kv: tuple[torch.Tensor, torch.Tensor] | None = None, in_graph: bool = False) -> torch.Tensor:
    """Attention of q [T, H, D] over the paged cache described by meta; returns [T, H, D] (in `out` if given).

    new_kv: this step's (key, value) [T, Hkv, D], written into the cache at meta.slot_mapping first.
    in_graph: the call is captured into a CUDA graph. Outside one, a decode batch's Triton attention is one
    launch (the kernel stores new_kv and merges its splits itself); inside, the KV store, decode and merge
    kernels stay apart, which is faster there (kernels/triton_decode.py says why).
    use_pdl / prefetch_metadata: launch choices of the decode kernel (see triton_decode.paged_decode_attention).
    batch_invariant: decode splits from the context length only (triton_decode.invariant_num_splits), one
    tile config for prefill and unified (invariant_tiles): a row's softmax has one order in any batch.
    """
    _check_backend(backend)
    one_launch = backend == "triton" and meta.decode_only and not meta.unified and not in_graph
    if new_kv is not None and not one_launch:
        store_kvcache(new_kv[0], new_kv[1], k_cache, v_cache, meta.slot_mapping, backend, use_pdl=use_pdl)
    if backend == "torch":
        # unified: more query rows (padding) than sequences; batch_invariant: the batched einsum of the decode
        # reference changes with the batch, the per-sequence loop of the prefill reference cannot
        if meta.decode_only and not meta.unified and not batch_invariant:
            bound = None if q.is_cuda and torch.cuda.is_current_stream_capturing() else meta.max_seq_len
            res = torch_ref.paged_decode_attention_ref(q, k_cache, v_cache, meta.block_tables, meta.seq_lens, scale,
                                                       bound)
        else:
            qsl = meta.query_start_loc_cpu
            lens = meta.seq_lens_cpu
            qsl = qsl if qsl is not None else meta.query_start_loc.tolist()  # host sync: fallback only
            lens = lens if lens is not None else meta.seq_lens.tolist()
            res = torch_ref.paged_prefill_attention_ref(q, k_cache, v_cache, meta.block_tables, qsl, lens, scale)
        return res if out is None else out.copy_(res)
    kernels = _triton()
    if meta.unified:  # one launch whose grid depends on the token count only (FULL graphs of any batch)
        from minivllm.kernels.triton_unified_attention import unified_paged_attention_op

        if out is None:
            out = torch.empty_like(q)
        unified_paged_attention_op(q, k_cache, v_cache, meta.block_tables, meta.query_start_loc, meta.seq_lens,
                                   out, scale, batch_invariant)
        return out
    if meta.decode_only:
        splits = kernels.invariant_num_splits(meta.block_tables.shape[1] * k_cache.shape[1]) if batch_invariant \
            else None
        # One query row per sequence of the metadata. A PIECEWISE step pads its tokens past the batch, and its
        # padded rows have no sequence: the per-sequence buffers may hold fewer rows than the padded token count
        # (a 128-token graph, max_num_seqs 32), so the kernel runs over the batch's rows only. The padded rows'
        # outputs are never read: every later op works row by row and only sampled rows reach the LM head.
        S = meta.seq_lens.shape[0]
        if out is None:
            out = torch.empty_like(q)
        kernels.paged_decode_attention(q[:S], k_cache, v_cache, meta.block_tables, meta.seq_lens, scale, out=out[:S],
                                       num_splits=splits, use_pdl=use_pdl, prefetch_metadata=prefetch_metadata,
                                       new_kv=(new_kv[0][:S], new_kv[1][:S], meta.slot_mapping)
                                       if one_launch and new_kv is not None else None,
                                       split_counters=meta.split_counters if one_launch else None)
        return out
    if out is not None and meta.query_start_loc_cpu is not None and meta.query_start_loc_cpu[-1] < q.shape[0]:
        out[meta.query_start_loc_cpu[-1]:].zero_()  # padding tokens of a padded mixed batch
    return kernels.paged_prefill_attention(q, k_cache, v_cache, meta.block_tables, meta.query_start_loc,
                                   meta.seq_lens, meta.max_query_len, scale, out=out,
                                   tile_config=kernels.invariant_tiles(q, k_cache) if batch_invariant else None)
