"""RMSNorm, optionally fused with the residual add (one read of x instead of two, as in vLLM)."""

from __future__ import annotations

import torch
from torch import nn

from minivllm.kernels import elementwise_ops  # also registers torch.ops.minivllm.*
from minivllm.layers.custom_op import CustomOp


class RMSNorm(CustomOp):
    name = "rms_norm"

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """(x + residual, then) RMSNorm in fp32, each output cast back once: the new residual stream is
        the rounded sum, the norm reads the unrounded one, as the Triton kernels do (elementwise_ops
        rms_norm_native says why one cast)."""
        if residual is None:
            return elementwise_ops.rms_norm_native(x, self.weight, self.eps)
        dtype = torch.promote_types(x.dtype, residual.dtype)
        xf = x.float() + residual.float()
        out = elementwise_ops.rms_norm_fp32(xf, self.weight, self.eps)
        return out.to(torch.promote_types(dtype, self.weight.dtype)), xf.to(dtype)

    def forward_custom(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """One Triton kernel (norm, or residual add + norm) instead of ~10 PyTorch ops."""
        if residual is None:
            return torch.ops.minivllm.rms_norm(x, self.weight, self.eps, self.custom_ops.use_pdl)
        out, residual = torch.ops.minivllm.fused_add_rms_norm(x, residual, self.weight, self.eps,
                                                              self.custom_ops.use_pdl)
        return out, residual
