"""Engines in a notebook: `del` frees, `with` and `shutdown()` end an engine, several engines and threads
do not disturb each other (CPU; the GPU halves are in tests/engine/test_cuda_graphs_gpu.py)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers import random_prompts, run_in_threads, tiny_checkpoint

PARAMS = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c"))))


@pytest.fixture(scope="module")
def prompts():
    return [{"prompt_token_ids": p} for p in random_prompts(500, [3, 11, 7, 5], seed=5)]


def tokens(llm, prompts, params=PARAMS):
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]


@pytest.mark.parametrize("level", [0, 2, 3])
def test_del_frees_the_model_and_kv_cache_without_gc(ckpt, prompts, level):
    """Nothing the engine built keeps it alive: plain reference counting frees it at `del` (at level 3 Dynamo
    keeps the split backend for the life of the process; it must hold the model only weakly)."""
    cc = {"mode": level, "backend": "eager"} if level else None
    llm = LLM(ckpt, max_model_len=64, compilation_config=cc, enforce_eager=level == 0)
    tokens(llm, prompts[:2])
    model, kv = weakref.ref(llm.model_runner.model), weakref.ref(llm.model_runner.kv_cache)
    gc.disable()
    try:
        del llm
        assert model() is None and kv() is None
    finally:
        gc.enable()


def test_shutdown_is_idempotent_and_generate_after_it_says_so(ckpt, prompts):
    llm = LLM(ckpt, max_model_len=64, enforce_eager=True)
    model = weakref.ref(llm.model_runner.model)
    llm.shutdown()
    llm.shutdown()
    gc.collect()
    assert model() is None
    with pytest.raises(RuntimeError, match="shut down"):
        llm.generate(prompts, PARAMS, use_tqdm=False)


def test_with_block_shuts_down_on_exit(ckpt, prompts):
    with LLM(ckpt, max_model_len=64, enforce_eager=True) as llm:
        assert tokens(llm, prompts[:1])
        model = weakref.ref(llm.model_runner.model)
    gc.collect()
    assert model() is None
    with pytest.raises(RuntimeError, match="shut down"):
        llm.generate(prompts, PARAMS, use_tqdm=False)


def test_two_threads_on_one_llm_give_the_serial_tokens(ckpt):
    llm = LLM(ckpt, max_model_len=64, enforce_eager=True)
    work = {t: [{"prompt_token_ids": p} for p in random_prompts(500, [4 + t, 9, 2 + 2 * t], seed=t)]
            for t in range(2)}
    ref = {t: tokens(llm, work[t]) for t in work}
    got = run_in_threads({t: lambda t=t: tokens(llm, work[t]) for t in work}, reps=6)
    assert all(g == ref[t] for t in got for g in got[t]) and all(len(got[t]) == 6 for t in got)


def test_generate_from_inside_a_step_is_refused_clearly(ckpt, prompts, monkeypatch):
    llm = LLM(ckpt, max_model_len=64, enforce_eager=True)
    runner = llm.model_runner
    orig = runner.execute_model
    seen: list[BaseException] = []

    def reentrant(sched, prev=None):
        try:
            llm.generate(prompts[:1], PARAMS, use_tqdm=False)
        except RuntimeError as e:
            seen.append(e)
        return orig(sched, prev)

    monkeypatch.setattr(runner, "execute_model", reentrant)
    out = tokens(llm, prompts[:1])  # the outer call finishes normally
    monkeypatch.undo()
    assert seen and "in use" in str(seen[0])
    assert out == tokens(llm, prompts[:1])


def test_two_live_engines_and_a_failed_one_do_not_disturb_each_other(ckpt, prompts, monkeypatch):
    eager = LLM(ckpt, max_model_len=64, enforce_eager=True)
    ref = tokens(eager, prompts)
    compiled = LLM(ckpt, max_model_len=64, compilation_config={"mode": 3, "backend": "eager"})
    with pytest.raises(ValueError):  # fails during startup (KV cache too small for max_model_len)
        LLM(ckpt, max_model_len=64, num_gpu_blocks_override=2, compilation_config={"mode": 3, "backend": "eager"})
    with pytest.raises(ValueError, match="needs a CUDA GPU"):  # refused at construction, not at the first step
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        LLM(ckpt, max_model_len=64, attention_backend="triton", device="cpu")
    assert tokens(eager, prompts) == ref and tokens(compiled, prompts) == ref
    rep = compiled.compile_report()
    assert rep["recompiles_at_runtime"] == 0, rep  # the failed engine reset nothing of this one
    del compiled
    again = LLM(ckpt, max_model_len=64, compilation_config={"mode": 3, "backend": "eager"})
    assert tokens(again, prompts) == ref


def test_forward_context_is_per_thread():
    from minivllm.attention.metadata import get_forward_context, set_forward_context

    seen = []
    with set_forward_context(None, "torch"):
        t = threading.Thread(target=lambda: seen.append(_context_or_error(get_forward_context)))
        t.start()
        t.join()
        assert get_forward_context().backend == "torch"
    assert "outside set_forward_context" in seen[0]


def _context_or_error(get) -> str:
    try:
        return repr(get())
    except RuntimeError as e:
        return str(e)


def test_kv_too_small_message_names_what_this_process_holds(monkeypatch):
    """The CUDA branch of the message, with the device's memory figures faked on a CPU."""
    from types import SimpleNamespace

    import torch

    from minivllm.worker.startup import GiB, kv_too_small_message

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (2 * GiB, 80 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda: 70 * GiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: 66 * GiB)
    cfg = SimpleNamespace(device=torch.device("cuda"), cache=SimpleNamespace(gpu_memory_utilization=0.9))
    msg = kv_too_small_message(0, 4096, cfg, live_engines=2)
    assert "holds 0 tokens, fewer than max_model_len=4096" in msg
    assert "This process holds 70.00 GiB of the GPU's 80.00 GiB (66.00 GiB in live tensors" in msg
    assert "2 other engine(s)" in msg and "other processes use 8.00 GiB" in msg
    assert "`del llm` or `llm.shutdown()`" in msg and "gpu_memory_utilization (now 0.9)" in msg
    assert "kv_cache_memory_bytes" in msg
