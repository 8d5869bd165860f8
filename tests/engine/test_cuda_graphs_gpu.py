"""CUDA graphs against eager on a GPU (skipped without CUDA; run by scripts/gpu_check.sh on the H200).

For every batch size from 1 to past the largest captured size, in every graph mode, greedy tokens equal
eager; the persistent buffers never move; sampling inside replays still follows the seed (no frozen RNG).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from tests.helpers import random_prompts, run_in_threads

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

SIZES = [1, 2, 4, 8, 16]
MODES = ["FULL_DECODE_ONLY", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL"]


def _default_model() -> str:
    """The embedded model, or (before it exists) a small random Qwen3 checkpoint."""
    if os.path.isdir(DEFAULT_MODEL):
        return DEFAULT_MODEL
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    return str(make_random_checkpoint("tiny", "/tmp/minivllm_tiny_gpu", dtype="bfloat16"))


def _models():
    models = [_default_model()]
    if os.environ.get("MINIVLLM_GPU_MODEL"):
        models.append(os.environ["MINIVLLM_GPU_MODEL"])
    return models


def _run(llm, prompts, max_tokens=16):
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate([{"prompt_token_ids": p} for p in prompts], params,
                                                          use_tqdm=False)]


def _differences(label: str, got: dict, ref: dict) -> list[str]:
    """'label batch b seq i: first difference at token j' for every sequence of got that is not ref's."""
    out = []
    for b, seqs in got.items():
        for i, (g, r) in enumerate(zip(seqs, ref[b])):
            if g != r:
                first = next((j for j, (x, y) in enumerate(zip(g, r)) if x != y), min(len(g), len(r)))
                out.append(f"{label} batch {b} seq {i}: first difference at token {first}")
    return out


@pytest.mark.parametrize("model", _models())
def test_graph_modes_match_eager_at_every_batch_size(model):
    """Every graph mode gives the tokens of eager running the same kernels, exactly.

    FULL_DECODE_ONLY, PIECEWISE and FULL_AND_PIECEWISE run the kernels of the default eager engine (the
    split-KV decode kernel and its merge, the prefill kernel), so they are compared with it. FULL replays one
    graph per token count of the unified attention kernel (no KV splits: another reduction order), so its
    graphs are compared with the same engine once its FULL graphs are dropped: the dispatcher still picks
    FULL and the unified layout, and the graph wrapper runs the captured forward eagerly. FULL against the
    default eager engine is then a comparison of two kernels: exact in fp32; in bf16 a near-tied greedy
    choice may flip (3 of 210 sequences on the H200 at 7a5abb1, from tokens 4, 12 and 14), so there it is
    printed and bounded (5% of the sequences: a broken kernel changes most of them), not asserted exactly."""
    # The trained model in bf16; the random 0.6B in fp32, because random weights give near-tied logits and a
    # padded batch (other GEMM shapes) may round differently in bf16: that would test cuBLAS, not graphs.
    dtype = "bfloat16" if model == _models()[0] else "float32"
    # No prefix cache: the second pass of FULL's engine would find every prompt cached and compute its first token
    # in a one-row step (another GEMM shape, other bf16 rounding, and later tokens read that step's KV): that
    # compares the prefix cache, not the graphs.
    common = dict(model=model, max_model_len=512, max_num_seqs=32, dtype=dtype, seed=0, gpu_memory_utilization=0.3,
                  enable_prefix_caching=False)
    eager = LLM(**common, enforce_eager=True)
    V = min(eager.engine.model_config.vocab_size, 5000)
    batches = {b: random_prompts(V, [7 + (i * 13) % 50 for i in range(b)], seed=b) for b in range(1, 21)}
    ref = {b: _run(eager, p) for b, p in batches.items()}
    eager.shutdown()
    failures, full_vs_eager = [], []
    for mode in MODES:
        llm = LLM(**common, cudagraph_mode=mode, cudagraph_capture_sizes=SIZES)
        ptrs = {k: v.data_ptr() for k, v in llm.model_runner.input_batch.buffers().items()}
        got = {b: _run(llm, p) for b, p in batches.items()}
        print(f"{mode}: {sum(len(p) for p in batches.values())} sequences compared")
        assert ptrs == {k: v.data_ptr() for k, v in llm.model_runner.input_batch.buffers().items()}
        counts = llm.model_runner.cudagraph_dispatcher.counts
        if mode != "PIECEWISE":
            assert counts["full"] > 0, counts
        if mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
            assert counts["piecewise"] > 0, counts
        if mode == "FULL":  # graphs of any batch: prefills up to 16 tokens replay FULL graphs too
            assert counts["piecewise"] == 0 and llm.model_runner.cudagraph_dispatcher.full_sizes, counts
        assert counts["eager"] > 0  # batches above 16 (and prefills above 16 tokens in FULL_DECODE_ONLY) run eagerly
        if mode == "FULL":
            llm.model_runner.full_graph.clear()  # the same steps, the same kernels, without their graphs
            same = {b: _run(llm, p) for b, p in batches.items()}
            failures += _differences("FULL graphs vs the same kernels eagerly:", got, same)
            full_vs_eager = _differences("FULL vs eager:", got, ref)
            print(f"FULL vs the default eager engine ({dtype}): {len(full_vs_eager)} sequences differ",
                  *full_vs_eager, sep="\n  ")
            if dtype == "float32" or len(full_vs_eager) > sum(len(p) for p in batches.values()) // 20:
                failures += full_vs_eager
        else:
            failures += _differences(mode, got, ref)
        llm.shutdown()
    assert not failures, f"{len(failures)} sequences differ: {failures[:10]}"


