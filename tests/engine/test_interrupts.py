"""A notebook's stop button: KeyboardInterrupt at any stage of `LLM.generate` leaves the engine as if that
call never happened (its requests dropped, every KV block free, the next call's tokens those of a fresh
engine), with sync and async scheduling, and a second interrupt during the clean-up changes nothing.

Each case makes one stage function raise KeyboardInterrupt on its Nth call, before or after doing its work
(an interrupt landing at its start or its end), runs a workload that passes every stage (queueing, admission
with chunked prefill and preemption, prefix-cache hits, the forward, sampling, output), then checks the
engine's state and runs the workload again next to a fresh engine's answer."""

from __future__ import annotations

import pytest
import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.attention import layer as attention_layer
from minivllm.engine.block_manager import BlockManager
from minivllm.engine.llm_engine import LLMEngine
from minivllm.engine.scheduler import Scheduler
from minivllm.engine.sequence import Sequence
from minivllm.layers.sampler import Sampler
from minivllm.worker.model_runner import ModelRunner
from tests.helpers import random_prompts

# 7 blocks of 8 tokens for 3 running sequences: chunked prefill (16-token budget), a queue, one preemption.
ENGINE = dict(max_num_seqs=3, num_gpu_blocks_override=7, max_model_len=56, block_size=8, max_num_batched_tokens=16)
_shared = random_prompts(512, [17], seed=3)[0]  # two full blocks every prompt starts with: prefix-cache hits
PROMPTS = [{"prompt_token_ids": _shared + p} for p in random_prompts(512, [3, 9, 1, 6], seed=4)]
# Greedy and seeded sampling: tokens that do not depend on how the steps were batched, which the prefix cache
# an interrupted call leaves behind changes. test_unseeded_sampling_... covers the engine's own random state.
PARAMS = [SamplingParams(temperature=0, max_tokens=8, ignore_eos=True),
          SamplingParams(temperature=0.8, max_tokens=7, ignore_eos=True, seed=1),
          SamplingParams(temperature=0, max_tokens=9),
          SamplingParams(temperature=0.7, top_k=20, max_tokens=6, ignore_eos=True, seed=2)]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Batches of a few tokens: one CPU thread is faster than two, and much faster on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _tokens(outs):
    return [(o.outputs[0].token_ids, o.outputs[0].finish_reason) for o in outs]


UNSEEDED_PROMPTS = [{"prompt_token_ids": p} for p in random_prompts(512, [2, 5, 3], seed=9)]
UNSEEDED = SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True)


@pytest.fixture(scope="module")
def fresh():
    """A fresh engine's tokens (sync and async give the same): the workload's, and the unseeded one's."""
    with LLM(DEFAULT_MODEL, **ENGINE) as llm:
        unseeded = _tokens(llm.generate(UNSEEDED_PROMPTS, UNSEEDED, use_tqdm=False))
        return _tokens(llm.generate(PROMPTS, PARAMS, use_tqdm=False)), unseeded


@pytest.fixture(scope="module")
def fresh_tokens(fresh):
    return fresh[0]


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "async"])
def llm(request):
    with LLM(DEFAULT_MODEL, async_scheduling=request.param, **ENGINE) as llm:
        yield llm


def _reset_rng(llm) -> None:
    """The random state a fresh engine starts from (each case starts as if it were the first call)."""
    llm.engine.model_runner.sampler.generator.manual_seed(llm.config.seed)


def _assert_idle(llm) -> None:
    eng = llm.engine
    bm = eng.block_manager
    assert not eng.scheduler.waiting and not eng.scheduler.running and eng.inflight is None
    assert all(b.ref_count == 0 for b in bm.blocks), [b for b in bm.blocks if b.ref_count]
    assert bm.num_free_blocks == bm.num_blocks
    bm.check_invariants()


def _assert_as_fresh(llm, fresh_tokens) -> None:
    """After an interrupt: idle with every block free, the next call's tokens a fresh engine's, still idle."""
    _assert_idle(llm)
    assert _tokens(llm.generate(PROMPTS, PARAMS, use_tqdm=False)) == fresh_tokens
    _assert_idle(llm)
    _reset_rng(llm)


def _interrupt(monkeypatch, owner, name: str, nth: int, after: bool, when=lambda *a, **k: True) -> dict:
    """Make owner.name raise KeyboardInterrupt on its nth call that satisfies `when` (after its work if
    `after`). Returns the call counter."""
    orig = getattr(owner, name)
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        hit = when(*args, **kwargs)
        if hit:
            calls["n"] += 1
        if hit and calls["n"] == nth and not after:
            raise KeyboardInterrupt
        res = orig(*args, **kwargs)
        if hit and calls["n"] == nth:
            raise KeyboardInterrupt
        return res

    monkeypatch.setattr(owner, name, wrapped)
    return calls


def _cache_hit(self, seq, cached_block_ids):
    return bool(cached_block_ids)


