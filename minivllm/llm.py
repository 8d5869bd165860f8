"""`LLM`: the offline-inference entry point, shaped like vLLM's so what learners practise transfers.

    llm = LLM(model="assets/models/minivllm-tiny")
    outs = llm.generate(["Q: 12+30= A:"], SamplingParams(temperature=0, max_tokens=8))
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence as Seq

import torch
from tqdm.auto import tqdm

from minivllm import DEFAULT_MODEL
from minivllm.config import (CacheConfig, CompilationConfig, EngineConfig, SchedulerConfig, resolve_device,
                             resolve_dtype)
from minivllm.engine.llm_engine import LLMEngine
from minivllm.inputs import encode_prompt, token_ids_from
from minivllm.loader import check_model_dir, load_model, load_model_config, load_tokenizer
from minivllm.logger import init_logger
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.startup import GiB, StartupReport, choose_num_blocks

logger = logging.getLogger("minivllm")
# Driver memory per kernel node of a captured graph, and kernel nodes per decoder layer, rounded up: H200,
# Qwen3-0.6B, default capture sizes, 8-12 kernels per layer per step; 10.5 KiB per node in FULL graphs,
# 11.8 KiB in piecewise ones (free-memory drop minus the pool, latency_4fff55c.json).
GRAPH_NODE_BYTES = 12 << 10
GRAPH_NODES_PER_LAYER = 12

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
        path = check_model_dir(model or DEFAULT_MODEL)
        model_config = load_model_config(path)
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, model_config.torch_dtype, dev)
        if max_model_len is not None and (not isinstance(max_model_len, int) or max_model_len < 2):
            raise ValueError(f"max_model_len must be an int >= 2, got {max_model_len!r}")
        if max_model_len is not None and max_model_len > model_config.max_position_embeddings:
            raise ValueError(f"max_model_len={max_model_len} exceeds the model's max_position_embeddings "
                             f"({model_config.max_position_embeddings})")
        user_max_len = max_model_len
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
        torch.manual_seed(seed)
        logger.info("Initializing minivllm engine: model=%s, arch=%s, dtype=%s, device=%s, max_model_len=%d, "
                    "attention_backend=%s, enforce_eager=%s, async_scheduling=%s", path, model_config.architecture,
                    str(torch_dtype).removeprefix("torch."), dev, max_len, self.config.resolved_attention_backend,
                    enforce_eager, self.config.resolved_async_scheduling)
        if dev.type != "cuda" and not enforce_eager:
            logger.info("CUDA graphs are unavailable on %s: running eagerly", dev)
        with self.report.phase("load_tokenizer", dev):
            self.tokenizer = load_tokenizer(path, self.config.skip_tokenizer_init)
        with self.report.phase("load_weights", dev):
            model = load_model(path, model_config, dev, torch_dtype)
        logger.info("Loading weights took %.2f s (%.3f GiB)", self.report.phases["load_weights"],
                    sum(p.numel() * p.element_size() for p in model.parameters()) / GiB)
        runner = ModelRunner(self.config, model_config, model)
        with self.report.phase("profile_run", dev):
            peak = runner.profile_run()
        num_blocks = choose_num_blocks(runner, self.config.cache, peak, self._graph_memory_estimate(runner, peak))
        kv_tokens = num_blocks * block_size
        if kv_tokens < max_len:
            if user_max_len is not None or dev.type == "cuda":
                raise ValueError(f"the KV cache holds {kv_tokens} tokens, fewer than max_model_len={max_len}; "
                                 f"lower max_model_len or give the cache more memory (gpu_memory_utilization, "
                                 f"kv_cache_memory_bytes, num_gpu_blocks_override)")
            max_len = self.config.max_model_len = kv_tokens
            logger.info("max_model_len lowered to %d to fit the KV cache", max_len)
        with self.report.phase("kv_cache", dev):
            runner.allocate_kv_cache(num_blocks)
        self.report.num_gpu_blocks, self.report.kv_cache_tokens = num_blocks, kv_tokens
        self.report.kv_cache_gib = num_blocks * runner.kv_bytes_per_block() / GiB
        self.config.cache.num_blocks = num_blocks
        logger.info("KV cache: %d blocks of %d tokens = %d tokens (%.3f GiB)", num_blocks, block_size, kv_tokens,
                    self.report.kv_cache_gib)
        self.model_runner = runner
        self.engine_vocab = model_config.vocab_size
        self._setup_compile_and_graphs(runner)
        self.engine = LLMEngine(self.config, model_config, self.tokenizer, runner, num_blocks)
        self.report.phases["total"] = time.perf_counter() - t_start
        logger.info("Engine ready in %.2f s", self.report.phases["total"])

    def _graph_memory_estimate(self, runner: ModelRunner, activation_peak: int) -> int:
        """Reserve room for CUDA graphs BEFORE sizing the KV cache, so capture cannot run out of memory.

        Two parts. The pool: one shared pool holds what the largest captured batch needs (smaller sizes reuse
        it), at most the profile run's activation peak scaled to that batch, for FULL and for PIECEWISE. The
        graph executables: the driver keeps ~11 KiB per captured kernel node outside the pool (H200, Qwen3-0.6B,
        default sizes: 35 FULL graphs took 104 MiB beyond the pool, 51 x 29 piecewise graphs 164 MiB).
        """
        cfg = self.config
        mode = cfg.cudagraph_mode
        if mode == "NONE":
            return 0
        sizes = cfg.capture_sizes()
        largest = max(sizes, default=0)
        per_mode = int(activation_peak * min(1.0, largest / runner.max_num_tokens))
        full = [s for s in sizes if s <= cfg.scheduler.max_num_seqs] if mode in ("FULL", "FULL_AND_PIECEWISE") else []
        piecewise = sizes if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else []
        nodes = (len(full) + len(piecewise)) * GRAPH_NODES_PER_LAYER * runner.model_config.num_hidden_layers
        pools = 2 if mode == "FULL_AND_PIECEWISE" else 1
        return pools * per_mode + max(64 << 20, nodes * GRAPH_NODE_BYTES)

    def _setup_compile_and_graphs(self, runner: ModelRunner) -> None:
        """torch.compile first, then CUDA graphs over the result; with fallback="auto", walk the ladder."""
        if self.fallback is None:
            self._setup_compile(runner)
            self._setup_graphs(runner)
            if self.verify:
                self._verify(runner)
            return
        from minivllm.compilation.diagnose import diagnose

        cfg = self.config
        ladder = [("as configured", {}), ("CUDA graphs off", {"graphs": False}),
                  ("torch.compile off", {"compile": False}), ("both off", {"graphs": False, "compile": False})]
        orig_level, orig_mode = cfg.compilation.level, cfg.compilation.cudagraph_mode
        for step, (name, off) in enumerate(ladder):
            cfg.compilation.level = 0 if off.get("compile") is False else orig_level
            cfg.compilation.cudagraph_mode = "NONE" if off.get("graphs") is False else orig_mode
            try:
                self._setup_compile(runner)
                self._setup_graphs(runner)
                if self.verify:
                    self._verify(runner)
                self.fallback_report.append({"step": name, "ok": True})
                if step:
                    logger.warning("Fallback: running with %s", name)
                return
            except Exception as e:  # noqa: BLE001 - every failure is diagnosed and the next rung tried
                d = diagnose(e)
                self.fallback_report.append({"step": name, "ok": False, "layer": d.layer, "error": d.reason})
                logger.warning("Startup with %s failed: %s", name, d)
                self._reset_runner(runner)
        raise RuntimeError(f"every rung of the fallback ladder failed: {self.fallback_report}")

    def _reset_runner(self, runner: ModelRunner) -> None:
        import torch._dynamo

        torch._dynamo.reset()
        runner.forward_fn = runner.full_graph_fn = runner.model.forward
        runner.full_graph_min_tokens = runner.min_num_tokens = 1
        runner.cudagraph_dispatcher = None
        runner.piecewise = None

    def _setup_compile(self, runner: ModelRunner) -> None:
        from minivllm.compilation.backend import compile_model

        with self.report.phase("torch.compile", self.config.device):
            self.report.compile = compile_model(runner, self.config)

    def _setup_graphs(self, runner: ModelRunner) -> None:
        cfg = self.config
        mode = cfg.cudagraph_mode
        self.report.cudagraph = {"mode": mode, "capture_sizes": cfg.capture_sizes() if mode != "NONE" else []}
        if mode == "NONE":
            return
        from minivllm.worker.cuda_graph import CUDAGraphDispatcher

        sizes = cfg.capture_sizes()
        if min(runner.min_num_tokens, runner.full_graph_min_tokens) > 1:  # a traced forward never runs 1
            sizes = sorted({max(s, runner.min_num_tokens) for s in sizes})  # token: batch 1 replays size 2
            self.report.cudagraph["capture_sizes"] = sizes
        dispatcher = CUDAGraphDispatcher(runner, sizes, mode)
        runner.cudagraph_dispatcher = dispatcher
        with self.report.phase("cudagraph_capture", cfg.device):
            if mode in ("FULL", "FULL_AND_PIECEWISE"):
                if cfg.resolved_attention_backend != "triton":
                    logger.warning("FULL CUDA graphs need attention_backend='triton' (the torch reference "
                                   "syncs with the host); decode runs without FULL graphs")
                else:
                    self.report.cudagraph["FULL"] = dispatcher.capture_full().as_dict()
            if mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
                from minivllm.compilation.backend import capture_piecewise

                stats = capture_piecewise(runner, dispatcher)
                if stats is not None:
                    self.report.cudagraph["PIECEWISE"] = stats.as_dict()

    def _verify(self, runner: ModelRunner) -> None:
        """Greedy probe through the optimized path vs plain eager; a difference is a NumericsError."""
        from minivllm.compilation.diagnose import NumericsError

        probe = [{"prompt_token_ids": [(7 * i + 3 * j) % min(self.engine_vocab, 1000) + 1 for j in range(5 + 3 * i)]}
                 for i in range(4)]
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        fast = [o.outputs[0].token_ids for o in self._generate_with(runner, probe, params)]
        saved = (runner.forward_fn, runner.cudagraph_dispatcher, runner.piecewise)
        runner.forward_fn, runner.cudagraph_dispatcher, runner.piecewise = runner.model.forward, None, None
        try:
            slow = [o.outputs[0].token_ids for o in self._generate_with(runner, probe, params)]
        finally:
            runner.forward_fn, runner.cudagraph_dispatcher, runner.piecewise = saved
        same = sum(a == b for a, b in zip(fast, slow))
        self.report.compile["verify"] = {"probes": len(probe), "identical": same}
        if same != len(probe):
            raise NumericsError(f"verify: {len(probe) - same} of {len(probe)} greedy probes differ from eager")
        logger.info("verify: %d/%d greedy probes identical to eager", same, len(probe))

    def _generate_with(self, runner: ModelRunner, prompts, params):
        """Run prompts on a throw-away engine (its own block manager: no prefix-cache hits across runs)."""
        engine = LLMEngine(self.config, runner.model_config, self.tokenizer, runner, self.config.cache.num_blocks)
        saved, self.engine = getattr(self, "engine", None), engine
        try:
            return self.generate(prompts, params, use_tqdm=False)
        finally:
            if saved is not None:
                self.engine = saved

    def compile_report(self) -> dict:
        """Graphs traced, graph breaks and run-time recompiles of torch.compile (see compilation/)."""
        from minivllm.compilation.backend import live_compile_report

        return live_compile_report(self.model_runner, self.report.compile)

    # ---- public API ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Free the GPU memory of this engine now (KV cache, graphs, compiled code, weights).

        `del llm` is not enough: compiled code and graph pools keep references, and a second engine in the
        same process sizes its KV cache from the memory that is free.
        """
        import gc

        import torch._dynamo

        runner = getattr(self, "model_runner", None)
        if runner is not None:
            runner.cudagraph_dispatcher = None
            runner.piecewise = None
            runner.split_backend = None
            runner.forward_fn = None
            runner.kv_cache = None
            runner.kv_caches = None
            runner.model = None
        self.model_runner = None
        self.engine = None
        torch._dynamo.reset()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

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

    def _normalize(self, prompts, sampling_params) -> tuple[list[tuple[str | None, list[int]]], list[SamplingParams]]:
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
            self.engine.validate(ids, sp, f"prompts[{i}]")  # all checked before any is queued
        return items, params

    def generate(self, prompts: PromptType | Seq[PromptType], sampling_params: SamplingParams | list | None = None,
                 use_tqdm: bool = True) -> list[RequestOutput]:
        items, params = self._normalize(prompts, sampling_params)
        engine = self.engine
        now = time.perf_counter()
        seqs = [engine.add_request(engine.next_request_id(), ids, sp, text, now)
                for (text, ids), sp in zip(items, params)]
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
