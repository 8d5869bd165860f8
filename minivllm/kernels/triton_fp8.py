"""Triton kernels of the FP8 scheme (quantization="fp8"): dynamic per-token activation quantization, fused
with the RMSNorm (and residual add) or the SiLU-and-mul before it, and the FP8 GEMV of a decode step.

Why a GEMV of its own: at batch 1 a decode step reads every weight once, so its time is the bytes moved.
FP8 weights are half the bytes of bf16 ones, but only a kernel that loads them as FP8 gets that: cuBLAS
has no FP8 matrix-vector path, and torch._scaled_mm's tiles are built for many rows (the bf16 GEMV's
reason, triton_gemv.py). This kernel reads the FP8 weight rows and the FP8 activation row, accumulates in
fp32 and applies both scales once per output: y[m, n] = (sum_k xq[m, k] * wq[n, k]) * xs[m] * ws[n].

Why the quantization kernels fuse: the activation quantization reads the row the norm (or the SiLU-and-mul)
just wrote, only to find its largest value and divide by it. One kernel that computes the norm, keeps the
row in registers, takes its max and writes FP8 saves a launch and a round trip of the row through memory:
what vLLM's rms_norm_dynamic_per_token_quant does, and what the fusion pass (compilation/passes/fusion.py)
puts in place of the two ops. Roundings follow the unfused ops: the normalised row (or silu(gate) * up) is
rounded to the activation dtype before its max is taken, as the separate kernels write it.

E4M3 rounding is done in fp32 before the conversion (_round_to_e4m3): the value is then exactly
representable, so the conversion cannot round, and the result is round-to-nearest-even like torch's
`.to(torch.float8_e4m3fn)` on every backend (Triton's interpreter, which the CPU tests use, rounds some
values wrongly when the rounding carries into the exponent: 125.5 became 64).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from minivllm.kernels.compat import fix_interpreter
from minivllm.kernels.launch import cdiv, next_power_of_2
from minivllm.kernels.triton_gemv import _short_bench

fix_interpreter()  # the GEMV's loop bound is a kernel argument (K)

FP8_MAX = 448.0  # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)  # as vLLM: an all-zero row gets this scale, never 0 (no division by 0)
MAX_M = 8  # rows the GEMV handles (decode batches); more rows take the scaled-matmul path


@triton.jit
def _round_to_e4m3(v):
    """v (fp32, |v| <= 448) rounded to the nearest float8_e4m3fn value, ties to even, still in fp32."""
    e = ((v.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127  # the binary exponent of v
    e = tl.maximum(e, -6)  # below 2**-6 E4M3 is subnormal: a fixed step of 2**-9
    step = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits: step 2**(e - 3)
    r = v / step  # exact (a power of two); |r| < 16
    r = (r + 12582912.0) - 12582912.0  # 1.5 * 2**23: fp32 addition rounds r to an integer, ties to even
    return r * step


@triton.jit
def _quant_row_kernel(x_ptr, r_ptr, w_ptr, q_ptr, s_ptr, res_out_ptr, K, stride_x, stride_r, eps,
                      HAS_NORM: tl.constexpr, ADD_RESIDUAL: tl.constexpr, SILU_MUL: tl.constexpr,
                      BLOCK: tl.constexpr):
    """One row: (silu(gate) * up | (x + residual) then RMSNorm | x) -> FP8 row and its scale."""
    m = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK)
    ok = k < K
    dtype = res_out_ptr.dtype.element_ty  # the activation dtype (res_out has it even when unused)
    x = tl.load(x_ptr + m * stride_x + k, mask=ok, other=0.0).to(tl.float32)
    if SILU_MUL:  # x is [gate | up]
        up = tl.load(x_ptr + m * stride_x + K + k, mask=ok, other=0.0).to(tl.float32)
        x = ((x / (1.0 + tl.exp(-x))).to(dtype).to(tl.float32) * up).to(dtype).to(tl.float32)
    if ADD_RESIDUAL:  # the norm reads the unrounded sum; the new residual stream is the rounded one
        x = x + tl.load(r_ptr + m * stride_r + k, mask=ok, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + m * K + k, x.to(dtype), mask=ok)
    if HAS_NORM:
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / K + eps)
        w = tl.load(w_ptr + k, mask=ok, other=0.0).to(tl.float32)
        x = (x * rstd * w).to(dtype).to(tl.float32)
    # IEEE divisions (div_rn), as torch's: a GPU's default fp32 division may be a few ulp off, which would
    # move a value across an E4M3 rounding boundary now and then
    scale = tl.maximum(tl.math.div_rn(tl.max(tl.abs(x), axis=0), 448.0), 1.0 / (448.0 * 512.0))
    q = _round_to_e4m3(tl.minimum(tl.maximum(tl.math.div_rn(x, scale), -448.0), 448.0))
    tl.store(q_ptr + m * K + k, q.to(q_ptr.dtype.element_ty), mask=ok)
    tl.store(s_ptr + m, scale)


def quant_rows(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6,
               residual: torch.Tensor | None = None,
               silu_mul: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per-token FP8 quantization of x [M, K] (of silu(gate) * up for x = [gate | up] [M, 2K] with silu_mul;
    of weight * rmsnorm(x (+ residual)) with weight). Returns (q [M, K] float8_e4m3fn, scale [M, 1] fp32,
    x + residual or None)."""
    M = x.shape[0]
    K = x.shape[1] // 2 if silu_mul else x.shape[1]
    assert not (silu_mul and weight is not None) and (residual is None or weight is not None)
    x = x if x.stride(-1) == 1 else x.contiguous()
    q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty(M, 1, dtype=torch.float32, device=x.device)
    res_out = torch.empty(M, K, dtype=x.dtype, device=x.device) if residual is not None else x
    if residual is not None and residual.stride(-1) != 1:
        residual = residual.contiguous()
    if M:
        _quant_row_kernel[(M,)](x, residual if residual is not None else x, weight if weight is not None else x,
                                q, s, res_out, K, x.stride(0), residual.stride(0) if residual is not None else 0,
                                eps, HAS_NORM=weight is not None, ADD_RESIDUAL=residual is not None,
                                SILU_MUL=silu_mul, BLOCK=next_power_of_2(K))
    return q, s, (res_out if residual is not None else None)


