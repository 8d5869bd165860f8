"""Paged decode attention in Triton: one new query token per sequence against its whole cached context.

Decode is memory-bound: every step reads each sequence's full K/V once and does little math with it. So the
kernel is organised around reading the cache as few times as possible and keeping the GPU busy:

* GQA: one program per (sequence, kv head) loads each K/V tile once and uses it for all `group` query heads
  that share that kv head (a [group, D] x [D, tile] dot, rows padded to 16 for tl.dot).
* Split-KV (flash-decoding): with few sequences there are too few programs to fill ~132 SMs, so each
  context is cut into NUM_SPLITS pieces handled by separate programs; each writes an unnormalised partial
  result (acc, max, sum) and a second small kernel merges them with the log-sum-exp trick, split by split
  in order (_merged_splits).
* One launch, where attention is launched from Python (eager and PIECEWISE steps, at batch 1 bound by the
  host's launches): the program whose split holds the step's new token (position seq_len - 1) writes its
  key and value from the step's k/v into the cache before it reads its tiles, and the last split of a
  (sequence, kv head) to finish merges the partials (a counter on the device says which is last), with
  the merge kernel's arithmetic: the same bits as the three kernels,
  so graph modes and eager still give the same tokens (tests/engine/test_cuda_graphs_gpu.py). Inside a
  CUDA graph the three kernels (KV store, decode, merge) stay apart: a graph launches them for free and
  PDL hides their edges, and there one kernel was slower (H200: the merge inside the kernel took batch-1
  TPOT 0.966 -> 1.006 ms, assets/results/h200 decode_ab_merge_*.json). vLLM writes
  the cache in its own kernel (reshape_and_cache_flash) in every mode; its launches are C++.
* CUDA graphs: the grid and NUM_SPLITS depend only on tensor shapes (the max context is
  block_tables.shape[1] * block_size), never on seq_lens values; each program reads its own seq_len on the
  device and skips what it does not need. Nothing here syncs with the host.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from minivllm.kernels.compat import fix_interpreter
from minivllm.kernels.launch import cdiv, launch, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel

_LOG2E = 1.4426950408889634
_MIN_TOKENS_PER_SPLIT = 128  # below this, the merge costs more than the parallelism gains
_MAX_SPLITS = 64
# Programs wanted per SM before the context is split to fill the GPU (few sequences). Measured on the H200
# (scripts/maint/attention_sweep.py --decode): 8 per SM everywhere was slower at short contexts (batch 64 x 256 tokens
# 34 vs 31 us); 2 per SM splits only small batches.
_PROGRAMS_PER_SM = 2
# Once (sequence, kv head) programs fill the GPU, long contexts are still split into enough programs for
# ~this many per SM, each at least _MIN_TOKENS_PER_WAVE_SPLIT tokens: one wave of long programs leaves
# SMs idle at its tail. H200, batch 64 x 2048 tokens (512 programs on 132 SMs): 1 split read 71.9% of the
# copy bandwidth, 3 splits 87.0%; at 128 x 1024, 2 splits 83.0% against 85.7% unsplit (one run each;
# assets/results/h200/decode_splits_sweep.json, scripts/maint/attention_sweep.py --decode).
_PROGRAMS_PER_SM_LONG = 8
_MIN_TOKENS_PER_WAVE_SPLIT = 512
_INVARIANT_SPLIT_TOKENS = 256  # batch-invariant mode: one split per this many tokens of the longest context


fix_interpreter()


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, out_ptr, part_acc_ptr, part_ml_ptr, counter_ptr,
                   knew_ptr, vnew_ptr, slot_ptr, knew_stride_s, knew_stride_h, vnew_stride_s, vnew_stride_h,
                   scale_log2, q_stride_s, q_stride_h, out_stride_s, out_stride_h,
                   bt_stride_s, kv_stride_blk, kv_stride_tok, kv_stride_head,
                   GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                   BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
                   PRECISION: tl.constexpr, PREFETCH_METADATA: tl.constexpr, HAS_NEW_KV: tl.constexpr,
                   MERGE_IN_KERNEL: tl.constexpr, USE_PDL: tl.constexpr):
    if not PREFETCH_METADATA:
        wait_for_previous_kernel(USE_PDL)
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    # fp32 always: when torch.compile traces the launch (attention_backend="unregistered"), Inductor passes
    # this Python float as fp64, which would promote the running max and fail the loop's type check.
    scale_log2 = tl.cast(scale_log2, tl.float32)
    num_heads = tl.num_programs(1) * GROUP

    g = tl.arange(0, GROUP_PAD)
    d = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + g
    head_ok = g < GROUP
    seq_len = tl.load(seq_lens_ptr + seq)
    if NUM_SPLITS == 1:
        start = 0
        end = seq_len
    else:  # this program's share of the context, rounded to whole tiles
        per_split = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), TILE_N) * TILE_N
        start = split * per_split
        end = tl.minimum(start + per_split, seq_len)
    # The block ids of the first tile; each iteration then requests the next tile's while it works on this one.
    n = start + tl.arange(0, TILE_N)
    next_block = tl.load(bt_ptr + seq * bt_stride_s + n // BLOCK_SIZE, mask=n < end, other=0)
    if PREFETCH_METADATA:  # seq_lens and block tables come from the step's host copies, not from a kernel
        wait_for_previous_kernel(USE_PDL)
    q_rows = q_ptr + seq * q_stride_s + heads[:, None] * q_stride_h
    q = tl.load(q_rows + d[None, :], mask=head_ok[:, None], other=0.0)
    q = q.to(k_ptr.dtype.element_ty)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)  # running max (log2 domain)
    l_i = tl.zeros([GROUP_PAD], tl.float32)  # running sum of exp
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    kv_base = kv_head * kv_stride_head
    if HAS_NEW_KV:  # noqa: SIM102 - a constexpr test (compiled out) around a runtime one
        # The program whose split holds the new token (position seq_len - 1) writes the step's K/V into the
        # cache before its loop reads the tile, which then holds them as after the KV-store kernel. A tl.where
        # that puts them into each K and V tile costs every tile (H200, batch-64 PIECEWISE TPOT 2.10 ms against
        # 1.83: assets/results/h200 archive members modes_b7acc77.json, modes_bc19aaf.json).
        if (start <= seq_len - 1) & (seq_len - 1 < end):
            slot = tl.load(slot_ptr + seq)
            if slot >= 0:
                k_new = tl.load(knew_ptr + seq * knew_stride_s + kv_head * knew_stride_h + d)
                v_new = tl.load(vnew_ptr + seq * vnew_stride_s + kv_head * vnew_stride_h + d)
                tl.store(k_ptr + slot * kv_stride_tok + kv_base + d, k_new.to(k_ptr.dtype.element_ty))
                tl.store(v_ptr + slot * kv_stride_tok + kv_base + d, v_new.to(v_ptr.dtype.element_ty))
        tl.debug_barrier()  # every thread's store before any thread's load of the tile
    for n0 in range(start, end, TILE_N):
        n = n0 + tl.arange(0, TILE_N)
        n_ok = n < end
        block = next_block.to(tl.int64)
        next_block = tl.load(bt_ptr + seq * bt_stride_s + (n + TILE_N) // BLOCK_SIZE,
                             mask=n + TILE_N < end, other=0)
        tok = kv_base + block * kv_stride_blk + (n % BLOCK_SIZE) * kv_stride_tok  # [TILE_N]
        k = tl.load(k_ptr + tok[None, :] + d[:, None], mask=n_ok[None, :], other=0.0)  # [D, TILE_N]
        s = tl.dot(q, k, input_precision=PRECISION) * scale_log2  # [GROUP_PAD, TILE_N]
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: every tile has >= 1 valid token
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + tok[:, None] + d[None, :], mask=n_ok[:, None], other=0.0)  # [TILE_N, D]
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new

    out_rows = out_ptr + seq * out_stride_s + heads[:, None] * out_stride_h + d[None, :]
    if NUM_SPLITS == 1:
        l_safe = tl.where(l_i > 0, l_i, 1.0)  # seq_len 0 -> acc is 0 -> output 0, never NaN
        tl.store(out_rows, (acc / l_safe[:, None]).to(out_ptr.dtype.element_ty), mask=head_ok[:, None])
    else:  # partials laid out [S, H, NUM_SPLITS, D] and [S, H, NUM_SPLITS, 2] (max, sum)
        first = (seq * num_heads + heads) * NUM_SPLITS
        tl.store(part_acc_ptr + (first + split)[:, None] * HEAD_DIM + d[None, :], acc, mask=head_ok[:, None])
        tl.store(part_ml_ptr + (first + split) * 2, m_i, mask=head_ok)
        tl.store(part_ml_ptr + (first + split) * 2 + 1, l_i, mask=head_ok)
        if MERGE_IN_KERNEL:
            # Count this split done; the last one merges. The barrier puts every thread's stores before the count
            # (one thread makes it, with release semantics), the count's acquire puts the others' stores before
            # the merge's loads (read from L2: .cg), as a serial split-K reduction does.
            tl.debug_barrier()
            counter = counter_ptr + seq * tl.num_programs(1) + kv_head
            if tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == NUM_SPLITS - 1:
                tl.store(counter, 0)  # zeroed again for the next launch
                out = _merged_splits(part_acc_ptr, part_ml_ptr, first, head_ok, d, HEAD_DIM, NUM_SPLITS, ".cg")
                tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None])


@triton.jit
def _merged_splits(part_acc_ptr, part_ml_ptr, first, row_ok, d, HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr,
                   CACHE: tl.constexpr):
    """out = sum_i acc_i 2^(m_i - m) / sum_i l_i 2^(m_i - m), m = max_i m_i, for the rows starting at `first`
    (split i of a row at first + i). The sums run over i in order, element by element, so the merge kernel
    and the decode kernel's own merge give the same bits whatever their layouts (a tl.sum would not)."""
    m = tl.full(first.shape, float("-inf"), tl.float32)
    for i in tl.static_range(NUM_SPLITS):  # unrolled: the loads of every split are issued at once
        m = tl.maximum(m, tl.load(part_ml_ptr + (first + i) * 2, mask=row_ok, other=float("-inf"),
                                  cache_modifier=CACHE))
    m = tl.where(m == float("-inf"), 0.0, m)  # every split empty (seq_len 0): weights 0, never NaN
    lsum = tl.zeros(first.shape, tl.float32)
    acc = tl.zeros([first.shape[0], HEAD_DIM], tl.float32)
    for i in tl.static_range(NUM_SPLITS):
        w = tl.exp2(tl.load(part_ml_ptr + (first + i) * 2, mask=row_ok, other=float("-inf"), cache_modifier=CACHE)
                    - m)  # an empty split has m_i = -inf: weight 0
        lsum += tl.load(part_ml_ptr + (first + i) * 2 + 1, mask=row_ok, other=0.0, cache_modifier=CACHE) * w
        acc += tl.load(part_acc_ptr + (first + i)[:, None] * HEAD_DIM + d[None, :], mask=row_ok[:, None], other=0.0,
                       cache_modifier=CACHE) * w[:, None]
    return acc / tl.where(lsum > 0, lsum, 1.0)[:, None]


