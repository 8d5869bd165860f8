"""The FP8 scheme's torch ops (quantization="fp8"): activation quantization, its fused forms, and the scaled
matmul, each with the plain-PyTorch reference the CPU runs and the tests check the kernels against.

Names follow vLLM's ops (vllm/_custom_ops.py): `scaled_fp8_quant` (dynamic, per token),
`rms_norm_dynamic_per_token_quant` (with or without the residual add), and a scaled matmul that takes FP8
activations and FP8 weights with their scales (vLLM: cutlass_scaled_mm). The activation quantization is an
op of its own in the traced graph, as in vLLM, so that a compiler pass can see "RMSNorm, then quantize"
and put the fused op in its place (compilation/passes/fusion.py). Every op is functional and opaque to
torch.compile (as elementwise_ops.py explains).

fp8_scaled_mm chooses its kernel inside the op, so a compiled graph has no branch on the batch:
  1-8 rows on a GPU   the FP8 GEMV (kernels/triton_fp8.py): decode reads FP8 weights, half of bf16's bytes
  more rows, sm90+    torch._scaled_mm with per-row and per-column scales (FP8 tensor cores)
  anywhere else       dequantize: FP8 values are exact in bf16/fp16/fp32, one matmul, then the two scales
"""

from __future__ import annotations

import functools

import torch

from minivllm.kernels.elementwise_ops import rms_norm_fp32, rms_norm_native, silu_and_mul_native
from minivllm.kernels.op_registry import direct_op

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)


