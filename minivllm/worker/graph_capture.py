"""Capturing CUDA graphs: one pass per mode over the capture sizes, into one shared memory pool.

Why: in eager mode every op of every layer is a separate launch from Python (tens of microseconds of CPU
per layer); at small batch the GPU finishes each kernel before the next is enqueued, so the step is bound
by CPU time. A graph replays the whole recorded sequence of kernels with one launch.

The pieces: CudagraphDispatcher (worker/cudagraph_dispatcher.py) picks the graph of each step,
CUDAGraphWrapper (compilation/cuda_graph.py) captures and replays, and this file runs the capture pass:
a dummy batch of each size (InputBatch.dummy_decode or dummy_unified) through the wrapped callable, with the forward
context saying "capture this mode at this size". Sizes go largest first into ONE memory pool, so the
smaller graphs reuse the larger one's memory instead of each taking its own. The memory the graphs will
need is reserved before the KV cache is sized (graph_memory_estimate).
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch
from tqdm.auto import tqdm

from minivllm.attention.metadata import set_forward_context
from minivllm.compilation.cuda_graph import CudaGraphCaptureError, CUDAGraphWrapper
from minivllm.config import CUDAGraphMode, EngineConfig
from minivllm.logger import progress_bars_enabled
from minivllm.worker.input_batch import InputBatch

logger = logging.getLogger("minivllm")
MiB = 1 << 20
# Driver memory per kernel node of a captured graph, and kernel nodes per decoder layer, rounded up: H200,
# Qwen3-0.6B, default capture sizes, 8-12 kernels per layer per step; 10.5 KiB per node in FULL graphs,
# 11.8 KiB in piecewise ones (the free-memory drop of a capture minus its pool).
GRAPH_NODE_BYTES = 12 << 10
GRAPH_NODES_PER_LAYER = 12


@dataclass
class CaptureStats:
    mode: str
    sizes: list[int] = field(default_factory=list)
    seconds_per_size: dict[int, float] = field(default_factory=dict)
    pool_growth_mib: dict[int, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    total_mib: float = 0.0  # the device's free memory before minus after this mode's captures
    pool_mib: float | None = None  # what the allocator holds for the graph pool after them (both modes' graphs)

    def as_dict(self) -> dict:
        return {"mode": self.mode, "sizes": self.sizes, "total_seconds": round(self.total_seconds, 3),
                "total_mib": round(self.total_mib, 2),
                "pool_mib": None if self.pool_mib is None else round(self.pool_mib, 2),
                "seconds_per_size": {k: round(v, 4) for k, v in self.seconds_per_size.items()},
                "pool_growth_mib": {k: round(v, 3) for k, v in self.pool_growth_mib.items()}}


def reset_rng_after_failed_capture() -> None:
    """A capture that fails (e.g. a host sync inside it) never reaches capture_end's epilogue, so the
    default CUDA generator stays marked as capturing and the next random op anywhere in the process fails
    with "Offset increment outside graph capture". A clone of its state (same seed and offset) is clean."""
    try:
        gen = torch.cuda.default_generators[torch.cuda.current_device()]
        gen.graphsafe_set_state(gen.clone_state())
    except Exception as e:  # an older/newer torch without these calls: say so, do not mask the capture error
        logger.warning("could not reset the CUDA RNG state after a failed capture: %s", e)


def pool_mib(pool) -> float | None:
    """What the caching allocator holds for a graph pool: unlike the device's free memory around a capture,
    this does not move with what else the process loads or frees meanwhile (kernel code loaded on first
    launch, cuBLAS workspaces, blocks of an earlier engine released during the capture). None without a pool."""
    if pool is None:
        return None
    # the allocator segments (cudaMalloc'd blocks) of that pool
    return sum(seg["total_size"] for seg in torch.cuda.memory_snapshot()
               if tuple(seg["segment_pool_id"]) == tuple(pool)) / MiB


def capture_all_sizes(mode: CUDAGraphMode | str, sizes: list[int], desc: str, capture_one: Callable[[int], None],
                      pool=None) -> CaptureStats:
    """The bookkeeping every capture pass shares: sizes largest first (the smaller graphs then reuse the
    pool memory of the larger one), Python's GC frozen (no frees mid-capture), time and pool growth per
    size, and vLLM's log line. `capture_one(n)` captures size n and raises a CudaGraphCaptureError."""
    stats = CaptureStats(mode, sorted(sizes))
    t_start = time.perf_counter()
    torch.cuda.synchronize()
    gc.collect()
    # torch.cuda.graph() empties the allocator's cache when a capture starts, so blocks cached before it (freed
    # activations) would be handed back to the driver mid-measurement and read as a NEGATIVE pool growth
    # (seen on the H200: -400 MiB at the first size). Empty it first: free memory then moves by the pool only.
    torch.cuda.empty_cache()
    free_start = torch.cuda.mem_get_info()[0]
    gc.freeze()
    try:
        for n in tqdm(sorted(sizes, reverse=True), desc=desc, disable=not sizes or not progress_bars_enabled()):
            t0 = time.perf_counter()
            torch.cuda.empty_cache()  # the previous size's warm-up activations, cached outside the pool
            free0 = torch.cuda.mem_get_info()[0]
            capture_one(n)
            torch.cuda.synchronize()
            stats.seconds_per_size[n] = time.perf_counter() - t0
            stats.pool_growth_mib[n] = (free0 - torch.cuda.mem_get_info()[0]) / MiB
    finally:
        gc.unfreeze()
    stats.total_seconds = time.perf_counter() - t_start
    stats.total_mib = (free_start - torch.cuda.mem_get_info()[0]) / MiB
    stats.pool_mib = pool_mib(pool)
    logger.info("Graph capturing finished in %.2f secs, took %.3f GiB (mode %s, %d sizes)%s",
                stats.total_seconds, stats.total_mib / 1024, mode, len(sizes),
                "" if stats.pool_mib is None else f"; the graph pool now holds {stats.pool_mib / 1024:.3f} GiB")
    return stats


