"""Triton SiLU-and-mul over the packed gate_up output: out = silu(x[:, :I]) * x[:, I:] in one kernel.

Why: the native version is a chunk, a silu and a multiply (plus casts), i.e. several launches and an extra
round trip through memory for silu(gate). Numerics follow F.silu(gate) * up in the input dtype: silu in fp32
rounded to the dtype, then the multiply in fp32 rounded once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.launch import cdiv, launch, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, x_stride_t, I, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    wait_for_previous_kernel(USE_PDL)
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    row = x_ptr + t * x_stride_t
    g = tl.load(row + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(row + I + cols, mask=mask, other=0.0).to(tl.float32)
    dtype = out_ptr.dtype.element_ty
    s = (g / (1.0 + tl.exp(-g))).to(dtype).to(tl.float32)  # rounded like F.silu's output
    tl.store(out_ptr + t * I + cols, (s * u).to(dtype), mask=mask)


def silu_and_mul(x: torch.Tensor, use_pdl: bool = False) -> torch.Tensor:
    """x [..., 2I] -> [..., I] (new, contiguous). Rows may be strided; the last dim must be contiguous.
    use_pdl: launch with programmatic dependent launch (pdl.py)."""
    I = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], I), dtype=x.dtype, device=x.device)
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    T = x2.shape[0]
    if T == 0 or I == 0:
        return out
    block = min(1024, next_power_of_2(I))
    launch(_silu_and_mul_kernel, (T, cdiv(I, block)), x2, out, x2.stride(0), I, BLOCK=block,
                                                     num_warps=4 if block >= 512 else 2,
                                                     **launch_options(x.device, use_pdl))
    return out
