"""The startup report and the KV-cache sizing arithmetic that worker/worker.py's phases use.

Each phase is timed and its memory noted in a StartupReport (`llm.startup_report()`). KV sizing on CUDA
takes what gpu_memory_utilization allows, minus what other processes use, what this process's live
tensors hold, the activation peak and the CUDA-graph reserve. Memory the caching allocator keeps but no
tensor uses (e.g. left by a dropped engine) counts as free.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import torch

from minivllm.config import EngineConfig, fixed_num_blocks, max_blocks
from minivllm.kernels import gemv_configs
from minivllm.worker.model_runner import ModelRunner

logger = logging.getLogger("minivllm")
GiB = 1 << 30


@dataclass
class StartupReport:
    phases: dict[str, float] = field(default_factory=dict)  # seconds
    memory_gib: dict[str, float] = field(default_factory=dict)
    num_gpu_blocks: int = 0
    kv_cache_tokens: int = 0
    kv_cache_gib: float = 0.0
    cudagraph: dict = field(default_factory=dict)  # filled by worker.capture_model
    compile: dict = field(default_factory=dict)  # filled by compilation

    @contextmanager
    def phase(self, name: str, device: torch.device) -> Iterator[None]:
        if device.type == "cuda":
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
        t0, tuned0 = time.perf_counter(), gemv_configs.tuning_seconds()
        yield
        if device.type == "cuda":
            torch.cuda.synchronize()
            self.memory_gib[name] = (torch.cuda.memory_allocated() - before) / GiB
        # the GEMV autotune runs inside whichever phase first meets a shape: its own phase, so a slow first
        # start on an unshipped GPU or model shows where the time went
        tuned = gemv_configs.tuning_seconds() - tuned0
        if tuned > 0:
            self.phases["gemv_autotune"] = self.phases.get("gemv_autotune", 0.0) + tuned
            logger.info("GEMV autotune took %.2f s during %s (%s)", tuned, name, gemv_configs.source())
        self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0 - tuned

    def as_dict(self) -> dict:
        return {"phases_s": {k: round(v, 4) for k, v in self.phases.items()},
                "memory_gib": {k: round(v, 4) for k, v in self.memory_gib.items()},
                "num_gpu_blocks": self.num_gpu_blocks, "kv_cache_tokens": self.kv_cache_tokens,
                "kv_cache_gib": round(self.kv_cache_gib, 4), "cudagraph": self.cudagraph, "compile": self.compile}

    def __str__(self) -> str:
        rows = [f"{k:<22}{v:8.2f} s" + (f"{self.memory_gib[k]:8.3f} GiB" if k in self.memory_gib else "")
                for k, v in self.phases.items()]
        rows.append(f"{'KV cache':<22}{self.num_gpu_blocks} blocks, {self.kv_cache_tokens} tokens, "
                    f"{self.kv_cache_gib:.3f} GiB")
        return "\n".join(rows)


def choose_num_blocks(runner: ModelRunner, activation_peak: int, graph_reserve: int) -> int:
    """How many KV blocks fit: the override, or the byte budget, or a CPU's default (config.fixed_num_blocks),
    or (CUDA) what gpu_memory_utilization leaves, capped as config.max_blocks says."""
    cfg, per_block = runner.config, runner.kv_bytes_per_block()
    blocks = fixed_num_blocks(cfg.cache, cfg.device, cfg.max_model_len, per_block, cfg.scheduler.max_num_seqs)
    if blocks is not None:
        return blocks
    free, total = torch.cuda.mem_get_info()
    used_by_others = total - free - torch.cuda.memory_reserved()
    budget = total * cfg.cache.gpu_memory_utilization - used_by_others - torch.cuda.memory_allocated() \
        - activation_peak - graph_reserve
    logger.info("Memory profiling: weights %.2f GiB, activation peak %.2f GiB, graph reserve %.2f GiB, "
                "budget for KV cache %.2f GiB", torch.cuda.memory_allocated() / GiB, activation_peak / GiB,
                graph_reserve / GiB, budget / GiB)
    return min(max(int(budget // per_block), 0), max_blocks(cfg.cache.block_size, cfg.max_model_len,
                                                           cfg.scheduler.max_num_seqs))


def kv_too_small_message(kv_tokens: int, max_len: int, cfg: EngineConfig, live_engines: int) -> str:
    """Why the KV cache is too small and what frees memory, with this process's share of the device."""
    msg = (f"the KV cache holds {kv_tokens} tokens, fewer than max_model_len={max_len}; lower max_model_len or "
           f"give the cache more memory (gpu_memory_utilization, kv_cache_memory_bytes, num_gpu_blocks_override)")
    if cfg.device.type != "cuda":
        return msg
    free, total = torch.cuda.mem_get_info()
    reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    others = max(total - free - reserved, 0)
    return (f"{msg}. This process holds {reserved / GiB:.2f} GiB of the GPU's {total / GiB:.2f} GiB "
            f"({allocated / GiB:.2f} GiB in live tensors, this engine's weights included; {live_engines} other "
            f"engine(s) of this process are alive); other processes use {others / GiB:.2f} GiB. To free it: "
            f"`del llm` or `llm.shutdown()` on engines you no longer need (and `gc.collect()`), or raise "
            f"gpu_memory_utilization (now {cfg.cache.gpu_memory_utilization}), or set kv_cache_memory_bytes.")
