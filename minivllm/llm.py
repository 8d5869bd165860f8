"""`LLM`: the offline-inference entry point, shaped like vLLM's so what learners practise transfers.

    llm = LLM(model="assets/models/minivllm-tiny")
    outs = llm.generate(["Q: 12+30= A:"], SamplingParams(temperature=0, max_tokens=8))
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator
from typing import Sequence as Seq

import torch
from tqdm.auto import tqdm

from minivllm import DEFAULT_MODEL
from minivllm.config import (
    CacheConfig,
    CompilationConfig,
    CUDAGraphMode,
    EngineConfig,
    SchedulerConfig,
    resolve_device,
    resolve_dtype,
)
from minivllm.engine.llm_engine import LLMEngine
from minivllm.inputs import encode_prompt, token_ids_from
from minivllm.loader import NoTokenizer, check_model_dir, load_model_config, load_tokenizer
from minivllm.logger import init_logger
from minivllm.models.footprint import check_fits
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.startup import StartupReport
from minivllm.worker.worker import Worker

logger = logging.getLogger("minivllm")

PromptType = str | dict


class LLM:
    def __init__(self, model: str | None = None, *, dtype: str | torch.dtype = "auto", device: str = "auto",
                 max_model_len: int | None = None, max_num_seqs: int = 256,
                 max_num_batched_tokens: int | None = None, block_size: int = 16,
                 gpu_memory_utilization: float = 0.9, kv_cache_memory_bytes: int | None = None,
                 num_gpu_blocks_override: int | None = None, enable_prefix_caching: bool = True,
                 enable_chunked_prefill: bool = True, seed: int = 0, enforce_eager: bool = False,
                 attention_backend: str = "auto", compilation_config: Any = None,
                 cudagraph_capture_sizes: list[int] | None = None, max_cudagraph_capture_size: int | None = None,
                 cudagraph_mode: str | None = None, async_scheduling: bool | None = None,
                 fallback: str | None = None, verify: bool = False, skip_tokenizer_init: bool = False) -> None:
        init_logger()
        if fallback not in (None, "auto"):
            raise ValueError(f"fallback must be None or 'auto', got {fallback!r}")
        self.fallback, self.verify = fallback, verify
        self.fallback_report: list[dict] = []
        t_start = time.perf_counter()
        self.report = StartupReport()
        path = check_model_dir(DEFAULT_MODEL if model is None else model)  # "" is an error, not the default
        model_config = load_model_config(path)
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, model_config.torch_dtype, dev)
        if max_model_len is not None and (not isinstance(max_model_len, int) or max_model_len < 2):
            raise ValueError(f"max_model_len must be an int >= 2, got {max_model_len!r}")
        if max_model_len is not None and max_model_len > model_config.max_position_embeddings:
            raise ValueError(f"max_model_len={max_model_len} exceeds the model's max_position_embeddings "
                             f"({model_config.max_position_embeddings})")
        max_len = max_model_len or model_config.max_position_embeddings
        comp = CompilationConfig.from_any(compilation_config)
        for key, val in (("cudagraph_capture_sizes", cudagraph_capture_sizes), ("cudagraph_mode", cudagraph_mode),
                         ("max_cudagraph_capture_size", max_cudagraph_capture_size)):
            if val is not None:
                setattr(comp, key, val)
        comp.__post_init__()
        if max_num_batched_tokens is None:
            max_num_batched_tokens = 8192 if enable_chunked_prefill else max(max_len, 8192)
        self.config = EngineConfig(
            model=str(path), dtype=torch_dtype, device=dev, max_model_len=max_len, seed=seed,
            enforce_eager=enforce_eager, attention_backend=attention_backend, skip_tokenizer_init=skip_tokenizer_init,
            cache=CacheConfig(block_size, gpu_memory_utilization, kv_cache_memory_bytes, num_gpu_blocks_override,
                              enable_prefix_caching),
            scheduler=SchedulerConfig(max_num_seqs, max_num_batched_tokens, enable_chunked_prefill, async_scheduling),
            compilation=comp,
        )
        if not enable_chunked_prefill and max_num_batched_tokens < max_len:
            raise ValueError(f"max_num_batched_tokens ({max_num_batched_tokens}) must be >= max_model_len "
                             f"({max_len}) when enable_chunked_prefill=False, or a long prompt could never run")
        self.config.capture_sizes()  # explicit capture sizes that contradict each other fail here, not at capture
        check_fits(model_config, max_len, torch_dtype, dev, max_num_seqs, block_size,
                   "max_model_len" if max_model_len is not None else "max_position_embeddings",
                   str(path / "config.json"))
        # The caller's torch RNG state is left alone (it is theirs): the sampler draws from its own generator
        # seeded with `seed` (layers/sampler.py), a request with a seed from its own generator.
        logger.info("Initializing minivllm engine: model=%s, arch=%s, dtype=%s, device=%s, max_model_len=%d, "
                    "attention_backend=%s, enforce_eager=%s, async_scheduling=%s, compilation mode=%d (%s), "
                    "cudagraph_mode=%s", path, model_config.architecture,
                    str(torch_dtype).removeprefix("torch."), dev, max_len, self.config.resolved_attention_backend,
                    enforce_eager, self.config.resolved_async_scheduling, self.config.compile_mode,
                    self.config.compile_mode.name, self.config.cudagraph_mode.value)
        if self.config.cudagraph_downgrade:
            logger.info("%s", self.config.cudagraph_downgrade)
        if dev.type != "cuda" and not enforce_eager:
            logger.info("CUDA graphs are unavailable on %s: running eagerly", dev)
        with self.report.phase("load_tokenizer", dev):
            self.tokenizer = load_tokenizer(path, self.config.skip_tokenizer_init)
        self.engine_vocab = model_config.vocab_size
        self.worker = Worker(self.config, model_config, path, self.report, user_max_model_len=max_model_len)
        try:
            self.worker.start(compile_and_capture=None if fallback is None else self._walk_fallback_ladder)
            if fallback is None and verify:
                self._verify()
        except BaseException:
            self.worker.release()  # a failed engine keeps nothing: the next one gets the whole device
            raise
        # `del llm` (or rebinding the name in a notebook cell) frees the device memory at once.
        self._finalizer = weakref.finalize(self, self.worker.release)
        self._finalizer.atexit = False  # at interpreter exit the driver frees everything anyway
        self._lock = threading.Lock()  # one generate at a time (see generate)
        self._owner: int | None = None
        self.engine: LLMEngine | None = LLMEngine(self.config, model_config, self.tokenizer, self.model_runner,
                                                  self.worker.num_blocks)
        self.report.phases["total"] = time.perf_counter() - t_start
        logger.info("Engine ready in %.2f s", self.report.phases["total"])

    @property
    def model_runner(self) -> ModelRunner | None:
        return self.worker.model_runner

    def _walk_fallback_ladder(self) -> None:
        """Compile and capture as configured; on failure, diagnose and try with graphs off, then compile off."""
        from minivllm.compilation.diagnose import diagnose

        cfg, worker = self.config, self.worker
        ladder = [("as configured", {}), ("CUDA graphs off", {"graphs": False}),
                  ("torch.compile off", {"compile": False}), ("both off", {"graphs": False, "compile": False})]
        orig_level, orig_mode = cfg.compilation.level, cfg.compilation.cudagraph_mode
        for step, (name, off) in enumerate(ladder):
            cfg.compilation.level = 0 if off.get("compile") is False else orig_level
            cfg.compilation.cudagraph_mode = CUDAGraphMode.NONE if off.get("graphs") is False else orig_mode
            try:
                worker.compile_model()
                worker.capture_model()
                if self.verify:
                    self._verify()
                self.fallback_report.append({"step": name, "ok": True})
                if step:
                    logger.warning("Fallback: running with %s", name)
                return
            except Exception as e:  # noqa: BLE001 - every failure is diagnosed and the next rung tried
                d = diagnose(e)
                self.fallback_report.append({"step": name, "ok": False, "layer": d.layer, "error": d.reason})
                logger.warning("Startup with %s failed: %s", name, d)
                worker.reset_compile_and_graphs()
        raise RuntimeError(f"every rung of the fallback ladder failed: {self.fallback_report}")

    def _verify(self) -> None:
        """Greedy probe through the optimized path vs plain eager; a difference is a NumericsError."""
        from minivllm.compilation.diagnose import NumericsError

        probe = [{"prompt_token_ids": [(7 * i + 3 * j) % min(self.engine_vocab, 1000) + 1 for j in range(5 + 3 * i)]}
                 for i in range(4)]
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        fast = [o.outputs[0].token_ids for o in self._generate_with(probe, params)]
        with self.worker.plain_forward():
            slow = [o.outputs[0].token_ids for o in self._generate_with(probe, params)]
        same = sum(a == b for a, b in zip(fast, slow))
        self.report.compile["verify"] = {"probes": len(probe), "identical": same}
        if same != len(probe):
            raise NumericsError(f"verify: {len(probe) - same} of {len(probe)} greedy probes differ from eager")
        logger.info("verify: %d/%d greedy probes identical to eager", same, len(probe))

    def _generate_with(self, prompts, params):
        """Run prompts on a throw-away engine (its own block manager: no prefix-cache hits across runs)."""
        runner = self.model_runner
        engine = LLMEngine(self.config, runner.model_config, self.tokenizer, runner, self.config.cache.num_blocks)
        return _run_to_completion(engine, *self._normalize(prompts, params, engine), use_tqdm=False)

    def compile_report(self) -> dict:
        """Graphs traced, graph breaks and run-time recompiles of torch.compile (see compilation/)."""
        from minivllm.compilation.report import live_compile_report

        runner = self.model_runner
        return live_compile_report(self.report.compile, runner.split_backend if runner is not None else None)

    # ---- lifecycle -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Free the device memory of this engine now (KV cache, graphs, compiled code, weights). Safe to call
        twice; `generate` afterwards raises. `del llm` and the end of a `with LLM(...)` block do the same."""
        with self._exclusive("shutdown"):
            self.engine = None
            self._finalizer()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    @contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        """Hold this LLM for one call. Another thread waits its turn (its tokens stay correct); a call from
        inside this LLM's own step (a callback, the forward) would corrupt the step in flight: refused."""
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError(f"LLM.{what}() called while this LLM is in use by a generate() on the same "
                               f"thread (from inside a step: a callback or the forward); this LLM is in use")
        with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None

    def get_tokenizer(self):
        """transformers' tokenizer of the checkpoint (chat templates and all; loaded on first use). The engine
        itself may run a lighter one over the same tokenizer.json (loader.FastTokenizer)."""
        from minivllm.loader import FastTokenizer, load_hf_tokenizer

        if isinstance(self.tokenizer, FastTokenizer):
            self.tokenizer = load_hf_tokenizer(self.tokenizer.path)
            if self.engine is not None:
                self.engine.tokenizer = self.tokenizer
        return self.tokenizer

    def startup_report(self) -> StartupReport:
        return self.report

    def _normalize(self, prompts, sampling_params,
                   engine: LLMEngine) -> tuple[list[tuple[str | None, list[int]]], list[SamplingParams]]:
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"prompts must be a str, a {{'prompt_token_ids': [...]}} dict, or a list of them, "
                            f"got {type(prompts).__name__}")
        items = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                if not p:
                    raise ValueError(f"prompts[{i}] is an empty string; a prompt must have at least 1 token")
                items.append((p, encode_prompt(self.tokenizer, p, f"prompts[{i}]")))
            elif isinstance(p, dict) and "prompt_token_ids" in p:
                ids = p["prompt_token_ids"]
                if not isinstance(ids, (list, tuple)):
                    raise TypeError(f"prompts[{i}]['prompt_token_ids'] must be a list of ints")
                items.append((p.get("prompt"), token_ids_from(ids, f"prompts[{i}]")))
            else:
                raise TypeError(f"prompts[{i}] must be a str or a dict with 'prompt_token_ids', "
                                f"got {type(p).__name__}")
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params] * len(items)
        elif isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != len(items):
                raise ValueError(f"sampling_params has {len(sampling_params)} entries but there are {len(items)} "
                                 f"prompts; give one SamplingParams or exactly one per prompt")
            params = list(sampling_params)
        else:
            raise TypeError(f"sampling_params must be a SamplingParams or a list of them, "
                            f"got {type(sampling_params).__name__}")
        for i, ((_, ids), sp) in enumerate(zip(items, params)):
            engine.validate(ids, sp, f"prompts[{i}]")  # all checked before any is queued
            if sp.stop and isinstance(self.tokenizer, NoTokenizer):
                raise ValueError(f"sampling_params for prompts[{i}]: stop={list(sp.stop)!r} needs a tokenizer, "
                                 f"and this engine has none ({self.tokenizer.reason}): stop strings are matched "
                                 f"on the detokenized text; use stop_token_ids=[...] instead")
        return items, params

    def generate(self, prompts: PromptType | Seq[PromptType], sampling_params: SamplingParams | list | None = None,
                 use_tqdm: bool = True) -> list[RequestOutput]:
        """Run prompts to completion. Thread-safe: calls from several threads run one after the other."""
        with self._exclusive("generate"):
            engine = self.engine
            if engine is None:
                raise RuntimeError("this LLM was shut down (shutdown(), or the end of its `with` block); "
                                   "build a new LLM(...) to generate")
            items, params = self._normalize(prompts, sampling_params, engine)
            return _run_to_completion(engine, items, params, use_tqdm)


def _run_to_completion(engine: LLMEngine, items: list, params: list[SamplingParams],
                       use_tqdm: bool) -> list[RequestOutput]:
    now = time.perf_counter()
    seqs = [engine.add_request(engine.next_request_id(), ids, sp, text, now) for (text, ids), sp in zip(items, params)]
    bar = tqdm(total=len(seqs), desc="Processed prompts", disable=not use_tqdm, dynamic_ncols=True)
    try:
        n_out = 0
        while engine.has_unfinished_requests():
            for seq in engine.step():
                n_out += seq.num_output_tokens
                bar.update(1)
                bar.set_postfix_str(f"output {n_out / max(bar.format_dict['elapsed'], 1e-9):.1f} toks/s")
    except BaseException:
        for seq in seqs:  # leave the engine usable: no half-run request keeps its blocks
            if not seq.is_finished:
                engine.abort_request(seq.request_id)
        engine.discard_inflight()
        raise
    finally:
        bar.close()
    return [engine.make_output(s) for s in seqs]
