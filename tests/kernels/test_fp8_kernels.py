"""The FP8 scheme's kernels (kernels/triton_fp8.py: on a GPU, or under TRITON_INTERPRET=1 on a CPU) against the
plain-PyTorch references of kernels/fp8_ops.py run on the CPU, and the references against the definition of
E4M3 quantization."""

from __future__ import annotations

import pytest
import torch

from minivllm.kernels import fp8_ops, triton_fp8
from minivllm.kernels.elementwise_ops import rms_norm_native, silu_and_mul_native

FP8 = torch.float8_e4m3fn
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _x(m: int, k: int, seed: int = 0, dtype=torch.float32, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g) * scale).to(dtype)


def _on(*tensors):
    return [t.to(DEVICE) if t is not None else None for t in tensors]


def _cpu(tensors):
    return [t.cpu() if t is not None else None for t in tensors]


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q * scale in fp32 (scale [M, 1] per row, or [N] per output channel of a weight)."""
    return q.float() * (scale if scale.dim() == 2 else scale[:, None])


def test_weight_round_trip_within_e4m3_precision():
    """Per-channel scales: each row's largest |w| maps to 448, and every element comes back within half a step
    of E4M3 (3 mantissa bits: relative 2**-4 for normal values; subnormals a fixed 2**-10 * scale)."""
    w = _x(48, 64, seed=1) * torch.logspace(-6, 0, 48)[:, None]  # rows of very different magnitudes
    q, scale = fp8_ops.quantize_weight_per_channel(w)
    assert q.dtype == FP8 and scale.shape == (48,) and scale.dtype == torch.float32
    assert torch.equal(q.float().abs().amax(1), torch.full((48,), 448.0))
    back = dequantize(q, scale)
    err = (back - w).abs()
    bound = torch.maximum(w.abs() * 2.0 ** -4, scale[:, None] * 2.0 ** -10)
    assert (err <= bound * (1 + 1e-6)).all(), (err / bound).max()
    # and per-channel is what makes the small rows survive: one scale for the whole tensor loses them
    q_t, s_t = fp8_ops.quantize_per_token_native(w.reshape(1, -1))
    per_tensor = dequantize(q_t, s_t).reshape(w.shape)
    assert (per_tensor - w)[0].abs().mean() > 4 * err[0].mean()  # row 0: 10**6 times smaller than the largest


def test_rounding_matches_torch_e4m3_everywhere():
    """The kernel's fp32 rounding (_round_to_e4m3) against torch's conversion over the whole E4M3 range,
    ties and subnormals included: a row per binade."""
    grid = torch.cat([torch.linspace(2.0 ** e, 2.0 ** (e + 1), 257) for e in range(-10, 9)])
    grid = torch.cat([grid[grid <= 448], -grid[grid <= 448], torch.zeros(3)])
    x = grid.reshape(1, -1)
    x = torch.cat([x, torch.full_like(x[:, :1], 448.0)], 1)  # the row's max is 448: the scale is exactly 1
    q, s, _ = _cpu(triton_fp8.quant_rows(x.to(DEVICE)))
    assert s.item() == 1.0
    assert torch.equal(q.float(), x.to(FP8).float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quant_kernel_equals_reference(dtype):
    x = _x(5, 200, dtype=dtype)
    x[3] = 0  # an all-zero row gets the minimum scale, not a division by zero
    q, s, _ = _cpu(triton_fp8.quant_rows(x.to(DEVICE)))
    q_ref, s_ref = fp8_ops.quantize_per_token_native(x)
    assert torch.equal(s, s_ref) and torch.equal(q.float(), q_ref.float())
    assert s[3].item() == torch.tensor(fp8_ops.MIN_SCALE, dtype=torch.float32).item()


def _close_fp8(q, s, q_ref, s_ref, dtype=torch.float32):
    """Fused vs unfused. The norm's sum of squares is reduced in another order, so the normalised row can
    differ by one rounding of the activation dtype, and so can its max (the scale). fp32: the FP8 values
    equal but for values on a rounding boundary; bf16: each value within one E4M3 step either way."""
    torch.testing.assert_close(s, s_ref, rtol=1e-5 if dtype == torch.float32 else 2.0 ** -7, atol=0)
    a, b = q.float() * s, q_ref.float() * s_ref
    assert ((a - b).abs() <= b.abs() * 2.0 ** -3 + s_ref * 2.0 ** -9).all()
    if dtype == torch.float32:
        assert (q.float() != q_ref.float()).float().mean() < 0.01


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_norm_quant_kernels_equal_unfused_reference(dtype):
    x, r, w = _x(4, 256, 2, dtype), _x(4, 256, 3, dtype), _x(1, 256, 4, dtype, 0.5)[0]
    q, s, none = _cpu(triton_fp8.quant_rows(x.to(DEVICE), w.to(DEVICE), 1e-6))
    assert none is None
    _close_fp8(q, s, *fp8_ops.quantize_per_token_native(rms_norm_native(x, w, 1e-6)), dtype)
    q, s, new_r = _cpu(triton_fp8.quant_rows(x.to(DEVICE), w.to(DEVICE), 1e-6, residual=r.to(DEVICE)))
    q_ref, s_ref, r_ref = fp8_ops.fused_add_rms_norm_dynamic_per_token_quant(x, r, w, 1e-6)  # CPU: reference
    assert torch.equal(r_ref, (x.float() + r.float()).to(dtype))
    # one rounding of the sum (the interpreter's fp32 -> bf16 conversion is not always to nearest)
    torch.testing.assert_close(new_r, r_ref, rtol=0 if dtype == torch.float32 else 2.0 ** -7, atol=0)
    _close_fp8(q, s, q_ref, s_ref, dtype)


def test_fused_silu_quant_kernel_equals_unfused_reference():
    x = _x(3, 2 * 96, 5)
    q, s, _ = _cpu(triton_fp8.quant_rows(x.to(DEVICE), silu_mul=True))
    _close_fp8(q, s, *fp8_ops.quantize_per_token_native(silu_and_mul_native(x)))


@pytest.mark.parametrize("m,bias", [(1, False), (2, True), (5, False)])
def test_fp8_gemv_equals_dequantized_reference(m, bias):
    """W8A8 GEMV: FP8 activations and weights, fp32 accumulation, both scales on the result."""
    x, w = _x(m, 160, 6), _x(72, 160, 7, scale=0.05)
    b = _x(1, 72, 8)[0] if bias else None
    xq, xs = fp8_ops.quantize_per_token_native(x)
    wq, ws = fp8_ops.quantize_weight_per_channel(w)
    for out_dtype in (torch.float32, torch.bfloat16):
        got = triton_fp8.fp8_gemv(*_on(xq, xs, wq, ws, b), out_dtype).cpu()
        ref = dequantize(xq, xs) @ dequantize(wq, ws).t() + (b if bias else 0)
        assert got.dtype == out_dtype
        tol = 1e-5 if out_dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got.float(), ref, rtol=tol, atol=tol * ref.abs().max().item())
    # the CPU op (dequantize, one matmul, scales after) is the same function of the FP8 values
    torch.testing.assert_close(fp8_ops.fp8_scaled_mm(xq, xs, wq, ws, b, torch.float32),
                               triton_fp8.fp8_gemv(*_on(xq, xs, wq, ws, b), torch.float32).cpu(), rtol=1e-5, atol=1e-5)
    # and the whole FP8 linear stays near the fp32 one: within E4M3's precision on both operands
    exact = x @ w.t() + (b if bias else 0)
    assert (got.float() - exact).abs().max() < 0.1 * exact.abs().max()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                    reason="torch._scaled_mm with row-wise scales needs sm90")
def test_scaled_mm_path_equals_dequantized_reference():
    """More rows than the GEMV takes: torch._scaled_mm on FP8 tensor cores (bf16 out), against the reference."""
    x, w = _x(64, 256, 9), _x(128, 256, 10, scale=0.05)
    xq, xs = fp8_ops.quantize_per_token_native(x)
    wq, ws = fp8_ops.quantize_weight_per_channel(w)
    got = fp8_ops.fp8_scaled_mm(*_on(xq, xs, wq, ws), None, torch.bfloat16).float().cpu()
    ref = dequantize(xq, xs) @ dequantize(wq, ws).t()
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