def test_sampling_inside_replays_follows_the_seed():
    llm = LLM(_default_model(), max_model_len=256, max_num_seqs=8, cudagraph_capture_sizes=[1, 2, 4, 8],
              gpu_memory_utilization=0.3)
    p = [{"prompt_token_ids": random_prompts(500, [6], seed=3)[0]}]

    def sample(seed):
        return llm.generate(p, SamplingParams(temperature=1.0, max_tokens=24, ignore_eos=True, seed=seed),
                            use_tqdm=False)[0].outputs[0].token_ids

    a, b, c = sample(1), sample(1), sample(2)
    assert a == b and a != c
    unseeded = {tuple(llm.generate(p, SamplingParams(temperature=1.0, max_tokens=24, ignore_eos=True),
                                   use_tqdm=False)[0].outputs[0].token_ids) for _ in range(3)}
    assert len(unseeded) == 3
    assert llm.model_runner.cudagraph_dispatcher.counts["full"] > 0
    llm.shutdown()


def test_capture_failure_names_mode_and_size_and_leaves_nothing():
    from minivllm.compilation.cuda_graph import CudaGraphCaptureError

    llm = LLM(_default_model(), max_model_len=256, max_num_seqs=8, enforce_eager=True,
              gpu_memory_utilization=0.3)
    from dataclasses import replace

    from minivllm.config import CUDAGraphMode

    runner = llm.model_runner
    orig = runner.model.forward

    def bad_forward(ids, pos):
        out = orig(ids, pos)
        out.sum().item()  # a host sync: not allowed while capturing
        return out

    runner.model.forward = bad_forward
    eager_config = runner.config  # capture as a FULL_DECODE_ONLY engine would (its plain forward, sizes 1, 2)
    runner.config = replace(eager_config, cudagraph_mode=CUDAGraphMode.FULL_DECODE_ONLY, full_capture_sizes=(1, 2),
                            full_graphs_capture="plain")
    with pytest.raises(CudaGraphCaptureError, match=r"(?s)mode FULL, batch size 2.*enforce_eager=True"):
        runner.capture_model()
    assert not runner.full_graph.graphs and not runner.cudagraph_dispatcher.full_sizes
    torch.randn(4, device="cuda")  # the CUDA RNG is usable again (a failed capture leaves it "capturing")
    runner.model.forward, runner.config, runner.full_graph = orig, eager_config, None
    out = llm.generate({"prompt_token_ids": [5, 6, 7]}, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert out[0].outputs[0].token_ids
    llm.shutdown()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_full_mode_matches_eager_with_prefill_mixed_and_decode_steps(dtype):
    """vLLM's FULL: one graph of the forward per token count holds any batch (the unified attention kernel).
    A workload of prompts longer than the token budget (chunked prefill), requests joining as others finish
    (steps mixing prefill chunks with decodes) and decodes: every step replays a FULL graph, none runs
    eagerly or piecewise, and the greedy tokens are eager's, in bf16 and fp32."""
    common = dict(model=_default_model(), max_model_len=512, max_num_seqs=4, max_num_batched_tokens=64,
                  dtype=dtype, seed=0, gpu_memory_utilization=0.3)
    eager = LLM(**common, enforce_eager=True)
    vocab = min(eager.engine.model_config.vocab_size, 5000)  # the embedded model has 512 tokens
    prompts = random_prompts(vocab, [150, 90, 5, 12, 40, 200, 7, 3, 60, 25], seed=7)
    ref = _run(eager, prompts)
    eager.shutdown()
    llm = LLM(**common, cudagraph_mode="FULL", cudagraph_capture_sizes=[1, 2, 4, 8, 16, 32, 64])
    runner = llm.model_runner
    assert llm.config.cudagraph_mode == "FULL" and llm.config.cudagraph_downgrade is None
    d = runner.cudagraph_dispatcher
    assert d.full_sizes == [1, 2, 4, 8, 16, 32, 64] and not d.piecewise_sizes  # by token count (mode FULL)
    ptrs = {k: v.data_ptr() for k, v in runner.input_batch.buffers().items()}
    steps = []
    execute = runner.execute_model

    def spy(sched, prev=None):
        steps.append([s.num_new_tokens for s in sched.scheduled])
        return execute(sched, prev)

    runner.execute_model = spy
    before = dict(d.counts)
    got = _run(llm, prompts)
    counts = {k: v - before[k] for k, v in d.counts.items()}
    runner.execute_model = execute
    assert ptrs == {k: v.data_ptr() for k, v in runner.input_batch.buffers().items()}
    llm.shutdown()
    kinds = {"prefill": sum(all(n > 1 for n in s) for s in steps), "decode": sum(all(n == 1 for n in s) for s in steps),
             "mixed": sum(any(n == 1 for n in s) and any(n > 1 for n in s) for s in steps)}
    print(f"FULL {dtype}: steps {kinds}, dispatch {counts}")
    assert all(kinds.values()), kinds
    assert counts["full"] == len(steps) and counts["piecewise"] == counts["eager"] == 0, counts
    diffs = [i for i, (g, r) in enumerate(zip(got, ref)) if g != r]
    assert not diffs, f"FULL {dtype}: sequences {diffs} differ from eager"


@pytest.mark.parametrize("mode, level", [("NONE", 2), ("FULL_DECODE_ONLY", 2), ("FULL_AND_PIECEWISE", 3)])
def test_compiled_modes_match_eager_on_gpu(mode, level):
    """Inductor on CUDA, with and without graphs (an illegal memory access here was seen at level 2 when the
    KV cache was still an input of the compiled graph; it is now looked up by layer index).

    fp32 and the task's own prompts: at level >= 1 Inductor generates the norms, RoPE and SiLU that eager
    runs as hand-written Triton kernels, so bf16 rounding differs and a near-tie (e.g. after EOS with
    ignore_eos) may flip; in fp32 on confident answers the tokens must be equal."""
    from minivllm.tools import tiny_task

    model = _default_model()
    prompts = [p for p, _ in tiny_task.make_examples(6, seed=4, split="test")]
    sp = SamplingParams(temperature=0, max_tokens=12)
    common = dict(max_model_len=256, max_num_seqs=8, gpu_memory_utilization=0.3, dtype="float32")

    def run(llm):
        return [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]

    eager = LLM(model, enforce_eager=True, **common)
    ref = run(eager)
    eager.shutdown()
    llm = LLM(model, cudagraph_mode=mode, compilation_config={"mode": level},
              cudagraph_capture_sizes=[1, 2, 4, 8], **common)
    assert run(llm) == ref
    single = llm.generate(prompts[:1], sp, use_tqdm=False)[0].outputs[0].token_ids  # batch 1: padded to 2
    assert single == ref[0]
    rep = llm.compile_report()
    assert rep["graph_breaks"] == 0 and rep["recompiles_at_runtime"] == 0, rep
    llm.shutdown()


FUSED_CASES = [
    (["all"], "FULL_DECODE_ONLY", 0), (["all", "-gemv"], "FULL_DECODE_ONLY", 0), (["all", "-pdl"], "FULL_DECODE_ONLY", 0),
    (["all", "-gemv_norm"], "FULL_DECODE_ONLY", 0), (["all"], "FULL_AND_PIECEWISE", 3),
    (["all", "-decode_prefetch"], "FULL_DECODE_ONLY", 0)]


@pytest.mark.parametrize("ops,mode,level", FUSED_CASES,
                         ids=["".join(o) + f"-{m}-L{lv}" for o, m, lv in FUSED_CASES])
def test_fused_rope_kernels_match_default_on_gpu(ops, mode, level):
    """The fused kernels (default: q/k RMSNorm + RoPE, the Triton GEMV with SiLU-and-mul fused into the down
    projection and with the residual add + RMSNorm fused into qkv_proj's and gate_up_proj's, and
    programmatic dependent launch of every Triton kernel) give the unfused path's
    greedy tokens ("-qk_norm_rope": norm, norm, RoPE, store as four kernels), replayed inside
    FULL graphs, and at level 3 inside PIECEWISE graphs of compiled pieces (fp32, the task's prompts: prefill
    batches of several prompts, then decode)."""
    from minivllm.tools import tiny_task

    prompts = [p for p, _ in tiny_task.make_examples(6, seed=5, split="test")]
    sp = SamplingParams(temperature=0, max_tokens=12)
    common = dict(max_model_len=256, max_num_seqs=8, gpu_memory_utilization=0.3, dtype="float32",
                  cudagraph_mode=mode, cudagraph_capture_sizes=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    runs = []
    for custom_ops in (["all", "-qk_norm_rope", "-gemv", "-gemv_norm", "-pdl", "-decode_prefetch"], ops):
        llm = LLM(_default_model(), compilation_config={"custom_ops": custom_ops, "mode": level}, **common)
        runs.append([o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)])
        counts = dict(llm.model_runner.cudagraph_dispatcher.counts)
        if level:
            assert llm.compile_report()["graph_breaks"] == 0
        llm.shutdown()
    assert runs[0] == runs[1]
    assert counts["full"] > 0 and (level < 3 or counts["piecewise"] > 0), counts


def test_unregistered_attention_compiles_on_gpu():
    """attention_backend="unregistered" at mode 1 on CUDA. With graph breaks allowed (the labs' variant,
    compilation/variants.py): a graph break at every attention call, and the registered op's greedy tokens.
    (Seen here before the op was hidden from Dynamo: Inductor traced the raw Triton launchers, passed the
    softmax scale as fp64, then functionalized the KV-cache writes: wrong tokens on this model, an illegal
    memory access on the 0.6B.) With fullgraph, as every vLLM mode compiles, its startup fails at the first
    attention call, which is what Lab 03 shows; the next engine in the process then starts as usual."""
    prompts = [{"prompt_token_ids": p} for p in random_prompts(300, [12, 5, 30, 9], seed=3)]
    sp = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    common = dict(max_model_len=128, max_num_seqs=4, gpu_memory_utilization=0.3, cudagraph_mode="NONE")
    with pytest.raises(Exception) as failed:
        LLM(_default_model(), attention_backend="unregistered", compilation_config={"mode": 1}, **common)
    assert "torch.compiler.disable" in str(failed.value) or "Unsupported" in type(failed.value).__name__, failed.value
    runs, reports = [], []
    for backend in ("triton", "unregistered"):
        llm = LLM(_default_model(), attention_backend=backend,
                  compilation_config={"mode": 1, "allow_graph_breaks": True}, **common)
        runs.append([o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)])
        reports.append(llm.compile_report())
        llm.shutdown()
    print("unregistered compile report:", reports[1])
    assert runs[0] == runs[1]
    assert reports[0]["graph_breaks"] == 0 and reports[1]["graph_breaks"] > 0, reports


