"""Triton rotary embedding (neox / rotate-half layout) applied to q and k in one kernel.

Why: the native version gathers cos/sin, splits, multiplies, concatenates and casts, separately for q and
k (~20 launches). Here one program per token loads its position's cos/sin row once from the fp32
cos_sin_cache [max_pos, D] (= cat(cos, sin), D/2 each) and rotates every q head and every k head.

q/k may be column slices of the fused qkv output (row stride != width): only the last dim must be
contiguous. Math is fp32, results are cast to the input dtype into new contiguous [T, H*D] tensors.

With NORM (Qwen3), the same program first applies the per-head RMSNorm of q and k (q_norm / k_norm), with
the roundings of the separate RMSNorm kernel, so one launch replaces three (q norm, k norm, rotary).
With STORE, the rotated k and v are written straight into the paged KV cache at each token's slot instead of
into a k tensor, so the attention op skips its own store_kvcache launch (rotary_embedding_store_kv).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel


@triton.jit
def _rotate_heads(src, dst, cos, sin, w_ptr, eps, cache_dst, H: tl.constexpr, H_PAD: tl.constexpr,
                  HALF: tl.constexpr, HALF_PAD: tl.constexpr, NORM: tl.constexpr, STORE: tl.constexpr):
    h = tl.arange(0, H_PAD)[:, None]
    d = tl.arange(0, HALF_PAD)[None, :]
    mask = (h < H) & (d < HALF)
    off = h * (2 * HALF) + d
    dtype = dst.dtype.element_ty
    x1 = tl.load(src + off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + off + HALF, mask=mask, other=0.0).to(tl.float32)
    if NORM:  # RMSNorm over each head's 2*HALF values, rounded like the RMSNorm kernel's output
        rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)[:, None]
        w1 = tl.load(w_ptr + d, mask=d < HALF, other=0.0).to(tl.float32)
        w2 = tl.load(w_ptr + HALF + d, mask=d < HALF, other=0.0).to(tl.float32)
        x1 = (w1 * (x1 * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        x2 = (w2 * (x2 * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    y1 = (x1 * cos - x2 * sin).to(dtype)
    y2 = (x2 * cos + x1 * sin).to(dtype)
    if STORE:  # straight into the paged K cache (the caller passes its slot, or skips a padding slot)
        tl.store(cache_dst + off, y1.to(cache_dst.dtype.element_ty), mask=mask)
        tl.store(cache_dst + off + HALF, y2.to(cache_dst.dtype.element_ty), mask=mask)
    else:
        tl.store(dst + off, y1, mask=mask)
        tl.store(dst + off + HALF, y2, mask=mask)


@triton.jit
def _rotary_kernel(pos_ptr, q_ptr, k_ptr, cache_ptr, q_out_ptr, k_out_ptr, q_stride_t, k_stride_t, cache_stride,
                   qw_ptr, kw_ptr, eps, v_ptr, v_stride_t, k_cache_ptr, v_cache_ptr, slot_ptr,
                   HQ: tl.constexpr, HK: tl.constexpr, HQ_PAD: tl.constexpr, HK_PAD: tl.constexpr,
                   HALF: tl.constexpr, HALF_PAD: tl.constexpr, NORM: tl.constexpr, STORE: tl.constexpr,
                   USE_PDL: tl.constexpr):
    wait_for_previous_kernel(USE_PDL)
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    d = tl.arange(0, HALF_PAD)
    row = cache_ptr + pos * cache_stride
    cos = tl.load(row + d, mask=d < HALF, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(row + HALF + d, mask=d < HALF, other=0.0).to(tl.float32)[None, :]
    _rotate_heads(q_ptr + t * q_stride_t, q_out_ptr + t * (HQ * 2 * HALF), cos, sin, qw_ptr, eps, q_out_ptr,
                  HQ, HQ_PAD, HALF, HALF_PAD, NORM, False)
    if STORE:  # K (rotated) and V go to the paged cache at this token's slot; nothing for a padding token
        slot = tl.load(slot_ptr + t)
        if slot >= 0:
            kv_off = slot * (HK * 2 * HALF)
            _rotate_heads(k_ptr + t * k_stride_t, k_out_ptr, cos, sin, kw_ptr, eps, k_cache_ptr + kv_off, HK,
                          HK_PAD, HALF, HALF_PAD, NORM, True)
            h = tl.arange(0, HK_PAD)[:, None]
            dd = tl.arange(0, 2 * HALF_PAD)[None, :]
            mask = (h < HK) & (dd < 2 * HALF)
            v = tl.load(v_ptr + t * v_stride_t + h * (2 * HALF) + dd, mask=mask)
            tl.store(v_cache_ptr + kv_off + h * (2 * HALF) + dd, v.to(v_cache_ptr.dtype.element_ty), mask=mask)
    else:
        _rotate_heads(k_ptr + t * k_stride_t, k_out_ptr + t * (HK * 2 * HALF), cos, sin, kw_ptr, eps, k_out_ptr,
                      HK, HK_PAD, HALF, HALF_PAD, NORM, False)


def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
                     head_dim: int, q_weight: torch.Tensor | None = None, k_weight: torch.Tensor | None = None,
                     eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T], q [T, Hq*D], k [T, Hk*D] -> rotated (q, k), new contiguous tensors of the same shapes.
    With q_weight/k_weight ([D] each), q and k are first RMS-normalized per head (Qwen3's q_norm/k_norm)."""
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    return _launch(positions, q, k, cos_sin_cache, head_dim, q_weight, k_weight, eps, k_out), k_out


