"""Building an engine changes nothing global to the process: not torch's default dtype (two engines built at
once in two threads keep their own dtypes), not the caller's RNG state, not os.environ (the compile cache),
not the caller's CompilationConfig; and two threads opening one compile-cache entry take turns."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
import torch

from minivllm import LLM, SamplingParams
from minivllm.compilation.cache import MANIFEST, CompileCache
from minivllm.config import CompilationConfig
from tests.helpers import run_in_threads, tiny_checkpoint


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("ckpt")))


def weight_dtypes(llm) -> set[torch.dtype]:
    return {p.dtype for p in llm.model_runner.model.parameters()}


def test_two_engines_built_at_once_keep_their_dtypes(src):
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, so constructions interleave
    try:
        got = run_in_threads({
            dtype: (lambda dtype=dtype: weight_dtypes(LLM(str(src), max_model_len=32, device="cpu", dtype=dtype)))
            for dtype in ("bfloat16", "float32")}, reps=3)
    finally:
        sys.setswitchinterval(old)
    assert got["bfloat16"] == [{torch.bfloat16}] * 3 and got["float32"] == [{torch.float32}] * 3
    assert torch.get_default_dtype() == torch.float32


def test_building_an_engine_never_sets_the_default_dtype(src, monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "set_default_dtype", lambda d: calls.append(d))
    llm = LLM(str(src), max_model_len=32, device="cpu", dtype="bfloat16")
    assert weight_dtypes(llm) == {torch.bfloat16} and calls == []


def test_the_callers_rng_state_is_left_alone(src):
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    llm = LLM(str(src), max_model_len=32, device="cpu", seed=7)
    assert torch.equal(torch.random.get_rng_state(), before)
    prompt = {"prompt_token_ids": [5, 6, 7]}
    unseeded = SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True)
    first = llm.generate(prompt, unseeded, use_tqdm=False)[0].outputs[0].token_ids
    assert torch.equal(torch.random.get_rng_state(), before)  # sampling draws from the engine's generator
    seeded = SamplingParams(temperature=1.0, max_tokens=8, seed=42, ignore_eos=True)
    a = llm.generate(prompt, seeded, use_tqdm=False)[0].outputs[0].token_ids
    torch.manual_seed(999)  # the caller's RNG does not steer the engine's sampling
    assert llm.generate(prompt, seeded, use_tqdm=False)[0].outputs[0].token_ids == a
    torch.manual_seed(5)
    again = LLM(str(src), max_model_len=32, device="cpu", seed=7)  # the engine seed reproduces too
    assert again.generate(prompt, unseeded, use_tqdm=False)[0].outputs[0].token_ids == first
    assert torch.equal(torch.random.get_rng_state(), torch.manual_seed(5).get_state())


def test_compiling_leaves_os_environ_unchanged(src, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "callers-triton"))
    before = dict(os.environ)
    llm = LLM(str(src), max_model_len=32, device="cpu",
              compilation_config={"mode": 1, "cache_dir": str(tmp_path / "cache")})
    assert dict(os.environ) == before
    assert llm.startup_report().compile["cache_dir"].startswith(str(tmp_path / "cache"))
    out = llm.generate({"prompt_token_ids": [5, 6, 7]}, SamplingParams(temperature=0, max_tokens=2), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 2


def test_two_threads_opening_one_cache_entry_take_turns(tmp_path):
    first_open, events = threading.Event(), []

    def writer() -> None:
        c = CompileCache(tmp_path, "k")
        c.open()
        (c.dir / "inductor").mkdir()
        (c.dir / "inductor" / "code.py").write_text("compiled")
        first_open.set()
        time.sleep(0.6)  # compiling, with the entry's lock held
        events.append("sealed")
        c.seal()

    def reader() -> bool:
        first_open.wait(10)
        c = CompileCache(tmp_path, "k")
        c.open()  # must wait for the writer, not take its live lock over and wipe its files
        events.append("opened")
        ok = c.warm and (c.dir / "inductor" / "code.py").read_text() == "compiled"
        c.seal()
        return ok

    got = run_in_threads({"writer": writer, "reader": reader}, reps=1, timeout=60)
    assert events == ["sealed", "opened"] and got["reader"] == [True]
    assert (tmp_path / "torch_compile_cache" / "k" / MANIFEST).is_file()


def test_llm_does_not_change_the_callers_compilation_config(src):
    cc = CompilationConfig(mode=0)
    llm = LLM(str(src), max_model_len=32, device="cpu", compilation_config=cc, cudagraph_capture_sizes=[1, 2],
              cudagraph_mode="PIECEWISE", fallback="auto")
    assert llm.config.compilation is not cc and llm.config.compilation.cudagraph_capture_sizes == [1, 2]
    assert cc == CompilationConfig(mode=0)
    assert CompilationConfig.from_any(cc) is not cc and CompilationConfig.from_any(cc) == cc