@pytest.mark.parametrize("level,full_sizes", [(None, [1, 2, 4]), (3, [2, 4])])
def test_batch_one_replays_a_size_one_full_graph_unless_compiled(level, full_sizes):
    """FULL_AND_PIECEWISE: in the default configuration the FULL graphs capture the plain forward (the
    hand-written kernels), so batch 1 replays a size-1 graph (no padding to 2: the traced forward's padding
    is for Dynamo's 0/1 specialization); with mode 3 asked for, they capture the compiled forward, which
    never sees 1 token. Piecewise sizes start at 2."""
    llm = LLM(_default_model(), max_model_len=128, max_num_seqs=4, gpu_memory_utilization=0.3,
              cudagraph_mode="FULL_AND_PIECEWISE", cudagraph_capture_sizes=[1, 2, 4],
              compilation_config=None if level is None else {"mode": level})
    d = llm.model_runner.cudagraph_dispatcher
    assert sorted(d.full_sizes) == full_sizes and min(d.piecewise_sizes) == 2
    sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    got = llm.generate({"prompt_token_ids": [5, 6, 7]}, sp, use_tqdm=False)[0].outputs[0].token_ids
    llm.shutdown()
    eager = LLM(_default_model(), max_model_len=128, max_num_seqs=4, gpu_memory_utilization=0.3,
                enforce_eager=True)
    assert got == eager.generate({"prompt_token_ids": [5, 6, 7]}, sp, use_tqdm=False)[0].outputs[0].token_ids
    eager.shutdown()


