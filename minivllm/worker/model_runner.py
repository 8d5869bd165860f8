"""One step on the device: fill the persistent buffers, run the forward (eager, compiled or a replayed CUDA
graph), compute logits for the sampled rows only, and sample. It returns as soon as the work is queued:
the sampled tokens stay on the device (a ModelRunnerOutput), so the engine decides when to wait for them
(at once, or after launching the next step: async scheduling)."""

from __future__ import annotations

import logging
import time
from functools import cached_property
from typing import Callable

import torch
from torch import nn

from minivllm.attention.metadata import set_forward_context
from minivllm.config import EngineConfig
from minivllm.engine.scheduler import SchedulerOutput
from minivllm.layers.sampler import Sampler
from minivllm.models.config import ModelConfig
from minivllm.worker.input_batch import InputBatch, PreparedBatch

logger = logging.getLogger("minivllm")


class ModelRunnerOutput:
    """One launched step: the sequences that got a token and those tokens, still on the device.

    `start_copy()` queues a non-blocking copy of the tokens to pinned host memory and records an event;
    `token_ids()` waits for that event only, not for the steps queued after this one.
    """

    def __init__(self, seqs: list, sampled: torch.Tensor | None, kind: str) -> None:
        self.seqs, self.sampled, self.kind = seqs, sampled, kind
        self.gpu_start: torch.cuda.Event | None = None
        self.done: torch.cuda.Event | None = None
        self._host: torch.Tensor | None = None

    @cached_property
    def row_of(self) -> dict[int, int]:
        """seq_id -> row of its token in `sampled` (only the next async step asks, so built on demand)."""
        return {seq.seq_id: i for i, seq in enumerate(self.seqs)}

    def start_copy(self) -> None:
        if self.sampled is not None and self.sampled.device.type == "cuda":
            self._host = torch.empty(self.sampled.shape, dtype=self.sampled.dtype, pin_memory=True)
            self._host.copy_(self.sampled, non_blocking=True)
        else:
            self._host = self.sampled
        if self.gpu_start is not None:  # CUDA: the event doubles as the end of the step's GPU timing
            self.done = torch.cuda.Event(enable_timing=True)
            self.done.record()

    def token_ids(self) -> list[int]:
        if self.done is not None:
            self.done.synchronize()
        return [] if self._host is None else self._host.tolist()

    def gpu_seconds(self) -> float | None:
        """GPU time from the step's first copy to its sampled tokens (call after token_ids())."""
        if self.gpu_start is None or self.done is None:
            return None
        return self.gpu_start.elapsed_time(self.done) / 1e3


