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

import torch
from torch import nn

from minivllm.attention.layer import Attention
from minivllm.attention.metadata import set_forward_context
from minivllm.compilation.cuda_graph import CUDAGraphWrapper
from minivllm.compilation.levels import CompiledForward, Forward
from minivllm.config import CUDAGraphMode, EngineConfig
from minivllm.engine.sched_output import SchedulerOutput
from minivllm.layers.sampler import Sampler, gather_logprobs
from minivllm.models.config import ModelConfig
from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher
from minivllm.worker.graph_capture import CaptureStats, capture_graphs
from minivllm.worker.input_batch import InputBatch, PreparedBatch
from minivllm.worker.model_runner_output import ModelRunnerOutput

logger = logging.getLogger("minivllm")
FULL, PIECEWISE, NONE = CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE, CUDAGraphMode.NONE


class DecodeStep:
    """What a FULL graph captures: the forward and the LM head of a decode batch, the logits written into
    one persistent buffer shared by all sizes (so no graph keeps its own [n, vocab] output in the pool)."""

    def __init__(self, model: nn.Module, forward: Forward, logits: torch.Tensor) -> None:
        self.model, self.forward, self.logits = model, forward, logits

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[0]
        return self.model.compute_logits(self.forward(input_ids, positions), out=self.logits[:n])


