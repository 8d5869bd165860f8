"""The attention layer and the `minivllm::unified_attention` custom op it calls.

Why a custom op: torch.compile must see attention as ONE opaque node. Dynamo cannot trace into Triton
launchers that read a global batch description, and a paged-KV write traced op by op is slow and
fragile. Registered with torch.library, the op is a single node with a fake (shape-only) implementation,
so the whole model traces with zero graph breaks, and level 3 can split the graph right at it.
attention_backend="unregistered" calls the same Python function, hidden from Dynamo, to show what happens then.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from minivllm.attention.metadata import get_forward_context
from minivllm.kernels import ops


def unified_attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                           layer_idx: int, scale: float, kv_stored: bool = False) -> None:
    """Store this step's K/V into the paged cache, then attend over the cache into `out`. q/k/v/out: [T, heads*D].
    kv_stored: the RoPE kernel already wrote K/V to the cache (custom op "+rope_kv_store"); skip the store.

    The output buffer is an argument (allocated by the code before the op) rather than a result: with the
    forward split at attention, `out` then lives in the previous piece's CUDA-graph memory, at the same
    address on every replay, so the next piece can read it without a copy (vLLM does the same).
    """
    ctx = get_forward_context()
    meta = ctx.attn_metadata
    if meta is None or ctx.kv_caches is None:  # the profile run, before the KV cache exists: identity on q
        out.copy_(q)
        return
    k_cache, v_cache = ctx.kv_caches[layer_idx]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    T = q.shape[0]
    # Inside this (already opaque) op the Triton launchers are called directly; "unregistered" on a CPU
    # falls back to the PyTorch reference, which Dynamo can trace into (and break on).
    backend = ctx.backend
    if backend != "torch" and q.device.type != "cuda":
        backend = "torch"
    elif backend == "triton":
        backend = "unregistered"
    if not kv_stored:
        ops.store_kvcache(k.view(T, num_kv_heads, head_dim), v.view(T, num_kv_heads, head_dim), k_cache, v_cache,
                          meta.slot_mapping, backend)
    ops.paged_attention(q.view(T, -1, head_dim), k_cache, v_cache, meta, scale, backend,
                        out=out.view(T, -1, head_dim))


def rope_attention_impl(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        out: torch.Tensor, q_weight: torch.Tensor | None, k_weight: torch.Tensor | None, eps: float,
                        cos_sin_cache: torch.Tensor, head_dim: int, layer_idx: int, scale: float) -> None:
    """Custom op "rope_attention": Qwen3's q/k RMSNorm (weights given), RoPE, the KV store and attention, from
    the raw q/k/v slices of the qkv output. A pure-decode batch on the Triton backend runs all of it as ONE
    kernel (the decode kernel normalises and rotates, and stores the new k/v itself): the RoPE and store
    kernels of every layer disappear from the decode step. Anything else (prompts, chunks, the reference
    backend) runs the RoPE kernel and then unified attention, as without the op."""
    ctx = get_forward_context()
    meta = ctx.attn_metadata
    kernels = q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"
    if (meta is not None and ctx.kv_caches is not None and meta.decode_only and ctx.backend == "triton"
            and kernels and cos_sin_cache.shape[-1] == head_dim):
        from minivllm.kernels.triton_decode import DecodeRope, paged_decode_attention

        k_cache, v_cache = ctx.kv_caches[layer_idx]
        T = q.shape[0]
        paged_decode_attention(q.view(T, -1, head_dim), k_cache, v_cache, meta.block_tables, meta.seq_lens, scale,
                               out=out.view(T, -1, head_dim),
                               rope=DecodeRope(positions, k, v, meta.slot_mapping, cos_sin_cache, q_weight,
                                               k_weight, eps))
        return
    from minivllm.kernels.triton_rotary import rotary_embedding

    q, k = rotary_embedding(positions, q, k, cos_sin_cache, head_dim, q_weight, k_weight, eps)
    unified_attention_impl(q, k, v, out, layer_idx, scale)


@torch.library.custom_op("minivllm::rope_unified_attention", mutates_args=("out",))
def rope_unified_attention(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           out: torch.Tensor, q_weight: torch.Tensor | None, k_weight: torch.Tensor | None,
                           eps: float, cos_sin_cache: torch.Tensor, head_dim: int, layer_idx: int,
                           scale: float) -> None:
    rope_attention_impl(positions, q, k, v, out, q_weight, k_weight, eps, cos_sin_cache, head_dim, layer_idx,
                        scale)


@rope_unified_attention.register_fake
def _(positions, q, k, v, out, q_weight, k_weight, eps, cos_sin_cache, head_dim, layer_idx, scale) -> None:
    return None


@torch._dynamo.disable
def unregistered_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
                           scale: float, kv_stored: bool = False) -> None:
    """attention_backend="unregistered": the same Python, hidden from Dynamo the way a plain C++/CUDA extension
    call is, so every attention call is a graph break.

    Left visible, Dynamo traces into the Triton launchers and must functionalize their in-place writes to
    the KV cache (a global it does not own): on the H200, Inductor then cloned the whole 28 GiB cache
    (8.05e9 elements) every forward and died with an illegal memory access, and on a small model it gave
    wrong tokens. Registering the op (below) is what tells the compiler what it may assume."""
    unified_attention_impl(q, k, v, out, layer_idx, scale, kv_stored)


@torch.library.custom_op("minivllm::unified_attention", mutates_args=("out",))
def unified_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
                      scale: float, kv_stored: bool = False) -> None:
    unified_attention_impl(q, k, v, out, layer_idx, scale, kv_stored)


@unified_attention.register_fake
def _(q, k, v, out, layer_idx, scale, kv_stored=False) -> None:
    return None


class Attention(nn.Module):
    """Paged attention over this layer's slice of the KV cache (found by layer index in the forward context)."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float, layer_idx: int) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim, self.scale = num_heads, num_kv_heads, head_dim, scale
        self.layer_idx = layer_idx  # which (k_cache, v_cache) of the forward context is this layer's
        self.use_custom_op = True  # False for attention_backend="unregistered" (set by the model runner)

    def forward_with_rope(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          cos_sin_cache: torch.Tensor, q_weight: torch.Tensor | None = None,
                          k_weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
        """Raw q/k/v in: (q/k norm,) RoPE and attention in one op (custom op "rope_attention")."""
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        torch.ops.minivllm.rope_unified_attention(positions, q, k, v, out, q_weight, k_weight, eps, cos_sin_cache,
                                                  self.head_dim, self.layer_idx, self.scale)
        return out

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_stored: bool = False) -> torch.Tensor:
        out = torch.empty_like(q)
        if not self.use_custom_op:
            unregistered_attention(q, k, v, out, self.layer_idx, self.scale, kv_stored)
        else:
            torch.ops.minivllm.unified_attention(q, k, v, out, self.layer_idx, self.scale, kv_stored)
        return out
