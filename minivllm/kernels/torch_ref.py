"""Pure-PyTorch paged attention: the CPU path and the reference every Triton kernel is tested against.

KV cache layout (per layer): k_cache, v_cache of shape [num_blocks, block_size, num_kv_heads, head_dim].
A token at slot s lives at block s // block_size, offset s % block_size.
"""

from __future__ import annotations

import torch


def store_kvcache_ref(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      slot_mapping: torch.Tensor) -> None:
    """Write key/value [T, Hkv, D] into the paged caches at slot_mapping [T]; slots < 0 are skipped."""
    num_blocks, block_size = k_cache.shape[:2]
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    k_cache.view(num_blocks * block_size, *k_cache.shape[2:])[slots] = key[keep].to(k_cache.dtype)
    v_cache.view(num_blocks * block_size, *v_cache.shape[2:])[slots] = value[keep].to(v_cache.dtype)


def paged_decode_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                               max_seq_len: int | None = None) -> torch.Tensor:
    """One query token per sequence: q [S, H, D] over each sequence's first seq_lens[s] cached tokens.

    Gather-and-mask with no host sync, so it can be captured in a CUDA graph. Rows with seq_len 0 give zeros.
    max_seq_len (a host-side bound on seq_lens) limits the gather to the blocks in use: without it every row
    gathers its whole table, max_model_len tokens, whatever it holds (64 one-token rows at max_model_len=32768
    gathered 0.8 GiB). A captured graph would keep the bound it was captured with, so graphs pass None.
    """
    S, H, D = q.shape
    block_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    if max_seq_len is not None:
        block_tables = block_tables[:, :max(-(-max_seq_len // block_size), 1)]
    M = block_tables.shape[1]
    k = k_cache[block_tables.long()].reshape(S, M * block_size, Hkv, D)
    v = v_cache[block_tables.long()].reshape(S, M * block_size, Hkv, D)
    group = H // Hkv
    qf = q.float().reshape(S, Hkv, group, D)  # reshape: q may be a strided view of a fused qkv tensor
    scores = torch.einsum("sgqd,sngd->sgqn", qf, k.float()) * scale  # [S,Hkv,group,N]
    pos = torch.arange(M * block_size, device=q.device)
    mask = pos.view(1, 1, 1, -1) < seq_lens.view(S, 1, 1, 1)
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    probs = torch.nan_to_num(probs, nan=0.0)  # rows with seq_len 0 -> all -inf -> NaN -> 0
    out = torch.einsum("sgqn,sngd->sgqd", probs, v.float())
    return out.reshape(S, H, D).to(q.dtype)


def paged_prefill_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                block_tables: torch.Tensor, query_start_loc: list[int], seq_lens: list[int],
                                scale: float) -> torch.Tensor:
    """Causal attention for packed variable-length queries q [T, H, D] whose K/V are already in the cache.

    Sequence s has query_len = query_start_loc[s+1] - query_start_loc[s] new tokens at positions
    [seq_lens[s] - query_len, seq_lens[s]); they attend to every cached token up to their own position
    (a cached prefix from prefix caching or an earlier chunk included).
    """
    T, H, D = q.shape
    block_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    group = H // Hkv
    out = torch.zeros_like(q)
    for s in range(len(seq_lens)):
        q0, q1, L = query_start_loc[s], query_start_loc[s + 1], seq_lens[s]
        ql = q1 - q0
        if ql == 0 or L == 0:
            continue
        nb = (L + block_size - 1) // block_size
        blocks = block_tables[s, :nb].long()
        k = k_cache[blocks].reshape(nb * block_size, Hkv, D)[:L].float()
        v = v_cache[blocks].reshape(nb * block_size, Hkv, D)[:L].float()
        k = k.repeat_interleave(group, dim=1)  # [L, H, D]
        v = v.repeat_interleave(group, dim=1)
        qs = q[q0:q1].float()
        scores = torch.einsum("qhd,khd->hqk", qs, k) * scale
        qpos = torch.arange(L - ql, L, device=q.device).view(-1, 1)
        kpos = torch.arange(L, device=q.device).view(1, -1)
        scores = scores.masked_fill((kpos > qpos).unsqueeze(0), float("-inf"))
        out[q0:q1] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).to(q.dtype)
    return out