def test_pinned_gemv_configs_and_a_recaptured_graph_keep_the_tokens():
    """`scripts/maint/gemv_tune.py`'s lever: pin every GEMV shape to a config the autotuner did not pick, re-capture the
    size-1 FULL graph, and the pinned configs are what runs, with the same greedy tokens (fp32: a different
    K split only moves the last bits). Re-capturing a size that was never captured is a clear error."""
    from minivllm.kernels import gemv_configs, triton_gemv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "maint"))
    from gemv_tune import recapture_full

    gemv_configs.set_pins({}, label="autotune")
    triton_gemv.forget_picks()  # earlier tests' shapes (other models) out of the way
    llm = LLM(_default_model(), max_model_len=128, max_num_seqs=2, dtype="float32", gpu_memory_utilization=0.3,
              cudagraph_mode="FULL_DECODE_ONLY", cudagraph_capture_sizes=[1, 2])
    try:
        prompt = random_prompts(min(llm.engine.model_config.vocab_size, 5000), [11], seed=3)
        ref = _run(llm, prompt, 24)
        picks = {s: c for s, c in triton_gemv.autotuned_configs().items() if "M_PAD=1" in s}
        assert picks, "no Triton GEMV ran at batch 1"
        configs = [gemv_configs.config_dict(c) for c in triton_gemv._configs()]
        other = {s: next(c for c in configs if c != pick) for s, pick in picks.items()}
        gemv_configs.set_pins(other)
        triton_gemv.forget_picks()
        d = llm.model_runner.cudagraph_dispatcher
        recapture_full(llm.model_runner, 1)
        assert _run(llm, prompt, 24) == ref
        assert {s: c for s, c in triton_gemv.autotuned_configs().items() if "M_PAD=1" in s} == other
        assert d.counts["full"] > 0
        with pytest.raises(ValueError, match="no FULL CUDA graph of batch size 4"):
            recapture_full(llm.model_runner, 4)
        assert _run(llm, prompt, 24) == ref  # still usable
    finally:
        gemv_configs.set_pins(None)
        triton_gemv.forget_picks()
        llm.shutdown()


