"""torch.compile levels on the CPU (Inductor's CPU backend): same greedy tokens as eager, zero graph breaks
with registered ops, visible breaks without, one trace for all batch sizes, a compile cache that is reused
and survives corruption, and the fallback ladder ending in a working engine."""

from __future__ import annotations

import logging

import pytest

from minivllm import LLM, SamplingParams
from minivllm.compilation.diagnose import NumericsError, diagnose
from minivllm.compilation.levels import INDUCTOR_DEFAULTS
from tests.helpers import random_prompts, tiny_checkpoint

PARAMS = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c"))))


@pytest.fixture(scope="module")
def prompts():
    return [{"prompt_token_ids": p} for p in random_prompts(500, [3, 11, 20, 6, 1], seed=21)]


@pytest.fixture(scope="module")
def eager_tokens(ckpt, prompts):
    llm = LLM(ckpt, max_model_len=64, enforce_eager=True)
    return [o.outputs[0].token_ids for o in llm.generate(prompts, PARAMS, use_tqdm=False)]


def tokens(llm, prompts):
    return [o.outputs[0].token_ids for o in llm.generate(prompts, PARAMS, use_tqdm=False)]


@pytest.mark.parametrize("level", [1, 2, 3])
def test_levels_match_eager_without_breaks(ckpt, prompts, eager_tokens, level, tmp_path):
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": level, "backend": "eager",
                                                          "cache_dir": str(tmp_path)})
    assert tokens(llm, prompts) == eager_tokens
    assert tokens(llm, prompts[1:2]) == eager_tokens[1:2]  # decode steps of a single token (batch 1)
    rep = llm.compile_report()
    assert rep["graph_breaks"] == 0, rep
    if level >= 2:  # one trace serves every batch size: 1..5 sequences, prefill and decode
        assert rep["recompiles_at_runtime"] == 0, rep
    if level == 3:
        assert rep["attention_splits"] == 2 and rep["pieces"] == 3, rep  # 2 layers -> 3 pieces
        # the split graph's own code calls attention's kernel, and its pieces are plain callables (call_directly)
        split_gm = llm.model_runner.compiled.split_backend._split_gms[0]()
        assert split_gm.code.count("unified_attention_impl(") == 2 and not list(split_gm.named_children())


def test_unregistered_attention_breaks_the_graph(ckpt, prompts, eager_tokens):
    """allow_graph_breaks (mode 1 only) turns the untraceable op into graph breaks; without it every mode
    compiles with fullgraph=True, as vLLM does, so the same op is a startup error."""
    llm = LLM(ckpt, max_model_len=64, attention_backend="unregistered",
              compilation_config={"mode": 1, "backend": "eager", "allow_graph_breaks": True})
    assert tokens(llm, prompts) == eager_tokens
    rep = llm.compile_report()
    assert rep["graph_breaks"] > 0, rep
    for mode in (1, 2):
        with pytest.raises(Exception) as info:  # fullgraph cannot trace it at all
            LLM(ckpt, max_model_len=64, attention_backend="unregistered",
                compilation_config={"mode": mode, "backend": "eager"})
        assert diagnose(info.value).layer == "compile"


def test_inductor_cache_warm_start_and_corruption(ckpt, prompts, eager_tokens, tmp_path, caplog):
    cc = {"mode": 3, "backend": "inductor", "cache_dir": str(tmp_path)}
    cold = LLM(ckpt, max_model_len=64, compilation_config=cc)
    assert tokens(cold, prompts) == eager_tokens
    assert cold.compile_report()["cache_warm"] is False
    split = cold.startup_report().compile  # Dynamo's share and the backend's (AOT + Inductor) share
    assert split["dynamo_s"] > 0 and split["backend_s"] > 0
    assert split["dynamo_s"] + split["backend_s"] <= split["seconds"] + 0.05
    warm = LLM(ckpt, max_model_len=64, compilation_config=cc)
    assert warm.compile_report()["cache_warm"] is True
    # the warm start calls the saved graph and compiled pieces directly: Dynamo does not run (graph_cache)
    assert warm.startup_report().compile.get("dynamo_skipped") is True
    assert warm.compile_report()["graphs_traced_at_startup"] == 0
    assert warm.compile_report()["compiled_pieces"] == cold.compile_report()["compiled_pieces"]
    assert tokens(warm, prompts) == eager_tokens
    assert warm.compile_report()["recompiles_at_runtime"] == 0
    entry = next(tmp_path.glob("torch_compile_cache/*"))
    victim = next(p for p in sorted(entry.rglob("*")) if p.is_file() and p.name != "minivllm_manifest.json")
    victim.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="minivllm"):
        rebuilt = LLM(ckpt, max_model_len=64, compilation_config=cc)
    assert "corrupted" in caplog.text
    assert rebuilt.compile_report()["cache_warm"] is False
    assert tokens(rebuilt, prompts) == eager_tokens


