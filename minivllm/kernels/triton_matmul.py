"""A batch-invariant matmul: y = x @ W^T (+ b) whose every row is computed the same way for any number of rows.

Why: cuBLAS (and this engine's GEMV at 1-2 rows) picks its kernel, tiles and split-K by M, the number of
rows, so a row's sum over K runs in a different order at batch 1 and at batch 64 and the last bits of the
result differ (in bf16, sometimes the next token). Here one tile config (per dtype) serves every M: each
program owns a BLOCK_M x BLOCK_N tile and walks K from 0 in BLOCK_K steps, accumulating with tl.dot in
fp32; a row never shares a sum with another row, and there is no split-K. M is not specialized (Triton
would otherwise compile M == 1 apart), so one compiled kernel serves every batch. The approach of Thinking
Machines' batch_invariant_ops, which vLLM adopted (matmul_persistent in
https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/batch_invariant.py); vLLM runs it
persistent with 128x128 tiles, here a plain grid with small tiles, so decode (M of 1-64) still gets programs
enough to fill the GPU. The config is fixed, not tuned per shape: a per-M choice is what this file removes.

Without Triton (the CPU "torch" backend) each row is its own F.linear: slow, and invariant by construction.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minivllm.kernels.op_registry import direct_op

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) per dtype: one for every M.
CONFIGS = {torch.bfloat16: (16, 32, 128, 4, 4), torch.float16: (16, 32, 128, 4, 4),
           torch.float32: (16, 32, 32, 4, 3)}

_kernel = None


def _build():
    import triton
    import triton.language as tl

    from minivllm.kernels.compat import fix_interpreter_for_numpy_2_4

    fix_interpreter_for_numpy_2_4()  # K, a loop bound from an argument, under TRITON_INTERPRET=1

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

    return _matmul_kernel


def invariant_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, K] @ weight [N, K]^T (+ bias) -> [M, N], row m the same bits for every M (Triton, or the
    interpreter under TRITON_INTERPRET=1)."""
    global _kernel
    from minivllm.kernels.launch import cdiv, launch

    M, K = x.shape
    N = weight.shape[0]
    if weight.shape[1] != K or x.dtype != weight.dtype or x.dtype not in CONFIGS:
        raise ValueError(f"invariant_matmul: x {tuple(x.shape)} {x.dtype} and weight {tuple(weight.shape)} "
                         f"{weight.dtype} must share K and a dtype of {[str(d) for d in CONFIGS]}")
    x = x if x.stride(-1) == 1 else x.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0:
        return out
    _kernel = _kernel or _build()
    bm, bn, bk, warps, stages = CONFIGS[x.dtype]
    launch(_kernel, (cdiv(M, bm), cdiv(N, bn)), x, weight, bias if bias is not None else weight, out, M, N, K,
           x.stride(0), weight.stride(0), out.stride(0), HAS_BIAS=bias is not None,
           PRECISION="ieee" if x.dtype == torch.float32 else "tf32", BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
           num_warps=warps, num_stages=stages)
    return out


@direct_op("minivllm::invariant_linear", mutates_args=())
def invariant_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The Linear layers' op in batch-invariant mode: the kernel above, or row by row without Triton."""
    import os

    if x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        return invariant_matmul(x, weight, bias)
    return torch.cat([F.linear(row, weight, bias) for row in x.split(1)]) if x.shape[0] else F.linear(x, weight, bias)


@invariant_linear.register_fake
def _(x, weight, bias):
    return x.new_empty((x.shape[0], weight.shape[0]))