class ModelRunner:
    def __init__(self, config: EngineConfig, model_config: ModelConfig, model: nn.Module) -> None:
        self.config, self.model_config, self.model = config, model_config, model
        self.device = config.device
        self.backend = config.resolved_attention_backend
        self.block_size = config.cache.block_size
        self.max_blocks_per_seq = (config.max_model_len + self.block_size - 1) // self.block_size
        sc = config.scheduler
        self.max_num_tokens = max(sc.max_num_batched_tokens, sc.max_num_seqs, 2)
        self.input_batch = InputBatch(self.max_num_tokens, max(sc.max_num_seqs, 2), self.max_blocks_per_seq,
                                      self.block_size, self.device)
        self.sampler = Sampler(self.device, config.seed)
        self.kv_cache: torch.Tensor | None = None
        self.kv_caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # per-layer views of kv_cache
        self.set_compiled(None)
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
            if isinstance(mod, Attention):
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

    # ---- compile and CUDA graphs (set by the worker at startup) ----------------------------------
    def set_compiled(self, compiled: CompiledForward | None) -> None:
        """Run with `compiled` (None: the plain forward, no graphs). Frees the graphs of the previous one."""
        self.drop_graphs()
        plain = self.model.forward
        self.compiled = compiled or CompiledForward(plain, plain)
        self.forward_fn: Forward = self.compiled.forward  # what runs every step that is not a FULL replay
        self.full_graph_fn: Forward = self.compiled.full_graph_forward  # what FULL graphs capture
        self.min_num_tokens = self.compiled.min_num_tokens  # smaller batches are padded (slot -1, no sampling)
        self.full_graph_min_tokens = self.compiled.full_graph_min_tokens
        self.split_backend = self.compiled.split_backend

    def drop_graphs(self) -> None:
        for w in self._wrappers():
            w.clear()
        self.cudagraph_dispatcher: CudagraphDispatcher | None = None
        self.full_step: CUDAGraphWrapper | None = None
        self.graph_pool = None
        self.logits_buf: torch.Tensor | None = None  # FULL graphs write their logits here (outside the pool)

    def _wrappers(self) -> list[CUDAGraphWrapper]:
        compiled = getattr(self, "compiled", None)
        pieces = compiled.piecewise_wrappers if compiled is not None else []
        full = getattr(self, "full_step", None)
        return pieces + ([full] if full is not None else [])

    @torch.inference_mode()
    def warm_up(self, fn: Forward) -> None:
        """Run fn once over a dummy decode batch (compiles it now, at startup)."""
        ib = self.input_batch
        n = min(8, ib.max_num_seqs)
        with set_forward_context(ib.dummy_decode(n), self.backend, self.kv_caches):
            fn(ib.input_ids[:n], ib.positions[:n])

    def capture(self, mode: CUDAGraphMode, sizes: list[int]) -> CaptureStats | None:
        """Capture the FULL decode step or the PIECEWISE pieces at these sizes; None if there is nothing to
        capture (PIECEWISE needs a forward split at attention)."""
        ib, d = self.input_batch, self.cudagraph_dispatcher
        self.graph_pool = self.graph_pool or torch.cuda.graph_pool_handle()
        dummy = None
        if mode is FULL and d.full_any_batch:  # vLLM's FULL: the forward of any batch, by token count
            sizes = sorted({max(s, self.full_graph_min_tokens) for s in sizes if s <= ib.max_num_tokens})
            # The LM head stays outside (as in vLLM): it runs on the sampled rows only, whose number varies.
            self.full_step = CUDAGraphWrapper(self.full_graph_fn, FULL, "FULL forward (any batch)")
            run, wrappers, dummy = self.full_step, [self.full_step], ib.dummy_unified
        elif mode is FULL:
            sizes = [s for s in sizes if s <= ib.max_num_seqs]
            if sizes and self.logits_buf is None:
                self.logits_buf = torch.empty(max(sizes), self.model_config.vocab_size, dtype=self.config.dtype,
                                              device=self.device)
            self.full_step = CUDAGraphWrapper(DecodeStep(self.model, self.full_graph_fn, self.logits_buf), FULL,
                                              "FULL decode step")
            run, wrappers = self.full_step, [self.full_step]
        else:
            wrappers = self.compiled.piecewise_wrappers
            if not wrappers:
                return None
            sizes = sorted({max(s, self.min_num_tokens) for s in sizes if s <= ib.max_num_tokens})
            run = self.forward_fn
        try:
            stats = capture_graphs(self, mode, sizes, run, wrappers, self.graph_pool, dummy_batch=dummy)
        except Exception:
            d.activate(mode, [])
            raise
        d.activate(mode, sizes)
        d.stats[mode.value] = stats
        return stats

    def release(self) -> None:
        """Free everything: graphs, compiled code, KV cache, weights. The runner is unusable after it."""
        for w in self._wrappers():
            w.release()
        if self.split_backend is not None:
            self.split_backend.release()
        self.drop_graphs()
        self.compiled = self.forward_fn = self.full_graph_fn = self.split_backend = None
        self.kv_cache = self.kv_caches = None
        self.model = None

    # ---- one step --------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, sched: SchedulerOutput, prev: ModelRunnerOutput | None = None) -> ModelRunnerOutput:
        """Launch one scheduled batch and return without waiting for the GPU. `prev` is the step in flight
        (async scheduling): the pending tokens of this batch are its sampled tokens."""
        t0 = time.perf_counter()
        mode, pad_t, pad_s, unified = NONE, None, None, False
        decode_only = sched.is_decode_only
        if self.cudagraph_dispatcher is not None:
            pick = self.cudagraph_dispatcher.dispatch(sched.num_tokens, len(sched.scheduled), decode_only)
            mode, pad_t, pad_s = pick.mode, pick.num_padded_tokens, pick.num_padded_seqs
            unified = mode is FULL and not pick.uniform_decode  # a FULL graph of any batch: hidden states out
        if pad_t is None and sched.num_tokens < self.min_num_tokens:  # padded rows: slot -1, no sampling
            pad_t = self.min_num_tokens
            pad_s = pad_t if decode_only else None
        timing = self.device.type == "cuda"
        if timing:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        ib = self.input_batch
        batch = ib.prepare(sched, pad_t, pad_s, prev, unified=unified)
        hidden = self.run_forward(batch, mode)
        seqs = [s.seq for s in sched.scheduled]
        rows = batch.sample_rows
        sampled = logprobs = None
        if rows:
            if mode is FULL and not unified:  # a decode graph returned the logits of every (padded) row
                logits = hidden[: len(seqs)]
            elif decode_only:  # row i of the hidden states is sequence i: no gather needed
                logits = self.model.compute_logits(hidden[: len(seqs)])
            else:
                seqs = [seqs[i] for i in rows]
                logits = self.model.compute_logits(hidden[batch.logits_indices])
            meta = ib.sampling_metadata(seqs)
            sampled = self.sampler(logits, meta)
            if meta.max_num_logprobs is not None:
                logprobs = gather_logprobs(logits, sampled, meta.max_num_logprobs)
        out = ModelRunnerOutput(seqs if rows else [], sampled, "decode" if decode_only else "prefill", logprobs)
        if not decode_only and any(s.seq.params.prompt_logprobs is not None for s in sched.scheduled):
            out.prompt_logprobs = self.prompt_logprobs(sched, batch, hidden)
        if timing:
            out.gpu_start = start
        out.start_copy()
        self.step_stats[f"{out.kind}_steps"] += 1
        self.step_stats["cpu_launch_time"] += time.perf_counter() - t0
        return out

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
        logits = self.model.compute_logits(hidden[torch.tensor(rows, device=self.device)])
        return owners, gather_logprobs(logits, torch.tensor(targets, device=self.device), k)

    def run_forward(self, batch: PreparedBatch, mode: CUDAGraphMode = NONE) -> torch.Tensor:
        """The forward over the buffers, under the step's graph decision: a FULL decode graph returns logits (the
        decode step with its LM head), everything else (a FULL graph of any batch included) hidden states."""
        ib = self.input_batch
        n = batch.num_padded_tokens
        with set_forward_context(batch.attn_metadata, self.backend, self.kv_caches, mode, n):
            if mode is FULL:
                return self.full_step(ib.input_ids[:n], ib.positions[:n])
            return self.forward_fn(ib.input_ids[:n], ib.positions[:n])
