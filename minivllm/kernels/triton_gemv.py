"""Triton GEMV: y = x @ W^T (+ b) for a handful of rows (batch-1 and batch-2 decode), optionally with
SiLU-and-mul applied to x on the fly.

Why: at batch 1 a decode step is a chain of matrix-VECTOR products. Each reads its whole weight once and does
2 flops per byte, so the only thing that matters is how close it gets to the memory bandwidth. The H200
profile (`minivllm bench profile`) showed cuBLAS at 0.8-1.6 TB/s on Qwen3-0.6B's 4-13 MB matrices, about a
third of the 4.2 TB/s copy bandwidth: its GEMM tiles are built for big M, and the down projection also runs a
split-K reduce kernel. Here each program owns BLOCK_N output columns and streams their rows of W over the
whole K, reusing each loaded W tile for all M (<= 8) rows of x; no reduce kernel, no atomics, deterministic.

With SILU_MUL the input is the gate_up output [M, 2K] and the kernel computes silu(gate) * up while
loading it, so the MLP's SiLU-and-mul kernel disappears too (one launch fewer per layer).

With HAS_NORM the kernel applies RMSNorm to x while loading it (a prologue: every program first reads the
whole row, 2 KB for a 1024-wide model, to get its rms), and with ADD_RESIDUAL it first adds the residual
stream to x, as vLLM's fused_add_rms_norm does; program 0 also writes x + residual out (the new residual
stream). So "residual add + RMSNorm, then qkv_proj (or gate_up_proj)" is one kernel instead of two: two
launches fewer per decoder layer (custom op "gemv_norm"). Roundings follow the separate kernels: the new
residual stream is the rounded sum, the norm reads the unrounded one, and the normalised row is rounded
once, after the weight multiply (the RMSNorm kernel's output).

Block sizes are autotuned per (N, K, M) on the GPU it runs on (the few configs gemv_configs.rule_candidates
keeps, short benchmarks, the first time each shape is seen, which is the warm-up before CUDA-graph capture). The winners are kept in Triton's
cache directory (cache_results), so a warm start does not tune again. Under TRITON_INTERPRET=1 a fixed
small config runs instead. Each config is timed alone, not inside the graph, so near-ties are picked
differently from one fresh autotune to the next, and batch-1 TPOT follows the pick (H200: 0.977-1.066 ms).
So shapes listed in a tuned file shipped for the GPU (ranked inside the graph by scripts/maint/gemv_tune.py)
skip the autotuner; see gemv_configs.py. Benchmarks record the picks either way.
"""

from __future__ import annotations

import os
import time

import torch
import triton
import triton.language as tl

from minivllm.kernels import gemv_configs
from minivllm.kernels.launch import cdiv, next_power_of_2
from minivllm.kernels.pdl import launch_options, wait_for_previous_kernel
from minivllm.kernels.compat import fix_interpreter

fix_interpreter()  # a loop bound from a kernel argument (K) under TRITON_INTERPRET=1