def rotary_embedding_store_kv(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                              cos_sin_cache: torch.Tensor, head_dim: int, q_weight: torch.Tensor | None = None,
                              k_weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """RoPE (after Qwen3's q/k norm when weights are given) with the KV-cache write fused in: returns the
    rotated q; the rotated k and v go straight to k_cache/v_cache [blocks, block_size, Hk, D] at
    slot_mapping [T] (slot -1: padding, skipped). One launch instead of two (rotary, store_kvcache)."""
    assert k_cache.is_contiguous() and v_cache.is_contiguous(), "paged caches must be contiguous"
    assert k_cache.shape[2] * k_cache.shape[3] == k.shape[-1] and slot_mapping.shape[0] == q.shape[0]
    v2 = v.reshape(v.shape[0], -1)
    v2 = v2 if v2.stride(-1) == 1 else v2.contiguous()
    slots = slot_mapping if slot_mapping.dtype == torch.int64 else slot_mapping.long()
    return _launch(positions, q, k, cos_sin_cache, head_dim, q_weight, k_weight, eps, None,
                   (v2, k_cache, v_cache, slots))


def _launch(positions, q, k, cos_sin_cache, head_dim, q_weight, k_weight, eps, k_out, store=None):
    T = q.shape[0]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if T == 0:
        return q_out
    q2, k2 = q.reshape(T, -1), k.reshape(T, -1)
    q2 = q2 if q2.stride(-1) == 1 else q2.contiguous()
    k2 = k2 if k2.stride(-1) == 1 else k2.contiguous()
    cache = cos_sin_cache if cos_sin_cache.stride(-1) == 1 else cos_sin_cache.contiguous()
    hq, hk, half = q2.shape[1] // head_dim, k2.shape[1] // head_dim, head_dim // 2
    norm = q_weight is not None
    if norm:
        assert k_weight is not None and q_weight.numel() == k_weight.numel() == head_dim
    v, k_cache, v_cache, slots = store if store is not None else (cache, cache, cache, positions)
    _rotary_kernel[(T,)](
        positions, q2, k2, cache, q_out, k_out if k_out is not None else q_out, q2.stride(0), k2.stride(0),
        cache.stride(0), q_weight if norm else cache, k_weight if norm else cache, eps,
        v, v.stride(0), k_cache, v_cache, slots,
        HQ=hq, HK=hk, HQ_PAD=triton.next_power_of_2(hq), HK_PAD=triton.next_power_of_2(hk),
        HALF=half, HALF_PAD=triton.next_power_of_2(half), NORM=norm, STORE=store is not None,
        num_warps=4, **launch_options(q.device),
    )
    return q_out
