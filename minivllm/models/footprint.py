"""What a config.json asks the engine to allocate, checked against the memory there is, before allocating.

Why: `vocab_size: 10**9` or `max_position_embeddings: 10**10` are one typo away from a real config, and
allocating them ends in a raw allocator error (or the machine swapping) deep in the model constructor. A
few multiplications say in advance which field asks for how much, and the error can name it.
"""

from __future__ import annotations

import os

import torch

from minivllm.models.config import ModelConfig

GiB = 1 << 30


def available_bytes(device: torch.device) -> int | None:
    """Free memory of `device`: the GPU's free memory, or the host's available RAM (psutil if present, else
    sysconf). None when it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def footprint(cfg: ModelConfig, max_model_len: int, dtype: torch.dtype, max_num_seqs: int,
              block_size: int, len_field: str) -> dict[str, tuple[int, str]]:
    """Bytes the engine allocates before its KV cache, by the config field that decides them:
    {field: (bytes, what)}."""
    item = torch.empty(0, dtype=dtype).element_size()
    H, D = cfg.hidden_size, cfg.head_dim
    embed = cfg.vocab_size * H * item * (1 if cfg.tie_word_embeddings else 2)
    attn = H * (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * D + cfg.num_attention_heads * D * H
    layer = (attn + 3 * H * cfg.intermediate_size + 2 * H + 2 * D) * item
    blocks = -(-max_model_len // block_size) * block_size
    rope = blocks * D * 4  # the one fp32 cos/sin table (layers/rotary.py)
    tables = max_num_seqs * (blocks // block_size) * 4  # the int32 block tables (worker/input_batch.py)
    return {
        "vocab_size": (embed, (f"the embedding{'' if cfg.tie_word_embeddings else ' and the LM head'} "
                               f"(vocab_size {cfg.vocab_size} x hidden_size {H} x {item} bytes)")),
        "num_hidden_layers": (cfg.num_hidden_layers * layer, f"{cfg.num_hidden_layers} decoder layers"),
        len_field: (rope + tables, f"the RoPE table and block tables for {max_model_len} positions"),
    }


def check_fits(cfg: ModelConfig, max_model_len: int, dtype: torch.dtype, device: torch.device,
               max_num_seqs: int, block_size: int, len_field: str, where: str) -> None:
    """A ValueError naming the field that asks for the most when the weights and tables alone exceed the
    free memory of `device`. len_field: what set max_model_len ('max_model_len', or config.json's
    'max_position_embeddings' when the caller gave none)."""
    parts = footprint(cfg, max_model_len, dtype, max_num_seqs, block_size, len_field)
    total = sum(b for b, _ in parts.values())
    free = available_bytes(device)
    if free is None or total <= free:
        return
    field, (size, what) = max(parts.items(), key=lambda kv: kv[1][0])
    hint = " (pass a smaller max_model_len=...)" if field == len_field else ""
    raise ValueError(f"{where}: {field} asks for {size / GiB:,.1f} GiB for {what}; with the rest the model needs "
                     f"{total / GiB:,.1f} GiB before its KV cache, more than the {free / GiB:,.1f} GiB available on "
                     f"{device.type}{hint}")
