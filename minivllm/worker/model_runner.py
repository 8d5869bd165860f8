"""One step on the device: fill the persistent buffers, run the forward (eager, compiled or a replayed CUDA
graph), compute logits for the sampled rows only, and sample. It returns as soon as the work is queued:
the sampled tokens stay on the device (a ModelRunnerOutput), so the engine decides when to wait for them
(at once, or after launching the next step: async scheduling).

The runner also holds what startup (worker/worker.py) gives it: the KV cache, the compiled forward, the
CUDA graphs and the dispatcher that picks one of them per step.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from minivllm.attention.metadata import set_forward_context
from minivllm.compilation.cuda_graph import CUDAGraphWrapper
from minivllm.compilation.levels import CompiledForward
from minivllm.config import CUDAGraphMode, EngineConfig, kv_bytes_per_block
from minivllm.layers.sampler import LogprobsTensors, Sampler, gather_logprobs
from minivllm.models.config import ModelConfig
from minivllm.spec_decode.rejection_sampler import RejectionSampler
from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher
from minivllm.worker.graph_capture import capture_graphs
from minivllm.worker.input_batch import InputBatch, PreparedBatch
from minivllm.worker.model_runner_output import ModelRunnerOutput

if TYPE_CHECKING:  # the engine's type, named in annotations only: worker/ never imports engine/
    from minivllm.engine.sched_output import SchedulerOutput

logger = logging.getLogger("minivllm")
FULL, PIECEWISE, NONE = CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE, CUDAGraphMode.NONE


class ModelRunner:
    def __init__(self, config: EngineConfig, model_config: ModelConfig, model: nn.Module) -> None:
        self.config, self.model_config, self.model = config, model_config, model
        self.device = config.device
        self.backend = config.attention_backend
        self.block_size = config.cache.block_size
        self.max_blocks_per_seq = (config.max_model_len + self.block_size - 1) // self.block_size
        sc = config.scheduler
        self.max_num_tokens = config.max_num_tokens
        self.input_batch = InputBatch(self.max_num_tokens, max(sc.max_num_seqs, 2), self.max_blocks_per_seq,
                                      self.block_size, model_config.num_key_value_heads, self.device)
        self.sampler = Sampler(self.device, config.seed)
        # Speculative decoding: every sampled sequence's new tokens come from verifying its draft (maybe empty)
        self.rejection_sampler = RejectionSampler(self.sampler) if config.speculative is not None else None
        self.kv_cache: torch.Tensor | None = None
        self.kv_caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # per-layer views of kv_cache
        self.compiled = CompiledForward(model.forward)  # the plain forward until the worker compiles
        self.cudagraph_dispatcher = CudagraphDispatcher(config.full_graphs_by_tokens, config.min_num_tokens,
                                                        config.uniform_decode_query_len)
        self.full_graph: CUDAGraphWrapper | None = None  # the FULL graphs, one per captured size
        self.graph_pool = None  # one memory pool for every graph of this engine
        # Wall time per kind of step, GPU time (CUDA events) per kind, and CPU time spent launching steps.
        self.step_stats = {"prefill_time": 0.0, "decode_time": 0.0, "prefill_steps": 0, "decode_steps": 0,
                           "prefill_gpu_time": 0.0, "decode_gpu_time": 0.0, "cpu_launch_time": 0.0}

    # ---- KV cache --------------------------------------------------------------------------------
    def kv_bytes_per_block(self) -> int:
        m = self.model_config
        return kv_bytes_per_block(m.num_hidden_layers, m.num_key_value_heads, m.head_dim, self.block_size,
                                  self.config.dtype)

    def allocate_kv_cache(self, num_blocks: int) -> None:
        """One tensor [layers, 2, blocks, block_size, kv_heads, head_dim]; each layer gets views of its slice."""
        m = self.model_config
        self.kv_cache = torch.zeros(m.num_hidden_layers, 2, num_blocks, self.block_size, m.num_key_value_heads,
                                    m.head_dim, dtype=self.config.dtype, device=self.device)
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(m.num_hidden_layers)]

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

    # ---- compile and CUDA graphs (set by the worker at startup) ----------------------------------
    @torch.inference_mode()
    def warm_up(self, fn) -> None:
        """Run fn once over a dummy decode batch (compiles it now, at startup)."""
        ib = self.input_batch
        n = min(8, ib.max_num_seqs)
        with set_forward_context(ib.dummy_decode(n), self.backend, self.kv_caches):
            fn(ib.input_ids[:n], ib.positions[:n])

    def capture_model(self) -> dict:
        """Capture the graphs the config resolved, FULL then PIECEWISE, into one pool; make them dispatchable.
        Returns the capture statistics per runtime mode."""
        cfg, stats = self.config, {}
        self.graph_pool = torch.cuda.graph_pool_handle()
        if cfg.full_capture_sizes:
            forward = self.model.forward if cfg.full_graphs_capture == "plain" else self.compiled.forward
            self.full_graph = CUDAGraphWrapper(forward, FULL, "FULL forward")
            any_batch = cfg.full_graphs_by_tokens  # by token count; else pure decode by batch size
            stats[FULL.value] = capture_graphs(self, FULL, list(cfg.full_capture_sizes), self.full_graph,
                                               [self.full_graph], self.graph_pool, any_batch,
                                               1 if any_batch else cfg.uniform_decode_query_len).as_dict()
            self.cudagraph_dispatcher.activate(FULL, list(cfg.full_capture_sizes))
        if cfg.piecewise_capture_sizes:
            stats[PIECEWISE.value] = capture_graphs(self, PIECEWISE, list(cfg.piecewise_capture_sizes),
                                                    self.compiled.forward, self.compiled.piecewise_wrappers,
                                                    self.graph_pool, True).as_dict()
            self.cudagraph_dispatcher.activate(PIECEWISE, list(cfg.piecewise_capture_sizes))
        return stats

    def release(self) -> None:
        """Free everything: graphs, compiled code, KV cache, weights. The runner is unusable after it."""
        if self.full_graph is not None:
            self.full_graph.release()
        self.compiled.release()
        self.compiled = self.full_graph = self.graph_pool = self.cudagraph_dispatcher = None
        self.kv_cache = self.kv_caches = None
        self.model = None

    # ---- one step --------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, sched: SchedulerOutput, prev: ModelRunnerOutput | None = None) -> ModelRunnerOutput:
        """Launch one scheduled batch and return without waiting for the GPU. `prev` is the step in flight
        (async scheduling): the pending tokens of this batch are its sampled tokens."""
        t0 = time.perf_counter()
        decode_only = sched.is_decode_only
        uniform_decode = sched.is_uniform_decode  # decode_only, or a verify step (speculative decoding)
        pick = self.cudagraph_dispatcher.dispatch(sched.num_tokens, len(sched.scheduled), uniform_decode)
        # A FULL graph of any batch (by token count), or a decode graph of q_len > 1 tokens per request: both
        # run the unified attention kernel, whose launch depends on the token count only.
        unified = pick.mode is FULL and (not pick.uniform_decode or self.config.uniform_decode_query_len > 1)
        timing = self.device.type == "cuda"
        if timing:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        ib = self.input_batch
        batch = ib.prepare(sched, pick.num_padded_tokens, pick.num_padded_seqs, prev, unified=unified)
        hidden = self.run_forward(batch, pick.mode)
        seqs = [s.seq for s in sched.scheduled]
        rows = batch.sample_rows
        sampled = logprobs = None
        spec = None
        if rows and self.rejection_sampler is not None:
            seqs = [seqs[i] for i in rows]
            sampled, logprobs, spec = self.verify(sched, batch, hidden, seqs)
        elif rows:
            if decode_only:  # row i of the hidden states is sequence i: no gather needed
                logits = self.model.compute_logits(hidden[: len(seqs)])
            else:
                seqs = [seqs[i] for i in rows]
                logits = self.model.compute_logits(hidden[batch.logits_indices])
            meta = ib.sampling_metadata(seqs)
            sampled = self.sampler(logits, meta)
            if meta.max_num_logprobs is not None:
                logprobs = gather_logprobs(logits, sampled, meta.max_num_logprobs)
        out = ModelRunnerOutput(seqs if rows else [], sampled, "decode" if uniform_decode else "prefill", logprobs)
        if spec is not None:
            out.num_draft_tokens = spec
        if not decode_only and any(s.seq.params.prompt_logprobs is not None for s in sched.scheduled):
            out.prompt_logprobs = self.prompt_logprobs(sched, batch, hidden)
        if timing:
            out.gpu_start = start
        out.start_copy()
        self.step_stats[f"{out.kind}_steps"] += 1
        self.step_stats["cpu_launch_time"] += time.perf_counter() - t0
        return out

    def verify(self, sched: SchedulerOutput, batch: PreparedBatch, hidden: torch.Tensor, seqs: list):
        """Speculative decoding: logits at each sampled sequence's last known token and at each of its draft
        tokens, W = 1 + the longest draft rows per sequence (a shorter draft repeats its last row), then the
        rejection sampler. Returns the new tokens [S, W] (-1 past each sequence's), their logprobs if asked
        (rows S * W) and the draft length per sequence."""
        qsl = batch.attn_metadata.query_start_loc_cpu
        drafts = [sched.scheduled[i].spec_token_ids for i in batch.sample_rows]
        W = 1 + max(map(len, drafts))
        idx = np.empty((len(drafts), W), dtype=np.int64)
        pad = np.full((len(drafts), W - 1), -1, dtype=np.int64)
        for r, (i, d) in enumerate(zip(batch.sample_rows, drafts)):
            last = qsl[i + 1] - 1  # the row of the sequence's last query token: its last draft token, if any
            idx[r] = np.minimum(np.arange(last - len(d), last - len(d) + W), last)
            pad[r, :len(d)] = d
        idx_t = self.sampler.to_device(idx.reshape(-1).tolist(), torch.int64)
        draft_t = self.sampler.to_device(pad.tolist(), torch.int64).view(len(drafts), W - 1)
        logits = self.model.compute_logits(hidden[idx_t])
        meta = self.input_batch.sampling_metadata(seqs)
        tokens = self.rejection_sampler(logits.view(len(drafts), W, -1), draft_t, meta)
        logprobs = None
        if meta.max_num_logprobs is not None:
            logprobs = gather_logprobs(logits, tokens.clamp(min=0).view(-1), meta.max_num_logprobs)
        return tokens, logprobs, [len(d) for d in drafts]

    def prompt_logprobs(self, sched: SchedulerOutput, batch: PreparedBatch, hidden: torch.Tensor):
        """Raw logprobs of the prompt tokens this chunk predicts: the hidden row at position p scores prompt
        token p + 1. Returns ([(seq, first position, count)], LogprobsTensors) over those rows."""
        owners, rows, targets = [], [], []
        qsl = batch.attn_metadata.query_start_loc_cpu
        for i, s in enumerate(sched.scheduled):
            seq, start = s.seq, s.seq.num_computed_tokens
            end = min(start + s.num_new_tokens, seq.num_prompt_tokens - 1)
            if seq.params.prompt_logprobs is None or end <= start:
                continue
            owners.append((seq, start, end - start))
            rows.extend(range(qsl[i], qsl[i] + end - start))
            targets.extend(seq.prompt_token_ids[start + 1:end + 1])
        if not owners:
            return None
        k = max(seq.params.prompt_logprobs for seq, _, _ in owners)
        rows, targets = torch.tensor(rows, device=self.device), torch.tensor(targets, device=self.device)
        # 256 rows at a time: a whole chunk's fp32 logits (8192 x a 150k vocabulary: 5 GB) would not fit
        parts = [gather_logprobs(self.model.compute_logits(hidden[rows[i:i + 256]]), targets[i:i + 256], k)
                 for i in range(0, len(rows), 256)]
        return owners, LogprobsTensors(*(torch.cat(t) for t in zip(*parts)))

    def run_forward(self, batch: PreparedBatch, mode: CUDAGraphMode = NONE) -> torch.Tensor:
        """The hidden states of the step, under the step's graph decision: a FULL replay, or the (compiled)
        forward, whose PIECEWISE wrappers replay their pieces when the mode is PIECEWISE."""
        ib = self.input_batch
        n = batch.num_padded_tokens
        with set_forward_context(batch.attn_metadata, self.backend, self.kv_caches, mode, n):
            forward = self.full_graph if mode is FULL else self.compiled.forward
            return forward(ib.input_ids[:n], ib.positions[:n])
