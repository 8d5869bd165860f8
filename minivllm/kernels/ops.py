"""The attention ops the model calls, registered with torch.library, plus the backend switch the engine uses.

Why torch.library: torch.compile cannot look inside a Triton launcher's Python (strides, grid maths, the
launch itself). Registered as `torch.ops.minivllm.*` with a fake (meta) implementation, each op is one opaque
node: Dynamo traces the model with zero graph breaks, and the fake tells it the output shape/dtype without
running anything. `mutates_args` tells the compiler that store_kvcache writes the caches in place, so it
keeps that write ordered before the attention that reads them.

Triton is imported lazily inside the op bodies, so this module (and the "torch" backend) works on machines
without Triton.
"""

from __future__ import annotations

import importlib.util

import torch

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import torch_ref

HAS_TRITON = importlib.util.find_spec("triton") is not None
BACKENDS = ("torch", "triton", "unregistered")


# ---- torch.library registrations -------------------------------------------------------------------------

@torch.library.custom_op("minivllm::store_kvcache", mutates_args=("k_cache", "v_cache"))
def store_kvcache_op(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     slot_mapping: torch.Tensor) -> None:
    from minivllm.kernels.triton_store_kv import store_kvcache as launch

    launch(key, value, k_cache, v_cache, slot_mapping)


@store_kvcache_op.register_fake
def _(key, value, k_cache, v_cache, slot_mapping) -> None:
    return None


@torch.library.custom_op("minivllm::paged_decode_attention", mutates_args=())
def paged_decode_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              block_tables: torch.Tensor, seq_lens: torch.Tensor,
                              scale: float) -> torch.Tensor:
    from minivllm.kernels.triton_decode import paged_decode_attention as launch

    return launch(q, k_cache, v_cache, block_tables, seq_lens, scale)


@paged_decode_attention_op.register_fake
def _(q, k_cache, v_cache, block_tables, seq_lens, scale):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.custom_op("minivllm::paged_prefill_attention", mutates_args=())
def paged_prefill_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               block_tables: torch.Tensor, query_start_loc: torch.Tensor,
                               seq_lens: torch.Tensor, max_query_len: int, scale: float) -> torch.Tensor:
    from minivllm.kernels.triton_prefill import paged_prefill_attention as launch

    return launch(q, k_cache, v_cache, block_tables, query_start_loc, seq_lens, max_query_len, scale)


@paged_prefill_attention_op.register_fake
def _(q, k_cache, v_cache, block_tables, query_start_loc, seq_lens, max_query_len, scale):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


# ---- backend dispatch used by the attention layer --------------------------------------------------------

def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; expected one of {BACKENDS}")
    if backend != "torch" and not HAS_TRITON:
        raise RuntimeError(f"attention backend {backend!r} needs Triton, which is not installed")


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, backend: str) -> None:
    """Write this step's key/value [T, Hkv, D] into the paged caches (slot -1 = padding, skipped).

    "triton": the registered op (compile- and CUDA-graph-friendly); "torch": the reference (boolean indexing,
    so it syncs); "unregistered": the raw Triton launcher, to show what torch.compile does without the op.
    """
    _check_backend(backend)
    if backend == "torch":
        torch_ref.store_kvcache_ref(key, value, k_cache, v_cache, slot_mapping)
    elif backend == "triton":
        torch.ops.minivllm.store_kvcache(key, value, k_cache, v_cache, slot_mapping)
    else:
        from minivllm.kernels.triton_store_kv import store_kvcache as launch

        launch(key, value, k_cache, v_cache, slot_mapping)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                    scale: float, backend: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of q [T, H, D] over the paged cache described by meta; returns [T, H, D] (in `out` if given).

    Pure-decode batches take the decode path (one query per sequence, split-KV, graph-safe); anything else
    (prompts, cached prefixes, chunks, mixed decode rows) takes the prefill path. "triton" calls the
    registered ops; "unregistered" the same launchers directly (the engine's unified_attention op, itself
    registered, uses the launchers directly too: one opaque op is enough).
    """
    _check_backend(backend)
    if backend == "torch":
        if meta.decode_only:
            res = torch_ref.paged_decode_attention_ref(q, k_cache, v_cache, meta.block_tables, meta.seq_lens, scale)
        else:
            qsl = meta.query_start_loc_cpu
            lens = meta.seq_lens_cpu
            qsl = qsl if qsl is not None else meta.query_start_loc.tolist()  # host sync: fallback only
            lens = lens if lens is not None else meta.seq_lens.tolist()
            res = torch_ref.paged_prefill_attention_ref(q, k_cache, v_cache, meta.block_tables, qsl, lens, scale)
        return res if out is None else out.copy_(res)
    if backend == "triton" and out is None:
        if meta.decode_only:
            return torch.ops.minivllm.paged_decode_attention(q, k_cache, v_cache, meta.block_tables,
                                                             meta.seq_lens, scale)
        return torch.ops.minivllm.paged_prefill_attention(q, k_cache, v_cache, meta.block_tables,
                                                          meta.query_start_loc, meta.seq_lens,
                                                          meta.max_query_len, scale)
    from minivllm.kernels.triton_decode import paged_decode_attention
    from minivllm.kernels.triton_prefill import paged_prefill_attention

    if meta.decode_only:
        return paged_decode_attention(q, k_cache, v_cache, meta.block_tables, meta.seq_lens, scale, out=out)
    if out is not None and meta.query_start_loc_cpu is not None and meta.query_start_loc_cpu[-1] < q.shape[0]:
        out[meta.query_start_loc_cpu[-1]:].zero_()  # padding tokens of a padded mixed batch
    return paged_prefill_attention(q, k_cache, v_cache, meta.block_tables, meta.query_start_loc,
                                   meta.seq_lens, meta.max_query_len, scale, out=out)
