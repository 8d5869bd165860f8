"""Unified paged attention in Triton: one launch for any batch (prefill chunks, cached prefixes, decodes),
with a launch grid that depends on the token count only, so a CUDA graph can hold it (vLLM:
vllm/v1/attention/ops/triton_unified_attention.py, the attention of the FULL cudagraph mode).

Why another kernel: the prefill kernel's grid is (sequences, query tiles of the LONGEST query, kv heads),
and the longest query is a host number that changes every step; a graph records one grid, so a graph of
that kernel would be right only for batches shaped like the one it captured. Here the grid is

    (num_tokens // BLOCK_Q + num_seqs + 1, kv heads)

where num_tokens is the padded token count (the graph's size) and num_seqs the length of the metadata
buffers (max_num_seqs in the engine): both fixed for a graph. That many query blocks always suffice:
sequence s needs ceil(len_s / BLOCK_Q) <= len_s // BLOCK_Q + 1 of them, and the lengths sum to num_tokens.
Each program finds its sequence on the device by a binary search over query_start_loc: sequence s owns
the program ids starting at query_start_loc[s] // BLOCK_Q + s (strictly increasing in s, with room for
its blocks), and a program past its sequence's last block returns at once.

Padding, fixed shapes:
  * metadata rows past the real batch have query_len 0 (query_start_loc repeats the real token count) and
    seq_len 0: they own no program;
  * tokens past query_start_loc[num_seqs] (the batch padded up to the graph's size) form one extra,
    virtual sequence with no context: its programs write zeros there, so padded rows are defined;
  * their KV slots are -1 (the store kernel skips them), so padding writes nothing to the cache.

Inside a query block the work is the prefill kernel's: BLOCK_M rows = BLOCK_Q tokens x GROUP_PAD query
heads of one kv head (GQA: each K/V tile is loaded once for the group), online softmax over the
sequence's paged K/V, unmasked tiles first and the causal diagonal last: the same jit function,
triton_prefill._attend_query_block.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.compat import fix_interpreter
from minivllm.kernels.op_registry import direct_op
from minivllm.kernels.triton_decode import _LOG2E, check_paged_inputs
from minivllm.kernels.triton_prefill import _attend_query_block, invariant_tiles, prefill_tile_config

fix_interpreter()


@triton.jit
def _find_seq(query_start_ptr, block_idx, num_seqs, BLOCK_Q: tl.constexpr):
    """The largest s in [0, num_seqs] whose first program id, query_start_loc[s] // BLOCK_Q + s, is <=
    block_idx. s == num_seqs is the virtual sequence of the padding tokens."""
    lo: tl.int32 = 0
    hi: tl.int32 = num_seqs + 1  # invariant: first_id(lo) <= block_idx < first_id(hi) (first_id(num_seqs + 1) = inf)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        first_id = tl.load(query_start_ptr + mid) // BLOCK_Q + mid
        if first_id <= block_idx:
            lo = mid
        else:
            hi = mid
    return lo


@triton.jit
def _unified_kernel(q_ptr, k_ptr, v_ptr, out_ptr, bt_ptr, query_start_ptr, seq_lens_ptr, scale_log2,
                    num_tokens, num_seqs,
                    q_stride_t, q_stride_h, out_stride_t, out_stride_h,
                    bt_stride_s, kv_stride_blk, kv_stride_tok, kv_stride_head,
                    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    PRECISION: tl.constexpr, K_ROWS: tl.constexpr):
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP_PAD  # query tokens per program
    # Highest ids first: a sequence's last query blocks (the most keys) start before its first ones.
    block_idx = tl.num_programs(0) - 1 - tl.program_id(0)
    kv_head = tl.program_id(1)
    # fp32 always (Inductor may pass the Python float as fp64; see triton_prefill._prefill_kernel)
    scale_log2 = tl.cast(scale_log2, tl.float32)

    seq = _find_seq(query_start_ptr, block_idx, num_seqs, BLOCK_Q)
    q_start = tl.load(query_start_ptr + seq)
    is_real = seq < num_seqs  # else: the padding tokens, no context, zeros out
    q_end = tl.where(is_real, tl.load(query_start_ptr + seq + 1, mask=is_real, other=0), num_tokens)
    seq_len = tl.load(seq_lens_ptr + seq, mask=is_real, other=0)
    query_len = q_end - q_start
    q_tile = block_idx - (q_start // BLOCK_Q + seq)  # this program's block within its sequence
    if q_tile * BLOCK_Q >= query_len:  # more programs than this sequence has blocks
        return
    # the padding's row is never read (kv_end <= 0 there)
    _attend_query_block(q_ptr, k_ptr, v_ptr, out_ptr, bt_ptr + seq.to(tl.int64) * bt_stride_s, q_start, query_len,
                        seq_len, q_tile, kv_head, scale_log2, q_stride_t, q_stride_h, out_stride_t, out_stride_h,
                        kv_stride_blk, kv_stride_tok, kv_stride_head,
                        GROUP, GROUP_PAD, HEAD_DIM, BLOCK_SIZE, BLOCK_M, BLOCK_N, PRECISION, K_ROWS)


def unified_grid(num_tokens: int, num_seqs: int, num_kv_heads: int, block_q: int) -> tuple[int, int]:
    """The launch grid: a function of the padded token count and the metadata's length only."""
    return num_tokens // block_q + num_seqs + 1, num_kv_heads