def graph_memory_estimate(config: EngineConfig, num_layers: int, activation_peak: int) -> int:
    """Bytes to reserve for CUDA graphs BEFORE sizing the KV cache, so capture cannot run out of memory.

    Two parts. The pool: one shared pool holds what the largest captured batch needs (smaller sizes reuse
    it), at most the profile run's activation peak scaled to that batch, for FULL and for PIECEWISE. The
    graph executables: the driver keeps ~11 KiB per captured kernel node outside the pool (H200, Qwen3-0.6B,
    default sizes: 35 FULL graphs took 104 MiB beyond the pool, 51 x 29 piecewise graphs 164 MiB).
    """
    full, piecewise = config.full_capture_sizes, config.piecewise_capture_sizes
    if not (full or piecewise):
        return 0
    largest = max(config.cudagraph_capture_sizes, default=0)
    q = 1 if config.full_graphs_by_tokens else config.uniform_decode_query_len  # speculation

    def per_mode(tokens: int) -> int:
        return int(activation_peak * min(1.0, tokens / config.max_num_tokens))

    nodes = (len(full) + len(piecewise)) * GRAPH_NODES_PER_LAYER * num_layers
    return ((per_mode(max(largest, max(full, default=0) * q)) if full else 0)
            + (per_mode(largest) if piecewise else 0) + max(64 << 20, nodes * GRAPH_NODE_BYTES))


class CaptureRunner(Protocol):
    """What a capture pass reads of the model runner (a Protocol: worker/model_runner.py imports this file)."""

    input_batch: InputBatch
    backend: str
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]] | None


@torch.inference_mode()
def capture_graphs(runner: CaptureRunner, mode: CUDAGraphMode, sizes: list[int], run: Callable,
                   wrappers: list[CUDAGraphWrapper], pool: Any, any_batch: bool, query_len: int = 1) -> CaptureStats:
    """The capture pass of one runtime mode: for each size, a dummy batch through `run` (the FULL forward, or
    the split forward whose pieces are the PIECEWISE wrappers) with the forward context set to (mode, size),
    so each wrapper of that mode captures itself. any_batch: the dummy batch is laid out for graphs keyed by
    token count (FULL of any batch: InputBatch.dummy_unified), else n decode rows. query_len > 1 (speculative
    decoding): a decode graph of n requests holds n * query_len tokens, laid out for the unified kernel (a
    verify step's queries are longer than one token). A failure frees every graph of the mode and says what
    to try instead."""
    ib = runner.input_batch
    dummy_batch = ib.dummy_unified if mode is CUDAGraphMode.FULL and (any_batch or query_len > 1) \
        else ib.dummy_decode
    for w in wrappers:
        w.pool = pool
    what = "tokens" if any_batch else "batch size"
    advice = ("Something in the forward is not capturable (a host sync such as .item(), or a changing "
              "allocation). Try enforce_eager=True, cudagraph_mode='PIECEWISE', or smaller cudagraph_capture_sizes."
              if mode is CUDAGraphMode.FULL else
              "Try enforce_eager=True, cudagraph_mode='FULL' or smaller cudagraph_capture_sizes.")

    def capture_one(n: int) -> None:
        t = n * query_len
        meta = dummy_batch(t)
        try:
            with set_forward_context(meta, runner.backend, runner.kv_caches, mode, t, capturing=True):
                run(ib.input_ids[:t], ib.positions[:t])
        except Exception as e:
            for w in wrappers:
                w.clear()
            reset_rng_after_failed_capture()
            torch.cuda.synchronize()
            where = f"batch size {n}" if what == "batch size" else f"{n} tokens"
            raise CudaGraphCaptureError(f"CUDA graph capture failed (mode {mode.value}, {where}): "
                                        f"{type(e).__name__}: {e}. {advice}") from e

    desc = ("Capturing CUDA graphs (decode, FULL)" + (f", {query_len} tokens per request" if query_len > 1 else "")
            if mode is CUDAGraphMode.FULL and not any_batch
            else f"Capturing CUDA graphs (mixed prefill-decode, {mode.value})")
    return capture_all_sizes(mode.value, sizes, desc, capture_one, pool)
