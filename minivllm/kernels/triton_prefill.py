"""Paged prefill attention in Triton: packed variable-length causal queries over K/V in the paged cache.

One kernel serves every batch that is not pure decode: fresh prompts, prompts with a cached prefix (prefix
caching), later chunks of a chunked prefill, and decode rows (query_len 1) mixed in. Query token i of
sequence s sits at position seq_lens[s] - query_len_s + i and sees cache positions [0, that position].

Flash-attention structure: a program owns a tile of BLOCK_M query rows and streams the K/V of its sequence
through in BLOCK_N-token tiles, keeping a running max / sum / accumulator (online softmax), so the
[query, key] score matrix never exists in memory. Two refinements:

* GQA packing: the BLOCK_M rows are BLOCK_M // GROUP_PAD query tokens x GROUP_PAD query heads of one kv
  head, so each K/V tile is loaded once for the whole group (and decode rows still fill the tile).
* Causal split of the key loop: tiles entirely at or below every row's diagonal need no mask; only the
  last few tiles pay for masking.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from minivllm.kernels.compat import fix_interpreter
from minivllm.kernels.launch import cdiv, launch, next_power_of_2
from minivllm.kernels.triton_decode import _LOG2E, check_paged_inputs

fix_interpreter()


@triton.jit
def _attend_tile(q, acc, m_i, l_i, n0, k_ptr, v_ptr, bt_row_ptr, kv_base, kv_stride_blk, kv_stride_tok,
                 q_pos, kv_end, scale_log2,
                 HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                 MASKED: tl.constexpr, PRECISION: tl.constexpr, K_ROWS: tl.constexpr):
    """Fold keys [n0, n0 + BLOCK_N) into the running softmax state of the BLOCK_M query rows.

    K_ROWS: load the K tile as [BLOCK_N, D] rows (like V) and transpose it in registers, instead of
    loading it as [D, BLOCK_N] directly; which one is faster is measured
    (scripts/maint/attention_sweep.py --prefill)."""
    n = n0 + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    if MASKED:
        n_ok = n < kv_end
        block = tl.load(bt_row_ptr + n // BLOCK_SIZE, mask=n_ok, other=0).to(tl.int64)
    else:
        block = tl.load(bt_row_ptr + n // BLOCK_SIZE).to(tl.int64)
    tok = kv_base + block * kv_stride_blk + (n % BLOCK_SIZE) * kv_stride_tok  # [BLOCK_N]
    if K_ROWS:
        if MASKED:
            k = tl.trans(tl.load(k_ptr + tok[:, None] + d[None, :], mask=n_ok[:, None], other=0.0))
        else:
            k = tl.trans(tl.load(k_ptr + tok[:, None] + d[None, :]))
    elif MASKED:
        k = tl.load(k_ptr + tok[None, :] + d[:, None], mask=n_ok[None, :], other=0.0)
    else:
        k = tl.load(k_ptr + tok[None, :] + d[:, None])  # [D, BLOCK_N]
    s = tl.dot(q, k, input_precision=PRECISION) * scale_log2  # [BLOCK_M, BLOCK_N]
    if MASKED:  # causal + end of context
        s = tl.where((n[None, :] <= q_pos[:, None]) & n_ok[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if MASKED:
        v = tl.load(v_ptr + tok[:, None] + d[None, :], mask=n_ok[:, None], other=0.0)
    else:
        v = tl.load(v_ptr + tok[:, None] + d[None, :])  # [BLOCK_N, D]
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return acc, m_new, l_i


@triton.jit
def _attend_query_block(q_ptr, k_ptr, v_ptr, out_ptr, bt_row_ptr, q_start, query_len, seq_len, q_tile, kv_head,
                        scale_log2, q_stride_t, q_stride_h, out_stride_t, out_stride_h,
                        kv_stride_blk, kv_stride_tok, kv_stride_head,
                        GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        PRECISION: tl.constexpr, K_ROWS: tl.constexpr):
    """One query block of one sequence (BLOCK_Q tokens x GROUP_PAD heads of kv_head) attends to its causal
    keys and writes its rows: the work this kernel and the unified one share (they differ in how a program
    finds its sequence and block)."""
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP_PAD  # query tokens per tile
    context_start = seq_len - query_len  # tokens already cached before this step's queries
    r = tl.arange(0, BLOCK_M)
    t = q_tile * BLOCK_Q + r // GROUP_PAD  # query token within the sequence
    g = r % GROUP_PAD
    head = kv_head * GROUP + g
    row_ok = (t < query_len) & (g < GROUP)
    d = tl.arange(0, HEAD_DIM)
    q_rows = (q_start + t).to(tl.int64)
    q = tl.load(q_ptr + q_rows[:, None] * q_stride_t + head[:, None] * q_stride_h + d[None, :],
                mask=row_ok[:, None], other=0.0)
    q = q.to(k_ptr.dtype.element_ty)
    # Rows past query_len get positions past the context: they see every key, so no row is all -inf.
    q_pos = context_start + t

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    kv_base = kv_head * kv_stride_head
    first_pos = context_start + q_tile * BLOCK_Q  # smallest position among this tile's queries
    last_pos = context_start + tl.minimum((q_tile + 1) * BLOCK_Q, query_len) - 1
    kv_end = tl.minimum(last_pos + 1, seq_len)  # seq_len 0 (padding) -> kv_end <= 0 -> no keys, zero output
    full_end = tl.maximum(tl.minimum((first_pos + 1) // BLOCK_N * BLOCK_N, kv_end), 0)
    for n0 in range(0, full_end, BLOCK_N):  # every key visible to every row: no mask
        acc, m_i, l_i = _attend_tile(q, acc, m_i, l_i, n0, k_ptr, v_ptr, bt_row_ptr, kv_base,
                                     kv_stride_blk, kv_stride_tok, q_pos, kv_end, scale_log2,
                                     HEAD_DIM, BLOCK_SIZE, BLOCK_N, False, PRECISION, K_ROWS)
    for n0 in range(full_end, kv_end, BLOCK_N):  # the diagonal: causal mask
        acc, m_i, l_i = _attend_tile(q, acc, m_i, l_i, n0, k_ptr, v_ptr, bt_row_ptr, kv_base,
                                     kv_stride_blk, kv_stride_tok, q_pos, kv_end, scale_log2,
                                     HEAD_DIM, BLOCK_SIZE, BLOCK_N, True, PRECISION, K_ROWS)

    l_safe = tl.where(l_i > 0, l_i, 1.0)  # no keys -> acc 0 -> zeros, never NaN
    out = acc / l_safe[:, None]
    tl.store(out_ptr + q_rows[:, None] * out_stride_t + head[:, None] * out_stride_h + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _prefill_kernel(q_ptr, k_ptr, v_ptr, out_ptr, bt_ptr, query_start_ptr, seq_lens_ptr, scale_log2,
                    q_stride_t, q_stride_h, out_stride_t, out_stride_h,
                    bt_stride_s, kv_stride_blk, kv_stride_tok, kv_stride_head,
                    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    PRECISION: tl.constexpr, K_ROWS: tl.constexpr):
    seq = tl.program_id(0)
    q_tile = tl.num_programs(1) - 1 - tl.program_id(1)  # longest (last, most keys) tiles launch first
    # fp32 always: when torch.compile traces the launch (attention_backend="unregistered"), Inductor passes
    # this Python float as fp64, which would promote the running max and fail the loop's type check.
    scale_log2 = tl.cast(scale_log2, tl.float32)
    kv_head = tl.program_id(2)
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP_PAD  # query tokens per tile

    q_start = tl.load(query_start_ptr + seq)
    query_len = tl.load(query_start_ptr + seq + 1) - q_start
    if q_tile * BLOCK_Q >= query_len:  # grid is sized for the longest query; shorter ones stop here
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    _attend_query_block(q_ptr, k_ptr, v_ptr, out_ptr, bt_ptr + seq * bt_stride_s, q_start, query_len, seq_len,
                        q_tile, kv_head, scale_log2, q_stride_t, q_stride_h, out_stride_t, out_stride_h,
                        kv_stride_blk, kv_stride_tok, kv_stride_head,
                        GROUP, GROUP_PAD, HEAD_DIM, BLOCK_SIZE, BLOCK_M, BLOCK_N, PRECISION, K_ROWS)


def prefill_tile_config(max_query_len: int, group_pad: int, head_dim: int,
                        dtype: torch.dtype) -> tuple[int, int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages, K_ROWS), chosen by measurement on the H200.

    Long prompts: 64x64 tiles, 4 warps, 2 stages, K loaded as rows. Two sweeps on the H200
    (scripts/maint/attention_sweep.py --prefill, 22 configs) found it the fastest for both 8x1024 and
    1x4096: 0.66x / 0.62x of SDPA, against 0.55x / 0.51x for a 128x64, 8-warp tile with K loaded as
    columns. Short queries (decode rows, small chunks) get small tiles so the padding rows do not multiply
    the work. fp32 and D=256 tiles are smaller to fit registers.
    """
    rows = max_query_len * group_pad
    k_rows = False
    if dtype == torch.float32:
        block_m, block_n, warps = (64, 32, 8) if head_dim <= 64 else (32, 16, 8)
    elif head_dim > 128:
        block_m, block_n, warps = 64, 32, 8
    elif rows > 32:
        block_m, block_n, warps, k_rows = 64, 64, 4, True
    else:
        block_m, block_n, warps = 32, 32, 4
    while block_m > 16 and block_m // 2 >= rows:  # few query rows: shrink the tile, not below 16
        block_m //= 2
    return max(block_m, group_pad), block_n, warps, 2, k_rows


