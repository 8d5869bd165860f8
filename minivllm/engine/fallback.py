"""Starting an engine: as configured, or down the fallback ladder, with the verify probe.

Why here, above the worker: each rung of the ladder is a new engine. The ladder (`LLM(..., fallback="auto")`)
starts the engine as configured; on a failure it diagnoses it (compilation/diagnose.py), frees the failed
worker, and resolves a fresh EngineConfig from the original arguments with one layer turned off, the layer
at fault first, as the handbook's §4.6 says: a capture error turns CUDA graphs off and keeps torch.compile,
a compile error turns torch.compile off and keeps the graphs a mode-0 engine can hold, a wrong result
(verify) turns graphs off, then compile, then both. Every rung is recorded (step, ok, the compilation mode
and cudagraph_mode it ran, the layer and error of a failure): `llm.fallback_report`. A rung whose
compilation settings equal an earlier one's is skipped.

The verify probe (`verify=True`): a few greedy requests through an eager engine built first (and freed),
then through the engine being started; both run LLMEngine.step, so the probe tests the engine's own step.
A difference is a NumericsError.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from minivllm.compilation.diagnose import NumericsError, diagnose
from minivllm.config import CompilationConfig, EngineConfig
from minivllm.interrupt import caused_by_interrupt
from minivllm.engine.llm_engine import LLMEngine
from minivllm.engine_args import EngineArgs
from minivllm.loader import load_generation_eos, load_tokenizer
from minivllm.models.config import ModelConfig
from minivllm.sampling_params import SamplingParams
from minivllm.worker.startup import StartupReport
from minivllm.worker.worker import Worker

logger = logging.getLogger("minivllm")
#: What each rung turns off: (torch.compile, CUDA graphs).
OFF = {"as configured": (False, False), "CUDA graphs off": (False, True), "torch.compile off": (True, False),
       "both off": (True, True)}


def start_engine(args: EngineArgs, report: StartupReport) -> LLMEngine:
    """Resolve the config, load the tokenizer, start a worker (down the ladder with fallback="auto")."""
    config, model_config = args.create_engine_config()
    log_config(config, model_config)
    with report.phase("load_tokenizer", config.device):
        tokenizer = load_tokenizer(Path(config.model), config.skip_tokenizer_init)
    eos = load_generation_eos(Path(config.model))
    reference = probe_tokens(reference_args(args, config)) if config.verify else None
    if config.fallback is None:
        return LLMEngine(config, model_config, tokenizer, start_worker(config, model_config, report, reference), eos)
    record, ran, todo = [], [], ["as configured"]
    while todo:
        step = todo.pop(0)
        cfg = config if step == "as configured" else args.with_off(*OFF[step]).create_engine_config()[0]
        if cfg.compilation in ran:
            continue  # the same settings as a rung already tried (e.g. graphs off where none were asked for)
        ran.append(cfg.compilation)
        entry = {"step": step, "compilation_mode": int(cfg.compile_mode), "cudagraph_mode": cfg.cudagraph_mode.value}
        try:
            worker = start_worker(cfg, model_config, report, reference)
        except Exception as e:  # noqa: BLE001 - every failure is diagnosed and the next rung tried
            d = diagnose(e, failed=[r["step"] for r in record] + [step])
            record.append({**entry, "ok": False, "layer": d.layer, "error": d.reason})
            logger.warning("Startup with %s failed: %s", step, d)
            if step == "as configured":
                todo = list(d.rungs)
            continue
        record.append({**entry, "ok": True})
        if step != "as configured":
            logger.warning("Fallback: running with %s (compilation_config mode %d, cudagraph_mode %s)", step,
                           int(cfg.compile_mode), cfg.cudagraph_mode.value)
        return LLMEngine(cfg, model_config, tokenizer, worker, eos, record)
    raise RuntimeError(f"every rung of the fallback ladder failed: {record}")


def log_config(config: EngineConfig, model_config: ModelConfig) -> None:
    logger.info("Initializing minivllm engine: model=%s, arch=%s, dtype=%s, device=%s, max_model_len=%d, "
                "attention_backend=%s, enforce_eager=%s, async_scheduling=%s, compilation mode=%d (%s), "
                "cudagraph_mode=%s", config.model, model_config.architecture,
                str(config.dtype).removeprefix("torch."), config.device, config.max_model_len,
                config.attention_backend, config.enforce_eager, config.async_scheduling,
                config.compile_mode, config.compile_mode.name, config.cudagraph_mode.value)
    if config.cudagraph_downgrade:
        logger.info("%s", config.cudagraph_downgrade)
    if config.speculative is not None:
        s = config.speculative
        logger.info("speculative decoding: method=%s, num_speculative_tokens=%d, prompt_lookup_min=%d, "
                    "prompt_lookup_max=%d", s.method, s.num_speculative_tokens, s.prompt_lookup_min,
                    s.prompt_lookup_max)
    if config.device.type != "cuda" and not config.enforce_eager:
        logger.info("CUDA graphs are unavailable on %s: running eagerly", config.device)


def start_worker(config: EngineConfig, model_config: ModelConfig, report: StartupReport,
                 reference: list[list[int]] | None = None) -> Worker:
    """A started worker, verified against the reference tokens when given; a failed one keeps nothing."""
    worker = Worker(config, model_config, report)
    try:
        worker.start()
        if reference is not None:
            got = probe_tokens_of(LLMEngine(config, model_config, None, worker))
            same = sum(a == b for a, b in zip(got, reference))
            report.compile["verify"] = {"probes": len(got), "identical": same}
            if same != len(got):
                raise NumericsError(f"verify: {len(got) - same} of {len(got)} greedy probes differ from eager")
            logger.info("verify: %d/%d greedy probes identical to eager", same, len(got))
    except BaseException as e:
        worker.release()  # the next engine (or rung) gets the whole device
        if not isinstance(e, KeyboardInterrupt) and caused_by_interrupt(e):
            raise KeyboardInterrupt from e  # Ctrl-C that a library re-raised as its own error
        raise
    return worker


def reference_args(args: EngineArgs, config: EngineConfig) -> EngineArgs:
    """The verify probe's reference: the same engine eager (no compile, no graphs), with the same ops and
    length, and a KV cache just large enough (it is freed before the engine under test starts)."""
    eager = args.with_off(compile_off=True, graphs_off=True)
    blocks = 2 * -(-config.max_model_len // config.cache.block_size)
    comp: CompilationConfig = replace(eager.compilation_config, custom_ops=list(config.custom_ops))
    return replace(eager, compilation_config=comp, max_model_len=config.max_model_len, num_gpu_blocks_override=blocks,
                   kv_cache_memory_bytes=None, fallback=None, verify=False)


def probe_tokens(args: EngineArgs) -> list[list[int]]:
    """The greedy probe's tokens from a throwaway engine of these arguments."""
    config, model_config = args.create_engine_config()
    worker = start_worker(config, model_config, StartupReport())
    try:
        return probe_tokens_of(LLMEngine(config, model_config, None, worker))
    finally:
        worker.release()


def probe_tokens_of(engine: LLMEngine) -> list[list[int]]:
    """Greedy tokens of 4 fixed prompts (prefill, then 8 decode steps), through the engine's own step."""
    vocab, max_len = engine.model_config.vocab_size, engine.config.max_model_len
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    seqs = [engine.add_request(f"probe-{i}", [(7 * i + 3 * j) % max(min(vocab, 1000) - 1, 1) + 1
                                              for j in range(min(5 + 3 * i, max_len - 1))], params)
            for i in range(4)]
    while engine.has_unfinished_requests():
        engine.step()
    return [seq.output_token_ids for seq in seqs]
