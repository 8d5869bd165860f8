"""The step loop: scheduler -> model runner -> sampled tokens -> stop checks -> finished requests.

Synchronous: schedule, launch, wait for the tokens, process them; the GPU idles while the CPU schedules,
prepares and processes. Async scheduling (vLLM's `async_scheduling`): launch step n+1 *before* waiting
for step n's tokens, so the CPU work of one step overlaps the GPU work of the other. Step n+1 takes its
pending input ids from step n's sampler output on the device; a sequence that step n finishes (EOS, stop)
wastes one row of step n+1, whose result is dropped.
"""

from __future__ import annotations

import copy
import logging
import time
from functools import cache
from itertools import count
from typing import Any

import torch

from minivllm.config import EngineConfig
from minivllm.engine.block_manager import BlockManager
from minivllm.interrupt import finish_despite_interrupts
from minivllm.engine.scheduler import Scheduler
from minivllm.engine.sequence import Sequence, SequenceStatus
from minivllm.loader import NoTokenizer
from minivllm.models.config import ModelConfig
from minivllm.outputs import CompletionOutput, RequestOutput, logprobs_dict
from minivllm.sampling_params import SamplingParams
from minivllm.spec_decode.metrics import SpecDecodingStats
from minivllm.spec_decode.ngram_proposer import NgramProposer
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.model_runner_output import ModelRunnerOutput
from minivllm.worker.worker import Worker

logger = logging.getLogger("minivllm")
Tokenizer = Any  # loader.FastTokenizer, loader.NoTokenizer or a transformers tokenizer: encode() and decode()


