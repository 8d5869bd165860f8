"""The architecture fields minivllm reads from a checkpoint's config.json (no remote code, ever).

The values are checked first (models/config_check.py): fields the engine does not implement are refused
there, so what is read here is what the model computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# config.json's torch_dtype names (also what tools/make_random_checkpoint.py writes)
CHECKPOINT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class ModelConfig:
    architecture: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool  # q/k/v projections: Qwen2 always; Llama and Qwen3 with attention_bias
    o_bias: bool  # o_proj: Llama and Qwen3 with attention_bias (Qwen2 never)
    mlp_bias: bool  # gate/up/down: Llama with mlp_bias (Qwen2/Qwen3 have none, as in transformers)
    qk_norm: bool
    torch_dtype: torch.dtype | None
    eos_token_ids: list[int]

    @classmethod
    def from_dict(cls, cfg: dict) -> "ModelConfig":
        """cfg: a config.json that passed the loader's checks (a supported architecture among them)."""
        arch = cfg["architectures"][0]
        heads = cfg["num_attention_heads"]
        rope = cfg.get("rope_parameters") or {}
        scaling = cfg.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
        eos = cfg.get("eos_token_id")
        eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        return cls(
            architecture=arch,
            hidden_size=cfg["hidden_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            intermediate_size=cfg["intermediate_size"],
            vocab_size=cfg["vocab_size"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0),
            rope_scaling=scaling,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=arch == "Qwen2ForCausalLM" or bool(cfg.get("attention_bias", False)),
            o_bias=arch != "Qwen2ForCausalLM" and bool(cfg.get("attention_bias", False)),
            mlp_bias=arch == "LlamaForCausalLM" and bool(cfg.get("mlp_bias", False)),
            qk_norm=arch == "Qwen3ForCausalLM",
            torch_dtype=CHECKPOINT_DTYPES.get(str(dtype)) if dtype else None,
            eos_token_ids=eos_ids,
        )
