"""The last two startup phases, compile and capture, with the fallback ladder and the verify probe.

Why here: both run inside the worker's startup, on the worker's model runner; nothing above the worker is
entered until the engine is up.

The ladder (`LLM(..., fallback="auto")`): start as configured; on a failure, diagnose it
(compilation/diagnose.py) and turn off the layer at fault first, as the handbook's §4.6 says: a capture
error turns CUDA graphs off and keeps torch.compile, a compile error turns torch.compile off and keeps the
graphs a mode-0 engine can hold, a wrong result (verify) turns graphs off, then compile, then both. Every
rung is recorded (step, ok, the compilation mode and cudagraph_mode it ran, the layer and error of a
failure): `llm.fallback_report`. A rung whose settings equal an earlier one's is skipped.

The verify probe (`verify=True`): a few greedy requests through the optimized path and through the plain
eager forward, on this runner's KV cache, with a scheduler of their own; a difference is a NumericsError.
"""

from __future__ import annotations

import logging
from typing import Callable

from minivllm.compilation.diagnose import NumericsError, diagnose
from minivllm.config import CompilationMode, CUDAGraphMode, EngineConfig
from minivllm.engine.block_manager import BlockManager
from minivllm.engine.interrupt import caused_by_interrupt
from minivllm.engine.scheduler import Scheduler
from minivllm.engine.sequence import Sequence, SequenceStatus
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.startup import StartupReport

logger = logging.getLogger("minivllm")
#: What each rung turns off: (torch.compile, CUDA graphs).
OFF = {"as configured": (False, False), "CUDA graphs off": (False, True), "torch.compile off": (True, False),
       "both off": (True, True)}


def build_with_fallback(config: EngineConfig, runner: ModelRunner, report: StartupReport,
                        build: Callable[[], None]) -> list[dict]:
    """Run `build` (the worker's compile and capture phases) as configured, then verify if asked; with
    fallback="auto", walk the ladder on a failure. Returns the ladder's record (empty without fallback)."""
    if config.fallback is None:
        build()
        if config.verify:
            verify(config, runner, report)
        return []
    comp, record = config.compilation, []
    asked = comp.mode, comp.cudagraph_mode
    todo, ran = ["as configured"], set()
    while todo:
        step = todo.pop(0)
        compile_off, graphs_off = OFF[step]
        comp.mode = CompilationMode.NONE if compile_off else asked[0]
        comp.cudagraph_mode = CUDAGraphMode.NONE if graphs_off else asked[1]
        if (comp.mode, comp.cudagraph_mode) in ran:
            continue  # the same settings as a rung already tried (e.g. graphs off where none were asked for)
        ran.add((comp.mode, comp.cudagraph_mode))
        runs = (config.compile_mode, config.cudagraph_mode)
        entry = {"step": step, "compilation_mode": int(runs[0]), "cudagraph_mode": runs[1].value}
        try:
            build()
            if config.verify:
                verify(config, runner, report)
        except Exception as e:  # noqa: BLE001 - every failure is diagnosed and the next rung tried
            if caused_by_interrupt(e):  # Ctrl-C that a compile worker or library re-raised as its own error
                raise KeyboardInterrupt from e
            d = diagnose(e, failed=[r["step"] for r in record] + [step])
            record.append({**entry, "ok": False, "layer": d.layer, "error": d.reason})
            logger.warning("Startup with %s failed: %s", step, d)
            runner.set_compiled(None)  # back to the plain forward, no graphs
            if step == "as configured":
                todo = list(d.rungs)
            continue
        record.append({**entry, "ok": True})
        if step != "as configured":
            logger.warning("Fallback: running with %s (compilation_config mode %d, cudagraph_mode %s)", step,
                           *runs)
        return record
    raise RuntimeError(f"every rung of the fallback ladder failed: {record}")


def greedy_probe(config: EngineConfig, runner: ModelRunner, num_probes: int = 4,
                 max_tokens: int = 8) -> list[list[int]]:
    """Greedy tokens of a few fixed prompts (prefill, then decode steps), scheduled as the engine does."""
    vocab, max_len = runner.model_config.vocab_size, config.max_model_len
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    seqs = [Sequence(f"probe-{i}", [(7 * i + 3 * j) % max(min(vocab, 1000) - 1, 1) + 1
                                    for j in range(min(5 + 3 * i, max_len - 1))], params)
            for i in range(num_probes)]
    scheduler = Scheduler(config.scheduler, BlockManager(config.cache.num_blocks, config.cache.block_size, False),
                          max_len)
    for seq in seqs:
        scheduler.add(seq)
    while scheduler.has_unfinished():
        sched = scheduler.schedule()
        out = runner.execute_model(sched)
        scheduler.update_computed(sched)
        for seq, tok in zip(out.seqs, out.token_ids()):
            seq.append_token(tok)
            if seq.num_output_tokens >= max_tokens or seq.num_tokens >= max_len:
                scheduler.finish(seq, SequenceStatus.FINISHED_LENGTH)
    return [seq.output_token_ids for seq in seqs]


def verify(config: EngineConfig, runner: ModelRunner, report: StartupReport) -> None:
    """The greedy probe through the optimized path vs the plain eager forward; a difference is a
    NumericsError."""
    fast = greedy_probe(config, runner)
    saved = runner.forward_fn, runner.cudagraph_dispatcher  # the plain eager forward, no graphs, for a while
    runner.forward_fn, runner.cudagraph_dispatcher = runner.model.forward, None
    try:
        slow = greedy_probe(config, runner)
    finally:
        runner.forward_fn, runner.cudagraph_dispatcher = saved
    same = sum(a == b for a, b in zip(fast, slow))
    report.compile["verify"] = {"probes": len(fast), "identical": same}
    if same != len(fast):
        raise NumericsError(f"verify: {len(fast) - same} of {len(fast)} greedy probes differ from eager")
    logger.info("verify: %d/%d greedy probes identical to eager", same, len(fast))