@triton.jit
def _fp8_gemv_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, M, N, K, stride_xm, stride_wn, stride_om,
                     M_PAD: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    m = tl.arange(0, M_PAD)
    m_ok = m < M
    w_rows = w_ptr + n.to(tl.int64)[:, None] * stride_wn
    x_rows = x_ptr + m[:, None] * stride_xm
    acc = tl.zeros([M_PAD, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < K
        w = tl.load(w_rows + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        x = tl.load(x_rows + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    xs = tl.load(xs_ptr + m, mask=m_ok, other=0.0)
    ws = tl.load(ws_ptr + n, mask=n_ok, other=0.0)
    acc = acc * xs[:, None] * ws[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + m[:, None] * stride_om + n[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


def _configs() -> list[triton.Config]:
    """Narrow-and-deep and wide-and-shallow tiles, as for the bf16 GEMV (triton_gemv._configs): an FP8
    weight row is half the bytes, so the deep tiles take twice the K per step."""
    return [triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
            for bn, bk, w, s in ((4, 1024, 4, 2), (4, 2048, 8, 2), (8, 512, 4, 3), (8, 1024, 8, 2),
                                 (16, 256, 4, 3), (16, 512, 8, 3), (32, 256, 8, 3), (2, 2048, 4, 2),
                                 (1, 4096, 4, 2), (32, 128, 4, 4))]


_autotuned = None


def _kernel():
    """The autotuned kernel on a GPU; None under the interpreter (a fixed small config then)."""
    global _autotuned
    if os.environ.get("TRITON_INTERPRET") == "1":
        return None
    if _autotuned is None:
        # the bf16 GEMV's short bench: the same timing, and its time counts in the startup's gemv_autotune
        _autotuned = triton.autotune(configs=_configs(), key=["N", "K", "M_PAD"], cache_results=True,
                                     do_bench=_short_bench)(_fp8_gemv_kernel)
    return _autotuned


def fp8_gemv(xq: torch.Tensor, x_scale: torch.Tensor, wq: torch.Tensor, w_scale: torch.Tensor,
             bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """(xq [M, K] * x_scale [M, 1]) @ (wq [N, K] * w_scale [N])^T + bias -> [M, N] of out_dtype, M <= MAX_M."""
    M, K = xq.shape
    N = wq.shape[0]
    assert M <= MAX_M and wq.shape[1] == K and xq.stride(-1) == 1 and wq.stride(-1) == 1
    out = torch.empty(M, N, dtype=out_dtype, device=xq.device)
    if M == 0:
        return out
    args = (xq, x_scale, wq, w_scale, bias if bias is not None else w_scale, out, M, N, K, xq.stride(0),
            wq.stride(0), out.stride(0))
    meta = {"M_PAD": next_power_of_2(M), "HAS_BIAS": bias is not None}
    kernel = _kernel()
    if kernel is None:
        _fp8_gemv_kernel[(cdiv(N, 16),)](*args, **meta, BLOCK_N=16, BLOCK_K=64)
    else:
        kernel[lambda c: (cdiv(N, c["BLOCK_N"]),)](*args, **meta)
    return out