STAGES = {  # stage -> (owner, function, which calls count)
    "queueing": (Scheduler, "add", None),
    "schedule": (Scheduler, "schedule", None),
    "admission": (BlockManager, "allocate", None),
    "prefix_cache_hit": (BlockManager, "admit", _cache_hit),
    "preemption": (Scheduler, "_preempt", None),
    "forward": (ModelRunner, "run_forward", None),
    "attention_layer": (attention_layer, "unified_attention_impl", None),  # inside a forward, between layers
    "sampling": (Sampler, "__call__", None),
    "step_launched": (ModelRunner, "execute_model", None),
    "output": (LLMEngine, "_process", None),
    "append_token": (Sequence, "append_token", None),
    "finish": (Scheduler, "finish", None),
    "make_output": (LLMEngine, "make_output", None),
}
# (stage, the call interrupted, at its start or its end): early and late in the run, before and after the work.
CASES = [("queueing", 1, "end"), ("queueing", 3, "start"), ("schedule", 2, "start"), ("schedule", 4, "end"),
         ("admission", 1, "end"), ("admission", 5, "start"), ("prefix_cache_hit", 1, "end"),
         ("prefix_cache_hit", 2, "start"), ("preemption", 1, "start"), ("preemption", 1, "end"),
         ("forward", 1, "start"), ("forward", 3, "end"), ("attention_layer", 6, "start"), ("sampling", 2, "start"),
         ("sampling", 3, "end"), ("step_launched", 4, "end"), ("output", 1, "start"), ("output", 4, "end"),
         ("append_token", 5, "end"), ("finish", 1, "start"), ("finish", 1, "end"), ("make_output", 2, "start")]


@pytest.mark.parametrize("stage,nth,at", CASES, ids=[f"{s}-{n}-{a}" for s, n, a in CASES])
def test_interrupt_leaves_the_engine_as_if_the_call_never_happened(llm, fresh_tokens, monkeypatch, stage, nth, at):
    owner, name, when = STAGES[stage]
    _reset_rng(llm)
    with monkeypatch.context() as m:
        calls = _interrupt(m, owner, name, nth, at == "end", when or (lambda *a, **k: True))
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)
        assert calls["n"] == nth
    _assert_as_fresh(llm, fresh_tokens)


@pytest.mark.parametrize("second", ["abort_all", "reconcile", "discard_inflight", "twice_in_reconcile"])
def test_second_interrupt_during_the_clean_up(llm, fresh_tokens, monkeypatch, second):
    """The user presses stop again while the engine cleans up after the first interrupt."""
    _reset_rng(llm)
    with monkeypatch.context() as m:
        _interrupt(m, ModelRunner, "run_forward", 4, False)
        if second == "abort_all":
            _interrupt(m, Scheduler, "abort_all", 1, False)
        elif second == "reconcile":
            _interrupt(m, BlockManager, "reconcile", 1, False)
        elif second == "discard_inflight":
            _interrupt(m, LLMEngine, "discard_inflight", 1, False)
        else:
            _interrupt(m, BlockManager, "reconcile", 1, False)
            _interrupt(m, BlockManager, "reconcile", 2, False)
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    _assert_as_fresh(llm, fresh_tokens)


def test_interrupt_midway_through_freeing_a_block_table(llm, fresh_tokens, monkeypatch):
    """An interrupt inside BlockManager.free (some references dropped, the table not yet cleared) must not
    drop them twice."""
    _reset_rng(llm)
    orig = BlockManager.free
    calls = {"n": 0}

    def half_free(self, seq):
        calls["n"] += 1
        if calls["n"] == 2 and len(seq.block_table) > 1:
            b = self.blocks[seq.block_table[-1]]
            b.ref_count -= 1
            if b.ref_count == 0:
                self.free_queue[b.block_id] = None
            raise KeyboardInterrupt
        return orig(self, seq)

    with monkeypatch.context() as m:
        m.setattr(BlockManager, "free", half_free)
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    _assert_as_fresh(llm, fresh_tokens)


def test_a_real_sigint_during_the_clean_up_waits_for_its_end(llm, fresh_tokens, monkeypatch):
    """Ctrl-C (the signal itself, not a raised exception) while the clean-up runs: held back, then raised."""
    import os
    import signal

    _reset_rng(llm)
    orig = BlockManager.reconcile
    done = []

    def signalled(self, live):
        os.kill(os.getpid(), signal.SIGINT)  # delivered to this (main) thread at the next bytecode
        orig(self, live)
        done.append(True)

    with monkeypatch.context() as m:
        _interrupt(m, ModelRunner, "run_forward", 2, False)
        m.setattr(BlockManager, "reconcile", signalled)
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    assert done == [True]  # ran to its end once, the signal waiting for it
    _assert_as_fresh(llm, fresh_tokens)


@pytest.mark.parametrize("fallback", [None, "auto"])
def test_interrupt_during_startup_stops_it(monkeypatch, fallback):
    """Ctrl-C during compile, also when a compile worker or a library re-raises it as its own error: the
    fallback ladder does not try the next rung, and LLM() raises KeyboardInterrupt."""
    from minivllm.compilation import levels

    calls = []

    def interrupted_compile(*args, **kwargs):
        calls.append(1)
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise RuntimeError("compile worker exited") from e

    monkeypatch.setattr(levels, "compile_model", interrupted_compile)
    with pytest.raises(KeyboardInterrupt):
        LLM(DEFAULT_MODEL, max_model_len=64, compilation_config={"mode": 2, "backend": "eager"}, fallback=fallback)
    assert calls == [1]
