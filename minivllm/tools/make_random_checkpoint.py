"""Write a Hugging Face checkpoint with random weights in a real architecture's shape.

Why: no real weights can be downloaded here, yet speed depends only on the *shapes* (layers, heads, GQA,
head_dim, vocabulary), and correctness tests only need the engine and transformers to agree on the same
weights. So a random Qwen3-0.6B measures the same tokens/s as the real one, and a random tiny Llama is
enough to check the engine's Llama path against transformers.

    python -m minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 .ckpt/qwen3-0.6b

The hyper-parameters are the published ones (config.json of Qwen/Qwen3-0.6B, meta-llama/Llama-3.2-1B,
Qwen/Qwen2-0.5B). The tokenizer is the embedded model's small byte-level BPE (scripts/maint/tiny_tokenizer.py),
copied from it: the model vocabulary is larger than the tokenizer's, which is normal (real checkpoints pad
their vocabularies too).
Weights are created on the meta device and filled directly in the target dtype: transformers' own
initialisation of a 1B model takes minutes, this takes seconds.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import (AutoModelForCausalLM, GenerationConfig, LlamaConfig, PretrainedConfig, Qwen2Config,
                          Qwen3Config)

from minivllm import DEFAULT_MODEL
from minivllm.models.config import CHECKPOINT_DTYPES

_QWEN3_0_6B = dict(
    hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
    num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
    max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1_000_000.0, max_window_layers=28,
    attention_bias=False,
)
_LLAMA_3_2_1B = dict(
    hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
    max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500_000.0, attention_bias=False,
    mlp_bias=False,
    rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=8192),
)
_QWEN2_0_5B = dict(
    hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=131072,
    rms_norm_eps=1e-6, rope_theta=1_000_000.0, max_window_layers=24, use_sliding_window=False,
)
# Tiny variants: same code paths (GQA, q/k norm, llama3 rope scaling, qkv bias), small enough for CPU tests.
# The vocabulary is padded past the tokenizer's 512 (transformers 5 gives Qwen2 one extra token, id 512).
_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=640, max_position_embeddings=2048)

#: shape name -> (config class, published hyper-parameters)
SHAPES: dict[str, tuple[type[PretrainedConfig], dict[str, Any]]] = {
    "qwen3-0.6b": (Qwen3Config, _QWEN3_0_6B),
    "llama-3.2-1b": (LlamaConfig, _LLAMA_3_2_1B),
    "qwen2-0.5b": (Qwen2Config, _QWEN2_0_5B),
    "tiny": (Qwen3Config, {**_QWEN3_0_6B, **_TINY}),
    "tiny-llama": (LlamaConfig, {**_LLAMA_3_2_1B, **_TINY, "rope_scaling": {
        **_LLAMA_3_2_1B["rope_scaling"], "original_max_position_embeddings": 256}}),
    "tiny-qwen2": (Qwen2Config, {**_QWEN2_0_5B, **{k: v for k, v in _TINY.items() if k != "head_dim"}}),
}


def make_config(shape: str, dtype: str = "float32", **overrides: Any) -> PretrainedConfig:
    """The transformers config of `shape`, with `overrides` (any config field) applied on top.

    rope_theta / rope_scaling are given in the classic form of published config.json files and converted
    to transformers 5's `rope_parameters`; `make_random_checkpoint` writes both forms into config.json."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {sorted(SHAPES)}, got {shape!r}")
    if dtype not in CHECKPOINT_DTYPES:
        raise ValueError(f"dtype must be one of {sorted(CHECKPOINT_DTYPES)}, got {dtype!r}")
    cls, params = SHAPES[shape]
    params = copy.deepcopy({**params, **overrides})
    theta = params.pop("rope_theta")
    rope = params.pop("rope_parameters", None) or {"rope_type": "default", "rope_theta": theta}
    rope.update(params.pop("rope_scaling", None) or {})
    if rope["rope_type"] == "llama3":  # transformers insists the original context is the shorter one
        params["max_position_embeddings"] = max(params["max_position_embeddings"],
                                                rope["original_max_position_embeddings"])
    # Token ids of the project tokenizer (pad 0, bos 1, eos 2), so generation stops where the tokenizer says.
    return cls(**params, rope_parameters=rope, pad_token_id=0, bos_token_id=1, eos_token_id=2, dtype=dtype)


@torch.no_grad()
def random_model(config: PretrainedConfig, seed: int = 0) -> torch.nn.Module:
    """Build the model without transformers' initialisation and fill it: N(0, 0.02) for matrices and biases,
    1 for norm weights. Same seed, same weights (the filling runs on the CPU in a fixed order)."""
    dtype = CHECKPOINT_DTYPES[str(config.dtype).removeprefix("torch.")]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.to_empty(device="cpu")
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():  # a tied lm_head is the same tensor: it is listed once
        if "norm" in name:
            p.fill_(1.0)
        else:
            p.normal_(0.0, config.initializer_range, generator=gen)
    model.tie_weights()
    for module in model.modules():  # rotary inv_freq buffers were computed on meta: recompute them
        if type(module).__name__.endswith("RotaryEmbedding"):
            fresh = type(module)(module.config)
            for buf_name, buf in fresh.named_buffers():
                getattr(module, buf_name).copy_(buf)
    return model.eval()


def make_random_checkpoint(shape: str, out_dir: str | Path, dtype: str = "float32", seed: int = 0,
                           **overrides: Any) -> Path:
    """Write config.json, model.safetensors, generation_config.json and the tokenizer to `out_dir`.

    `overrides` set config fields, e.g. `make_random_checkpoint("tiny-llama", d, num_hidden_layers=3)`."""
    out_dir = Path(out_dir)
    config = make_config(shape, dtype, **overrides)
    model = random_model(config, seed)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model.save_pretrained(str(out_dir))
    add_classic_config_keys(out_dir / "config.json", config)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(Path(DEFAULT_MODEL) / name, out_dir / name)
    return out_dir


def add_classic_config_keys(path: Path, config: PretrainedConfig) -> None:
    """Published config.json files say rope_theta / rope_scaling / torch_dtype; transformers 5 writes
    rope_parameters / dtype. Write both, so a loader written against either form reads ours."""
    cfg = json.loads(path.read_text())
    rope = dict(config.rope_parameters)
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope if rope.get("rope_type", "default") != "default" else None
    cfg["torch_dtype"] = cfg.get("dtype", str(config.dtype).removeprefix("torch."))
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(CHECKPOINT_DTYPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("out_dir")
    args = ap.parse_args(argv)
    out = make_random_checkpoint(args.shape, args.out_dir, args.dtype, args.seed)
    cfg = json.loads((out / "config.json").read_text())
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(f"wrote {out}: {args.shape} ({cfg['architectures'][0]}), {cfg['num_hidden_layers']} layers, "
          f"vocab {cfg['vocab_size']}, {args.dtype}, {size / 1e6:.1f} MB of weights")


if __name__ == "__main__":
    main()