def unified_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                            scale: float, out: torch.Tensor | None = None,
                            tile_config: tuple[int, int, int, int, bool] | None = None) -> torch.Tensor:
    """Causal attention of packed queries q [T, H, D] over the paged cache (which already holds them).

    query_start_loc [S+1] and seq_lens [S] describe S sequences; rows with query_len 0 are unused, and the
    tokens past query_start_loc[S] are padding (zeros out). No host number of the batch is read: the
    launch depends on T, S and the tensors' addresses only, so it can be captured once per T.
    tile_config overrides (BLOCK_M, BLOCK_N, num_warps, num_stages, K_ROWS) (tests, tuning).
    """
    T, H, D = q.shape
    q, block_size, Hkv = check_paged_inputs(q, k_cache, v_cache)
    S = seq_lens.shape[0]
    if query_start_loc.shape[0] != S + 1:
        raise ValueError(f"query_start_loc has {query_start_loc.shape[0]} entries for {S} sequences "
                         f"(expected {S + 1})")
    if out is None:
        out = torch.empty(T, H, D, dtype=q.dtype, device=q.device)
    if T == 0:
        return out
    group = H // Hkv
    group_pad = triton.next_power_of_2(group)
    # Tiles from T and S alone (the same for every composition of a graph's tokens): with no more tokens than
    # sequences the batch may be all decodes, one query token each, where rows past the GQA group would be
    # wasted work, so the tile is the smallest; more tokens than sequences means long queries: prefill tiles.
    block_m, block_n, num_warps, num_stages, k_rows = (
        tile_config or prefill_tile_config(T if T > S else 1, group_pad, D, q.dtype))
    if block_m < max(16, group_pad) or block_m & (block_m - 1):
        raise ValueError(f"BLOCK_M {block_m} must be a power of two >= 16 and >= the padded GQA group {group_pad}")
    precision = "ieee" if k_cache.dtype == torch.float32 else "tf32"
    grid = unified_grid(T, S, Hkv, block_m // group_pad)
    _unified_kernel[grid](
        q, k_cache, v_cache, out, block_tables, query_start_loc, seq_lens, scale * _LOG2E, T, S,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        block_tables.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        GROUP=group, GROUP_PAD=group_pad, HEAD_DIM=D, BLOCK_SIZE=block_size,
        BLOCK_M=block_m, BLOCK_N=block_n, PRECISION=precision, K_ROWS=k_rows,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out


@direct_op("minivllm::unified_paged_attention", mutates_args=("out",))
def unified_paged_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               block_tables: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                               out: torch.Tensor, scale: float, batch_invariant: bool = False) -> None:
    """`torch.ops.minivllm.unified_paged_attention`: the kernel as a torch op writing into `out`, so
    compiled code sees one opaque node (like the other kernels, kernels/op_registry.py). batch_invariant:
    the tiles of triton_prefill.invariant_tiles, not those picked from T and S."""
    unified_paged_attention(q, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale, out=out,
                            tile_config=invariant_tiles(q, k_cache) if batch_invariant else None)


@unified_paged_attention_op.register_fake
def _(q, k_cache, v_cache, block_tables, query_start_loc, seq_lens, out, scale, batch_invariant=False) -> None:
    return None
