"""Quantization at load time (vLLM's `quantization=` argument): which methods exist and how a model gets one.

As in vLLM, a quantization method owns the weights of the linear layers it covers (it rewrites them after
loading: process_weights_after_loading) and their matmul (apply); the layers only ask it. The LM head and
the embedding stay in the model dtype (vLLM's fp8 method covers linear layers only).
"""

from __future__ import annotations

from minivllm.quantization.fp8 import Fp8LinearMethod, check_fp8_supported

QUANTIZATION_METHODS = {"fp8": Fp8LinearMethod}


def check_quantization(quantization, device, batch_invariant: bool) -> None:
    """Refuse, with the reason, a method this engine does not have or cannot run here."""
    if quantization is None:
        return
    if quantization not in QUANTIZATION_METHODS:
        raise ValueError(f"quantization must be None or one of {sorted(QUANTIZATION_METHODS)}, got "
                         f"{quantization!r} (quantized checkpoints are not loaded: give a bf16/fp32 checkpoint "
                         f"and quantization='fp8' to quantize it at load, as vLLM does)")
    if batch_invariant:
        raise ValueError("quantization='fp8' with batch_invariant=True is not supported: the FP8 matmuls "
                         "(GEMV for 1-8 rows, scaled matmul above) change their reduction order with the batch")
    check_fp8_supported(device)


def quantize_model(model, quantization: str, device) -> int:
    """Give every linear layer of the decoder (not the LM head) the method and quantize its weights; returns
    how many layers were quantized."""
    from minivllm.layers.linear import Linear

    method = QUANTIZATION_METHODS[quantization]()
    layers = [m for name, m in model.named_modules() if isinstance(m, Linear) and not name.endswith("lm_head")]
    for layer in layers:
        method.process_weights_after_loading(layer)
        layer.quant_method = method
    method.log_startup(len(layers), device)
    return len(layers)
