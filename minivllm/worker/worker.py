"""Worker: engine startup, told in order, and its release.

    start():  load_model -> profile_run -> initialize_kv_cache -> compile_model -> capture_model

The worker runs one EngineConfig as resolved; the fallback ladder and the verify probe (engine/fallback.py)
build a new worker for each configuration they try.

Each phase is a method below, timed into the StartupReport (`llm.startup_report()`) and logged with
vLLM-style lines, because "why is startup slow?" is one of the handbook's questions. nano-vllm's
ModelRunner.__init__ is the model: the same walk in a few lines. The order matters: the profile run
measures the activation peak before the KV cache takes what is left; graphs are captured last, on the
compiled forward, at the addresses of the KV cache and the persistent buffers.

`release()` frees what startup built (graphs, compiled code, KV cache, weights); LLM calls it on
`shutdown()`, at the end of a `with` block, and when the LLM object is garbage (weakref.finalize).
"""

from __future__ import annotations

import gc
import logging
import weakref
from pathlib import Path

import torch

from minivllm.compilation import levels
from minivllm.config import EngineConfig
from minivllm.loader import load_model
from minivllm.models.config import ModelConfig
from minivllm.worker.graph_capture import graph_memory_estimate
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.startup import GiB, StartupReport, choose_num_blocks, kv_too_small_message

logger = logging.getLogger("minivllm")
_live: "weakref.WeakSet[Worker]" = weakref.WeakSet()  # for the out-of-memory message only


class Worker:
    def __init__(self, config: EngineConfig, model_config: ModelConfig, report: StartupReport) -> None:
        self.config, self.model_config, self.report = config, model_config, report
        self.model_runner: ModelRunner | None = None
        self.num_blocks = 0

    def start(self) -> None:
        """Every phase, in order."""
        free_dropped_engines()
        self.load_model()
        peak = self.profile_run()
        self.initialize_kv_cache(peak)
        self.compile_model()
        self.capture_model()
        _live.add(self)

    # ---- the phases --------------------------------------------------------------------------------
    def load_model(self) -> None:
        dev = self.config.device
        bs = self.config.cache.block_size  # RoPE covers max_model_len in whole blocks (dummy batches fill them)
        with self.report.phase("load_weights", dev):
            model = load_model(Path(self.config.model), self.model_config, dev, self.config.dtype,
                               -(-self.config.max_model_len // bs) * bs, self.config.quantization)
        logger.info("Loading weights took %.2f s (%.3f GiB)", self.report.phases["load_weights"],
                    sum(p.numel() * p.element_size() for p in model.parameters()) / GiB)
        self.model_runner = ModelRunner(self.config, self.model_config, model)

    def profile_run(self) -> int:
        """The largest batch once, without a KV cache: the activation peak the KV cache must leave room for."""
        with self.report.phase("profile_run", self.config.device):
            return self.model_runner.profile_run()

    def initialize_kv_cache(self, activation_peak: int) -> None:
        """Size the KV cache from what is left (after the activations and the future CUDA graphs), allocate it."""
        cfg, runner = self.config, self.model_runner
        reserve = graph_memory_estimate(cfg, self.model_config.num_hidden_layers, activation_peak)
        num_blocks = choose_num_blocks(runner, activation_peak, reserve)
        block_size, max_len = cfg.cache.block_size, cfg.max_model_len
        kv_tokens = num_blocks * block_size
        if kv_tokens < max_len:  # (a CPU's fixed-size cache lowered max_model_len when it was resolved)
            raise ValueError(kv_too_small_message(kv_tokens, max_len, cfg, len(_live)))
        with self.report.phase("kv_cache", cfg.device):
            runner.allocate_kv_cache(num_blocks)
        self.num_blocks = num_blocks
        self.report.num_gpu_blocks, self.report.kv_cache_tokens = num_blocks, kv_tokens
        self.report.kv_cache_gib = num_blocks * runner.kv_bytes_per_block() / GiB
        logger.info("KV cache: %d blocks of %d tokens = %d tokens (%.3f GiB)", num_blocks, block_size, kv_tokens,
                    self.report.kv_cache_gib)

    def compile_model(self) -> None:
        """torch.compile as compilation_config says (compilation/levels.py), compiled now, not on the first
        request."""
        runner = self.model_runner
        with self.report.phase("torch.compile", self.config.device):
            runner.compiled = levels.compile_model(runner.model, self.model_config, self.config, runner.warm_up)
        self.report.compile = runner.compiled.info

    def capture_model(self) -> None:
        """CUDA graphs over the forward, at the sizes the config resolved: FULL, then PIECEWISE (one pool)."""
        cfg = self.config
        self.report.cudagraph = {"mode": cfg.cudagraph_mode, "capture_sizes": list(cfg.cudagraph_capture_sizes)}
        if not (cfg.full_capture_sizes or cfg.piecewise_capture_sizes):
            return
        with self.report.phase("cudagraph_capture", cfg.device):
            self.report.cudagraph.update(self.model_runner.capture_model())

    # ---- after startup -------------------------------------------------------------------------------
    def release(self) -> None:
        """Free the device memory of this engine now: graphs, compiled code, KV cache, weights. Idempotent."""
        _live.discard(self)
        if self.model_runner is not None:
            self.model_runner.release()
            self.model_runner = None
        free_dropped_engines()


def free_dropped_engines() -> None:
    """Collect engines that are garbage but not yet freed (reference cycles), and hand the memory the
    caching allocator keeps for them back to the driver, so the next KV sizing sees it as free."""
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