MAX_M = 8  # rows the kernel handles
# rows it is used for (minivllm::linear): on the H200 it took batch-1 TPOT from 1.41 to 1.22 ms, was even at
# 2 rows (1.37 vs 1.38 ms) and lost at 4 and 8 (1.39 -> 1.68, 1.36 -> 2.26 ms): cuBLAS's tiles then reuse
# each weight tile across rows better than this kernel's broadcast-and-sum (bench kernels --gemv).
DISPATCH_MAX_M = 2
# rows up to which the (residual add +) RMSNorm runs inside the GEMV (custom op "gemv_norm"); above, the
# RMSNorm kernel runs first. H200, batch 2, FULL graphs: 1.258 ms with the norm kernel vs 1.324 ms with the
# norm in the prologue (every program re-reading and reducing two rows before its first weight tile).
NORM_MAX_M = 1
MAX_WEIGHT_ELEMENTS = 1 << 26  # the LM head (155M elements) is already near the bandwidth in cuBLAS


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, out_ptr, nw_ptr, res_ptr, res_out_ptr, M, N, K, stride_xm, stride_wn,
                 stride_om, stride_rm, eps,
                 M_PAD: tl.constexpr, HAS_BIAS: tl.constexpr, SILU_MUL: tl.constexpr, HAS_NORM: tl.constexpr,
                 ADD_RESIDUAL: tl.constexpr, K_PAD: tl.constexpr, USE_PDL: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, LOOP_STAGES: tl.constexpr = 1):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    w_rows = w_ptr + n.to(tl.int64)[:, None] * stride_wn
    # loading the first W tile before this wait was measured slower (H200 batch-1 TPOT 0.923 -> 0.950 ms;
    # Lab 09, "gemv_prefetch", dropped)
    wait_for_previous_kernel(USE_PDL)
    m = tl.arange(0, M_PAD)
    m_ok = m < M
    x_rows = x_ptr + m[:, None] * stride_xm
    r_rows = res_ptr + m[:, None] * stride_rm
    dtype = out_ptr.dtype.element_ty
    rstd = tl.zeros([M_PAD], tl.float32)
    if HAS_NORM:  # prologue: the rms of each whole row (K_PAD >= K, one load; the rows are a few KB)
        kk = tl.arange(0, K_PAD)
        row_mask = m_ok[:, None] & (kk < K)[None, :]
        xx = tl.load(x_rows + kk[None, :], mask=row_mask, other=0.0).to(tl.float32)
        if ADD_RESIDUAL:  # x + residual, unrounded for the norm; program 0 writes it out, rounded
            xx = xx + tl.load(r_rows + kk[None, :], mask=row_mask, other=0.0).to(tl.float32)
            if tl.program_id(0) == 0:
                tl.store(res_out_ptr + m[:, None] * K + kk[None, :], xx.to(dtype), mask=row_mask)
        rstd = tl.rsqrt(tl.sum(xx * xx, axis=1) / K + eps)
    acc = tl.zeros([M_PAD, BLOCK_N], tl.float32)
    # LOOP_STAGES > 1: Triton pipelines a dot-free loop's loads (cp.async, W tiles this many steps ahead)
    # only when the loop names its stages; a config's num_stages alone leaves them unpipelined
    for k0 in tl.range(0, K, BLOCK_K, num_stages=LOOP_STAGES):
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < K
        w = tl.load(w_rows + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        acc = _tile_product(acc, w, k, k_ok, x_rows, r_rows, nw_ptr, rstd, m_ok, K, dtype, SILU_MUL, HAS_NORM,
                            ADD_RESIDUAL)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + m[:, None] * stride_om + n[None, :], acc.to(dtype), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _tile_product(acc, w, k, k_ok, x_rows, r_rows, nw_ptr, rstd, m_ok, K, dtype: tl.constexpr,
                  SILU_MUL: tl.constexpr, HAS_NORM: tl.constexpr, ADD_RESIDUAL: tl.constexpr):
    """acc + f(x[:, k]) @ w^T for one loaded tile of W (fp32), f: SiLU-and-mul or the RMSNorm."""
    x_mask = m_ok[:, None] & k_ok[None, :]
    x = tl.load(x_rows + k[None, :], mask=x_mask, other=0.0).to(tl.float32)
    if SILU_MUL:  # x is [gate | up]: silu(gate) * up, rounded like the separate kernel's outputs
        up = tl.load(x_rows + K + k[None, :], mask=x_mask, other=0.0).to(tl.float32)
        x = ((x / (1.0 + tl.exp(-x))).to(dtype).to(tl.float32) * up).to(dtype).to(tl.float32)
    if HAS_NORM:  # (residual add +) RMSNorm, rounded like the separate kernel's output
        if ADD_RESIDUAL:
            x = x + tl.load(r_rows + k[None, :], mask=x_mask, other=0.0).to(tl.float32)
        nw = tl.load(nw_ptr + k, mask=k_ok, other=0.0).to(tl.float32)
        x = (nw[None, :] * (x * rstd[:, None])).to(dtype).to(tl.float32)
    return acc + tl.sum(x[:, None, :] * w[None, :, :], axis=2)


def _configs() -> list[triton.Config]:
    """Six are narrow and deep: 1-4 output rows per program with the whole K (or half of it) in one step,
    so a 1024-wide projection (o_proj, down_proj) runs 256-1024 programs that each issue all their loads at
    once, instead of 128 programs walking K in 4-6 dependent steps. With them H200 batch-1 TPOT is 1.052 ms
    against 1.134 ms without, batch 2 1.103 against 1.176 ms (two repetitions each, same run). The last ten
    walk K with their loads pipelined LOOP_STAGES steps ahead: more bytes in flight per program."""
    return [triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
            for bn, bk, w, s in ((4, 512, 4, 3), (8, 256, 4, 3), (8, 512, 4, 3), (8, 512, 8, 3),
                                 (16, 256, 4, 3), (16, 256, 8, 4), (16, 512, 8, 3), (32, 128, 4, 4),
                                 (32, 256, 8, 3), (8, 1024, 8, 2),
                                 (1, 1024, 4, 2), (1, 2048, 4, 2), (2, 1024, 4, 2), (2, 2048, 8, 2),
                                 (4, 1024, 4, 2), (4, 2048, 8, 2))] + [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "LOOP_STAGES": s}, num_warps=w, num_stages=s)
        for bn, bk, w, s in ((4, 256, 4, 4), (8, 256, 4, 3), (16, 256, 4, 3), (16, 256, 8, 4), (32, 128, 4, 4),
                             (32, 256, 8, 3), (4, 512, 4, 3), (8, 512, 8, 3), (2, 1024, 4, 3), (4, 1024, 8, 3))]