# ---- engines in a notebook (issue 16): memory comes back, KV sizing does not drift, threads are safe ----------
def _free_gib() -> float:
    import gc

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()[0] / 2**30


def _batch(llm, n: int, max_tokens: int = 8):
    V = min(llm.engine.model_config.vocab_size, 5000)
    return _run(llm, random_prompts(V, [16 + i % 7 for i in range(n)], seed=n), max_tokens)


@pytest.mark.parametrize("cfg", [dict(enforce_eager=True), dict(), dict(compilation_config={"mode": 3})],
                         ids=["eager", "graphs", "level3"])
def test_del_gives_the_memory_back(cfg):
    """After `del llm` + gc.collect() the device's free memory is within 1 GiB of before the engine."""
    before = _free_gib()
    llm = LLM(_default_model(), max_model_len=512, max_num_seqs=64, **cfg)
    _batch(llm, 1)
    _batch(llm, 64)
    del llm
    after = _free_gib()
    print(f"free before {before:.2f} GiB, after del {after:.2f} GiB")
    assert after > before - 1.0


def test_sixth_engine_sizes_its_kv_cache_like_the_first():
    """Six engines in turn, each dropped with plain `del`, batch-64 runs in between: the 6th engine's KV
    cache is within 1% of the 1st's (at b2aa4ed: -4.5%, and a level-3 engine after two others got 0 tokens)."""
    configs = [dict(), dict(enforce_eager=True), dict(compilation_config={"mode": 3}),
               dict(cudagraph_mode="FULL_DECODE_ONLY"), dict(cudagraph_mode="PIECEWISE"), dict()]
    kv = []
    for cfg in configs:
        llm = LLM(_default_model(), max_model_len=512, max_num_seqs=64, **cfg)
        kv.append(llm.startup_report().kv_cache_tokens)
        _batch(llm, 1)
        _batch(llm, 64)
        del llm
    print("KV tokens per engine:", kv)
    assert abs(kv[-1] - kv[0]) <= 0.01 * kv[0], kv


