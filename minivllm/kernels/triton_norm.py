"""Triton RMSNorm, optionally fused with the residual add: one kernel instead of ~10 small PyTorch ops.

Why: in a CUDA-graph decode step every kernel costs ~2 us however little it does, and the native RMSNorm
(add, cast, pow, mean, add, rsqrt, mul, cast, mul) is a string of them. Here one program normalises ROWS
rows at once: it reads x (and the residual) once, writes the new residual and the normed output once.

Numerics follow RMSNorm.forward_native: everything in fp32, each output cast back once. The new residual
stream is the sum rounded to its dtype; the norm reads the unrounded sum, and the weight multiply is in
fp32 before the one rounding of the output (elementwise_ops.rms_norm_native says why no intermediate cast).

Layout: rows are addressed as (t, h) with strides, so a [T, H, D] view of a column slice of the fused qkv
output (Qwen3's q_norm/k_norm input) is read in place; only the last dim must be contiguous. Outputs are
new contiguous tensors.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.launch import cdiv, launch, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel


@triton.jit
def _rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr,
                     n_rows, n_heads, x_stride_t, x_stride_h, res_stride_t, res_stride_h, eps,
                     N: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                     USE_PDL: tl.constexpr):
    wait_for_previous_kernel(USE_PDL)
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < N)[None, :]
    t = rows // n_heads
    h = rows % n_heads
    x = tl.load(x_ptr + (t * x_stride_t + h * x_stride_h)[:, None] + cols[None, :], mask=mask, other=0.0)
    out_off = rows[:, None] * N + cols[None, :]  # outputs are contiguous [n_rows, N]
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + (t * res_stride_t + h * res_stride_h)[:, None] + cols[None, :], mask=mask,
                    other=0.0)
        xf = x.to(tl.float32) + r.to(tl.float32)  # the norm reads the unrounded sum
        tl.store(res_out_ptr + out_off, xf.to(res_out_ptr.dtype.element_ty), mask=mask)
    else:
        xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / N + eps)
    y = xf * rstd[:, None]
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + out_off, (w[None, :] * y).to(out_ptr.dtype.element_ty), mask=mask)


def _as_rows(x: torch.Tensor) -> tuple[torch.Tensor, int, int, int]:
    """(tensor, n_heads, stride_t, stride_h) addressing x's rows as (t, h); copies only if it must."""
    if x.stride(-1) != 1 or x.dim() > 3:
        x = x.reshape(-1, x.shape[-1])
        if x.stride(-1) != 1:
            x = x.contiguous()
    if x.dim() == 1:
        return x, 1, 0, 0
    if x.dim() == 2:
        return x, 1, x.stride(0), 0
    return x, x.shape[1], x.stride(0), x.stride(1)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
             use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Normalise over the last dim; with residual, also return x + residual. x: [..., N] (up to 3-d strided).
    use_pdl: launch with programmatic dependent launch (pdl.py)."""
    N = x.shape[-1]
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype), device=x.device)
    res_out = None
    if residual is not None:
        res_out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, residual.dtype), device=x.device)
    n_rows = x.numel() // N if N else 0
    if n_rows == 0:
        return out, res_out
    xr, n_heads, xs_t, xs_h = _as_rows(x)
    if residual is not None:
        if residual.shape != x.shape:
            residual = residual.expand(x.shape)
        rr, r_heads, rs_t, rs_h = _as_rows(residual)
        if r_heads != n_heads:  # different row shapes (e.g. >3-d): fall back to contiguous copies
            xr, n_heads, xs_t, xs_h = _as_rows(x.contiguous().view(-1, N))
            rr, r_heads, rs_t, rs_h = _as_rows(residual.contiguous().view(-1, N))
    else:
        rr, rs_t, rs_h = xr, 0, 0  # unused (HAS_RESIDUAL=False)
    block_n = next_power_of_2(N)
    rows = max(1, min(16, 2048 // block_n))  # several short rows (head_dim norms) per program
    launch(_rms_norm_kernel, (cdiv(n_rows, rows),),
        xr, rr, weight, out, res_out if res_out is not None else out,
        n_rows, n_heads, xs_t, xs_h, rs_t, rs_h, eps,
        N=N, BLOCK_N=block_n, ROWS=rows, HAS_RESIDUAL=residual is not None,
        num_warps=8 if block_n * rows >= 4096 else 4, **launch_options(x.device, use_pdl),
    )
    return out, res_out
