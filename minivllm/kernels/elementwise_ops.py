"""The fused elementwise kernels (RMSNorm, residual-add + RMSNorm, rotary, SiLU-and-mul) as torch ops.

Why torch.library (as in ops.py): torch.compile cannot trace a Triton launcher, but a registered op with a
fake implementation is one opaque graph node, so the model traces with zero graph breaks, and Inductor
leaves these kernels alone while fusing whatever is around them.

Every op is functional (mutates_args=()): it returns new tensors instead of writing x/residual/q/k in
place. That keeps the compiled graph free of auto_functionalize copies, and it is CUDA-graph safe: the
outputs come from the graph's memory pool, the grid depends only on shapes, and nothing syncs with the host.

Triton is imported lazily inside the op bodies, so importing this module (which the layers do, to register
the ops) works on machines without Triton; the layers only call these ops when custom kernels are enabled.
Every op takes `use_pdl` (programmatic dependent launch, kernels/pdl.py) from the layer that calls it: the
ops read no engine state of their own.
"""

from __future__ import annotations

import torch

from minivllm.kernels.op_registry import direct_op


@direct_op("minivllm::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, use_pdl: bool = False) -> torch.Tensor:
    """weight * rmsnorm(x) over the last dim; x may be a strided [T, H, D] view."""
    from minivllm.kernels.triton_norm import rms_norm as launch

    return launch(x, weight, eps, use_pdl=use_pdl)[0]


@rms_norm.register_fake
def _(x, weight, eps, use_pdl=False):
    return x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype))


@direct_op("minivllm::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                       use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight * rmsnorm(x + residual), x + residual), from one read of x and residual."""
    from minivllm.kernels.triton_norm import rms_norm as launch

    return launch(x, weight, eps, residual, use_pdl=use_pdl)


@fused_add_rms_norm.register_fake
def _(x, residual, weight, eps, use_pdl=False):
    return (x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype)),
            x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, residual.dtype)))


@direct_op("minivllm::rotary_embedding", mutates_args=())
def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
                     head_dim: int, use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Neox-style RoPE of q [T, Hq*D] and k [T, Hk*D] at positions [T]; returns new (q, k)."""
    from minivllm.kernels.triton_rotary import rotary_embedding as launch

    return launch(positions, q, k, cos_sin_cache, head_dim, use_pdl=use_pdl)


@rotary_embedding.register_fake
def _(positions, q, k, cos_sin_cache, head_dim, use_pdl=False):
    return q.new_empty(q.shape), k.new_empty(k.shape)


@direct_op("minivllm::qk_norm_rotary_embedding", mutates_args=())
def qk_norm_rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor,
                             k_weight: torch.Tensor, eps: float, cos_sin_cache: torch.Tensor, head_dim: int,
                             use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen3's per-head q/k RMSNorm and then RoPE, one kernel; returns new (q, k)."""
    from minivllm.kernels.triton_rotary import rotary_embedding as launch

    return launch(positions, q, k, cos_sin_cache, head_dim, q_weight, k_weight, eps, use_pdl=use_pdl)


@qk_norm_rotary_embedding.register_fake
def _(positions, q, k, q_weight, k_weight, eps, cos_sin_cache, head_dim, use_pdl=False):
    return q.new_empty(q.shape), k.new_empty(k.shape)


