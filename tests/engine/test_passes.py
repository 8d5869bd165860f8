"""The post-grad pass manager (compilation/passes): each pass changes a graph as intended (match counts and
the ops left), the rewritten graph computes what the unfused one did, pass_config is validated with vLLM's
names and enters the compile-cache key, and in the engine the passes run inside Inductor on every piece
(compile_report lists them) without changing the tokens."""

from __future__ import annotations

import pytest
import torch
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

from minivllm import LLM, SamplingParams
from minivllm.compilation.cache import cache_key
from minivllm.compilation.passes.pass_config import PassConfig
from minivllm.compilation.passes.pass_manager import PostGradPassManager, for_config
from minivllm.config import CompilationConfig
from minivllm.engine_args import EngineArgs
from minivllm.kernels import fp8_ops  # noqa: F401  (registers the FP8 ops)
from minivllm.layers.activation import SiluAndMul
from minivllm.layers.layernorm import RMSNorm
from tests.helpers import random_prompts, tiny_checkpoint

ops = torch.ops.minivllm
QUANT, NORM_QUANT, ADD_NORM_QUANT, ACT_QUANT = (ops.scaled_fp8_quant.default,
                                                ops.rms_norm_dynamic_per_token_quant.default,
                                                ops.fused_add_rms_norm_dynamic_per_token_quant.default,
                                                ops.silu_and_mul_dynamic_per_token_quant.default)


def _layer_like(dtype: torch.dtype):
    """What a quantized decoder layer traces to with the small ops left native: the first layer's norm (no
    residual), a residual add + norm, and the MLP's SiLU-and-mul, each followed by the quantization; plus a
    reshape to the same shape and a full slice (the no-op pass's targets). Built from the layers' own
    forward_native, so the patterns are pinned to the model code."""
    norm1, norm2, act = RMSNorm(64, 1e-6), RMSNorm(64, 1e-5), SiluAndMul()
    call = torch.func.functional_call  # the norms' weights as graph inputs, as in a compiled piece

    def fn(x, residual, gate_up, w1, w2):
        q1, s1 = ops.scaled_fp8_quant(call(norm1, {"weight": w1}, (x,)))
        normed, new_residual = call(norm2, {"weight": w2}, (x, residual))
        q2, s2 = ops.scaled_fp8_quant(normed.reshape(x.shape[0], 64))
        q3, s3 = ops.scaled_fp8_quant(act.forward_native(gate_up)[0:gate_up.shape[0]])
        return q1, s1, q2, s2, new_residual, q3, s3

    g = torch.Generator().manual_seed(0)
    args = [(torch.randn(n, generator=g) * 2).reshape(7, -1).to(dtype) for n in (7 * 64, 7 * 64, 7 * 256)]
    args += [(torch.rand(64, generator=g) + 0.5).to(dtype) for _ in range(2)]
    return fn, args


def _trace(fn, args):
    """An ATen graph with a symbolic token count and Inductor's decompositions: what a post-grad pass sees."""
    return make_fx(fn, select_decomp_table(), tracing_mode="symbolic")(*args)


