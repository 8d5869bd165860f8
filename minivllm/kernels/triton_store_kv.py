"""Triton kernel that writes this step's new K/V into the paged cache.

Why a kernel: the PyTorch version needs boolean indexing to drop padding slots (-1), which makes the output
size data-dependent (a host sync, so no CUDA graph). Here each program copies one token and simply returns
when its slot is -1, so the launch is the same whatever the batch holds.

Cache layout: [num_blocks, block_size, num_kv_heads, head_dim], contiguous, so one token's [Hkv, D] values
are contiguous at offset slot * Hkv * D; the slot number alone locates them.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from minivllm.kernels.launch import launch, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel


@triton.jit
def _store_kv_kernel(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
                     key_stride_t, key_stride_h, value_stride_t, value_stride_h,
                     NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                     HEADS_PAD: tl.constexpr, DIM_PAD: tl.constexpr, USE_PDL: tl.constexpr):
    wait_for_previous_kernel(USE_PDL)
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token)  # int64
    if slot < 0:  # padding token: nothing to store
        return
    h = tl.arange(0, HEADS_PAD)[:, None]
    d = tl.arange(0, DIM_PAD)[None, :]
    mask = (h < NUM_KV_HEADS) & (d < HEAD_DIM)
    src_k = key_ptr + token.to(tl.int64) * key_stride_t + h * key_stride_h + d
    src_v = value_ptr + token.to(tl.int64) * value_stride_t + h * value_stride_h + d
    dst = slot * (NUM_KV_HEADS * HEAD_DIM) + h * HEAD_DIM + d
    k = tl.load(src_k, mask=mask)
    v = tl.load(src_v, mask=mask)
    tl.store(k_cache_ptr + dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_cache_ptr + dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, use_pdl: bool = False) -> None:
    """Write key/value [T, Hkv, D] into k_cache/v_cache at slot_mapping [T] (int64); slot -1 is skipped.

    key/value may be strided views (e.g. slices of a fused qkv output) as long as the last dim is contiguous.
    use_pdl: launch with programmatic dependent launch (pdl.py).
    """
    T, Hkv, D = key.shape
    assert k_cache.is_contiguous() and v_cache.is_contiguous(), "paged caches must be contiguous"
    assert k_cache.shape[2:] == (Hkv, D) and slot_mapping.shape[0] == T
    if T == 0:
        return
    if key.stride(-1) != 1:
        key = key.contiguous()
    if value.stride(-1) != 1:
        value = value.contiguous()
    slots = slot_mapping if slot_mapping.dtype == torch.int64 else slot_mapping.long()
    launch(_store_kv_kernel, (T,), key, value, k_cache, v_cache, slots,
           key.stride(0), key.stride(1), value.stride(0), value.stride(1), **_constexprs(Hkv, D, key.device, use_pdl))


@functools.lru_cache(maxsize=64)
def _constexprs(num_kv_heads: int, head_dim: int, device: torch.device, use_pdl: bool) -> dict:
    """The kernel's constexprs and launch options: once per shape, not once per layer and step."""
    return dict(NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, HEADS_PAD=next_power_of_2(num_kv_heads),
                DIM_PAD=next_power_of_2(head_dim), num_warps=4, **launch_options(device, use_pdl))