def invariant_tiles(q: torch.Tensor, k_cache: torch.Tensor) -> tuple[int, int, int, int, bool]:
    """Batch-invariant mode: one tile config for the prefill and unified kernels (a long prompt's), not one
    chosen from the batch's longest query; the KV tile (BLOCK_N) sets the order of a row's softmax."""
    return prefill_tile_config(1 << 16, next_power_of_2(q.shape[1] // k_cache.shape[2]), q.shape[2], k_cache.dtype)


def paged_prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                            max_query_len: int, scale: float, out: torch.Tensor | None = None,
                            tile_config: tuple[int, int, int, int, bool] | None = None) -> torch.Tensor:
    """Causal attention of packed queries q [T, H, D] over the paged cache (which already holds them).

    max_query_len (a host int, an upper bound is fine) sizes the grid. Sequences with seq_len 0 give zeros;
    with out=None, tokens past query_start_loc[-1] (batch padding) are zeros too. tile_config overrides
    (BLOCK_M, BLOCK_N, num_warps, num_stages, K_ROWS) for tuning sweeps.
    """
    T, H, D = q.shape
    q, block_size, Hkv = check_paged_inputs(q, k_cache, v_cache)
    if out is None:
        out = torch.zeros(T, H, D, dtype=q.dtype, device=q.device)
    S = seq_lens.shape[0]
    if T == 0 or S == 0 or max_query_len <= 0:
        return out
    group = H // Hkv
    group_pad = next_power_of_2(group)
    block_m, block_n, num_warps, num_stages, k_rows = (
        tile_config or prefill_tile_config(max_query_len, group_pad, D, q.dtype))
    precision = "ieee" if k_cache.dtype == torch.float32 else "tf32"
    grid = (S, cdiv(max_query_len, block_m // group_pad), Hkv)
    launch(_prefill_kernel, grid,
        q, k_cache, v_cache, out, block_tables, query_start_loc, seq_lens, scale * _LOG2E,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        block_tables.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        GROUP=group, GROUP_PAD=group_pad, HEAD_DIM=D, BLOCK_SIZE=block_size,
        BLOCK_M=block_m, BLOCK_N=block_n, PRECISION=precision, K_ROWS=k_rows,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out