def test_threads_on_one_graphed_engine_give_the_serial_tokens():
    llm = LLM(_default_model(), max_model_len=256, max_num_seqs=16, cudagraph_capture_sizes=[1, 2, 4, 8, 16],
              gpu_memory_utilization=0.3)
    V = min(llm.engine.model_config.vocab_size, 5000)
    work = {t: random_prompts(V, [5 + t + 3 * i for i in range(1 + 3 * t)], seed=t) for t in range(4)}
    ref = {t: _run(llm, p) for t, p in work.items()}
    got = run_in_threads({t: lambda t=t: _run(llm, work[t]) for t in work}, reps=10, timeout=600)
    assert all(g == ref[t] for t in got for g in got[t])
    assert llm.model_runner.cudagraph_dispatcher.counts["full"] > 0
    llm.shutdown()


def test_kv_sizing_failure_says_what_holds_the_memory():
    """Memory this process holds (here a plain tensor standing for a forgotten engine) is named in the error,
    with what frees it; once freed, the same engine starts."""
    total = torch.cuda.mem_get_info()[1]
    hog = torch.empty(int(0.5 * total), dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match=r"(?s)This process holds .* GiB.*llm.shutdown\(\).*kv_cache_memory_bytes"):
        LLM(_default_model(), max_model_len=512, gpu_memory_utilization=0.5, enforce_eager=True)
    del hog
    LLM(_default_model(), max_model_len=512, gpu_memory_utilization=0.5, enforce_eager=True).shutdown()
