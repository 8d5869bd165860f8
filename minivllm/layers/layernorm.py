"""RMSNorm, optionally fused with the residual add (one read of x instead of two, as in vLLM)."""

from __future__ import annotations

import torch
from torch import nn

from minivllm.kernels import elementwise_ops  # noqa: F401  (registers torch.ops.minivllm.*)
from minivllm.layers.custom_op import CustomOp


class RMSNorm(CustomOp):
    name = "rms_norm"

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if residual is not None:
            x = x + residual
            residual = x
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * xf.to(dtype)
        return out if residual is None else (out, residual)

    def forward_custom(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """One Triton kernel (norm, or residual add + norm) instead of ~10 PyTorch ops."""
        if residual is None:
            return torch.ops.minivllm.rms_norm(x, self.weight, self.eps)
        out, residual = torch.ops.minivllm.fused_add_rms_norm(x, residual, self.weight, self.eps)
        return out, residual