def test_a_saved_graph_that_does_not_load_is_traced_again(ckpt, prompts, eager_tokens, tmp_path, caplog):
    """A warm entry whose saved graph cannot be used (here: written by another minivllm version, with a
    valid manifest) is not trusted: the start traces with Dynamo again, rewrites it, and stays correct."""
    import json

    from minivllm.compilation.cache import CompileCache

    cc = {"mode": 3, "backend": "inductor", "cache_dir": str(tmp_path)}
    LLM(ckpt, max_model_len=64, compilation_config=cc)
    entry = next(tmp_path.glob("torch_compile_cache/*"))
    meta = json.loads((entry / "graph.json").read_text())
    (entry / "graph.json").write_text(json.dumps({**meta, "version": -1}))
    CompileCache(tmp_path, entry.name).seal()  # checksums match again: only the graph cache can object
    with caplog.at_level(logging.WARNING, logger="minivllm"):
        llm = LLM(ckpt, max_model_len=64, compilation_config=cc)
    assert "Could not load the traced graph" in caplog.text
    assert llm.compile_report()["cache_warm"] is True and llm.compile_report()["graphs_traced_at_startup"] == 1
    assert tokens(llm, prompts) == eager_tokens
    assert json.loads((entry / "graph.json").read_text())["version"] == meta["version"]  # rewritten


def test_fallback_ladder_after_injected_compile_failure(ckpt, prompts, eager_tokens, monkeypatch):
    import minivllm.compilation.levels as levels

    real = levels.compile_model

    def failing(model, model_config, config, warm_up):
        if config.compilation.level > 0:
            raise RuntimeError("torch._inductor.exc.InductorError: injected failure")
        return real(model, model_config, config, warm_up)

    monkeypatch.setattr(levels, "compile_model", failing)
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 2}, fallback="auto", verify=True)
    steps = llm.fallback_report
    assert steps[0] == {"step": "as configured", "compilation_mode": 2, "cudagraph_mode": "NONE", "ok": False,
                        "layer": "compile", "error": steps[0]["error"]}
    assert steps[-1] == {"step": "torch.compile off", "compilation_mode": 0, "cudagraph_mode": "NONE", "ok": True}
    assert tokens(llm, prompts) == eager_tokens


def test_fallback_ladder_after_injected_graph_failure(ckpt, prompts, eager_tokens, monkeypatch):
    from minivllm.compilation.cuda_graph import CudaGraphCaptureError
    from minivllm.worker.worker import Worker

    def failing(self):
        if self.config.compilation.cudagraph_mode != "NONE":
            raise CudaGraphCaptureError("CUDA graph capture failed (mode FULL, batch size 8): injected")

    monkeypatch.setattr(Worker, "capture_model", failing)
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 2, "backend": "eager",
                                                          "cudagraph_mode": "FULL"}, fallback="auto")
    assert [s["ok"] for s in llm.fallback_report] == [False, True]
    assert llm.fallback_report[0]["layer"] == "graph"
    assert llm.report.compile["level"] == 2  # compile kept, graphs dropped
    assert tokens(llm, prompts) == eager_tokens


def test_verify_catches_a_silently_wrong_path(ckpt, monkeypatch):
    import minivllm.compilation.levels as levels

    real = levels.compile_model

    def corrupting(model, model_config, config, warm_up):
        compiled = real(model, model_config, config, warm_up)
        if config.compilation.level > 0:
            fwd = model.forward
            compiled.forward = lambda ids, pos: fwd(ids, pos) * -1.0  # a "fused" op that flips the sign
        return compiled

    monkeypatch.setattr(levels, "compile_model", corrupting)
    with pytest.raises(NumericsError, match="greedy probes differ"):
        LLM(ckpt, max_model_len=64, compilation_config={"mode": 1, "backend": "eager"}, verify=True)
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 1, "backend": "eager"}, verify=True,
              fallback="auto")
    assert llm.fallback_report[0]["layer"] == "numerics"


