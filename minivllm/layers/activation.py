"""SiLU(gate) * up over the packed gate_up projection output."""

from __future__ import annotations

import torch

from minivllm.kernels import elementwise_ops  # also registers torch.ops.minivllm.*
from minivllm.layers.custom_op import CustomOp


class SiluAndMul(CustomOp):
    name = "silu_and_mul"

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return elementwise_ops.silu_and_mul_native(x)

    def forward_custom(self, x: torch.Tensor) -> torch.Tensor:
        """One Triton kernel: no separate silu(gate) tensor, no extra launches."""
        return torch.ops.minivllm.silu_and_mul(x, self.custom_ops.use_pdl)
