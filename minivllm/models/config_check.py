"""The checks of a checkpoint's config.json: types and ranges, and the fields the engine does not implement.

Why refuse instead of ignore: a field that changes the math (an activation, a sliding window, a RoPE
scaling) but is silently skipped gives fluent, wrong tokens, and nothing says why. So every field of
transformers' LlamaConfig / Qwen2Config / Qwen3Config that changes what the model computes is either
implemented (ModelConfig reads it) or refused here with a ValueError naming it; the README's "Checkpoints
and configs" table lists which is which. A wrong type (`"rms_norm_eps": "1e-6"`) is refused here too,
before it reaches a kernel.
"""

from __future__ import annotations

import math
from pathlib import Path

from minivllm.config import is_int
from minivllm.layers.rotary import ROPE_TYPES, rope_type_of

ACTIVATIONS = ("silu",)  # the MLP is SiLU(gate) * up (layers/activation.py); "swish" is the same function
_ACT_ALIASES = {"swish": "silu"}


def is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_config_fields(file: Path, raw: dict) -> None:
    """Raise a ValueError naming `file` and the field for anything the engine cannot run as written."""
    def bad(msg: str) -> ValueError:
        return ValueError(f"{file}: {msg}")

    archs = raw.get("architectures")
    if isinstance(archs, str):
        raise bad(f"'architectures' must be a list of class names, e.g. [\"Qwen3ForCausalLM\"], got the string "
                  f"{archs!r}")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise bad(f"'architectures' must be a list of class names, got {archs!r}")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                "num_key_value_heads", "head_dim"):
        value = raw.get(key)
        if value is not None and not (is_int(value) and value >= 1):
            raise bad(f"{key!r} must be a positive int, got {value!r}")
    mpe = raw.get("max_position_embeddings")
    if mpe is not None and not (is_int(mpe) and mpe >= 2):
        raise bad(f"'max_position_embeddings' must be an int >= 2 (the longest sequence the model takes), "
                  f"got {mpe!r}")
    eos = raw.get("eos_token_id")
    if eos is not None and not (is_int(eos) and eos >= 0) and not (
            isinstance(eos, list) and all(is_int(t) and t >= 0 for t in eos)):
        raise bad(f"'eos_token_id' must be a non-negative int, a list of them or null, got {eos!r}")
    _check_numbers(raw, bad)
    _check_shapes(raw, bad)
    _check_rope(raw, bad)
    _check_unsupported(raw, bad)


def _check_numbers(raw: dict, bad) -> None:
    eps = raw.get("rms_norm_eps")
    if eps is not None and not (is_number(eps) and eps > 0):
        raise bad(f"'rms_norm_eps' must be a positive number (e.g. 1e-6), got {eps!r}"
                  + (" (a string: write it without quotes)" if isinstance(eps, str) else ""))
    for key in ("attention_bias", "mlp_bias", "tie_word_embeddings", "use_sliding_window"):
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise bad(f"{key!r} must be true or false, got {value!r}")
    dropout = raw.get("attention_dropout")
    if dropout is not None and not (is_number(dropout) and 0 <= dropout <= 1):
        raise bad(f"'attention_dropout' must be a number in [0, 1] (unused at inference), got {dropout!r}")


def _check_shapes(raw: dict, bad) -> None:
    heads, kv = raw.get("num_attention_heads"), raw.get("num_key_value_heads")
    if heads and kv and heads % kv:
        raise bad(f"'num_attention_heads' ({heads}) must be a multiple of 'num_key_value_heads' ({kv}): each "
                  f"KV head serves the same number of query heads (GQA)")
    head_dim = raw.get("head_dim")
    if head_dim is None and raw.get("hidden_size") and heads:
        if raw["hidden_size"] % heads:
            raise bad(f"'hidden_size' ({raw['hidden_size']}) is not a multiple of 'num_attention_heads' "
                      f"({heads}) and there is no 'head_dim': the head size is undefined")
        head_dim = raw["hidden_size"] // heads
    if head_dim is not None and head_dim % 2:
        raise bad(f"the head size ('head_dim', or hidden_size / num_attention_heads) must be even for RoPE, "
                  f"got {head_dim}")