@triton.jit
def _merge_splits_kernel(part_acc_ptr, part_ml_ptr, out_ptr, out_stride_s, out_stride_h,
                         HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr, USE_PDL: tl.constexpr):
    """Merge the splits' partials of one (sequence, head): _merged_splits, as the decode kernel's own merge."""
    wait_for_previous_kernel(USE_PDL)
    seq = tl.program_id(0)
    head = tl.program_id(1)
    row = tl.arange(0, 1)  # one row: the head
    d = tl.arange(0, HEAD_DIM)
    first = (seq * tl.num_programs(1) + head + row) * NUM_SPLITS
    out = _merged_splits(part_acc_ptr, part_ml_ptr, first, row == 0, d, HEAD_DIM, NUM_SPLITS, "")
    tl.store(out_ptr + seq * out_stride_s + (head + row)[:, None] * out_stride_h + d[None, :],
             out.to(out_ptr.dtype.element_ty))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return 8  # interpreter: keep the grid small


@functools.cache
def _cuda_sms(index: int) -> int:
    """Looked up once per device: every decode launch asks."""
    return torch.cuda.get_device_properties(index).multi_processor_count


def choose_num_splits(num_seqs: int, num_kv_heads: int, max_context: int, device: torch.device,
                      num_sms: int | None = None) -> int:
    """KV splits per (sequence, kv head), from occupancy; shapes only (CUDA graphs), never seq_lens' values.

    Few programs (num_seqs x num_kv_heads < 2 per SM): split until the GPU is filled, at least 128 tokens
    a split. Enough programs but long contexts: split into ~8 programs per SM, at least 512 tokens a split,
    so the last wave does not leave SMs idle. num_sms: the device's SM count (default: looked up)."""
    programs = num_seqs * num_kv_heads
    sms = num_sms if num_sms is not None else _num_sms(device)
    if programs < _PROGRAMS_PER_SM * sms:
        by_occupancy = cdiv(_PROGRAMS_PER_SM * sms, programs)
        by_length = max(1, max_context // _MIN_TOKENS_PER_SPLIT)
    else:
        by_occupancy = cdiv(_PROGRAMS_PER_SM_LONG * sms, programs)
        by_length = max(1, max_context // _MIN_TOKENS_PER_WAVE_SPLIT)
    return max(1, min(by_occupancy, by_length, _MAX_SPLITS))


def invariant_num_splits(max_context: int) -> int:
    """Batch-invariant mode: KV splits from the longest context the block tables hold (their width, the same
    for every batch of an engine), never from the batch size; the kernel then cuts each sequence's own
    seq_len into that many whole tiles, so its split boundaries depend on its length alone."""
    return max(1, min(cdiv(max_context, _INVARIANT_SPLIT_TOKENS), _MAX_SPLITS))


def decode_tile_config(head_dim: int, dtype: torch.dtype) -> tuple[int, int]:
    """(TILE_N tokens per loop step, num_warps). Checked offline for sm_90 (ptxas): no register spills.

    A 64-token bf16 tile of K plus V is 32 KiB at D=128: big enough to keep many bytes in flight, small
    enough that ~4 programs fit per SM. fp32 and D=256 tiles are halved (quartered) to avoid spilling.
    """
    if dtype == torch.float32:
        return (32 if head_dim <= 128 else 16), 8
    return (64, 4) if head_dim <= 128 else (32, 8)


def check_paged_inputs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor):
    """Shared by the decode and prefill launchers: layouts the kernels assume; returns (q, block_size, Hkv)."""
    H, D = q.shape[1:]
    _, block_size, Hkv, Dk = k_cache.shape
    assert Dk == D and H % Hkv == 0 and k_cache.is_contiguous() and v_cache.is_contiguous()
    assert D >= 16 and D & (D - 1) == 0, "head_dim must be a power of two >= 16"
    return (q if q.stride(-1) == 1 else q.contiguous()), block_size, Hkv


@functools.lru_cache(maxsize=1024)
def _decode_plan(S: int, H: int, Hkv: int, D: int, block_size: int, max_blocks: int, kv_dtype: torch.dtype,
                 device: torch.device, use_pdl: bool, prefetch_metadata: bool, has_new_kv: bool,
                 merge_in_kernel: bool, num_splits: int | None) -> tuple[int, dict, dict | None]:
    """(splits, the decode kernel's constexprs and options, the merge kernel's or None): they depend on shapes
    and launch choices only, so they are worked out once per batch shape, not for each of a step's 28 layers
    (an eager or PIECEWISE step launches attention from Python, where this host time adds up)."""
    if num_splits is None:
        num_splits = choose_num_splits(S, Hkv, max_blocks * block_size, device)
    tile_n, num_warps = decode_tile_config(D, kv_dtype)
    group = H // Hkv
    decode_kw = dict(GROUP=group, GROUP_PAD=max(16, next_power_of_2(group)), HEAD_DIM=D, BLOCK_SIZE=block_size,
                     TILE_N=tile_n, NUM_SPLITS=num_splits,
                     PRECISION="ieee" if kv_dtype == torch.float32 else "tf32",  # exact fp32 dot; bf16 ignores it
                     PREFETCH_METADATA=prefetch_metadata, HAS_NEW_KV=has_new_kv,
                     MERGE_IN_KERNEL=merge_in_kernel and num_splits > 1, num_warps=num_warps, num_stages=2,
                     **launch_options(device, use_pdl))
    if num_splits == 1 or merge_in_kernel:
        return num_splits, decode_kw, None
    return num_splits, decode_kw, dict(HEAD_DIM=D, NUM_SPLITS=num_splits, num_warps=4,
                                       **launch_options(device, use_pdl))


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                           out: torch.Tensor | None = None, num_splits: int | None = None,
                           use_pdl: bool = False, prefetch_metadata: bool = False,
                           new_kv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                           split_counters: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of q [S, H, D] (one token per sequence) over the first seq_lens[s] tokens of its context.

    new_kv: (key, value [S, Hkv, D], slot_mapping [S]), the step's own K/V (each context's last token),
    written into the cache at its slot (-1: not written) by this launch and attended from the step's k/v;
    without it, the cache already holds every token. split_counters: S * Hkv zeroed int32, left zeroed:
    given, the splits merge inside this launch; without, a merge kernel follows (see the module docstring
    for which runs where). num_splits=None picks split-KV from shapes (see choose_num_splits); pass an int
    to force it (tests). Rows with seq_len 0 produce zeros. use_pdl: launch with programmatic dependent
    launch (pdl.py); prefetch_metadata: read seq_lens and the first block ids before the PDL wait, which is
    safe only when no kernel of the step writes them (the engine's host copies do).
    """
    S, H, D = q.shape
    q, block_size, Hkv = check_paged_inputs(q, k_cache, v_cache)
    if out is None:
        out = torch.empty(S, H, D, dtype=q.dtype, device=q.device)
    if S == 0:
        return out
    num_splits, decode_kw, merge_kw = _decode_plan(S, H, Hkv, D, block_size, block_tables.shape[1], k_cache.dtype,
                                                   q.device, use_pdl, prefetch_metadata, new_kv is not None,
                                                   split_counters is not None, num_splits)
    if num_splits > 1:  # one allocation for both partials: [S, H, splits, D] accumulators, then (max, sum)
        parts = torch.empty(S * H * num_splits * (D + 2), dtype=torch.float32, device=q.device)
        part_acc, part_ml = parts[:S * H * num_splits * D], parts[S * H * num_splits * D:]
    else:
        part_acc = part_ml = out  # unused
    if split_counters is None:
        split_counters = out  # unused
    else:
        assert split_counters.dtype == torch.int32 and split_counters.numel() >= S * Hkv
    if new_kv is None:
        k_new = v_new = slots = out  # unused
    else:
        k_new, v_new, slots = new_kv
        assert k_new.shape == v_new.shape == (S, Hkv, D) and k_new.stride(-1) == v_new.stride(-1) == 1
        assert slots.dtype == torch.int64 and slots.shape[0] >= S
    launch(_decode_kernel, (S, Hkv, num_splits),
        q, k_cache, v_cache, block_tables, seq_lens, out, part_acc, part_ml, split_counters,
        k_new, v_new, slots, k_new.stride(0), k_new.stride(1), v_new.stride(0), v_new.stride(1),
        scale * _LOG2E, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        block_tables.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), **decode_kw)
    if merge_kw is not None:
        launch(_merge_splits_kernel, (S, H), part_acc, part_ml, out, out.stride(0), out.stride(1), **merge_kw)
    return out
