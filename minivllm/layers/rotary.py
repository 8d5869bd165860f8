"""Rotary position embedding (neox / rotate-half layout, as Llama and Qwen use), with llama3 scaling.

cos/sin for every position are precomputed once (a cache indexed by position), so the step only gathers.
"""

from __future__ import annotations

import math

import torch

from minivllm.kernels import elementwise_ops  # noqa: F401  (registers torch.ops.minivllm.*)
from minivllm.layers.custom_op import CustomOp


def _llama3_inv_freq(inv_freq: torch.Tensor, scaling: dict) -> torch.Tensor:
    factor = scaling["factor"]
    low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    old_len = scaling.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    smooth = (old_len / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return torch.where(mid, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)


class RotaryEmbedding(CustomOp):
    name = "rotary_embedding"

    def __init__(self, head_dim: int, max_position: int, base: float, rope_scaling: dict | None = None) -> None:
        super().__init__()
        self.head_dim = head_dim
        # float32 like Hugging Face, so fp32 greedy tokens match it exactly
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        rope_type = (rope_scaling or {}).get("rope_type", (rope_scaling or {}).get("type", "default"))
        if rope_type == "llama3":
            inv_freq = _llama3_inv_freq(inv_freq, rope_scaling)  # type: ignore[arg-type]
        elif rope_type not in ("default", None):
            raise ValueError(f"rope_scaling type {rope_type!r} is not supported (supported: default, llama3)")
        t = torch.arange(max_position, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()  # [max_pos, head_dim]
        self.register_buffer("cos_sin_cache", cache, persistent=False)

    def forward_native(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        """q [T, Hq*D], k [T, Hk*D] -> rotated, same shapes."""
        cos, sin = self.cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)  # [T, D/2]
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def forward_custom(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        """One Triton kernel for q and k together (cos/sin gathered once per token)."""
        return torch.ops.minivllm.rotary_embedding(positions, q, k, self.cos_sin_cache, self.head_dim,
                                                   self.custom_ops.use_pdl)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        T = x.shape[0]
        xs = x.view(T, -1, self.head_dim).float()
        x1, x2 = xs.chunk(2, dim=-1)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
        return out.to(x.dtype).view(T, -1)