def _rope_dicts(raw: dict, bad) -> list[tuple[str, dict]]:
    """rope_scaling (classic config.json) and rope_parameters (transformers 5), each a dict or null."""
    found = []
    for key in ("rope_scaling", "rope_parameters"):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise bad(f"{key!r} must be an object such as {{\"rope_type\": \"linear\", \"factor\": 2.0}} or null, "
                      f"got {value!r}")
        found.append((key, value))
    return found


def _check_rope(raw: dict, bad) -> None:
    theta = raw.get("rope_theta")
    if theta is not None and not (is_number(theta) and theta > 0):
        raise bad(f"'rope_theta' must be a positive number (e.g. 10000.0), got {theta!r}")
    for key, rope in _rope_dicts(raw, bad):
        rope_type = rope_type_of(rope)
        if rope_type not in ROPE_TYPES:
            raise bad(f"{key}.rope_type {rope_type!r} is not supported: minivllm implements "
                      f"{', '.join(ROPE_TYPES)} (dynamic, yarn, longrope and the rest are refused rather than "
                      f"run unscaled)")
        for field in ("rope_theta", "factor", "low_freq_factor", "high_freq_factor",
                      "original_max_position_embeddings"):
            value = rope.get(field)
            if value is not None and not (is_number(value) and value > 0):
                raise bad(f"{key}.{field} must be a positive number, got {value!r}")
        if rope_type in ("linear", "llama3") and rope.get("factor") is None:
            raise bad(f"{key}: rope_type {rope_type!r} needs a 'factor'")
        if rope_type == "llama3" and rope.get("low_freq_factor", 1.0) >= rope.get("high_freq_factor", 4.0):
            raise bad(f"{key}: llama3 needs low_freq_factor < high_freq_factor, got {rope.get('low_freq_factor')} "
                      f"and {rope.get('high_freq_factor')}")
    partial = [rope.get("partial_rotary_factor") for _, rope in _rope_dicts(raw, bad)]
    partial.append(raw.get("partial_rotary_factor"))
    for value in partial:
        if value is not None and value != 1.0:
            raise bad(f"'partial_rotary_factor' {value!r} is not supported: RoPE rotates the whole head "
                      f"(only 1.0)")


def _sliding_window_in_use(raw: dict) -> bool:
    """As transformers decides it: Qwen2/Qwen3 slide only with use_sliding_window, and then only in the
    layers from max_window_layers on (or as layer_types says); a window at least max_position_embeddings
    long never cuts anything. Llama has no such switch: a sliding_window there is Mistral-style, in use."""
    window = raw.get("sliding_window")
    layer_types = raw.get("layer_types")
    if isinstance(layer_types, list) and any(t != "full_attention" for t in layer_types):
        return True
    if window is None or raw.get("use_sliding_window") is False:
        return False
    if is_int(window) and is_int(raw.get("max_position_embeddings")) and window >= raw["max_position_embeddings"]:
        return False
    arch = (raw.get("architectures") or [""])[0]
    if arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        if not raw.get("use_sliding_window", False):
            return False
        if layer_types is None:  # transformers: layer i slides when i >= max_window_layers
            return raw.get("max_window_layers", 28) < raw.get("num_hidden_layers", 0)
        return False
    return True


def _check_unsupported(raw: dict, bad) -> None:
    act = raw.get("hidden_act", "silu")
    if not isinstance(act, str) or _ACT_ALIASES.get(act, act) not in ACTIVATIONS:
        raise bad(f"'hidden_act' {act!r} is not supported: the MLP computes SiLU(gate) * up (supported: "
                  f"{', '.join(ACTIVATIONS)})")
    layer_types = raw.get("layer_types")
    if layer_types is not None and not (isinstance(layer_types, list) and all(isinstance(t, str)
                                                                              for t in layer_types)):
        raise bad(f"'layer_types' must be a list of strings such as \"full_attention\", got {layer_types!r}")
    if _sliding_window_in_use(raw):
        raise bad(f"sliding-window attention is not supported ('sliding_window': {raw.get('sliding_window')!r}, "
                  f"'use_sliding_window': {raw.get('use_sliding_window')!r}, 'max_window_layers': "
                  f"{raw.get('max_window_layers')!r}, 'layer_types': {layer_types!r}): every layer attends to "
                  f"the whole context here, which would change this model's outputs")
    if raw.get("quantization_config") is not None:
        raise bad("'quantization_config' is set: quantized checkpoints are not supported (weights are loaded "
                  "as float32 / bfloat16 / float16 tensors only)")