def _short_bench(fn, quantiles=None):
    """Triton's do_bench, briefly; the first call of a config compiles it, so the time counted (what the
    startup report shows as gemv_autotune) is compile plus timing."""
    t0 = time.perf_counter()
    try:
        return triton.testing.do_bench(fn, warmup=3, rep=15, quantiles=quantiles)
    finally:
        gemv_configs.record_tuning(time.perf_counter() - t0)


_autotuned = None


def _kernel():
    """The autotuned kernel on a GPU; the plain one (fixed config) under the interpreter."""
    global _autotuned
    if os.environ.get("TRITON_INTERPRET") == "1":
        return None
    if _autotuned is None:
        _autotuned = triton.autotune(configs=_configs(), key=["N", "K", "M_PAD", "SILU_MUL", "HAS_NORM"],
                                     prune_configs_by={"early_config_prune": gemv_configs.use_pinned},
                                     do_bench=_short_bench, cache_results=True)(_gemv_kernel)
    return _autotuned


def autotuned_configs() -> dict[str, dict]:
    """The block sizes in use in this process, per shape (autotuned, or pinned by gemv_configs). Benchmarks
    record them: on the H200, fresh autotunes pick differently among near-tied configs (each is timed alone,
    not inside the graph), and batch-1 TPOT followed the pick from 0.977 to 1.066 ms."""
    if _autotuned is None:
        return {}
    picks = {gemv_configs.shape_name(*key[:5]): gemv_configs.config_dict(cfg)
             for key, cfg in _autotuned.cache.items()}
    return dict(sorted(picks.items()))


def forget_picks() -> None:
    """Drop this process's picks, so the next launch of each shape resolves its config again (through the
    pins of gemv_configs, else the autotuner and its disk cache). scripts/maint/gemv_tune.py does it between
    trials."""
    if _autotuned is not None:
        _autotuned.cache.clear()


def supports(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Shapes this kernel is for: few rows, a weight that is not huge, unit-stride rows."""
    return (x.dim() == 2 and 0 < x.shape[0] <= DISPATCH_MAX_M and weight.numel() <= MAX_WEIGHT_ELEMENTS
            and weight.stride(-1) == 1)


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, silu_mul: bool = False,
         norm_weight: torch.Tensor | None = None, eps: float = 1e-6,
         residual: torch.Tensor | None = None,
         use_pdl: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """f(x) @ weight[N, K]^T + bias -> [M, N], M <= MAX_M, where f(x) is x [M, K], or silu(gate) * up for
    x = [gate | up] [M, 2K] (silu_mul), or norm_weight * rmsnorm(x) (norm_weight), or with a residual too
    norm_weight * rmsnorm(x + residual), and then (out, x + residual) is returned. use_pdl: launch with
    programmatic dependent launch (pdl.py)."""
    M = x.shape[0]
    N, K = weight.shape
    assert x.shape[1] == (2 * K if silu_mul else K), (x.shape, weight.shape, silu_mul)
    assert M <= MAX_M and not (silu_mul and norm_weight is not None)
    assert residual is None or (norm_weight is not None and residual.shape == x.shape)
    x = x if x.stride(-1) == 1 else x.contiguous()
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    res_out = None if residual is None else torch.empty(M, K, dtype=x.dtype, device=x.device)
    if M == 0:
        return out if residual is None else (out, res_out)
    if residual is not None and residual.stride(-1) != 1:
        residual = residual.contiguous()
    args = (x, weight, bias if bias is not None else weight, out,
            norm_weight if norm_weight is not None else weight, residual if residual is not None else x,
            res_out if res_out is not None else out, M, N, K, x.stride(0), weight.stride(0), out.stride(0),
            residual.stride(0) if residual is not None else 0, eps)
    meta = dict(M_PAD=next_power_of_2(M), HAS_BIAS=bias is not None, SILU_MUL=silu_mul,
                HAS_NORM=norm_weight is not None, ADD_RESIDUAL=residual is not None,
                K_PAD=next_power_of_2(K) if norm_weight is not None else 1)
    kernel = _kernel()
    if kernel is None:  # interpreter: this shape's pinned config (tests/kernels pin each one), else a small one
        pin = gemv_configs.pinned_configs().get(gemv_configs.shape_name(
            N, K, meta["M_PAD"], silu_mul, norm_weight is not None), {"BLOCK_N": 16, "BLOCK_K": 64})
        blocks = {k: v for k, v in pin.items() if k.isupper()}
        _gemv_kernel[(cdiv(N, blocks["BLOCK_N"]),)](*args, **meta, USE_PDL=False, **blocks)
    else:
        kernel[lambda c: (cdiv(N, c["BLOCK_N"]),)](*args, **meta, **launch_options(x.device, use_pdl))
    return out if residual is None else (out, res_out)
