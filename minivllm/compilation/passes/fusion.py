"""Fusion passes written with Inductor's pattern matcher: "RMSNorm, then FP8 quantization" becomes one op,
and so does "SiLU-and-mul, then FP8 quantization" (vLLM: RMSNormQuantFusionPass, ActivationQuantFusionPass
in vllm/compilation/passes/fusion).

Why a pass and not a layer that calls the fused op: the model code stays one readable sequence (norm,
then a quantized linear that quantizes its input), and the fusion is a compiler decision that can be
turned off, counted and compared (compile_report, Lab 12). Why the fused op pays: the quantization only
reads the row the norm just wrote to find its max; one kernel keeps the row in registers (kernels/triton_fp8.py).

How: `register_replacement(search, replace, example_inputs, fwd_only, patterns)` traces both functions to ATen
graphs with Inductor's own decompositions, so the search graph looks like what the post-grad graph holds,
and `patterns.apply(graph)` rewrites each match, returning how many it made. The search functions are the
layers' native forward (RMSNorm.forward_native, SiluAndMul.forward_native) followed by the quantization op:
the graph a compile mode traces when the small ops are left to Inductor (custom_ops "none", the default of
an asked-for mode); and the same with the hand-written kernels' ops (minivllm::rms_norm, fused_add_rms_norm,
silu_and_mul: custom_ops "all", the default configuration), traced with fake tensors since their kernels
need a GPU. Constants are part of a traced pattern, so each eps, activation dtype and PDL flag is a pattern
of its own (vLLM registers one per eps too); the fused kernels launch without PDL.
"""

from __future__ import annotations

import functools

import torch
from torch import fx
from torch._inductor.pattern_matcher import PatternMatcherPass, fwd_only, register_replacement
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from minivllm.kernels import fp8_ops  # noqa: F401  (registers the torch.ops.minivllm FP8 ops)
from minivllm.kernels.elementwise_ops import rms_norm_fp32, rms_norm_native, silu_and_mul_native

EPSILONS = (1e-5, 1e-6)  # RMSNorm eps of the Llama / Qwen families
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _norm_quant(eps: float):
    def search(x, weight):
        return torch.ops.minivllm.scaled_fp8_quant(rms_norm_native(x, weight, eps))

    def replace(x, weight):
        return torch.ops.minivllm.rms_norm_dynamic_per_token_quant(x, weight, eps)

    return search, replace


def _add_norm_quant(eps: float):
    def search(x, residual, weight):  # RMSNorm.forward_native with a residual, then the quantization
        dtype = torch.promote_types(x.dtype, residual.dtype)
        xf = x.float() + residual.float()
        normed = rms_norm_fp32(xf, weight, eps).to(torch.promote_types(dtype, weight.dtype))
        q, scale = torch.ops.minivllm.scaled_fp8_quant(normed)
        return q, scale, xf.to(dtype)

    def replace(x, residual, weight):
        return torch.ops.minivllm.fused_add_rms_norm_dynamic_per_token_quant(x, residual, weight, eps)

    return search, replace


def _kernel_norm_quant(eps: float, pdl: bool):
    def search(x, weight):
        return torch.ops.minivllm.scaled_fp8_quant(torch.ops.minivllm.rms_norm(x, weight, eps, pdl))

    return search, _norm_quant(eps)[1]


def _kernel_add_norm_quant(eps: float, pdl: bool):
    def search(x, residual, weight):
        normed, new_residual = torch.ops.minivllm.fused_add_rms_norm(x, residual, weight, eps, pdl)
        q, scale = torch.ops.minivllm.scaled_fp8_quant(normed)
        return q, scale, new_residual

    return search, _add_norm_quant(eps)[1]


def _kernel_act_quant(pdl: bool):
    def search(x):
        return torch.ops.minivllm.scaled_fp8_quant(torch.ops.minivllm.silu_and_mul(x, pdl))

    return search, _act_quant()[1]


def _fake_trace(fn, args, **kwargs):
    """fwd_only with fake example inputs: the hand-written kernels' ops run only their fake implementations
    (the pattern matcher calls this again with the matched nodes' fake values, already fake)."""
    if any(isinstance(a, FakeTensor) for a in args):
        return fwd_only(fn, args, **kwargs)
    with FakeTensorMode() as mode:
        return fwd_only(fn, [mode.from_tensor(a) for a in args], **kwargs)


def _act_quant():
    def search(x):
        return torch.ops.minivllm.scaled_fp8_quant(silu_and_mul_native(x))

    def replace(x):
        return torch.ops.minivllm.silu_and_mul_dynamic_per_token_quant(x)

    return search, replace


class PatternPass:
    """A PatternMatcherPass called as a pass (graph -> matches), traced once per process (tracing takes seconds)."""

    def __init__(self, patterns: PatternMatcherPass) -> None:
        self.patterns = patterns

    def __call__(self, graph: fx.Graph) -> int:
        return self.patterns.apply(graph)


@functools.cache
def rms_norm_quant_pass() -> PatternPass:
    patterns = PatternMatcherPass(pass_name="fuse_norm_quant")
    for dtype in DTYPES:
        x, r, w = torch.empty(5, 16, dtype=dtype), torch.empty(5, 16, dtype=dtype), torch.empty(16, dtype=dtype)
        for eps in EPSILONS:
            register_replacement(*_add_norm_quant(eps), [x, r, w], fwd_only, patterns)
            register_replacement(*_norm_quant(eps), [x, w], fwd_only, patterns)
    x, r, w = torch.empty(5, 16), torch.empty(5, 16), torch.empty(16)
    for eps in EPSILONS:
        for pdl in (False, True):
            register_replacement(*_kernel_add_norm_quant(eps, pdl), [x, r, w], _fake_trace, patterns)
            register_replacement(*_kernel_norm_quant(eps, pdl), [x, w], _fake_trace, patterns)
    return PatternPass(patterns)


@functools.cache
def act_quant_pass() -> PatternPass:
    patterns = PatternMatcherPass(pass_name="fuse_act_quant")
    for dtype in DTYPES:
        register_replacement(*_act_quant(), [torch.empty(5, 32, dtype=dtype)], fwd_only, patterns)
    for pdl in (False, True):
        register_replacement(*_kernel_act_quant(pdl), [torch.empty(5, 32)], _fake_trace, patterns)
    return PatternPass(patterns)
