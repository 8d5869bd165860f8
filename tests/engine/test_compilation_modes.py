"""vLLM's compilation modes and CUDA-graph modes, with vLLM's meanings, checked on the CPU.

Mode 0 (NONE) runs no Dynamo at all; `level` is a deprecated alias of `mode`; a piecewise graph mode at a
mode without the split trace, and FULL with an attention backend that has no kernel a graph can hold for
mixed batches (anything but the Triton one), are downgraded as vLLM downgrades them (one log line, and
`llm.config` names the mode used); mode 2 drops Dynamo's guards after its one trace.
"""

from __future__ import annotations

import logging

import pytest
import torch

from minivllm import LLM, SamplingParams
from minivllm.config import CompilationConfig, CompilationMode, CUDAGraphMode, EngineConfig
from tests.helpers import random_prompts, tiny_checkpoint

PARAMS = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c"))))


def _prompts(lengths):
    return [{"prompt_token_ids": p} for p in random_prompts(500, lengths, seed=5)]


def test_mode_0_traces_nothing(ckpt, monkeypatch):
    def no_compile(*args, **kwargs):
        raise AssertionError("mode 0 called torch.compile")

    monkeypatch.setattr(torch, "compile", no_compile)  # Dynamo is reached only through torch.compile
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 0})
    llm.generate(_prompts([3, 9, 1]), PARAMS, use_tqdm=False)
    rep = llm.compile_report()
    assert rep["graphs_traced_at_startup"] == 0 and rep["recompiles_at_runtime"] == 0, rep
    assert llm.config.compile_mode is CompilationMode.NONE


def test_level_is_a_deprecated_alias_of_mode():
    with pytest.warns(DeprecationWarning, match="'level' is deprecated"):
        c = CompilationConfig.from_any({"level": 2})
    assert c.mode == 2 and c.level == 2
    with pytest.raises(ValueError, match="both 'mode' and its deprecated alias 'level'"):
        CompilationConfig.from_any({"level": 2, "mode": 3})
    with pytest.raises(ValueError, match="unknown keys"):
        CompilationConfig.from_any({"modes": 3})


def test_default_is_mode_3_with_hand_written_kernels_on_cuda_and_mode_0_on_cpu():
    c = CompilationConfig()
    assert EngineConfig.resolve(model="m", device=CUDA, compilation=c).compile_mode is CompilationMode.VLLM_COMPILE
    assert EngineConfig.resolve(model="m", compilation=c).compile_mode is CompilationMode.NONE
    assert c.resolved_custom_ops() == ["all"]
    assert CompilationConfig(mode=3).resolved_custom_ops() == ["none"]  # asked-for compile: Inductor's ops
    cfg = EngineConfig.resolve(model="m", device=CUDA)
    assert cfg.compile_mode is CompilationMode.VLLM_COMPILE
    assert cfg.cudagraph_mode is CUDAGraphMode.FULL_AND_PIECEWISE and cfg.cudagraph_downgrade is None
    assert EngineConfig.resolve(model="m", device=CUDA, enforce_eager=True).compile_mode is CompilationMode.NONE


@pytest.mark.parametrize("mode, asked, runs", [
    (0, "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"),  # vLLM -O0: no split trace, decode-only full graphs
    (1, "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"),
    (2, "PIECEWISE", "NONE"),
    (0, "PIECEWISE", "NONE"),
    (3, "PIECEWISE", "PIECEWISE"),
    (3, "FULL", "FULL"),  # the unified Triton kernel: full graphs of any batch
    (0, "FULL", "FULL"),  # no split trace needed
    (0, "FULL_DECODE_ONLY", "FULL_DECODE_ONLY"),
    (3, "NONE", "NONE"),
])
def test_graph_modes_are_downgraded_as_in_vllm(mode, asked, runs):
    cfg = EngineConfig.resolve(model="m", device=CUDA, compilation=CompilationConfig(mode=mode, cudagraph_mode=asked))
    assert cfg.cudagraph_mode is CUDAGraphMode(runs)
    if asked == runs:
        assert cfg.cudagraph_downgrade is None
    else:
        assert cfg.cudagraph_downgrade.startswith(f"cudagraph_mode {asked} -> {runs}:")


@pytest.mark.parametrize("mode, runs", [(3, "PIECEWISE"), (0, "NONE")])
def test_full_is_downgraded_without_the_unified_kernel(mode, runs):
    """The PyTorch reference attention has no kernel a full graph can hold: vLLM's downgrade to PIECEWISE,
    and NONE where there is no split trace either."""
    cfg = EngineConfig.resolve(model="m", device=CUDA, attention_backend="torch",
                       compilation=CompilationConfig(mode=mode, cudagraph_mode="FULL"))
    assert cfg.cudagraph_mode is CUDAGraphMode(runs)
    assert cfg.cudagraph_downgrade.startswith(f"cudagraph_mode FULL -> {runs}: attention_backend 'torch'")


def test_the_startup_log_names_the_modes_used(ckpt, caplog):
    with caplog.at_level(logging.INFO, logger="minivllm"):
        llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 0, "cudagraph_mode": "PIECEWISE"})
    assert "compilation mode=0 (NONE)" in caplog.text
    assert llm.config.cudagraph_mode is CUDAGraphMode.NONE  # a CPU has no graphs at all


def test_mode_2_traces_once_and_drops_the_guards(ckpt):
    eager = LLM(ckpt, max_model_len=64, enforce_eager=True)
    prompts = _prompts([3, 11, 1, 6])
    want = [o.outputs[0].token_ids for o in eager.generate(prompts, PARAMS, use_tqdm=False)]
    llm = LLM(ckpt, max_model_len=64, compilation_config={"mode": 2, "backend": "eager"})
    got = [o.outputs[0].token_ids for o in llm.generate(prompts, PARAMS, use_tqdm=False)]
    got += [o.outputs[0].token_ids for o in llm.generate(prompts[2:3], PARAMS, use_tqdm=False)]
    assert got == want + want[2:3]
    assert llm.startup_report().compile.get("guards_dropped") is True
    assert llm.compile_report()["recompiles_at_runtime"] == 0


@pytest.mark.parametrize("cc", [{"mode": 2, "allow_graph_breaks": True}, {"mode": 3, "compile_scope": "layer"},
                                {"mode": 0, "compile_sizes": [8]}])
def test_options_a_mode_does_not_have_are_refused(cc):
    with pytest.raises(ValueError, match="needs mode"):
        CompilationConfig.from_any(cc)