def test_a_second_model_family_keeps_module_floats_constant(ckpt, tmp_path_factory, monkeypatch):
    """Dynamo's automatic dynamic would turn RMSNorm eps / attention scale into per-call tensor inputs once
    a model with other values was compiled in the process; a CUDA graph cannot read those (seen on the GPU
    as 'piecewise graph 0: input 3 moved since capture')."""
    from minivllm.compilation import backend

    lifted = []
    orig = backend.SplitBackend.__call__

    def spy(self, gm, example_inputs):
        lifted.extend(n.name for n in gm.graph.nodes if n.op == "placeholder" and n.name.endswith(("eps", "scale")))
        return orig(self, gm, example_inputs)

    monkeypatch.setattr(backend.SplitBackend, "__call__", spy)
    other = str(tiny_checkpoint("llama-gqa4-d32", str(tmp_path_factory.mktemp("o"))))
    for path in (ckpt, other):  # two families, two eps values, one process
        llm = LLM(path, max_model_len=64, compilation_config={"mode": 3, "backend": "eager"})
        assert tokens(llm, [{"prompt_token_ids": [1, 2, 3]}])
    assert not lifted, lifted


def test_identical_pieces_share_one_compilation():
    """Layers differ only in their weights (graph inputs), so their pieces must hash the same; a different
    constant or input shape must not."""
    import torch
    import torch.fx as fx

    from minivllm.compilation.backend import piece_structure_key

    def layer(x, w, eps: float = 1e-6):
        return torch.nn.functional.linear(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), w)

    def traced(eps):
        gm = fx.symbolic_trace(lambda x, w: layer(x, w, eps))
        return gm

    a, b = traced(1e-6), traced(1e-6)
    for i, n in enumerate(n for n in b.graph.nodes if n.op == "placeholder"):
        n.name = f"layer_7_input_{i}"  # other layer, other names
    args = [torch.randn(4, 8), torch.randn(8, 8)]
    assert piece_structure_key(a, args) == piece_structure_key(b, args)
    assert piece_structure_key(a, args) != piece_structure_key(traced(1e-5), args)
    assert piece_structure_key(a, args) != piece_structure_key(a, [torch.randn(4, 16), torch.randn(8, 16)])


def test_compile_sizes_add_static_pieces(ckpt, prompts, eager_tokens, monkeypatch, tmp_path):
    """Level 3 with compile_sizes: each distinct piece is also compiled for that exact token count, steps of
    that size run it (5 decode rows here), and the tokens stay eager's; other levels refuse the option."""
    from minivllm.compilation import backend

    hits = []
    orig = backend.SizeDispatch.__call__

    def spy(self, *args):
        hits.append(args[self.size_arg].shape[0] in self.static)
        return orig(self, *args)

    monkeypatch.setattr(backend.SizeDispatch, "__call__", spy)
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 3, "compile_sizes": [5],
                                                          "cache_dir": str(tmp_path)})
    assert tokens(llm, prompts) == eager_tokens
    rep = llm.compile_report()
    assert rep["static_size_compiles"] == rep["compiled_pieces"] and rep["recompiles_at_runtime"] == 0
    assert any(hits) and not all(hits)  # decode steps of 5 tokens: static; prefills: the dynamic version
    hits.clear()  # a warm start loads the static versions too, without Dynamo
    warm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 3, "compile_sizes": [5],
                                                           "cache_dir": str(tmp_path)})
    assert warm.startup_report().compile.get("dynamo_skipped") is True
    assert warm.compile_report()["static_size_compiles"] == rep["static_size_compiles"]
    assert tokens(warm, prompts) == eager_tokens
    assert any(hits) and not all(hits)
    with pytest.raises(ValueError, match="compile_sizes needs mode 3"):
        LLM(ckpt, max_model_len=64, compilation_config={"mode": 2, "compile_sizes": [5]})


def test_inductor_compile_config_reaches_inductor(ckpt, prompts, eager_tokens, monkeypatch, tmp_path):
    """compilation_config.inductor_compile_config: Inductor config patches for every piece it compiles at
    level 3 (vLLM's knob of that name); the tokens stay eager's; levels without Inductor refuse it."""
    import torch._inductor

    seen = []
    orig = torch._inductor.standalone_compile

    def spy(*args, **kwargs):
        seen.append(kwargs.get("options"))
        return orig(*args, **kwargs)

    monkeypatch.setattr(torch._inductor, "standalone_compile", spy)
    patches = {"epilogue_fusion": False, "max_autotune": False, "size_asserts": True}  # the user's patch wins
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 3, "inductor_compile_config": patches,
                                                          "cache_dir": str(tmp_path)})
    assert tokens(llm, prompts) == eager_tokens
    assert seen and all(o == {"config_patches": {**INDUCTOR_DEFAULTS, **patches}} for o in seen)
    # the pieces' graph wrappers call the compiled code itself, without a module call around it
    assert all(not isinstance(w.runnable, torch.nn.Module) for w in llm.model_runner.compiled.piecewise_wrappers)
    for bad in ({"mode": 0, "inductor_compile_config": patches},
                {"mode": 3, "backend": "eager", "inductor_compile_config": patches},
                {"mode": 3, "inductor_compile_config": ["max_autotune"]}):
        with pytest.raises(ValueError, match="inductor_compile_config"):
            LLM(ckpt, max_model_len=64, compilation_config=bad)