class ModelRunner:
    def __init__(self, config: EngineConfig, model_config: ModelConfig, model: nn.Module) -> None:
        self.config, self.model_config, self.model = config, model_config, model
        self.device = config.device
        self.backend = config.resolved_attention_backend
        self.block_size = config.cache.block_size
        self.max_blocks_per_seq = (config.max_model_len + self.block_size - 1) // self.block_size
        sc = config.scheduler
        self.max_num_tokens = max(sc.max_num_batched_tokens, sc.max_num_seqs, 2)
        self.min_num_tokens = 1  # compile_model raises it to 2 (see there); smaller batches are padded
        self.input_batch = InputBatch(self.max_num_tokens, max(sc.max_num_seqs, 2), self.max_blocks_per_seq,
                                      self.block_size, self.device)
        self.sampler = Sampler(self.device, config.seed)
        self.kv_cache: torch.Tensor | None = None
        self.kv_caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # per-layer views of kv_cache
        # What runs the forward; torch.compile and the CUDA-graph dispatcher replace or wrap it.
        self.forward_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = model.forward
        # What FULL graphs capture: the compiled forward when something is compiled (level >= 1), else the
        # plain model forward, even when forward_fn is a traced one (level 0 with PIECEWISE graphs): the same
        # ops, and it runs 1 token without the traced forward's padding to 2 (batch 1 replays size 1).
        self.full_graph_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = model.forward
        self.full_graph_min_tokens = 1
        self.cudagraph_dispatcher = None  # set by worker.cuda_graph when graphs are captured
        self.piecewise = None  # compilation.backend.PiecewiseState when the forward is split at attention
        # Wall time per kind of step, GPU time (CUDA events) per kind, and CPU time spent launching steps.
        self.step_stats = {"prefill_time": 0.0, "decode_time": 0.0, "prefill_steps": 0, "decode_steps": 0,
                           "prefill_gpu_time": 0.0, "decode_gpu_time": 0.0, "cpu_launch_time": 0.0}

    # ---- KV cache --------------------------------------------------------------------------------
    def kv_bytes_per_block(self) -> int:
        m = self.model_config
        elem = torch.empty(0, dtype=self.config.dtype).element_size()
        return 2 * m.num_hidden_layers * self.block_size * m.num_key_value_heads * m.head_dim * elem

    def allocate_kv_cache(self, num_blocks: int) -> None:
        """One tensor [layers, 2, blocks, block_size, kv_heads, head_dim]; each layer gets views of its slice."""
        m = self.model_config
        self.kv_cache = torch.zeros(m.num_hidden_layers, 2, num_blocks, self.block_size, m.num_key_value_heads,
                                    m.head_dim, dtype=self.config.dtype, device=self.device)
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(m.num_hidden_layers)]
        for mod in self.model.modules():
            if type(mod).__name__ == "Attention":
                mod.use_custom_op = self.backend != "unregistered"

    @torch.inference_mode()
    def profile_run(self) -> int:
        """Run the largest batch once without a KV cache; return the peak activation bytes (CUDA only)."""
        n = self.max_num_tokens
        ids = torch.zeros(n, dtype=torch.long, device=self.device)
        pos = torch.arange(n, device=self.device) % self.config.max_model_len
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        with set_forward_context(None, self.backend):
            hidden = self.model(ids, pos)
            self.model.compute_logits(hidden[: self.config.scheduler.max_num_seqs])
        if self.device.type != "cuda":
            return 0
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del hidden
        torch.cuda.empty_cache()
        return peak

    # ---- one step --------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, sched: SchedulerOutput, prev: ModelRunnerOutput | None = None) -> ModelRunnerOutput:
        """Launch one scheduled batch and return without waiting for the GPU. `prev` is the step still in
        flight (async scheduling): the pending tokens of this batch are its sampled tokens."""
        t0 = time.perf_counter()
        runner = pad_t = pad_s = None
        if self.cudagraph_dispatcher is not None:
            runner, pad_t, pad_s = self.cudagraph_dispatcher.dispatch(sched)
        if pad_t is None and sched.num_tokens < self.min_num_tokens:  # padded rows: slot -1, no sampling
            pad_t = self.min_num_tokens
            pad_s = pad_t if sched.is_decode_only else None
        timing = self.device.type == "cuda"
        if timing:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        batch = self.input_batch.prepare(sched, pad_t, pad_s, prev)
        hidden = self.run_forward(batch, runner)
        seqs = [s.seq for s in sched.scheduled]
        rows = batch.sample_rows
        sampled = None
        if rows and runner is not None:  # a FULL graph returned the logits of every (padded) decode row
            sampled = self.sampler(hidden[: len(seqs)], seqs)
        elif rows and sched.is_decode_only:  # row i of the hidden states is sequence i: no gather needed
            sampled = self.sampler(self.model.compute_logits(hidden[: len(seqs)]), seqs)
        elif rows:
            sampled = self.sampler(self.model.compute_logits(hidden[batch.logits_indices]), [seqs[i] for i in rows])
        out = ModelRunnerOutput([seqs[i] for i in rows], sampled, "decode" if sched.is_decode_only else "prefill")
        if timing:
            out.gpu_start = start
        out.start_copy()
        self.step_stats[f"{out.kind}_steps"] += 1
        self.step_stats["cpu_launch_time"] += time.perf_counter() - t0
        return out

    def run_forward(self, batch: PreparedBatch, runner=None) -> torch.Tensor:
        ib = self.input_batch
        n = batch.num_padded_tokens
        if self.piecewise is not None:  # which piecewise graphs (if any) this step replays
            d = self.cudagraph_dispatcher
            self.piecewise.num_tokens = n if runner is None and d is not None and n in d.piecewise_sizes else None
        with set_forward_context(batch.attn_metadata, self.backend, self.kv_caches):
            if runner is not None:
                return runner(n)
            return self.forward_fn(ib.input_ids[:n], ib.positions[:n])
