"""Paged decode attention in Triton: one new query token per sequence against its whole cached context.

Decode is memory-bound: every step reads each sequence's full K/V once and does little math with it. So the
kernel is organised around reading the cache as few times as possible and keeping the GPU busy:

* GQA: one program per (sequence, kv head) loads each K/V tile once and uses it for all `group` query heads
  that share that kv head (a [group, D] x [D, tile] dot, rows padded to 16 for tl.dot).
* Split-KV (flash-decoding): with few sequences there are too few programs to fill ~132 SMs, so each
  context is cut into NUM_SPLITS pieces handled by separate programs; each writes an unnormalised partial
  result (acc, max, sum) and a second small kernel merges them with the log-sum-exp trick.
* ROPE (custom op "rope_attention"): the kernel takes q, k and v straight from the qkv projection and
  applies Qwen3's per-head q/k RMSNorm and RoPE itself. The loop reads the cached tokens; the program whose
  split holds the new token adds it from registers (one more online-softmax step) and writes its k and v
  into the paged cache. The RoPE and KV-store kernels of the step disappear: two launches fewer per layer.
* CUDA graphs: the grid and NUM_SPLITS depend only on tensor shapes (the max context is
  block_tables.shape[1] * block_size), never on seq_lens values; each program reads its own seq_len on the
  device and skips what it does not need. Nothing here syncs with the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel
from minivllm.layers.custom_op import custom_op_enabled

_LOG2E = 1.4426950408889634
_MIN_TOKENS_PER_SPLIT = 128  # below this, the merge costs more than the parallelism gains
_MAX_SPLITS = 64
# Programs wanted per SM before the context is split. Measured on the H200 (bench kernels --sweep-decode):
# 8 per SM (more splits) was slower at every engine shape, e.g. batch 64 x 2048 tokens 80.8% of the copy
# bandwidth vs 89.8% unsplit, batch 64 x 256 tokens 34 vs 31 us; 2 per SM splits only small batches.
_PROGRAMS_PER_SM = 2


def fix_interpreter_for_numpy_2_4() -> None:
    """TRITON_INTERPRET only: let `range(start, end)` take device scalars again under NumPy >= 2.4.

    Triton 3.6's interpreter converts a loop bound with int(ndarray of shape (1,)), which NumPy 2.4 rejects
    (triton-lang/triton#9171, fixed upstream after 3.6). Compiled GPU kernels are not affected.
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.runtime.interpreter as interp

    original = interp._patch_lang_tensor
    if getattr(original, "_minivllm_fixed", False):
        return

    def patched(tensor, scope) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._minivllm_fixed = True
    interp._patch_lang_tensor = patched


fix_interpreter_for_numpy_2_4()


@triton.jit
def _norm_rope(x, xp, w_ptr, d, partner, cos, sin, eps, HEAD_DIM: tl.constexpr, HALF: tl.constexpr,
               NORM: tl.constexpr, dtype: tl.constexpr):
    """Rows x [R, D] (fp32) of heads -> (per-head RMSNorm,) RoPE, rounded to dtype as the separate kernels
    round (triton_rotary). xp holds each element's rotate-half partner x[(d + D/2) % D], so the rotation is
    elementwise: y = x cos - x[d + D/2] sin in the first half, x cos + x[d - D/2] sin in the second."""
    if NORM:
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / HEAD_DIM + eps)[:, None]
        w = tl.load(w_ptr + d).to(tl.float32)[None, :]
        wp = tl.load(w_ptr + partner).to(tl.float32)[None, :]
        x = (w * (x * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        xp = (wp * (xp * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    sign = tl.where(d < HALF, -1.0, 1.0)[None, :]
    return (x * cos + sign * xp * sin).to(dtype)


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, out_ptr, part_acc_ptr, part_ml_ptr,
                   scale_log2, q_stride_s, q_stride_h, out_stride_s, out_stride_h,
                   bt_stride_s, kv_stride_blk, kv_stride_tok, kv_stride_head,
                   pos_ptr, cos_sin_ptr, cos_sin_stride, qw_ptr, kw_ptr, eps, knew_ptr, vnew_ptr, knew_stride_s,
                   vnew_stride_s, slot_ptr,
                   GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                   BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
                   PRECISION: tl.constexpr, PREFETCH_METADATA: tl.constexpr, USE_PDL: tl.constexpr,
                   ROPE: tl.constexpr, NORM: tl.constexpr):
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
    # With ROPE the new token (the last) is not in the cache yet: the loop reads the tokens before it, and
    # the split that holds it adds it from registers after the loop (and stores it then).
    last = seq_len - 1
    cached_end = tl.minimum(end, last) if ROPE else end
    # The block ids of the first tile; each iteration then requests the next tile's while it works on this one.
    n = start + tl.arange(0, TILE_N)
    next_block = tl.load(bt_ptr + seq * bt_stride_s + n // BLOCK_SIZE, mask=n < cached_end, other=0)
    if PREFETCH_METADATA:  # seq_lens and block tables come from the step's host copies, not from a kernel
        wait_for_previous_kernel(USE_PDL)
    q_rows = q_ptr + seq * q_stride_s + heads[:, None] * q_stride_h
    q = tl.load(q_rows + d[None, :], mask=head_ok[:, None], other=0.0)
    if ROPE:
        half: tl.constexpr = HEAD_DIM // 2
        partner = (d + half) % HEAD_DIM
        cs_row = cos_sin_ptr + tl.load(pos_ptr + seq).to(tl.int64) * cos_sin_stride
        cos = tl.load(cs_row + d % half).to(tl.float32)[None, :]
        sin = tl.load(cs_row + half + d % half).to(tl.float32)[None, :]
        qp = tl.load(q_rows + partner[None, :], mask=head_ok[:, None], other=0.0)
        q = _norm_rope(q.to(tl.float32), qp.to(tl.float32), qw_ptr, d, partner, cos, sin, eps, HEAD_DIM, half,
                       NORM, q_ptr.dtype.element_ty)
    q = q.to(k_ptr.dtype.element_ty)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)  # running max (log2 domain)
    l_i = tl.zeros([GROUP_PAD], tl.float32)  # running sum of exp
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    kv_base = kv_head * kv_stride_head
    for n0 in range(start, cached_end, TILE_N):
        n = n0 + tl.arange(0, TILE_N)
        n_ok = n < cached_end
        block = next_block.to(tl.int64)
        next_block = tl.load(bt_ptr + seq * bt_stride_s + (n + TILE_N) // BLOCK_SIZE,
                             mask=n + TILE_N < cached_end, other=0)
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

    if ROPE:  # the new token: its k (normed, rotated) and v, one more online-softmax step, then the store
        mine = (last >= start) & (last < end)  # exactly one split holds it (none for a seq_len-0 row)
        k_row = knew_ptr + seq * knew_stride_s + kv_head * HEAD_DIM
        k_new = _norm_rope(tl.load(k_row + d).to(tl.float32)[None, :],
                           tl.load(k_row + partner).to(tl.float32)[None, :], kw_ptr, d, partner, cos, sin, eps,
                           HEAD_DIM, half, NORM, q_ptr.dtype.element_ty).to(k_ptr.dtype.element_ty)  # [1, D]
        v_new = tl.load(vnew_ptr + seq * vnew_stride_s + kv_head * HEAD_DIM + d).to(v_ptr.dtype.element_ty)
        s_new = tl.sum(q.to(tl.float32) * k_new.to(tl.float32), axis=1) * scale_log2  # [GROUP_PAD]
        s_new = tl.where(mine, s_new, float("-inf"))
        m_new = tl.maximum(m_i, s_new)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # an empty split stays empty, never NaN
        p_new = tl.exp2(s_new - m_ref)
        alpha = tl.exp2(m_i - m_ref)
        l_i = l_i * alpha + p_new
        acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)[None, :]
        m_i = m_new
        slot = tl.load(slot_ptr + seq).to(tl.int64)
        dst = kv_head * kv_stride_head + (slot // BLOCK_SIZE) * kv_stride_blk + (slot % BLOCK_SIZE) * kv_stride_tok
        tl.store(k_ptr + dst + d[None, :], k_new, mask=mine & (slot >= 0) & (d[None, :] < HEAD_DIM))
        tl.store(v_ptr + dst + d, v_new, mask=mine & (slot >= 0) & (d < HEAD_DIM))

    if NUM_SPLITS == 1:
        l_safe = tl.where(l_i > 0, l_i, 1.0)  # seq_len 0 -> acc is 0 -> output 0, never NaN
        out = acc / l_safe[:, None]
        tl.store(out_ptr + seq * out_stride_s + heads[:, None] * out_stride_h + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None])
    else:  # partials laid out [S, H, NUM_SPLITS, D] and [S, H, NUM_SPLITS, 2] (max, sum)
        row = (seq * num_heads + heads) * NUM_SPLITS + split
        tl.store(part_acc_ptr + row[:, None] * HEAD_DIM + d[None, :], acc, mask=head_ok[:, None])
        tl.store(part_ml_ptr + row * 2, m_i, mask=head_ok)
        tl.store(part_ml_ptr + row * 2 + 1, l_i, mask=head_ok)


@triton.jit
def _merge_splits_kernel(part_acc_ptr, part_ml_ptr, out_ptr, out_stride_s, out_stride_h,
                         HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr, SPLITS_PAD: tl.constexpr,
                         USE_PDL: tl.constexpr):
    """Merge the splits' partials: out = sum_i acc_i 2^(m_i - m) / sum_i l_i 2^(m_i - m), m = max_i m_i."""
    wait_for_previous_kernel(USE_PDL)
    seq = tl.program_id(0)
    head = tl.program_id(1)
    row = (seq * tl.num_programs(1) + head) * NUM_SPLITS
    i = tl.arange(0, SPLITS_PAD)
    d = tl.arange(0, HEAD_DIM)
    ok = i < NUM_SPLITS
    m = tl.load(part_ml_ptr + (row + i) * 2, mask=ok, other=float("-inf"))
    l = tl.load(part_ml_ptr + (row + i) * 2 + 1, mask=ok, other=0.0)
    acc = tl.load(part_acc_ptr + (row + i)[:, None] * HEAD_DIM + d[None, :], mask=ok[:, None], other=0.0)
    m_max = tl.max(m, axis=0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)  # all splits empty (seq_len 0)
    w = tl.exp2(m - m_max)  # empty splits have m = -inf -> weight 0
    denom = tl.sum(l * w, axis=0)
    denom = tl.where(denom > 0, denom, 1.0)
    out = tl.sum(acc * w[:, None], axis=0) / denom
    tl.store(out_ptr + seq * out_stride_s + head * out_stride_h + d, out.to(out_ptr.dtype.element_ty))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 8  # interpreter: keep the grid small


def choose_num_splits(num_seqs: int, num_kv_heads: int, max_context: int, device: torch.device) -> int:
    """Split the context only when (seq, kv head) programs alone cannot fill the GPU. Shapes only."""
    programs = num_seqs * num_kv_heads
    target = _PROGRAMS_PER_SM * _num_sms(device)
    if programs >= target:
        return 1
    by_occupancy = triton.cdiv(target, programs)
    by_length = max(1, max_context // _MIN_TOKENS_PER_SPLIT)
    return max(1, min(by_occupancy, by_length, _MAX_SPLITS))


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


@dataclass
class DecodeRope:
    """What the decode kernel needs to do RoPE and the KV store itself (custom op "rope_attention"): the new
    tokens' positions [S], raw k and v [S, Hkv*D] (column slices of the qkv output are fine), their cache
    slots [S] (-1: padding, not stored), the fp32 cos_sin_cache [max_pos, D], and Qwen3's q_norm / k_norm
    weights [D] (None: no q/k norm, as in Llama)."""

    positions: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    slot_mapping: torch.Tensor
    cos_sin_cache: torch.Tensor
    q_weight: torch.Tensor | None = None
    k_weight: torch.Tensor | None = None
    eps: float = 1e-6


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                           out: torch.Tensor | None = None, num_splits: int | None = None,
                           rope: DecodeRope | None = None) -> torch.Tensor:
    """Attention of q [S, H, D] (one token per sequence) over the first seq_lens[s] cached tokens.

    num_splits=None picks split-KV from shapes (see choose_num_splits); pass an int to force it (tests).
    Rows with seq_len 0 produce zeros. With `rope`, q is the raw projection: the kernel normalises and
    rotates q and the new k, and writes the new k and v into the cache (the last of the seq_lens[s] tokens).
    """
    S, H, D = q.shape
    q, block_size, Hkv = check_paged_inputs(q, k_cache, v_cache)
    if out is None:
        out = torch.empty(S, H, D, dtype=q.dtype, device=q.device)
    if S == 0:
        return out
    group = H // Hkv
    max_context = block_tables.shape[1] * block_size
    if num_splits is None:
        num_splits = choose_num_splits(S, Hkv, max_context, q.device)
    tile_n, num_warps = decode_tile_config(D, k_cache.dtype)
    precision = "ieee" if k_cache.dtype == torch.float32 else "tf32"  # exact fp32 dot; bf16/fp16 ignore it
    if num_splits > 1:
        part_acc = torch.empty(S, H, num_splits, D, dtype=torch.float32, device=q.device)
        part_ml = torch.empty(S, H, num_splits, 2, dtype=torch.float32, device=q.device)
    else:
        part_acc = part_ml = out  # unused
    if rope is not None:
        r = rope
        k_new, v_new = (x if x.stride(-1) == 1 else x.contiguous() for x in (r.k, r.v))
        assert k_new.shape == v_new.shape == (S, Hkv * D) and r.positions.shape == r.slot_mapping.shape == (S,)
        cos_sin = r.cos_sin_cache if r.cos_sin_cache.stride(-1) == 1 else r.cos_sin_cache.contiguous()
        norm = r.q_weight is not None
        rope_args = (r.positions, cos_sin, cos_sin.stride(0), r.q_weight if norm else cos_sin,
                     r.k_weight if norm else cos_sin, r.eps, k_new, v_new, k_new.stride(0), v_new.stride(0),
                     r.slot_mapping)
    else:
        norm = False
        rope_args = (seq_lens, q, 0, q, q, 0.0, q, q, 0, 0, seq_lens)  # unused
    _decode_kernel[(S, Hkv, num_splits)](
        q, k_cache, v_cache, block_tables, seq_lens, out, part_acc, part_ml,
        scale * _LOG2E, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        block_tables.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), *rope_args,
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=D,
        BLOCK_SIZE=block_size, TILE_N=tile_n, NUM_SPLITS=num_splits, PRECISION=precision,
        PREFETCH_METADATA=custom_op_enabled("decode_prefetch"), ROPE=rope is not None, NORM=norm,
        num_warps=num_warps, num_stages=2, **launch_options(q.device),
    )
    if num_splits > 1:
        _merge_splits_kernel[(S, H)](
            part_acc, part_ml, out, out.stride(0), out.stride(1),
            HEAD_DIM=D, NUM_SPLITS=num_splits, SPLITS_PAD=triton.next_power_of_2(num_splits),
            num_warps=4 if triton.next_power_of_2(num_splits) * D <= 4096 else 8, **launch_options(q.device),
        )
    return out
