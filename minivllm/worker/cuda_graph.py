"""CUDA graphs for decode: capture sizes, the dispatcher, padding, one shared memory pool.

Why: in eager mode every op of every layer is a separate launch from Python (tens of microseconds of CPU
per layer); at small batch the GPU finishes each kernel before the next is enqueued, so the step is bound
by CPU time. A graph replays the whole recorded sequence of kernels with one launch.

What makes replay correct: the graph reads and writes the exact addresses it saw while capturing. So all
inputs come from the persistent buffers of InputBatch (fixed addresses), the KV cache is allocated before
capture, and a batch of S sequences replays the graph of the smallest captured size B >= S with rows
S..B-1 padded (slot -1: no KV write; seq_len 0: attention writes zeros); their outputs are discarded.
Sizes are captured largest first into ONE memory pool, so the smaller graphs reuse the larger one's memory
instead of each taking its own.
"""

from __future__ import annotations

import bisect
import gc
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from tqdm.auto import tqdm

from minivllm.attention.metadata import AttentionMetadata, set_forward_context
from minivllm.engine.scheduler import SchedulerOutput

logger = logging.getLogger("minivllm")
MiB = 1 << 20


class CudaGraphCaptureError(RuntimeError):
    """A capture failed; names the mode and size and says what to try instead."""


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


def segments_mib(segments: list[dict], pool_id) -> float:
    """MiB of the allocator segments (cudaMalloc'd blocks) that belong to one memory pool, from a
    torch.cuda.memory_snapshot() segment list."""
    return sum(seg["total_size"] for seg in segments
               if tuple(seg.get("segment_pool_id", ())) == tuple(pool_id)) / MiB


def pool_mib(pool) -> float | None:
    """What the caching allocator holds for a graph pool: unlike the device's free memory around a capture,
    this does not move with what else the process loads or frees meanwhile (kernel code loaded on first
    launch, cuBLAS workspaces, blocks of an earlier engine released during the capture). None if unknown."""
    if pool is None:
        return None
    try:
        return segments_mib(torch.cuda.memory_snapshot(), pool)
    except Exception as e:  # noqa: BLE001 - a torch without this snapshot field: fall back to free memory
        logger.debug("no allocator snapshot for the graph pool: %s", e)
        return None


