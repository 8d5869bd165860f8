"""The Llama decoder and its Qwen2 (qkv bias) and Qwen3 (q/k RMSNorm) variants, on minivllm's layers.

Biases follow transformers: Qwen2 has them on q/k/v; Llama and Qwen3 on q/k/v/o with attention_bias;
Llama on gate/up/down with mlp_bias.

Inputs are flat: T tokens of a packed batch (input_ids [T], positions [T]); there is no batch or padding
dimension, because the attention op knows from the batch metadata where each sequence starts.
"""

from __future__ import annotations

import torch
from torch import nn

from minivllm.attention.layer import Attention
from minivllm.layers.activation import SiluAndMul
from minivllm.layers.custom_op import UsesCustomOps
from minivllm.layers.layernorm import RMSNorm
from minivllm.layers.linear import Linear, PackedLinear
from minivllm.layers.rotary import RotaryEmbedding
from minivllm.models.config import ModelConfig


class DecoderAttention(UsesCustomOps):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        H, Hkv, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_size, self.kv_size, self.head_dim = H * D, Hkv * D, D
        self.qkv_proj = PackedLinear(cfg.hidden_size, {"q": H * D, "k": Hkv * D, "v": Hkv * D}, bias=cfg.qkv_bias)
        self.o_proj = Linear(H * D, cfg.hidden_size, bias=cfg.o_bias)
        self.rotary_emb = RotaryEmbedding(D, cfg.max_position_embeddings, cfg.rope_theta, cfg.rope_scaling)
        self.attn = Attention(H, Hkv, D, scale=D ** -0.5, layer_idx=layer_idx)
        self.qk_norm = cfg.qk_norm
        if cfg.qk_norm:
            self.q_norm = RMSNorm(D, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(D, cfg.rms_norm_eps)

    def rope_qk(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        """Qwen3's per-head q/k RMSNorm, then RoPE; one fused kernel unless custom_ops has "-qk_norm_rope"."""
        if self.qk_norm and self.custom_ops.is_enabled("qk_norm_rope"):
            return torch.ops.minivllm.qk_norm_rotary_embedding(
                positions, q, k, self.q_norm.weight, self.k_norm.weight, self.q_norm.eps,
                self.rotary_emb.cos_sin_cache, self.head_dim, self.custom_ops.use_pdl)
        if self.qk_norm:
            T = q.shape[0]
            q = self.q_norm(q.reshape(T, -1, self.head_dim)).view(T, -1)
            k = self.k_norm(k.reshape(T, -1, self.head_dim)).view(T, -1)
        return self.rotary_emb(positions, q, k)

    def forward(self, positions: torch.Tensor, qkv: torch.Tensor) -> torch.Tensor:
        """Everything after the qkv projection (which the layer runs with its norm): (q/k norm,) RoPE,
        attention, o_proj."""
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q, k = self.rope_qk(positions, q, k)
        return self.o_proj(self.attn(q, k, v))  # v stays a strided view of qkv: the KV store reads it in place


class DecoderMLP(UsesCustomOps):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_up_proj = PackedLinear(cfg.hidden_size, {0: cfg.intermediate_size, 1: cfg.intermediate_size},
                                         bias=cfg.mlp_bias)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)
        self.act_fn = SiluAndMul()

    def forward(self, gate_up: torch.Tensor) -> torch.Tensor:
        """Everything after the gate/up projection (which the layer runs with its norm): SiLU-and-mul, then
        down_proj."""
        if self.custom_ops.gemv_silu_mul:  # 1-2 rows: SiLU-and-mul inside the down projection's GEMV (more
            # rows: the SiLU-and-mul kernel, then cuBLAS, inside the op)
            return self.down_proj(gate_up, silu_mul=True)
        return self.down_proj(self.act_fn(gate_up))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = DecoderAttention(cfg, layer_idx)
        self.mlp = DecoderMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, positions: torch.Tensor, x: torch.Tensor, residual: torch.Tensor | None):
        """Returns (output, residual) as vLLM's layers do: the next layer (or the final norm) adds them.
        Each "residual add + RMSNorm, then projection" is one call of the projection (Linear.forward_after_norm),
        so with custom op "gemv_norm" it can be one GEMV kernel for 1 row: two kernels fewer per layer."""
        qkv, residual = self.self_attn.qkv_proj.forward_after_norm(x, residual, self.input_layernorm)
        x = self.self_attn(positions, qkv)
        gate_up, residual = self.mlp.gate_up_proj.forward_after_norm(x, residual, self.post_attention_layernorm)
        return self.mlp(gate_up), residual


class DecoderModel(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        residual = None
        for layer in self.layers:
            x, residual = layer(positions, x, residual)
        x, _ = self.norm(x, residual)
        return x


class LlamaForCausalLM(nn.Module):
    """forward() returns hidden states; compute_logits() projects only the rows that are sampled."""

    # checkpoint name fragment -> (packed parameter fragment, shard id)
    packed_modules = {
        ".q_proj.": (".qkv_proj.", "q"), ".k_proj.": (".qkv_proj.", "k"), ".v_proj.": (".qkv_proj.", "v"),
        ".gate_proj.": (".gate_up_proj.", 0), ".up_proj.": (".gate_up_proj.", 1),
    }

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = DecoderModel(cfg)
        self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)


class Qwen2ForCausalLM(LlamaForCausalLM):
    """Llama with a bias on q/k/v (set from the architecture name in ModelConfig)."""


class Qwen3ForCausalLM(LlamaForCausalLM):
    """Llama with per-head RMSNorm on q and k before RoPE (set from the architecture name in ModelConfig)."""
