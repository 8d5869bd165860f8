"""quantization="fp8": a bf16/fp32 checkpoint's linear weights quantized to FP8 (E4M3) at load, one scale per
output channel; activations quantized per token at run time (vLLM: Fp8LinearMethod for a checkpoint that is
not FP8-serialized, and FP8_DYNAMIC's scale layout).

A quantized linear is two ops in the traced graph, as in vLLM: `scaled_fp8_quant(x)` (FP8 row and its scale),
then `fp8_scaled_mm` (FP8 GEMV for decode batches, torch._scaled_mm on Hopper for the rest, or a
dequantizing matmul; kernels/fp8_ops.py). Keeping the quantization a separate op is what lets the fusion
pass (compilation/passes/fusion.py) merge it with the RMSNorm or the SiLU-and-mul before it.

Where FP8 cannot run: the Triton kernels load and store float8_e4m3fn, which needs compute capability 8.9
(Ada, Hopper and later); older GPUs are refused at configuration time, the CPU runs the plain-PyTorch ops.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from minivllm.kernels import fp8_ops

logger = logging.getLogger("minivllm")


def check_fp8_supported(device: torch.device) -> None:
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if cap < (8, 9):
            raise ValueError(f"quantization='fp8' needs a GPU with FP8 support (compute capability 8.9 or later: "
                             f"Ada, Hopper, Blackwell); {torch.cuda.get_device_name(device)} is sm{cap[0]}{cap[1]}. "
                             f"Run without quantization, or on the CPU (device='cpu' dequantizes)")


class Fp8LinearMethod:
    def process_weights_after_loading(self, layer: nn.Module) -> None:
        """weight [N, K] -> FP8 weight [N, K] and weight_scale [N] fp32 (parameters, so the compiled graph and
        its cache see them as the model's)."""
        q, scale = fp8_ops.quantize_weight_per_channel(layer.weight.data)
        layer.weight = nn.Parameter(q, requires_grad=False)
        layer.weight_scale = nn.Parameter(scale, requires_grad=False)

    def apply(self, layer: nn.Module, x: torch.Tensor, silu_mul: bool = False) -> torch.Tensor:
        """x @ dequant(weight)^T + bias with x quantized per token first; silu_mul: x is [gate | up] (the
        layer's custom op asked for SiLU-and-mul inside the matmul; here it runs before the quantization)."""
        if silu_mul:
            x = torch.ops.minivllm.silu_and_mul(x, layer.custom_ops.use_pdl)
        xq, x_scale = torch.ops.minivllm.scaled_fp8_quant(x)
        return torch.ops.minivllm.fp8_scaled_mm(xq, x_scale, layer.weight, layer.weight_scale, layer.bias, x.dtype)

    @staticmethod
    def log_startup(num_layers: int, device: torch.device) -> None:
        decode = ("Triton FP8 GEMV (1-8 rows)" if device.type == "cuda"
                  else "dequantize + matmul (CPU; the Triton kernels need a GPU)")
        logger.info("Quantization fp8: %d linear layers' weights in FP8 E4M3 with per-channel scales, activations "
                    "quantized per token; decode: %s; prefill: %s", num_layers, decode,
                    fp8_ops.prefill_path(device))