class LLMEngine:
    """The step loop over one started worker (engine/fallback.py starts both: the config from EngineArgs,
    the tokenizer, then the worker's startup, worker/worker.py)."""

    def __init__(self, config: EngineConfig, model_config: ModelConfig, tokenizer: Tokenizer,
                 worker: Worker, generation_eos: list[int] | None = None,
                 fallback_report: list[dict] | None = None) -> None:
        self.config, self.model_config, self.tokenizer = config, model_config, tokenizer
        self.worker = worker
        self.fallback_report = fallback_report or []  # the fallback ladder's rungs (engine/fallback.py)
        self.model_runner: ModelRunner = worker.model_runner
        cache = config.cache
        self.block_manager = BlockManager(worker.num_blocks, cache.block_size, cache.enable_prefix_caching)
        eos = list(model_config.eos_token_ids)
        if getattr(tokenizer, "eos_token_id", None) is not None and tokenizer.eos_token_id not in eos:
            eos.append(tokenizer.eos_token_id)
        self.eos_token_ids = set(eos)
        # generation_config.json's other EOS ids stop as stop_token_ids do (vLLM's
        # SamplingParams.update_from_generation_config): finish_reason "stop", stop_reason the id.
        self.generation_eos_ids = set(generation_eos or ()) - self.eos_token_ids
        spec = config.speculative
        self.scheduler = Scheduler(config.scheduler, self.block_manager, config.max_model_len,
                                   NgramProposer(spec) if spec is not None else None,
                                   frozenset(self.eos_token_ids | self.generation_eos_ids))
        self.spec_stats = SpecDecodingStats(spec.num_speculative_tokens) if spec is not None else None
        self.async_scheduling = config.async_scheduling
        self.inflight: ModelRunnerOutput | None = None  # the launched step whose tokens are not read yet
        self._ids = count()
        self.stats = {"steps": 0, "scheduled_tokens": 0, "scheduled_seqs": 0, "preemptions": 0,
                      "schedule_time": 0.0, "wait_time": 0.0, "process_time": 0.0}

    # ---- requests --------------------------------------------------------------------------------
    def next_request_id(self) -> str:
        return str(next(self._ids))

    def validate(self, token_ids: list[int], params: SamplingParams, where: str) -> None:
        vocab = self.model_config.vocab_size
        if not token_ids:
            raise ValueError(f"{where}: the prompt is empty (it must have at least 1 token)")
        for t in token_ids:
            if type(t) is not int or not 0 <= t < vocab:
                raise ValueError(f"{where}: prompt_token_ids contains {t!r}, outside the vocabulary range "
                                 f"[0, {vocab})")
        limit = self.config.max_model_len
        if len(token_ids) >= limit:
            raise ValueError(f"{where}: the prompt has {len(token_ids)} tokens but max_model_len is {limit}; "
                             f"a prompt may have at most {limit - 1} tokens (room for one output token)")
        if not isinstance(params, SamplingParams):
            raise TypeError(f"{where}: sampling_params must be a SamplingParams, got {type(params).__name__}")
        for name in ("logprobs", "prompt_logprobs"):
            if (getattr(params, name) or 0) > vocab:
                raise ValueError(f"{where}: {name}={getattr(params, name)} exceeds the vocabulary size {vocab}")

    def add_request(self, request_id: str, token_ids: list[int], params: SamplingParams,
                    prompt: str | None = None, arrival_time: float | None = None) -> Sequence:
        self.validate(token_ids, params, f"request {request_id}")
        seq = Sequence(request_id, token_ids, params, prompt, arrival_time)
        self.scheduler.add(seq)
        return seq

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def sampler_state(self) -> torch.Tensor:
        """The sampler's random state (requests without a seed draw from it), for abort_all to restore."""
        return self.model_runner.sampler.generator.get_state()

    def abort_all(self, sampler_state: torch.Tensor | None = None) -> None:
        """Abort every request wherever it is (queued, running, admitted halfway, in the step in flight), give
        every block back (cached prefixes stay cached) and restore the sampler's random state if given.
        Idempotent and run to its end despite Ctrl-C (minivllm/interrupt.py)."""
        def once() -> None:
            self.discard_inflight()
            self.scheduler.abort_all()
            self.block_manager.reconcile(self.scheduler.running)
            if sampler_state is not None:
                self.model_runner.sampler.generator.set_state(sampler_state)

        finish_despite_interrupts(once)

    # ---- one step --------------------------------------------------------------------------------
    def step(self) -> list[Sequence]:
        """Schedule and launch a step, then process the tokens of the previous step (async) or of this one
        (sync); return the sequences that finished."""
        t0 = time.perf_counter()
        sched = self.scheduler.schedule()
        self.stats["schedule_time"] += time.perf_counter() - t0
        launched = None
        if not sched.is_empty:
            now = time.perf_counter()
            for s in sched.scheduled:
                if s.seq.metrics.first_scheduled_time is None:
                    s.seq.metrics.first_scheduled_time = now
            launched = self.model_runner.execute_model(sched, self.inflight)
            self.scheduler.update_computed(sched)
            for seq in launched.seqs:
                seq.num_pending += 1
            self.stats["steps"] += 1
            self.stats["scheduled_tokens"] += sched.num_tokens
            self.stats["scheduled_seqs"] += len(sched.scheduled)
            self.stats["preemptions"] += len(sched.preempted)
        if self.async_scheduling:
            done, self.inflight = self.inflight, launched
        else:
            done = launched
        if done is None:
            if launched is None and self.scheduler.has_unfinished():
                raise RuntimeError("scheduler made no progress: a request needs more KV blocks than exist")
            return []
        finished = self._process(done)
        if (self.inflight is not None and all(seq.is_finished for seq in self.inflight.seqs)
                and self.inflight.prompt_logprobs is None):
            self.inflight = None  # only rows of finished sequences: nothing to read back
        kind = (launched or done).kind
        self.model_runner.step_stats[f"{kind}_time"] += time.perf_counter() - t0
        return finished

    def _process(self, out: ModelRunnerOutput) -> list[Sequence]:
        """Read a step's tokens (the only wait for the GPU), append them and apply the stop checks."""
        t0 = time.perf_counter()
        tokens = out.token_ids()
        now = time.perf_counter()
        self.stats["wait_time"] += now - t0
        gpu = out.gpu_seconds()
        if gpu is not None:
            self.model_runner.step_stats[f"{out.kind}_gpu_time"] += gpu
        finished = []
        if out.prompt_logprobs is not None:
            self._append_prompt_logprobs(*out.prompt_logprobs)
        lp = out.logprobs and [t.tolist() for t in out.logprobs]
        drafts = out.num_draft_tokens  # speculative decoding: a list of new tokens per row, -1 past them
        width = len(tokens[0]) if drafts is not None and tokens else 1
        for row, (seq, toks) in enumerate(zip(out.seqs, tokens)):
            if seq.is_finished:
                continue  # finished (or aborted) while this step was in flight: drop its row
            seq.num_pending -= 1
            new = [toks] if drafts is None else [t for t in toks if t >= 0]
            if drafts is not None and drafts[row]:
                self.spec_stats.observe_draft(drafts[row], len(new) - 1)
            for j, tok in enumerate(new):  # one by one: nothing past a stop is kept
                seq.append_token(tok)
                if seq.logprobs is not None:
                    r = row * width + j
                    seq.logprobs.append(logprobs_dict(lp[0][r], lp[1][r], lp[2][r], seq.params.logprobs))
                    seq.cumulative_logprob += lp[1][r][0]
                if seq.metrics.first_token_time is None:
                    seq.metrics.first_token_time = now
                seq.metrics.num_generated_tokens = seq.num_output_tokens
                status = self._check_stop(seq, tok)
                if status is not None:
                    seq.metrics.finished_time = now
                    self.scheduler.finish(seq, status)
                    finished.append(seq)
                    break
            else:
                if drafts is not None:
                    self.scheduler.rollback_rejected(seq)
        self.stats["process_time"] += time.perf_counter() - now
        return finished

    @staticmethod
    def _append_prompt_logprobs(owners: list[tuple[Sequence, int, int]], lp) -> None:
        """Row r of a chunk's rows scores prompt token p + 1. A position already filled (a preempted request
        recomputes its prompt) is skipped."""
        ids, vals, ranks = (t.tolist() for t in lp)
        r = 0
        for seq, start, n in owners:
            for p in range(start, start + n):
                if not seq.is_finished and len(seq.prompt_logprobs) == p + 1:
                    seq.prompt_logprobs.append(logprobs_dict(ids[r], vals[r], ranks[r], seq.params.prompt_logprobs))
                r += 1

    def spec_decoding_stats(self, reset: bool = False) -> SpecDecodingStats | None:
        """A copy of the speculative-decoding counters since the engine started (or the last reset); None
        when speculation is off. reset=True zeroes them after the copy."""
        if self.spec_stats is None:
            return None
        stats = copy.deepcopy(self.spec_stats)
        if reset:
            self.spec_stats = SpecDecodingStats(stats.num_spec_tokens)
        return stats

    def discard_inflight(self) -> None:
        """Forget the step in flight (after its requests were aborted); wait for it so nothing outlives it."""
        if self.inflight is not None:
            try:
                self.inflight.token_ids()
            finally:
                self.inflight = None

    def _check_stop(self, seq: Sequence, tok: int) -> SequenceStatus | None:
        p = seq.params
        if not p.ignore_eos and tok in self.eos_token_ids:
            seq.stop_reason = None
            return SequenceStatus.FINISHED_STOPPED
        if (p.stop_token_ids and tok in p.stop_token_ids) or (not p.ignore_eos and tok in self.generation_eos_ids):
            seq.stop_reason = tok
            return SequenceStatus.FINISHED_STOPPED
        if p.stop:
            text = self.tokenizer.decode(seq.output_token_ids, skip_special_tokens=True)
            for stop in p.stop:
                # Only look where the newest token could have completed the stop string.
                idx = text.find(stop, max(0, len(seq.output_text) - len(stop)))
                if idx != -1:
                    seq.output_text = text[:idx]
                    seq.stop_reason = stop
                    return SequenceStatus.FINISHED_STOPPED
            seq.output_text = text
        if seq.num_output_tokens >= p.max_tokens or seq.num_tokens >= self.config.max_model_len:
            return SequenceStatus.FINISHED_LENGTH
        return None

    def make_output(self, seq: Sequence) -> RequestOutput:
        if seq.stop_reason is None or not isinstance(seq.stop_reason, str):
            seq.output_text = self.tokenizer.decode(seq.output_token_ids, skip_special_tokens=True)
        finish = seq.status.value if seq.is_finished else None
        comp = CompletionOutput(0, seq.output_text, list(seq.output_token_ids), finish, seq.stop_reason,
                                seq.logprobs, seq.cumulative_logprob)
        if not isinstance(self.tokenizer, NoTokenizer):  # each Logprob's text, as vLLM's detokenizer fills it
            text = cache(lambda t: self.tokenizer.decode([t], skip_special_tokens=False))
            for d in filter(None, (seq.logprobs or []) + (seq.prompt_logprobs or [])):
                for tid, lp in d.items():
                    lp.decoded_token = text(tid)
        return RequestOutput(seq.request_id, seq.prompt, list(seq.prompt_token_ids), [comp], seq.is_finished,
                             seq.metrics, seq.num_cached_tokens, {"num_preemptions": seq.num_preemptions},
                             seq.prompt_logprobs)
