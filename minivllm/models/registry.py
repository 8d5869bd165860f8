"""Model classes keyed by the `architectures` entry of a Hugging Face config.json."""

from __future__ import annotations

from torch import nn

from minivllm.models.llama import LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM

MODEL_REGISTRY: dict[str, type[nn.Module]] = {
    "LlamaForCausalLM": LlamaForCausalLM,
    "Qwen2ForCausalLM": Qwen2ForCausalLM,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
}  # load_model_config refuses any other architecture, naming these
