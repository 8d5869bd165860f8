"""Batch-invariant mode on the CPU: how it is turned on (LLM keyword, flag, vLLM's VLLM_BATCH_INVARIANT), what
it selects, and the embedded model's logprobs for a prompt alone and in a batch, bitwise.

What invariance means on a CPU: the engine runs the "torch" backend there, so batch_invariant runs each row's
matmul as its own F.linear and each sequence's attention on its own (the batched decode reference is one
einsum over the batch, and MKL's result for a row changed with the batch: measured, the default engine's
decode logprobs differed in the last bits between alone and a batch of six). The Triton kernels' invariance
is tested in tests/kernels/test_batch_invariance.py (interpreter) and tests/engine/test_batch_invariance_gpu.py.
"""

from __future__ import annotations

import pytest
import torch

from minivllm import LLM, SamplingParams
from minivllm.config import CompilationConfig, EngineConfig
from minivllm.engine_args import EngineArgs
from minivllm.layers.custom_op import CustomOpSelection


def test_off_by_default_on_by_keyword_flag_or_vllm_environment_variable(monkeypatch):
    import argparse

    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    assert not EngineArgs().create_engine_config()[0].batch_invariant
    assert EngineArgs(batch_invariant=True).create_engine_config()[0].batch_invariant
    args = EngineArgs.add_cli_args(argparse.ArgumentParser()).parse_args(["--batch-invariant"])
    assert EngineArgs.from_cli_args(args).create_engine_config()[0].batch_invariant
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    assert EngineArgs().create_engine_config()[0].batch_invariant
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "yes")
    with pytest.raises(ValueError, match="VLLM_BATCH_INVARIANT must be an integer"):
        EngineArgs().create_engine_config()
    with pytest.raises(ValueError, match="batch_invariant must be True or False"):
        EngineConfig.resolve(model="m", batch_invariant="yes")


def test_the_selection_drops_the_gemv_and_keeps_the_triton_norms_under_inductor():
    pytest.importorskip("triton")  # the "triton" backend on a CPU: TRITON_INTERPRET=1 (conftest.py)
    cfg = EngineConfig.resolve(model="m", attention_backend="triton", batch_invariant=True,
                       compilation=CompilationConfig(mode=3))  # mode 3 asked: custom ops "none" (Inductor's)
    sel = CustomOpSelection.for_engine(cfg)
    assert sel.batch_invariant and sel.enabled == {"rms_norm", "qk_norm_rope"}
    full = CustomOpSelection.for_engine(EngineConfig.resolve(model="m", attention_backend="triton", batch_invariant=True))
    assert {"gemv", "gemv_norm"}.isdisjoint(full.enabled) and {"rms_norm", "pdl"} <= full.enabled
    assert not CustomOpSelection.for_engine(EngineConfig.resolve(model="m", attention_backend="triton")).batch_invariant


def _logprobs(llm, prompts, target, n=5):
    sp = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, logprobs=2)
    out = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)[target].outputs[0]
    return out.token_ids, [[(t, lp.logprob) for t, lp in sorted(d.items())] for d in out.logprobs]


def test_a_prompt_alone_and_in_a_batch_gets_the_same_logprobs_bitwise():
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 400, (n,), generator=g).tolist() for n in (5, 11, 17, 3, 8)]
    llm = LLM(device="cpu", max_model_len=64, enable_prefix_caching=False, batch_invariant=True)
    assert llm.config.batch_invariant
    alone = _logprobs(llm, [prompts[1]], 0)
    assert _logprobs(llm, prompts, 1) == alone  # tokens and every logprob, compared as floats: bitwise
    assert _logprobs(llm, prompts[1:3], 0) == alone
