"""SiLU(gate) * up over the packed gate_up projection output."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minivllm.layers.custom_op import CustomOp


class SiluAndMul(CustomOp):
    name = "silu_and_mul"

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up