@direct_op("minivllm::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor, use_pdl: bool = False) -> torch.Tensor:
    """silu(x[..., :I]) * x[..., I:] for x [..., 2I]."""
    from minivllm.kernels.triton_activation import silu_and_mul as launch

    return launch(x, use_pdl=use_pdl)


@silu_and_mul.register_fake
def _(x, use_pdl=False):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@direct_op("minivllm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, silu_mul: bool,
           norm_weight: torch.Tensor | None = None, eps: float = 1e-6, use_pdl: bool = False) -> torch.Tensor:
    """f(x) @ weight^T + bias, where f(x) is x, or silu(gate) * up for x = [gate | up] (silu_mul), or
    norm_weight * rmsnorm(x) (norm_weight given).
    Up to triton_gemv.DISPATCH_MAX_M rows (decode at batch 1-2) run the Triton GEMV with f fused in (the
    norm only up to NORM_MAX_M rows, else the RMSNorm kernel first); anything else runs the SiLU-and-mul or
    RMSNorm kernel, then cuBLAS. The choice is made here, inside
    the opaque op, so a compiled graph has no branch on the batch."""
    import torch.nn.functional as F

    from minivllm.kernels import triton_gemv

    if _triton_ok(x) and triton_gemv.supports(x, weight) and (norm_weight is None
                                                             or x.shape[0] <= triton_gemv.NORM_MAX_M):
        return triton_gemv.gemv(x, weight, bias, silu_mul, norm_weight, eps, use_pdl=use_pdl)
    if silu_mul:
        x = silu_and_mul(x, use_pdl) if x.is_cuda else silu_and_mul_native(x)
    if norm_weight is not None:
        x = rms_norm(x, norm_weight, eps, use_pdl) if _triton_ok(x) else rms_norm_native(x, norm_weight, eps)
    return F.linear(x, weight, bias)


@linear.register_fake
def _(x, weight, bias, silu_mul, norm_weight=None, eps=1e-6, use_pdl=False):
    return x.new_empty((x.shape[0], weight.shape[0]))


@direct_op("minivllm::add_rms_norm_linear", mutates_args=())
def add_rms_norm_linear(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                        weight: torch.Tensor, bias: torch.Tensor | None,
                        use_pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(norm_weight * rmsnorm(x + residual) @ weight^T + bias, x + residual): the decoder layer's residual
    add + RMSNorm and the projection after it. Up to triton_gemv.NORM_MAX_M rows: one GEMV kernel with the
    add and the norm in its prologue; more: the fused_add_rms_norm kernel, then cuBLAS (the unfused path)."""
    import torch.nn.functional as F

    from minivllm.kernels import triton_gemv

    if _triton_ok(x) and triton_gemv.supports(x, weight) and x.shape[0] <= triton_gemv.NORM_MAX_M:
        return triton_gemv.gemv(x, weight, bias, norm_weight=norm_weight, eps=eps, residual=residual,
                                use_pdl=use_pdl)
    if _triton_ok(x):
        normed, new_residual = fused_add_rms_norm(x, residual, norm_weight, eps, use_pdl)
    else:  # the norm reads the unrounded sum, as the kernels do
        xf = x.float() + residual.float()
        new_residual = xf.to(torch.promote_types(x.dtype, residual.dtype))
        normed = rms_norm_fp32(xf, norm_weight, eps).to(torch.promote_types(new_residual.dtype, norm_weight.dtype))
    return F.linear(normed, weight, bias), new_residual


@add_rms_norm_linear.register_fake
def _(x, residual, norm_weight, eps, weight, bias, use_pdl=False):
    return x.new_empty((x.shape[0], weight.shape[0])), x.new_empty(x.shape)


@direct_op("minivllm::invariant_linear", mutates_args=())
def invariant_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Linear in batch-invariant mode: kernels/triton_matmul.py on a GPU; on a CPU each row its own F.linear
    (invariant by construction; the kernel runs on a CPU only in its tests, under TRITON_INTERPRET=1)."""
    if x.is_cuda:
        from minivllm.kernels.triton_matmul import invariant_matmul

        return invariant_matmul(x, weight, bias)
    return torch.cat([torch.nn.functional.linear(r, weight, bias) for r in x.split(1)] or [x @ weight.T])


@invariant_linear.register_fake
def _(x, weight, bias):
    return x.new_empty((x.shape[0], weight.shape[0]))


def _triton_ok(x: torch.Tensor) -> bool:
    """Whether a Triton kernel can run on x: on a GPU, or on the CPU under the interpreter (tests)."""
    import os

    return x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def rms_norm_native(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in plain PyTorch: RMSNorm.forward_native and the ops' fallbacks without Triton.

    Everything in fp32 and one cast back at the end, as the Triton kernels do. Why not Hugging Face's
    roundings (the normalised row cast to x's dtype before the weight multiply): Inductor fuses these ops
    and keeps the intermediate in fp32 (it drops casts it does not need, torch._inductor.config
    emulate_precision_casts is off), so a compiled forward would round differently from its own eager
    version; in bf16 that made greedy tokens diverge. With one cast there is no intermediate to drop."""
    return rms_norm_fp32(x.float(), weight, eps).to(torch.promote_types(x.dtype, weight.dtype))


def rms_norm_fp32(xf: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * rmsnorm(xf) in fp32, xf already fp32 (the fused add's unrounded sum, or x.float())."""
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def silu_and_mul_native(x: torch.Tensor) -> torch.Tensor:
    """silu(x[..., :I]) * x[..., I:] in plain PyTorch: SiluAndMul.forward_native and the linear op's fallback."""
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up
