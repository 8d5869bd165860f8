"""Linear layers whose weights are packed at load time (q/k/v into one matmul, gate/up into another).

One big matmul instead of three small ones: fewer kernel launches and better GPU utilisation. Each packed
parameter has a `weight_loader` that copies a checkpoint shard ("q", "k", "v" or 0/1) into its slice.
"""

from __future__ import annotations

import torch
from torch import nn

from minivllm.kernels import elementwise_ops  # noqa: F401  (registers torch.ops.minivllm.linear and others)
from minivllm.layers.custom_op import UsesCustomOps


class Linear(UsesCustomOps):
    quant_method = None  # a quantization method (minivllm/quantization) owns the weights and the matmul

    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)
        self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False) if bias else None

    def forward(self, x: torch.Tensor, silu_mul: bool = False) -> torch.Tensor:
        """silu_mul: x is a gate_up output [T, 2K]; multiply silu(gate) * up (only with custom op "gemv",
        which fuses it into the GEMV; callers use SiluAndMul otherwise). Batch-invariant mode: one matmul
        kernel for every number of rows (kernels/triton_matmul.py)."""
        if self.quant_method is not None:
            return self.quant_method.apply(self, x, silu_mul)
        if self.custom_ops.batch_invariant:
            return torch.ops.minivllm.invariant_linear(x, self.weight, self.bias)
        if self.custom_ops.is_enabled("gemv"):
            return torch.ops.minivllm.linear(x, self.weight, self.bias, silu_mul, None, 1e-6,
                                             self.custom_ops.use_pdl)
        assert not silu_mul, "silu_mul needs the gemv custom op"
        return nn.functional.linear(x, self.weight, self.bias)

    def forward_after_norm(self, x: torch.Tensor, residual: torch.Tensor | None,
                           norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """norm(x + residual) (or norm(x) when residual is None) projected, and the new residual stream:
        what a decoder layer's "residual add + RMSNorm, then this linear" computes. With custom op
        "gemv_norm" it is one op (for 1 row one GEMV kernel does it all); else the norm, then the linear."""
        if not self.custom_ops.gemv_norm or self.quant_method is not None:
            normed, residual = (norm(x), x) if residual is None else norm(x, residual)
            return self(normed), residual
        pdl = self.custom_ops.use_pdl
        if residual is None:
            return torch.ops.minivllm.linear(x, self.weight, self.bias, False, norm.weight, norm.eps, pdl), x
        return torch.ops.minivllm.add_rms_norm_linear(x, residual, norm.weight, norm.eps, self.weight, self.bias,
                                                      pdl)


class PackedLinear(Linear):
    """Several projections of the same input stacked along the output dimension."""

    def __init__(self, in_features: int, shard_sizes: dict, bias: bool = False) -> None:
        super().__init__(in_features, sum(shard_sizes.values()), bias)
        self.shard_offsets: dict = {}
        off = 0
        for shard_id, size in shard_sizes.items():
            self.shard_offsets[shard_id] = (off, size)
            off += size
        for p in (self.weight, self.bias):
            if p is not None:
                p.weight_loader = self._load_shard  # type: ignore[attr-defined]
                p.shard_ids = list(shard_sizes)  # type: ignore[attr-defined]

    def _load_shard(self, param: nn.Parameter, loaded: torch.Tensor, shard_id) -> None:
        off, size = self.shard_offsets[shard_id]
        if loaded.shape[0] != size or loaded.shape[1:] != param.shape[1:]:
            raise ValueError(f"checkpoint shard {shard_id!r} has shape {tuple(loaded.shape)}, expected "
                             f"({size}, {', '.join(map(str, param.shape[1:]))})")
        param.data.narrow(0, off, size).copy_(loaded)