def capture_all_sizes(mode: str, sizes: list[int], desc: str, capture_one: Callable[[int], None],
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
        for n in tqdm(sorted(sizes, reverse=True), desc=desc, disable=not sizes):
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


class CUDAGraphDispatcher:
    """Owns the captured FULL decode graphs and decides, per step, which graph (if any) runs it.

    A FULL graph covers the whole decode step including the LM head, so its replay returns logits for
    every (padded) row; piecewise graphs and eager runs return hidden states.
    """

    def __init__(self, runner, capture_sizes: list[int], mode: str) -> None:
        self.runner = runner
        self.mode = mode
        self.sizes = sorted(capture_sizes)
        self.full_graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        self.piecewise_sizes: list[int] = []  # token counts the piecewise (compiled) forward has graphs for
        self.stats: dict[str, CaptureStats] = {}
        self.counts = {"full": 0, "piecewise": 0, "eager": 0}
        self.logits_buf: torch.Tensor | None = None  # FULL graphs write their logits here (outside the pool)

    # ---- capture ---------------------------------------------------------------------------------
    def _decode_metadata(self, n: int) -> AttentionMetadata:
        ib = self.runner.input_batch
        return AttentionMetadata(slot_mapping=ib.slot_mapping[:n], query_start_loc=ib.query_start_loc[:n + 1],
                                 seq_lens=ib.seq_lens[:n], block_tables=ib.block_tables[:n], max_query_len=1,
                                 max_seq_len=self.runner.config.max_model_len, decode_only=True)

    def _dummy_decode_inputs(self, n: int) -> None:
        ib = self.runner.input_batch
        ib.input_ids[:n].zero_()
        ib.positions[:n].zero_()
        ib.slot_mapping[:n].fill_(-1)
        ib.seq_lens[:n].zero_()
        ib.query_start_loc[:n + 1].copy_(torch.arange(n + 1, dtype=torch.int32, device=ib.device))

    @torch.inference_mode()
    def capture_full(self) -> CaptureStats:
        ib = self.runner.input_batch
        sizes = [s for s in self.sizes if s <= ib.max_num_seqs]  # >= full_graph_min_tokens (LLM._setup_graphs)
        self.pool = self.pool or torch.cuda.graph_pool_handle()
        if sizes and self.logits_buf is None:
            vocab, dtype = self.runner.model_config.vocab_size, self.runner.config.dtype
            self.logits_buf = torch.empty(max(sizes), vocab, dtype=dtype, device=ib.device)
        stats = capture_all_sizes("FULL", sizes, "Capturing CUDA graphs (decode, FULL)", self._capture_full_one,
                                  self.pool)
        self.stats["FULL"] = stats
        return stats

    @torch.inference_mode()
    def recapture_full(self, n: int) -> None:
        """Capture the FULL graph of batch size n again, replacing the old one (its pool memory is reused).
        `bench gemv-tune` does this after changing a kernel's block sizes: a graph keeps the kernels it
        was captured with."""
        if n not in self.full_graphs:
            raise ValueError(f"no FULL CUDA graph of batch size {n} to re-capture (captured: "
                             f"{sorted(self.full_graphs)})")
        del self.full_graphs[n]
        torch.cuda.synchronize()
        self._capture_full_one(n)

    def _capture_full_one(self, n: int) -> None:
        runner, ib = self.runner, self.runner.input_batch
        self._dummy_decode_inputs(n)
        meta = self._decode_metadata(n)
        try:
            with set_forward_context(meta, runner.backend, runner.kv_caches):
                runner.model.compute_logits(runner.full_graph_fn(ib.input_ids[:n], ib.positions[:n]),
                                            self.logits_buf[:n])  # warm-up
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool):
                    # The LM head is in the graph too (a decode step samples every row). It writes into
                    # one persistent buffer shared by all sizes, so no graph keeps its own [n, vocab]
                    # output alive in the pool.
                    out = self.logits_buf[:n]
                    runner.model.compute_logits(runner.full_graph_fn(ib.input_ids[:n], ib.positions[:n]),
                                                out=out)
        except Exception as e:
            self.full_graphs.clear()
            reset_rng_after_failed_capture()
            torch.cuda.synchronize()
            raise CudaGraphCaptureError(
                f"CUDA graph capture failed (mode FULL, batch size {n}): {type(e).__name__}: {e}. "
                f"Something in the forward is not capturable (a host sync such as .item(), or a "
                f"changing allocation). Try enforce_eager=True, cudagraph_mode='PIECEWISE', or smaller "
                f"cudagraph_capture_sizes.") from e
        self.full_graphs[n] = (graph, out)

    # ---- per step ----------------------------------------------------------------------------------
    def dispatch(self, sched: SchedulerOutput):
        """Return (runner or None, padded token count, padded seq count) for this batch."""
        S, T = len(sched.scheduled), sched.num_tokens
        if sched.is_decode_only and self.full_graphs:
            i = bisect.bisect_left(self.sizes, S)
            if i < len(self.sizes) and self.sizes[i] in self.full_graphs:
                n = self.sizes[i]
                self.counts["full"] += 1
                graph, out = self.full_graphs[n]

                def replay(_n: int, graph=graph, out=out) -> torch.Tensor:
                    graph.replay()
                    return out

                return replay, n, n
        if self.piecewise_sizes:
            i = bisect.bisect_left(self.piecewise_sizes, T)
            if i < len(self.piecewise_sizes):
                self.counts["piecewise"] += 1
                return None, self.piecewise_sizes[i], None
        self.counts["eager"] += 1
        return None, None, None
