"""Rotary position embedding (neox / rotate-half layout, as Llama and Qwen use), with linear and llama3 scaling.

cos/sin for every position are precomputed once (a table indexed by position), so the step only gathers.
The table covers the engine's max_model_len, not the model's max_position_embeddings (40960 positions for
Qwen3-0.6B would be 20 MiB per layer for positions no request reaches), and all layers of one engine share
one table (attach_rope_tables), as vLLM's get_rope shares one module per set of rope parameters.
"""

from __future__ import annotations

import json
import math

import torch
from torch import nn

from minivllm.kernels import elementwise_ops  # noqa: F401  (registers torch.ops.minivllm.*)
from minivllm.layers.custom_op import CustomOp

# rope_type values whose inverse frequencies are computed here; models/config_check.py refuses the others
# (dynamic, yarn, longrope, ...) with their names.
ROPE_TYPES = ("default", "linear", "llama3")


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


def rope_type_of(rope_scaling: dict | None) -> str:
    scaling = rope_scaling or {}
    return scaling.get("rope_type", scaling.get("type", "default")) or "default"


def cos_sin_table(head_dim: int, max_position: int, base: float, rope_scaling: dict | None = None,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """[max_position, head_dim] = cat(cos, sin), float32 whatever the model dtype (as Hugging Face computes
    it, so fp32 greedy tokens match transformers exactly)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
    rope_type = rope_type_of(rope_scaling)
    if rope_type == "llama3":
        inv_freq = _llama3_inv_freq(inv_freq, rope_scaling)  # type: ignore[arg-type]
    elif rope_type == "linear":  # positions divided by the factor (transformers: inv_freq / factor)
        inv_freq = inv_freq / rope_scaling["factor"]  # type: ignore[index]
    elif rope_type != "default":
        raise ValueError(f"rope_scaling type {rope_type!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    t = torch.arange(max_position, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()


def attach_rope_tables(model: nn.Module, max_position: int, device: torch.device) -> None:
    """Give every RotaryEmbedding of `model` its table for `max_position` positions: one table per distinct
    set of rope parameters (in practice one per engine), owned by the model, so it is freed with it."""
    tables: dict[tuple, torch.Tensor] = {}
    for m in model.modules():
        if isinstance(m, RotaryEmbedding):
            key = (m.head_dim, m.base, json.dumps(m.rope_scaling, sort_keys=True))
            if key not in tables:
                tables[key] = cos_sin_table(m.head_dim, max_position, m.base, m.rope_scaling, device)
            m.cos_sin_cache = tables[key]


class RotaryEmbedding(CustomOp):
    name = "rotary_embedding"

    def __init__(self, head_dim: int, max_position: int, base: float, rope_scaling: dict | None = None) -> None:
        """Builds its own table (standalone use, tests); inside a model the loader replaces it with the
        engine's shared one (attach_rope_tables), and the model is built on the meta device, where this
        table costs nothing."""
        super().__init__()
        self.head_dim, self.base, self.rope_scaling = head_dim, base, rope_scaling
        self.register_buffer("cos_sin_cache", cos_sin_table(head_dim, max_position, base, rope_scaling),
                             persistent=False)

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