def _count(gm, *targets) -> int:
    return sum(n.op == "call_function" and n.target in targets for n in gm.graph.nodes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_each_pass_rewrites_what_it_should_and_computes_the_same(dtype):
    fn, args = _layer_like(dtype)
    expected = fn(*args)
    views = (torch.ops.aten.view.default, torch.ops.aten.reshape.default, torch.ops.aten.slice.Tensor)

    gm = _trace(fn, args)
    assert _count(gm, QUANT) == 3 and _count(gm, NORM_QUANT, ADD_NORM_QUANT, ACT_QUANT) == 0
    noops_before = _count(gm, *views)
    manager = PostGradPassManager(PassConfig(eliminate_noops=True))
    manager(gm.graph)
    removed = manager.matches["eliminate_noops"]
    assert removed >= 2 and _count(gm, *views) == noops_before - removed  # the reshape and the full slice

    manager = PostGradPassManager(PassConfig(fuse_norm_quant=True))
    manager(gm.graph)
    assert manager.matches == {"fuse_norm_quant": 2}
    assert _count(gm, NORM_QUANT) == 1 and _count(gm, ADD_NORM_QUANT) == 1 and _count(gm, QUANT) == 1
    assert not any(n.target is torch.ops.aten.rsqrt.default for n in gm.graph.nodes)  # the norms are gone

    manager = PostGradPassManager(PassConfig(fuse_act_quant=True))
    manager(gm.graph)
    assert manager.matches == {"fuse_act_quant": 1} and _count(gm, QUANT) == 0 and _count(gm, ACT_QUANT) == 1
    assert manager.report() == {"graphs": 1, "passes": [{"name": "fuse_act_quant", "matches": 1}]}

    gm.recompile()
    for got, want in zip(gm(*args), expected, strict=True):  # the fused ops (CPU: their references) = unfused
        assert got.dtype == want.dtype and torch.equal(got.float(), want.float())


def test_the_hand_written_kernels_ops_are_fused_too():
    """The default configuration's ops (custom_ops "all": minivllm::rms_norm, fused_add_rms_norm,
    silu_and_mul, PDL on or off) followed by the quantization: the same fused ops replace them, and compute
    what they did (the kernels under TRITON_INTERPRET=1 on a CPU)."""
    def fn(x, residual, gate_up, w):
        q1, s1 = ops.scaled_fp8_quant(ops.rms_norm(x, w, 1e-6, False))
        normed, new_residual = ops.fused_add_rms_norm(x, residual, w, 1e-5, True)
        q2, s2 = ops.scaled_fp8_quant(normed)
        q3, s3 = ops.scaled_fp8_quant(ops.silu_and_mul(gate_up, False))
        return q1, s1, q2, s2, new_residual, q3, s3

    g = torch.Generator().manual_seed(1)
    args = [torch.randn(3, 64, generator=g), torch.randn(3, 64, generator=g), torch.randn(3, 128, generator=g),
            torch.rand(64, generator=g) + 0.5]
    gm = _trace(fn, args)
    manager = PostGradPassManager(PassConfig(fuse_norm_quant=True, fuse_act_quant=True))
    manager(gm.graph)
    assert manager.matches == {"fuse_norm_quant": 2, "fuse_act_quant": 1} and _count(gm, QUANT) == 0
    assert _count(gm, NORM_QUANT) == _count(gm, ADD_NORM_QUANT) == _count(gm, ACT_QUANT) == 1
    if torch.cuda.is_available():
        return  # the comparison below runs the kernels against the fused ops' CPU references
    gm.recompile()
    for got, want in zip(gm(*args), fn(*args), strict=True):  # fused references vs the Triton kernels
        if got.dtype == torch.float8_e4m3fn:
            assert (got.float() - want.float()).abs().le(want.float().abs() * 2.0 ** -3 + 2.0 ** -9).all()
        else:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_fusion_needs_the_exact_pattern():
    """A norm whose output is also used elsewhere is not fused (the fused op does not return the normed row),
    nor is a quantization of anything but a norm."""
    norm = RMSNorm(64, 1e-6)

    def fn(x, w):
        normed = torch.func.functional_call(norm, {"weight": w}, (x,))
        q, s = ops.scaled_fp8_quant(normed)
        q2, s2 = ops.scaled_fp8_quant(x * 2)
        return q, s, normed + 1, q2, s2

    gm = _trace(fn, [torch.randn(5, 64), torch.rand(64)])
    manager = PostGradPassManager(PassConfig(fuse_norm_quant=True, fuse_act_quant=True))
    manager(gm.graph)
    assert manager.matches == {"fuse_norm_quant": 0, "fuse_act_quant": 0} and _count(gm, QUANT) == 2


def test_pass_config_uses_vllm_names_and_is_checked():
    assert CompilationConfig().pass_config == PassConfig() and for_config(PassConfig()) is None
    c = CompilationConfig.from_any({"mode": 3, "pass_config": {"fuse_norm_quant": True}})
    assert c.pass_config.enabled() == ["fuse_norm_quant"]
    with pytest.warns(DeprecationWarning) as record:
        old = CompilationConfig.from_any({"mode": 3, "pass_config": {"enable_fusion": True, "enable_noop": True}})
    assert sorted(str(w.message).split()[1] for w in record) == ["'enable_fusion'", "'enable_noop'"]
    assert old.pass_config.enabled() == ["eliminate_noops", "fuse_norm_quant", "fuse_act_quant"]
    for bad, match in (({"fuse_attn_quant": True}, "does not have"), ({"fuse_norm": True}, "unknown key"),
                       ({"fuse_norm_quant": 1}, "True or False")):
        with pytest.raises(ValueError, match=match):
            CompilationConfig.from_any({"mode": 3, "pass_config": bad})
    for mode, backend in ((0, "inductor"), (3, "eager")):
        with pytest.raises(ValueError, match="needs Inductor"):
            CompilationConfig.from_any({"mode": mode, "backend": backend, "pass_config": {"eliminate_noops": True}})


def test_pass_config_changes_the_cache_keys():
    def key(pass_config):
        config, model_config = EngineArgs(device="cpu", compilation_config={
            "mode": 3, "pass_config": pass_config}).create_engine_config()
        return cache_key(config, model_config)

    keys = {key({}), key({"fuse_norm_quant": True}), key({"fuse_act_quant": True}), key({"eliminate_noops": True})}
    assert len(keys) == 4
    # and Inductor's own FX-graph cache: the manager's uuid differs with the passes it runs
    assert PostGradPassManager(PassConfig(fuse_norm_quant=True)).uuid() != \
        PostGradPassManager(PassConfig(fuse_act_quant=True)).uuid()


def test_passes_run_in_the_engine_on_every_piece(tmp_path):
    """Mode 3 on the CPU, FP8 weights, every pass on: per piece the norms before a quantized projection and
    the SiLU-and-mul are fused (2 layers: 4 norms, the final one feeds the unquantized LM head; 2 MLPs), and
    the greedy tokens are the eager FP8 engine's."""
    ckpt = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path)))
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in random_prompts(500, [3, 11, 1], seed=21)]

    def tokens(llm):
        return [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]

    eager = tokens(LLM(ckpt, max_model_len=64, device="cpu", quantization="fp8", enforce_eager=True))
    llm = LLM(ckpt, max_model_len=64, device="cpu", quantization="fp8", compilation_config={
        "mode": 3, "cache_dir": str(tmp_path / "cache"),
        "pass_config": {"eliminate_noops": True, "fuse_norm_quant": True, "fuse_act_quant": True}})
    assert tokens(llm) == eager
    rep = llm.compile_report()["passes"]
    assert rep["graphs"] == 3  # the distinct pieces Inductor compiled
    assert {p["name"]: p["matches"] for p in rep["passes"]} == {"eliminate_noops": 0, "fuse_norm_quant": 4,
                                                                 "fuse_act_quant": 2}
