"""The fused elementwise Triton ops (minivllm::rms_norm, fused_add_rms_norm, rotary_embedding, silu_and_mul)
against the layers' forward_native, plus the torch.compile trace and the CustomOp on/off switch.

On CPU the kernels run under TRITON_INTERPRET=1 (conftest.py), so shapes stay small and dtypes are fp32 and
fp16; with CUDA the same tests add bf16, long batches (T = 8192) and a CUDA-graph capture/replay check.
Inputs include the strided views the model really passes: column slices of a fused qkv output and
Qwen3's [T, H, D] per-head view of such a slice.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from minivllm.layers.activation import SiluAndMul
from minivllm.layers.custom_op import CustomOpSelection, attach_custom_ops
from minivllm.layers.layernorm import RMSNorm
from minivllm.layers.rotary import RotaryEmbedding

pytest.importorskip("triton")

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16] if CUDA else [torch.float32, torch.float16]
TOL = {torch.float32: 2e-6, torch.bfloat16: 2e-2, torch.float16: 5e-3}
TOKENS = [1, 7, 300, 8192] if CUDA else [1, 7, 40]


def check(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape and out.dtype == ref.dtype
    tol = TOL[ref.dtype]
    torch.testing.assert_close(out, ref, atol=tol * max(1.0, ref.abs().max().item()), rtol=tol)


def randn(*shape, dtype=torch.float32, seed=0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE, dtype)


def one_sequence_meta(start: int, n: int):
    """Metadata for one sequence whose tokens start..start+n-1 run now, its cache in block 0 (n == 1: decode)."""
    from minivllm.attention.metadata import AttentionMetadata

    i32 = dict(dtype=torch.int32, device=DEVICE)
    return AttentionMetadata(torch.arange(start, start + n, device=DEVICE), torch.tensor([0, n], **i32),
                             torch.tensor([start + n], **i32), torch.tensor([[0]], **i32), max_query_len=n,
                             max_seq_len=start + n, decode_only=n == 1, query_start_loc_cpu=[0, n],
                             seq_lens_cpu=[start + n])


def make_norm(n: int, dtype: torch.dtype) -> RMSNorm:
    norm = RMSNorm(n, eps=1e-6).to(DEVICE, dtype)
    norm.weight.data.copy_(randn(n, seed=99) * 0.5 + 1)
    return norm


def use(module: torch.nn.Module, spec: list[str], has_kernels: bool = True) -> CustomOpSelection:
    """Give module (a layer or a model) the selection an engine with custom_ops=spec would attach."""
    selection = CustomOpSelection.from_spec(spec, has_kernels)
    attach_custom_ops(module, selection)
    return selection


# ---- RMSNorm ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", TOKENS)
@pytest.mark.parametrize("hidden", [64, 96])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm(dtype, T, hidden, with_residual):
    norm = make_norm(hidden, dtype)
    x = randn(T, hidden, dtype=dtype, seed=T) * 3
    if not with_residual:
        check(norm.forward_custom(x), norm.forward_native(x))
        return
    residual = randn(T, hidden, dtype=dtype, seed=T + 1)
    out, res = norm.forward_custom(x, residual)
    ref_out, ref_res = norm.forward_native(x, residual)
    check(out, ref_out)
    check(res, ref_res)
    assert x.equal(randn(T, hidden, dtype=dtype, seed=T) * 3), "inputs must not be modified"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm_strided_inputs(dtype, with_residual):
    """Rows with a stride wider than the row (a column slice), as the model's inputs can be."""
    T, hidden = 9, 64
    norm = make_norm(hidden, dtype)
    wide = randn(T, 3 * hidden, dtype=dtype, seed=1)
    x = wide[:, hidden:2 * hidden]
    assert not x.is_contiguous()
    if with_residual:
        residual = randn(T, 2 * hidden, dtype=dtype, seed=2)[:, :hidden]
        for a, b in zip(norm.forward_custom(x, residual), norm.forward_native(x, residual)):
            check(a, b)
    else:
        check(norm.forward_custom(x), norm.forward_native(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", TOKENS[:2])
def test_qk_norm_per_head_view(dtype, T):
    """Qwen3's q_norm/k_norm: RMSNorm over head_dim of a [T, H, D] view of a slice of the fused qkv output."""
    H, Hkv, D = 4, 2, 64
    norm = make_norm(D, dtype)
    qkv = randn(T, (H + 2 * Hkv) * D, dtype=dtype, seed=3)
    for view in (qkv[:, :H * D].reshape(T, H, D), qkv[:, H * D:(H + Hkv) * D].reshape(T, Hkv, D)):
        assert T == 1 or not view.is_contiguous()  # (a single row counts as contiguous)
        out = norm.forward_custom(view)
        check(out, norm.forward_native(view))
        assert out.view(T, -1).shape == (T, view.shape[1] * D)  # the model flattens the result with view()


def test_rms_norm_empty_and_4d():
    norm = make_norm(64, torch.float32)
    assert norm.forward_custom(randn(0, 64)).shape == (0, 64)
    x = randn(2, 3, 5, 64)
    check(norm.forward_custom(x), norm.forward_native(x))


# ---- SiLU and mul ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", TOKENS)
@pytest.mark.parametrize("inter", [64, 1100])  # 1100: not a power of two, and more than one column block
def test_silu_and_mul(dtype, T, inter):
    if T > 7 and inter > 64 and not CUDA:
        pytest.skip("slow under the interpreter")
    act = SiluAndMul()
    x = randn(T, 2 * inter, dtype=dtype, seed=T) * 4
    check(act.forward_custom(x), act.forward_native(x))


def test_silu_and_mul_strided():
    act = SiluAndMul()
    x = randn(5, 300, seed=4)[:, :256]
    assert not x.is_contiguous()
    check(act.forward_custom(x), act.forward_native(x))
    assert act.forward_custom(randn(0, 256)).shape == (0, 128)


# ---- rotary ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", TOKENS)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("heads", [(4, 2), (3, 1)])  # (q heads, kv heads); 3: not a power of two
@pytest.mark.parametrize("fused_qkv", [True, False])
def test_rotary(dtype, T, head_dim, heads, fused_qkv):
    if not CUDA and T > 7 and (head_dim, heads, fused_qkv) != (128, (4, 2), True):
        pytest.skip("slow under the interpreter")
    hq, hk = heads
    rope = RotaryEmbedding(head_dim, max_position=4096, base=10000.0).to(DEVICE)
    positions = torch.randint(0, 4096, (T,), generator=torch.Generator().manual_seed(T)).to(DEVICE)
    if fused_qkv:  # q and k are column slices of the qkv projection's output (row stride != width)
        qkv = randn(T, (hq + 2 * hk) * head_dim, dtype=dtype, seed=5)
        q, k = qkv[:, :hq * head_dim], qkv[:, hq * head_dim:(hq + hk) * head_dim]
    else:
        q, k = randn(T, hq * head_dim, dtype=dtype, seed=6), randn(T, hk * head_dim, dtype=dtype, seed=7)
    out_q, out_k = rope.forward_custom(positions, q, k)
    ref_q, ref_k = rope.forward_native(positions, q, k)
    check(out_q, ref_q)
    check(out_k, ref_k)


def test_rotary_llama3_scaling_and_int32_positions():
    scaling = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 256}
    rope = RotaryEmbedding(64, max_position=2048, base=500000.0, rope_scaling=scaling).to(DEVICE)
    positions = torch.tensor([0, 5, 2047, 300], device=DEVICE)
    q, k = randn(4, 4 * 64, seed=8), randn(4, 2 * 64, seed=9)
    ref = rope.forward_native(positions, q, k)
    for out, r in zip(rope.forward_custom(positions.int(), q, k), ref):
        check(out, r)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", TOKENS[:2])
@pytest.mark.parametrize("heads", [(4, 2), (3, 1)])
def test_qk_norm_rope_fused_equals_norm_then_rope(dtype, T, heads):
    """minivllm::qk_norm_rotary_embedding == q_norm, k_norm, then RoPE (both as Triton kernels, and native),
    on column slices of a fused qkv output as the model passes them."""
    from minivllm.kernels.elementwise_ops import qk_norm_rotary_embedding

    hq, hk, d = *heads, 64
    rope = RotaryEmbedding(d, max_position=4096, base=10000.0).to(DEVICE)
    q_norm, k_norm = make_norm(d, dtype), make_norm(d, dtype)
    k_norm.weight.data.copy_(randn(d, seed=98) * 0.5 + 1)
    positions = torch.randint(0, 4096, (T,), generator=torch.Generator().manual_seed(T)).to(DEVICE)
    qkv = randn(T, (hq + 2 * hk) * d, dtype=dtype, seed=5) * 3
    q, k = qkv[:, :hq * d], qkv[:, hq * d:(hq + hk) * d]
    out_q, out_k = qk_norm_rotary_embedding(positions, q, k, q_norm.weight, k_norm.weight, 1e-6,
                                            rope.cos_sin_cache, d)

    def unfused(norm_fn, rope_fn):
        nq = norm_fn(q_norm, q.reshape(T, -1, d)).reshape(T, -1)
        nk = norm_fn(k_norm, k.reshape(T, -1, d)).reshape(T, -1)
        return rope_fn(positions, nq, nk)

    for ref_q, ref_k in (unfused(RMSNorm.forward_custom, rope.forward_custom),
                         unfused(RMSNorm.forward_native, rope.forward_native)):
        check(out_q, ref_q)
        check(out_k, ref_k)


def test_qk_norm_rope_is_on_with_all_and_used_by_the_model(tmp_path, monkeypatch):
    """"all" turns the fusion on (measured faster on the H200); "-qk_norm_rope" runs norm, norm, RoPE."""
    from minivllm.kernels import triton_rotary
    from minivllm.loader import load_model_config
    from minivllm.models.llama import DecoderAttention
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    cfg = load_model_config(make_random_checkpoint("tiny", tmp_path / "c", dtype="float32"))
    attn = DecoderAttention(cfg, 0).to(DEVICE)
    sel = use(attn, ["all", "-qk_norm_rope"])
    assert sel.is_enabled("rms_norm") and not sel.is_enabled("qk_norm_rope")
    for norm in (attn.q_norm, attn.k_norm):
        norm.weight.data.copy_(randn(cfg.head_dim, seed=3) * 0.5 + 1)
    positions = torch.arange(3, device=DEVICE)
    q, k = randn(3, attn.q_size, seed=1), randn(3, attn.kv_size, seed=2)
    ref = attn.rope_qk(positions, q, k)
    fused_calls = []
    launch = triton_rotary.rotary_embedding

    def spy(*args, **kwargs):
        fused_calls.append(len(args) > 5)  # the fused launch passes the norm weights
        return launch(*args, **kwargs)

    monkeypatch.setattr(triton_rotary, "rotary_embedding", spy)
    assert use(attn, ["all"]).is_enabled("qk_norm_rope")
    out = attn.rope_qk(positions, q, k)
    assert fused_calls == [True]
    for o, r in zip(out, ref):
        check(o, r)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M", [1, 3, 8])
@pytest.mark.parametrize("bias,silu_mul", [(False, False), (True, False), (False, True)])
def test_gemv_equals_linear(dtype, M, bias, silu_mul):
    """The Triton GEMV (<= 8 rows) == F.linear, with a bias, and with SiLU-and-mul fused on its input (==
    the SiLU-and-mul kernel, then F.linear); N and K not multiples of the block sizes; strided input rows."""
    import torch.nn.functional as F

    from minivllm.kernels.triton_gemv import gemv

    N, K = (200, 96) if not CUDA else (3000, 1100)
    w = randn(N, K, dtype=dtype, seed=1) / K ** 0.5
    b = randn(N, dtype=dtype, seed=2) if bias else None
    width = 2 * K if silu_mul else K
    x = randn(M, width + 8, dtype=dtype, seed=3)[:, :width]  # row stride != width
    out = gemv(x, w, b, silu_mul=silu_mul)
    xin = SiluAndMul().forward_native(x) if silu_mul else x
    check(out, F.linear(xin.float(), w.float(), None if b is None else b.float()).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M", [1, 2, 5])
@pytest.mark.parametrize("residual,bias", [(False, False), (True, False), (True, True)])
def test_gemv_with_add_and_norm_equals_separate_ops(dtype, M, residual, bias):
    """The GEMV with the residual add and RMSNorm in its prologue (custom op "gemv_norm") == the RMSNorm
    (fused add + RMSNorm) layer's native path, then F.linear; with a residual, the new residual stream
    x + residual comes back too. Through the ops: 1-2 rows take the GEMV, 5 rows the fallback (the norm
    kernel, then F.linear). K is not a power of 2."""
    import torch.nn.functional as F

    N, K = (136, 80) if not CUDA else (3000, 1100)
    w = randn(N, K, dtype=dtype, seed=1) / K ** 0.5
    b = randn(N, dtype=dtype, seed=2) if bias else None
    x = randn(M, K, dtype=dtype, seed=3) * 3
    r = randn(M, K, dtype=dtype, seed=5) if residual else None
    norm = RMSNorm(K, eps=1e-5).to(DEVICE, dtype)
    norm.weight.data.copy_((1 + 0.1 * randn(K, seed=4)).to(dtype))
    if r is None:
        out = torch.ops.minivllm.linear(x, w, b, False, norm.weight, 1e-5)
        normed = norm.forward_native(x)
    else:
        out, new_residual = torch.ops.minivllm.add_rms_norm_linear(x, r, norm.weight, 1e-5, w, b)
        normed, ref_residual = norm.forward_native(x, r)
        assert torch.equal(new_residual, ref_residual)
    check(out, F.linear(normed.float(), w.float(), None if b is None else b.float()).to(dtype))


def _gemv_config_cases() -> list:
    """Every autotune config on a GPU; on the CPU (interpreter, slow) one per block shape family: a 16x64
    tile walking K, a pipelined one (LOOP_STAGES), and a narrow one that takes K in one step."""
    from minivllm.kernels import gemv_configs, triton_gemv

    cfgs = [gemv_configs.config_dict(c) for c in triton_gemv._configs()]
    few = [c for c in cfgs if (c["BLOCK_N"], c["BLOCK_K"], c.get("LOOP_STAGES")) in
           ((16, 256, None), (8, 256, 3), (2, 1024, 3), (1, 2048, None))]
    cfgs = cfgs if CUDA else few
    return [pytest.param(c, id="-".join(f"{k}{v}" for k, v in c.items())) for c in cfgs]


@pytest.mark.parametrize("cfg", _gemv_config_cases())
def test_gemv_every_config_equals_linear(cfg, monkeypatch):
    """Each config the tuner may ship, pinned for the shape (as a shipped file does), == the PyTorch
    reference for the fused forms the decode step runs: plain, SiLU-and-mul, residual add + RMSNorm. N and K
    are not multiples of the blocks, and K spans several steps of the pipelined configs."""
    import torch.nn.functional as F

    from minivllm.kernels import gemv_configs, triton_gemv

    N, K = (40, 1100) if not CUDA else (3000, 2100)
    w = randn(N, K, dtype=torch.float16, seed=1) / K ** 0.5
    x = randn(1, 2 * K, dtype=torch.float16, seed=3)
    r = randn(1, K, dtype=torch.float16, seed=5)
    norm = RMSNorm(K, eps=1e-5).to(DEVICE, torch.float16)
    norm.weight.data.copy_((1 + 0.1 * randn(K, seed=4)).to(torch.float16))
    pins = {gemv_configs.shape_name(N, K, 1, silu, nrm): cfg for silu, nrm in ((0, 0), (1, 0), (0, 1))}
    try:
        gemv_configs.set_pins(pins, label="test")
        triton_gemv.forget_picks()
        check(triton_gemv.gemv(x[:, :K], w), F.linear(x[:, :K].float(), w.float()).half())
        check(triton_gemv.gemv(x, w, silu_mul=True),
              F.linear(SiluAndMul().forward_native(x).float(), w.float()).half())
        out, res = triton_gemv.gemv(x[:, :K], w, norm_weight=norm.weight, eps=1e-5, residual=r)
        normed, ref_res = norm.forward_native(x[:, :K], r)
        assert torch.equal(res, ref_res)
        check(out, F.linear(normed.float(), w.float()).half())
        if CUDA:  # the autotuner ran this config alone (the pin prunes the others)
            assert all(c == cfg for c in triton_gemv.autotuned_configs().values())
    finally:
        gemv_configs.set_pins(None)
        triton_gemv.forget_picks()


def test_gemv_norm_in_the_model_removes_the_norm_kernels(tmp_path, monkeypatch):
    """custom_ops "gemv_norm" (on with "all"): the decoder's hidden states equal the unfused path's (a 5-token prefill,
    which takes the fallback, then a 1-token decode, which takes the GEMVs with the residual add and the
    RMSNorm inside), and at decode the only RMSNorm kernel left is the final norm (the default launches one
    per norm: 2 per layer + 1)."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm.kernels import triton_norm
    from minivllm.loader import load_model_config
    from minivllm.models.llama import DecoderModel
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    cfg = load_model_config(make_random_checkpoint("tiny", tmp_path / "c", dtype="float32"))
    model = DecoderModel(cfg).to(DEVICE)
    for i, p in enumerate(model.parameters()):  # the layers allocate with torch.empty
        p.data.copy_(randn(*p.shape, seed=40 + i) * 0.1 + (1.0 if p.dim() == 1 else 0.0))
    ids = torch.tensor([3, 14, 15, 92, 65, 35], device=DEVICE)
    launches, launch = [], triton_norm.rms_norm
    monkeypatch.setattr(triton_norm, "rms_norm", lambda *a, **k: (launches.append(1), launch(*a, **k))[1])
    outs, decode_launches = [], []
    for ops in (["all", "-gemv_norm"], ["all"]):  # gemv_norm is on with "all"
        assert use(model, ops).gemv_norm == (ops == ["all"])
        caches = [(torch.zeros(1, 16, cfg.num_key_value_heads, cfg.head_dim, device=DEVICE),
                   torch.zeros(1, 16, cfg.num_key_value_heads, cfg.head_dim, device=DEVICE))
                  for _ in range(cfg.num_hidden_layers)]
        out = []
        for start, n in ((0, 5), (5, 1)):
            launches.clear()
            with torch.no_grad(), set_forward_context(one_sequence_meta(start, n), "triton", caches):
                out.append(model(ids[start:start + n], torch.arange(start, start + n, device=DEVICE)))
        decode_launches.append(len(launches))
        outs.append(torch.cat(out))
    check(outs[1], outs[0])
    assert decode_launches == [2 * cfg.num_hidden_layers + 1, 1], decode_launches


def _accesses_before_wait(body: list, flags: dict) -> list | None:
    """(call, pointer) of each tl.load / tl.store / tl.atomic_* that runs before the first
    wait_for_previous_kernel(USE_PDL) of a kernel body, resolving `if FLAG:` / `if not FLAG:` on constexpr
    PREFETCH_* flags; None if the body never waits."""
    import ast

    seen = []
    for st in body:
        if isinstance(st, ast.If) and ast.unparse(st.test).removeprefix("not ") in flags:
            flag = ast.unparse(st.test).removeprefix("not ")
            taken = flags[flag] != ast.unparse(st.test).startswith("not ")
            inner = _accesses_before_wait(st.body if taken else st.orelse, flags)
            if inner is not None:
                return seen + inner
            seen += [a for n in (st.body if taken else st.orelse) for a in _accesses(n)]
            continue
        if ast.unparse(st) == "wait_for_previous_kernel(USE_PDL)":
            return seen
        seen += _accesses(st)
    return None


def _accesses(node) -> list:
    import ast

    return [(ast.unparse(c.func), ast.unparse(c.args[0])) for c in ast.walk(node) if isinstance(c, ast.Call)
            and (ast.unparse(c.func) in ("tl.load", "tl.store") or ast.unparse(c.func).startswith("tl.atomic"))]


def test_every_pdl_kernel_waits_before_it_touches_memory():
    """custom_ops "pdl" (on with "all") launches minivllm's Triton kernels early (programmatic dependent launch), which is
    only safe if each waits for the previous kernel before its first load or store: every kernel whose
    launcher passes launch_options() must call wait_for_previous_kernel(USE_PDL) before any load or store.
    The exception is what no kernel of a step writes, read early on purpose: the decode kernel's seq_lens and
    block table ("decode_prefetch", the step's host copies). Off the GPU (or with "-pdl") nothing is
    launched early."""
    import ast
    import inspect

    from minivllm.kernels import (pdl, triton_activation, triton_decode, triton_gemv, triton_norm, triton_rotary,
                                  triton_store_kv)

    kernels = 0
    for mod in (triton_activation, triton_decode, triton_gemv, triton_norm, triton_rotary, triton_store_kv):
        tree = ast.parse(inspect.getsource(mod))
        # the kernels a launcher may start early: those that take the USE_PDL flag launch_options() sets (launched
        # as kernel[grid](...), through kernels/launch.py's launch(kernel, grid, ...), or by an autotuner)
        launched = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                    and any(a.arg == "USE_PDL" for a in n.args.args)}
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in launched):
            flags = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id.startswith("PREFETCH_")})
            for values in itertools.product([False, True], repeat=len(flags)):
                before = _accesses_before_wait(fn.body, dict(zip(flags, values)))
                assert before is not None, (mod.__name__, fn.name, "never waits")
                for name, pointer in before:  # only what no kernel of a step writes may be read early
                    assert name == "tl.load" and pointer.startswith(("seq_lens_ptr", "bt_ptr")), (
                        mod.__name__, fn.name, name, pointer)
            kernels += 1
    assert kernels == 7, kernels  # silu, decode, merge, gemv, norm, rotary, store
    assert CustomOpSelection.from_spec(["all"], True).use_pdl  # on with "all"; "-pdl" turns it off
    assert not CustomOpSelection.from_spec(["all", "-pdl"], True).use_pdl
    assert pdl.launch_options(torch.device("cpu"), True) == {"USE_PDL": False}  # only CUDA sm_90+ launches early
    if CUDA:
        hopper = torch.cuda.get_device_capability()[0] >= 9
        assert pdl.launch_options(torch.device("cuda"), True) == ({"USE_PDL": True, "launch_pdl": True} if hopper
                                                                  else {"USE_PDL": False})
        assert pdl.launch_options(torch.device("cuda"), False) == {"USE_PDL": False}


def test_gemv_custom_op_in_the_model(tmp_path):
    """custom_ops "all" (gemv on): every small linear of a decoder layer goes through minivllm::linear (the
    MLP's SiLU-and-mul inside the down projection); same output as "-gemv"; more than 2 rows and the LM
    head fall back to F.linear inside the op."""
    from minivllm.kernels import triton_gemv
    from minivllm.layers.linear import Linear
    from minivllm.loader import load_model_config
    from minivllm.models.llama import DecoderMLP
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    cfg = load_model_config(make_random_checkpoint("tiny", tmp_path / "c", dtype="float32"))
    mlp = DecoderMLP(cfg).to(DEVICE)
    for i, p in enumerate(mlp.parameters()):
        p.data.copy_(randn(*p.shape, seed=30 + i) * 0.1)
    calls = []
    orig = triton_gemv.gemv

    def spy(*args, **kwargs):
        calls.append(args[3] if len(args) > 3 else kwargs.get("silu_mul", False))
        return orig(*args, **kwargs)

    triton_gemv.gemv = spy
    try:
        for rows in (1, 2, 3, 12):
            x = randn(rows, cfg.hidden_size, seed=rows)
            assert not use(mlp, ["all", "-gemv"]).is_enabled("gemv")
            ref = mlp(mlp.gate_up_proj(x))
            assert use(mlp, ["all"]).is_enabled("gemv")
            calls.clear()
            check(mlp(mlp.gate_up_proj(x)), ref)
            assert calls == ([False, True] if rows <= triton_gemv.DISPATCH_MAX_M else [])
        x1 = randn(1, cfg.hidden_size, seed=1)
        use(mlp, ["all", "-gemv", "-silu_and_mul"])
        ref1 = mlp(mlp.gate_up_proj(x1))
        use(mlp, ["all", "-silu_and_mul"])  # native SiLU asked for: not fused
        calls.clear()
        check(mlp(mlp.gate_up_proj(x1)), ref1)
        assert calls == [False, False]  # gate_up and down as plain GEMVs, the native SiLU-and-mul between
        big = Linear(64, triton_gemv.MAX_WEIGHT_ELEMENTS // 64 + 1).to(DEVICE)  # LM-head sized: cuBLAS
        use(big, ["all"])
        calls.clear()
        big(randn(1, 64, seed=9))
        assert calls == []
    finally:
        triton_gemv.gemv = orig


# ---- torch.compile and the CustomOp switch ---------------------------------------------------------------

class _Block(torch.nn.Module):
    """The elementwise part of a Qwen3 decoder layer: norms, per-head q/k norms, rotary, SiLU-and-mul."""

    def __init__(self, hq=4, hk=2, d=64, hidden=64):
        super().__init__()
        self.hq, self.hk, self.d = hq, hk, d
        self.norm, self.q_norm, self.k_norm = RMSNorm(hidden), RMSNorm(d), RMSNorm(d)
        self.rope = RotaryEmbedding(d, 512, 10000.0)
        self.act = SiluAndMul()

    def forward(self, positions, qkv, x, residual):
        T, d = qkv.shape[0], self.d
        q, k, _ = qkv.split([self.hq * d, self.hk * d, self.hk * d], dim=-1)
        q = self.q_norm(q.reshape(T, -1, d)).view(T, -1)
        k = self.k_norm(k.reshape(T, -1, d)).view(T, -1)
        q, k = self.rope(positions, q, k)
        h = self.norm(x)
        h, residual = self.norm(h, residual)
        return q, k, self.act(torch.cat([h, x], dim=-1)), residual


def _block_inputs(T=5):
    blk = _Block().to(DEVICE).requires_grad_(False)  # the engine runs under inference_mode
    positions = torch.randint(0, 512, (T,), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    return blk, (positions, randn(T, 8 * 64, seed=10), randn(T, 64, seed=11), randn(T, 64, seed=12))


def test_compile_fullgraph_no_graph_breaks():
    from torch._dynamo.utils import counters

    blk, args = _block_inputs()
    use(blk, ["all"])
    torch._dynamo.reset()
    counters.clear()
    seen: list[str] = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    compiled = torch.compile(blk, fullgraph=True, backend=backend)
    with torch.inference_mode():
        outs = compiled(*args)
    assert sum(counters["graph_break"].values()) == 0
    for op in ("rms_norm", "fused_add_rms_norm", "rotary_embedding", "silu_and_mul"):
        assert any(f"minivllm.{op}" in t for t in seen), f"{op} not in the traced graph"
    use(blk, ["none"], has_kernels=False)
    for out, ref in zip(outs, blk(*args)):
        check(out, ref)
    torch._dynamo.reset()


def _spy(monkeypatch, cls, calls):
    for which in ("forward_native", "forward_custom"):
        orig = getattr(cls, which)

        def wrapped(self, *a, _orig=orig, _which=which, **kw):
            calls.append((cls.name, _which))
            return _orig(self, *a, **kw)

        monkeypatch.setattr(cls, which, wrapped)


def test_custom_op_switch(monkeypatch):
    calls: list[tuple[str, str]] = []
    for cls in (RMSNorm, SiluAndMul, RotaryEmbedding):
        _spy(monkeypatch, cls, calls)
    blk, args = _block_inputs(T=2)

    def used():
        calls.clear()
        blk(*args)
        return set(calls)

    assert {which for _, which in used()} == {"forward_native"}  # no selection attached: native
    use(blk, ["all"])
    assert used() == {("rms_norm", "forward_custom"), ("silu_and_mul", "forward_custom"),
                      ("rotary_embedding", "forward_custom")}
    use(blk, ["all", "-rms_norm"])
    assert used() == {("rms_norm", "forward_native"), ("silu_and_mul", "forward_custom"),
                      ("rotary_embedding", "forward_custom")}
    use(blk, ["all"], has_kernels=False)  # CPU without kernels: everything native
    assert {which for _, which in used()} == {"forward_native"}


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_cuda_graph_replay():
    """Capture the ops once, then replay with new input values: outputs follow (no host syncs, fixed grid)."""
    blk, args = _block_inputs(T=16)
    use(blk, ["all"])
    static = [a.clone() for a in args]
    blk(*static)  # warm-up: compile the kernels outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = blk(*static)
    _, new_args = _block_inputs(T=16)
    new_args = (torch.randint(0, 512, (16,), device=DEVICE),) + tuple(a * 2 for a in new_args[1:])
    for s, a in zip(static, new_args):
        s.copy_(a)
    graph.replay()
    use(blk, ["none"], has_kernels=False)
    for out, ref in zip(outs, blk(*new_args)):
        check(out, ref)


# ---- bf16 numerics of the PyTorch ops -------------------------------------------------------------------

def test_native_add_and_rms_norm_round_once_in_bf16():
    """RMSNorm.forward_native in bf16 rounds as the Triton kernels do: fp32 throughout, one cast per output.
    Inductor keeps fused intermediates in fp32, so a native op with an intermediate cast (Hugging Face's
    cast before the weight multiply, or the residual sum rounded before the norm) rounds differently once
    compiled; on the H200 that made greedy tokens diverge in bf16 (issue 26). The reference here is computed
    in float64 and cast once: every output is within 1 bf16 ulp of it and nearly all are equal, while the
    twice-rounded version is off by a whole ulp far more often."""
    T, N, eps = 64, 1024, 1e-6
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(T, N, generator=g) * 3).bfloat16()
    r = torch.randn(T, N, generator=g).bfloat16()
    norm = RMSNorm(N, eps=eps).bfloat16()
    norm.weight.data.copy_((torch.randn(N, generator=g) * 0.5 + 1).bfloat16())
    out, res = norm.forward_native(x, r)
    assert out.dtype == res.dtype == torch.bfloat16
    assert torch.equal(res, x + r)  # the residual stream: the sum rounded once (what a bf16 add does)
    s = x.double() + r.double()
    ref = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * norm.weight.double()).bfloat16()
    ulp = (ref.float().abs() * 2.0 ** -7).clamp_min(2.0 ** -133)
    diff = (out.float() - ref.float()).abs()
    assert bool((diff <= ulp).all())
    exact = (diff == 0).float().mean().item()
    assert exact > 0.99, exact
    # Hugging Face's roundings (sum rounded, row cast before the weight multiply) against the same reference
    sf = (x + r).float()
    hf = norm.weight * (sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps)).bfloat16()
    assert (hf.float() - ref.float()).abs().gt(0).float().mean().item() > 5 * (1 - exact)
    # without a residual, and the op's fallback without Triton: the same one rounding
    assert torch.equal(norm.forward_native(x), _rms_norm_native_checked(x, norm.weight, eps))


def _rms_norm_native_checked(x, weight, eps):
    from minivllm.kernels.elementwise_ops import rms_norm_native

    xf = x.float()
    assert torch.equal(rms_norm_native(x, weight, eps),
                       (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).bfloat16())
    return rms_norm_native(x, weight, eps)
