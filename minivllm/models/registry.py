"""Model classes keyed by the `architectures` entry of a Hugging Face config.json."""

from __future__ import annotations

from torch import nn

from minivllm.models.config import ModelConfig
from minivllm.models.llama import LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM

MODEL_REGISTRY: dict[str, type[nn.Module]] = {
    "LlamaForCausalLM": LlamaForCausalLM,
    "Qwen2ForCausalLM": Qwen2ForCausalLM,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
}


def get_model_class(cfg: ModelConfig) -> type[nn.Module]:
    try:
        return MODEL_REGISTRY[cfg.architecture]
    except KeyError:
        raise ValueError(f"unsupported architecture {cfg.architecture!r} in config.json; supported: "
                         f"{sorted(MODEL_REGISTRY)}") from None
