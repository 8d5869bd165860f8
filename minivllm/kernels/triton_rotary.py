"""Triton rotary embedding (neox / rotate-half layout) applied to q and k in one kernel.

Why: the native version gathers cos/sin, splits, multiplies, concatenates and casts, separately for q and
k (~20 launches). Here one program per token loads its position's cos/sin row once from the fp32
cos_sin_cache [max_pos, D] (= cat(cos, sin), D/2 each) and rotates every q head and every k head.

q/k may be column slices of the fused qkv output (row stride != width): only the last dim must be
contiguous. Math is fp32, results are cast to the input dtype into new contiguous [T, H*D] tensors.

With NORM (Qwen3), the same program first applies the per-head RMSNorm of q and k (q_norm / k_norm), with
the roundings of the separate RMSNorm kernel, so one launch replaces three (q norm, k norm, rotary).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.launch import launch, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel


@triton.jit
def _rotate_heads(src, dst, cos, sin, w_ptr, eps, H: tl.constexpr, H_PAD: tl.constexpr, HALF: tl.constexpr,
                  HALF_PAD: tl.constexpr, NORM: tl.constexpr):
    h = tl.arange(0, H_PAD)[:, None]
    d = tl.arange(0, HALF_PAD)[None, :]
    mask = (h < H) & (d < HALF)
    off = h * (2 * HALF) + d
    dtype = dst.dtype.element_ty
    x1 = tl.load(src + off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + off + HALF, mask=mask, other=0.0).to(tl.float32)
    if NORM:  # RMSNorm over each head's 2*HALF values, rounded once like the RMSNorm kernel's output
        rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)[:, None]
        w1 = tl.load(w_ptr + d, mask=d < HALF, other=0.0).to(tl.float32)
        w2 = tl.load(w_ptr + HALF + d, mask=d < HALF, other=0.0).to(tl.float32)
        x1 = (w1 * (x1 * rstd)).to(dtype).to(tl.float32)
        x2 = (w2 * (x2 * rstd)).to(dtype).to(tl.float32)
    y1 = (x1 * cos - x2 * sin).to(dtype)
    y2 = (x2 * cos + x1 * sin).to(dtype)
    tl.store(dst + off, y1, mask=mask)
    tl.store(dst + off + HALF, y2, mask=mask)


@triton.jit
def _rotary_kernel(pos_ptr, q_ptr, k_ptr, cache_ptr, q_out_ptr, k_out_ptr, q_stride_t, k_stride_t, cache_stride,
                   qw_ptr, kw_ptr, eps,
                   HQ: tl.constexpr, HK: tl.constexpr, HQ_PAD: tl.constexpr, HK_PAD: tl.constexpr,
                   HALF: tl.constexpr, HALF_PAD: tl.constexpr, NORM: tl.constexpr, USE_PDL: tl.constexpr):
    wait_for_previous_kernel(USE_PDL)
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    d = tl.arange(0, HALF_PAD)
    row = cache_ptr + pos * cache_stride
    cos = tl.load(row + d, mask=d < HALF, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(row + HALF + d, mask=d < HALF, other=0.0).to(tl.float32)[None, :]
    _rotate_heads(q_ptr + t * q_stride_t, q_out_ptr + t * (HQ * 2 * HALF), cos, sin, qw_ptr, eps, HQ, HQ_PAD,
                  HALF, HALF_PAD, NORM)
    _rotate_heads(k_ptr + t * k_stride_t, k_out_ptr + t * (HK * 2 * HALF), cos, sin, kw_ptr, eps, HK, HK_PAD,
                  HALF, HALF_PAD, NORM)


def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
                     head_dim: int, q_weight: torch.Tensor | None = None, k_weight: torch.Tensor | None = None,
                     eps: float = 1e-6, use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T], q [T, Hq*D], k [T, Hk*D] -> rotated (q, k), new contiguous tensors of the same shapes.
    With q_weight/k_weight ([D] each), q and k are first RMS-normalized per head (Qwen3's q_norm/k_norm).
    use_pdl: launch with programmatic dependent launch (pdl.py)."""
    T = q.shape[0]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if T == 0:
        return q_out, k_out
    q2, k2 = q.reshape(T, -1), k.reshape(T, -1)
    q2 = q2 if q2.stride(-1) == 1 else q2.contiguous()
    k2 = k2 if k2.stride(-1) == 1 else k2.contiguous()
    cache = cos_sin_cache if cos_sin_cache.stride(-1) == 1 else cos_sin_cache.contiguous()
    hq, hk, half = q2.shape[1] // head_dim, k2.shape[1] // head_dim, head_dim // 2
    norm = q_weight is not None
    if norm:
        assert k_weight is not None and q_weight.numel() == k_weight.numel() == head_dim
    launch(_rotary_kernel, (T,),
        positions, q2, k2, cache, q_out, k_out, q2.stride(0), k2.stride(0), cache.stride(0),
        q_weight if norm else cache, k_weight if norm else cache, eps,
        HQ=hq, HK=hk, HQ_PAD=next_power_of_2(hq), HK_PAD=next_power_of_2(hk),
        HALF=half, HALF_PAD=next_power_of_2(half), NORM=norm,
        num_warps=4, **launch_options(q.device, use_pdl),
    )
    return q_out, k_out