# ---- plain PyTorch: the CPU path and the reference -------------------------------------------------------
def quantize_per_token_native(x: torch.Tensor, min_scale: float = MIN_SCALE) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (q [M, K] float8_e4m3fn, scale [M, 1] fp32), x ~= q * scale; each row's max maps to 448
    (a row whose max is below 448 * min_scale keeps min_scale: vLLM's floor for activations)."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1, keepdim=True) / FP8_MAX).clamp(min=min_scale)
    return (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def quantize_weight_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] -> (q [N, K] float8_e4m3fn, scale [N] fp32): one scale per output channel (row). No floor
    but the smallest normal fp32: a row of tiny weights keeps its precision (an all-zero row stays zero)."""
    q, scale = quantize_per_token_native(w, torch.finfo(torch.float32).tiny)
    return q, scale.squeeze(1)


def scaled_mm_native(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
                     bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """(a * a_scale) @ (b * b_scale)^T + bias by dequantizing: FP8 values are exact in any wider float, so
    the matmul runs on the FP8 integers (fp32 on a CPU, out_dtype on a GPU, fp32 accumulation either way)
    and the scales multiply its fp32 result."""
    compute = torch.float32 if a.device.type == "cpu" else out_dtype
    out = (a.to(compute) @ b.to(compute).t()).float() * a_scale * b_scale[None, :]
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


# ---- the ops ------------------------------------------------------------------------------------------
def _kernels_ok(x: torch.Tensor) -> bool:
    """The Triton kernels run on a GPU; the CPU (the engine there, and the graph passes' tests) runs the
    references. The kernels' own tests call them under TRITON_INTERPRET=1."""
    return x.is_cuda


@direct_op("minivllm::scaled_fp8_quant", mutates_args=())
def scaled_fp8_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token FP8 quantization of x [M, K]: (q, scale [M, 1])."""
    if _kernels_ok(x):
        from minivllm.kernels.triton_fp8 import quant_rows

        return quant_rows(x)[:2]
    return quantize_per_token_native(x)


@scaled_fp8_quant.register_fake
def _(x):
    return x.new_empty(x.shape, dtype=FP8), x.new_empty((x.shape[0], 1), dtype=torch.float32)


@direct_op("minivllm::rms_norm_dynamic_per_token_quant", mutates_args=())
def rms_norm_dynamic_per_token_quant(x: torch.Tensor, weight: torch.Tensor,
                                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """scaled_fp8_quant(weight * rmsnorm(x)) in one kernel (the unfused norm's rounding kept)."""
    if _kernels_ok(x):
        from minivllm.kernels.triton_fp8 import quant_rows

        return quant_rows(x, weight, eps)[:2]
    return quantize_per_token_native(rms_norm_native(x, weight, eps))


@rms_norm_dynamic_per_token_quant.register_fake
def _(x, weight, eps):
    return x.new_empty(x.shape, dtype=FP8), x.new_empty((x.shape[0], 1), dtype=torch.float32)


@direct_op("minivllm::fused_add_rms_norm_dynamic_per_token_quant", mutates_args=())
def fused_add_rms_norm_dynamic_per_token_quant(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                               eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q, scale, x + residual): the residual add, the RMSNorm of the unrounded sum, and its quantization."""
    if _kernels_ok(x):
        from minivllm.kernels.triton_fp8 import quant_rows

        return quant_rows(x, weight, eps, residual=residual)
    dtype = torch.promote_types(x.dtype, residual.dtype)
    xf = x.float() + residual.float()
    normed = rms_norm_fp32(xf, weight, eps).to(torch.promote_types(dtype, weight.dtype))
    return (*quantize_per_token_native(normed), xf.to(dtype))


@fused_add_rms_norm_dynamic_per_token_quant.register_fake
def _(x, residual, weight, eps):
    return (x.new_empty(x.shape, dtype=FP8), x.new_empty((x.shape[0], 1), dtype=torch.float32),
            x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, residual.dtype)))


@direct_op("minivllm::silu_and_mul_dynamic_per_token_quant", mutates_args=())
def silu_and_mul_dynamic_per_token_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """scaled_fp8_quant(silu(gate) * up) for x = [gate | up], in one kernel."""
    if _kernels_ok(x):
        from minivllm.kernels.triton_fp8 import quant_rows

        return quant_rows(x, silu_mul=True)[:2]
    return quantize_per_token_native(silu_and_mul_native(x))


@silu_and_mul_dynamic_per_token_quant.register_fake
def _(x):
    return (x.new_empty((x.shape[0], x.shape[1] // 2), dtype=FP8),
            x.new_empty((x.shape[0], 1), dtype=torch.float32))


@functools.cache
def has_fp8_tensor_cores(index: int | None) -> bool:
    """torch._scaled_mm with row-wise scales runs on Hopper (sm90) and later."""
    return torch.cuda.get_device_capability(index) >= (9, 0)


def prefill_path(device: torch.device) -> str:
    """What fp8_scaled_mm runs for more than triton_fp8.MAX_M rows on this device (the startup log line)."""
    if device.type == "cuda" and has_fp8_tensor_cores(device.index):
        return "torch._scaled_mm (FP8 tensor cores, per-token x per-channel scales)"
    where = f"sm{''.join(map(str, torch.cuda.get_device_capability(device)))}" if device.type == "cuda" else "CPU"
    return f"dequantize to {'fp32' if device.type == 'cpu' else 'the model dtype'} + matmul (no FP8 tensor cores on {where})"


@direct_op("minivllm::fp8_scaled_mm", mutates_args=())
def fp8_scaled_mm(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
                  bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """(a [M, K] * a_scale [M, 1]) @ (b [N, K] * b_scale [N])^T + bias, a and b float8_e4m3fn."""
    if a.is_cuda:
        from minivllm.kernels import triton_fp8

        if a.shape[0] <= triton_fp8.MAX_M:
            return triton_fp8.fp8_gemv(a, a_scale, b, b_scale, bias, out_dtype)
        K, N = b.shape[1], b.shape[0]
        if has_fp8_tensor_cores(a.device.index) and K % 16 == 0 and N % 16 == 0:
            # row-wise scaling needs a bf16 output; b.t() is the column-major operand _scaled_mm wants
            out = torch._scaled_mm(a, b.t(), scale_a=a_scale, scale_b=b_scale[None, :], out_dtype=torch.bfloat16)
            if bias is not None:
                out = out + bias
            return out.to(out_dtype)
    return scaled_mm_native(a, a_scale, b, b_scale, bias, out_dtype)


@fp8_scaled_mm.register_fake
def _(a, a_scale, b, b_scale, bias, out_dtype):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)

