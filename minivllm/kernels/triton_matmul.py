"""A batch-invariant matmul: y = x @ W^T (+ b), each row computed the same way for any number of rows.

Why: cuBLAS (and the GEMV at 1-2 rows) picks kernel, tiles and split-K by M, so a row's sum over K runs in
another order at batch 1 than at batch 64 and rounds differently (in bf16, sometimes into another token).
Here one tile config per dtype serves every M: a program owns a BLOCK_M x BLOCK_N tile and walks K from 0 in
BLOCK_K steps with tl.dot into fp32; no row shares a sum with another, no split-K, and M is not specialized
(Triton would compile M == 1 apart). The approach of Thinking Machines' batch_invariant_ops that vLLM adopted
(`matmul_persistent`, https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/determinism/batch_invariant.py),
with small tiles instead of 128x128 so that decode's few rows still fill the GPU. Not tuned per shape: a
choice per M is what this file removes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.compat import fix_interpreter
from minivllm.kernels.launch import cdiv, launch

fix_interpreter()  # K, a loop bound from an argument, under TRITON_INTERPRET=1

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) per dtype, for every M
CONFIGS = {torch.bfloat16: (16, 32, 128, 4, 4), torch.float16: (16, 32, 128, 4, 4),
           torch.float32: (16, 32, 32, 4, 3)}


@triton.jit(do_not_specialize=["M"])
def _matmul_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, stride_xm, stride_wn, stride_om,
                   HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + m.to(tl.int64)[:, None] * stride_xm + k[None, :],
                    mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        w = tl.load(w_ptr + n.to(tl.int64)[None, :] * stride_wn + k[:, None],
                    mask=(n < N)[None, :] & (k < K)[:, None], other=0.0)  # [BLOCK_K, BLOCK_N]
        acc += tl.dot(x, w, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n < N, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + m.to(tl.int64)[:, None] * stride_om + n[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(m < M)[:, None] & (n < N)[None, :])


def invariant_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, K] @ weight [N, K]^T (+ bias) -> [M, N]; row m has the same bits for every M."""
    (M, K), N = x.shape, weight.shape[0]
    if weight.shape[1] != K or x.dtype != weight.dtype or x.dtype not in CONFIGS:
        raise ValueError(f"invariant_matmul: x {tuple(x.shape)} {x.dtype} and weight {tuple(weight.shape)} "
                         f"{weight.dtype} must share K and a dtype of {[str(d) for d in CONFIGS]}")
    x = x if x.stride(-1) == 1 else x.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0:
        return out
    bm, bn, bk, warps, stages = CONFIGS[x.dtype]
    launch(_matmul_kernel, (cdiv(M, bm), cdiv(N, bn)), x, weight, bias if bias is not None else weight, out,
           M, N, K, x.stride(0), weight.stride(0), out.stride(0), HAS_BIAS=bias is not None,
           PRECISION="ieee" if x.dtype == torch.float32 else "tf32", BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
           num_warps=warps, num_stages=stages)
    return out