@pytest.mark.parametrize("error, layer, walked", [
    (RuntimeError("torch._inductor.exc.InductorError: boom"), "compile",
     ["as configured", "torch.compile off"]),  # compile off first, graphs kept
    (RuntimeError("torch._dynamo.exc.Unsupported: Data-dependent branching"), "compile",
     ["as configured", "both off"]),  # a host read: graphs would fail too
    ("graph", "graph", ["as configured", "CUDA graphs off"]),  # graphs off first, compile kept
])
def test_the_ladder_turns_off_the_layer_at_fault_first(error, layer, walked, monkeypatch):
    """The rungs follow the diagnosis (handbook §4.6): each one a config resolved anew from the arguments
    (CUDA-shaped here) with one layer off, started by a fake worker."""
    import contextlib
    from types import SimpleNamespace

    import torch

    from minivllm.compilation.cuda_graph import CudaGraphCaptureError
    from minivllm.config import CompilationConfig, EngineConfig
    from minivllm.engine import fallback
    from minivllm.engine_args import EngineArgs

    def resolve(self):  # as on a GPU, without a checkpoint
        comp = CompilationConfig.from_any(self.compilation_config, cudagraph_mode=self.cudagraph_mode)
        return EngineConfig.resolve(model="m", device=torch.device("cuda"), fallback="auto", compilation=comp), None

    runs = []

    def start_worker(cfg, model_config, report, reference=None):
        mode, graphs = int(cfg.compile_mode), cfg.cudagraph_mode.value
        runs.append((mode, graphs))
        if error == "graph" and graphs != "NONE":
            raise CudaGraphCaptureError("CUDA graph capture failed (mode FULL, batch size 8): injected")
        if error != "graph" and (mode > 0 if walked[-1] == "torch.compile off" else (mode > 0 or graphs != "NONE")):
            raise error
        return "worker"

    monkeypatch.setattr(EngineArgs, "create_engine_config", resolve)
    monkeypatch.setattr(fallback, "start_worker", start_worker)
    monkeypatch.setattr(fallback, "load_tokenizer", lambda *a: None)
    monkeypatch.setattr(fallback, "LLMEngine", lambda cfg, mc, tok, worker, eos, record: SimpleNamespace(record=record))
    monkeypatch.setattr(fallback, "log_config", lambda *a: None)
    report = fallback.start_engine(EngineArgs(compilation_config={"mode": 3}, fallback="auto"),
                                   SimpleNamespace(phase=lambda *a: contextlib.nullcontext())).record
    assert [r["step"] for r in report] == walked and report[0]["layer"] == layer
    assert [r["ok"] for r in report] == [False, True]
    assert (report[-1]["compilation_mode"], report[-1]["cudagraph_mode"]) == runs[-1]
    if walked[-1] == "torch.compile off":
        assert runs[-1] == (0, "FULL_DECODE_ONLY")  # mode 0 keeps the graphs it can hold


def test_diagnose_speaks_vllm_and_never_repeats_a_failed_rung():
    from minivllm.compilation.diagnose import diagnose

    compile_error = RuntimeError("torch._inductor.exc.InductorError: boom")
    d = diagnose(compile_error)
    assert d.rungs == ("torch.compile off", "both off") and "compilation_config mode 0" in d.suggestion
    assert "keep graphs" not in d.suggestion and "level" not in d.suggestion
    d = diagnose(compile_error, failed=["as configured", "torch.compile off"])
    assert d.rungs == ("both off",) and d.suggestion.startswith("compilation_config mode 0 and cudagraph_mode NONE")
    # the recorded compile fault of Lab 05 (a branch on a tensor's value): mode 0 with graphs failed there too
    recorded = RuntimeError("torch._dynamo.exc.Unsupported: Data-dependent branching / Explanation: Detected "
                            "data-dependent branching (e.g. `if my_tensor.sum() > 0:`).")
    d = diagnose(recorded)
    assert d.layer == "compile" and d.rungs == ("both off",) and "cudagraph_mode NONE" in d.suggestion
