"""The step loop: scheduler -> model runner -> sampled tokens -> stop checks -> finished requests."""

from __future__ import annotations

import logging
import time
from itertools import count

from minivllm.engine.block_manager import BlockManager
from minivllm.engine.scheduler import Scheduler
from minivllm.engine.sequence import Sequence, SequenceStatus
from minivllm.outputs import CompletionOutput, RequestOutput
from minivllm.sampling_params import SamplingParams

logger = logging.getLogger("minivllm")


class LLMEngine:
    def __init__(self, config, model_config, tokenizer, model_runner, num_blocks: int) -> None:
        self.config, self.model_config, self.tokenizer = config, model_config, tokenizer
        self.model_runner = model_runner
        self.block_manager = BlockManager(num_blocks, config.cache.block_size, config.cache.enable_prefix_caching)
        self.scheduler = Scheduler(config.scheduler, self.block_manager)
        eos = list(model_config.eos_token_ids)
        if getattr(tokenizer, "eos_token_id", None) is not None and tokenizer.eos_token_id not in eos:
            eos.append(tokenizer.eos_token_id)
        self.eos_token_ids = set(eos)
        self._ids = count()
        self.stats = {"steps": 0, "scheduled_tokens": 0, "scheduled_seqs": 0, "preemptions": 0}

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

    def add_request(self, request_id: str, token_ids: list[int], params: SamplingParams,
                    prompt: str | None = None, arrival_time: float | None = None) -> Sequence:
        self.validate(token_ids, params, f"request {request_id}")
        seq = Sequence(request_id, token_ids, params, prompt, arrival_time)
        self.scheduler.add(seq)
        return seq

    def abort_request(self, request_id: str) -> bool:
        return self.scheduler.abort(request_id) is not None

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    # ---- one step --------------------------------------------------------------------------------
    def step(self) -> list[Sequence]:
        """Schedule, run the model, append tokens; return the sequences that finished in this step."""
        sched = self.scheduler.schedule()
        if sched.is_empty:
            if self.scheduler.has_unfinished():
                raise RuntimeError("scheduler made no progress: a request needs more KV blocks than exist")
            return []
        now = time.perf_counter()
        for s in sched.scheduled:
            if s.seq.metrics.first_scheduled_time is None:
                s.seq.metrics.first_scheduled_time = now
        sampled = self.model_runner.execute(sched)
        self.scheduler.update_computed(sched)
        self.stats["steps"] += 1
        self.stats["scheduled_tokens"] += sched.num_tokens
        self.stats["scheduled_seqs"] += len(sched.scheduled)
        self.stats["preemptions"] += len(sched.preempted)
        now = time.perf_counter()
        finished = []
        for s, tok in zip(sched.scheduled, sampled):
            if tok is None:
                continue
            seq = s.seq
            seq.append_token(tok)
            if seq.metrics.first_token_time is None:
                seq.metrics.first_token_time = now
            seq.metrics.num_generated_tokens = seq.num_output_tokens
            status = self._check_stop(seq, tok)
            if status is not None:
                seq.metrics.finished_time = now
                self.scheduler.finish(seq, status)
                finished.append(seq)
        return finished

    def _check_stop(self, seq: Sequence, tok: int) -> SequenceStatus | None:
        p = seq.params
        if not p.ignore_eos and tok in self.eos_token_ids:
            seq.stop_reason = None
            return SequenceStatus.FINISHED_STOPPED
        if p.stop_token_ids and tok in p.stop_token_ids:
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
        comp = CompletionOutput(0, seq.output_text, list(seq.output_token_ids), finish, seq.stop_reason)
        return RequestOutput(seq.request_id, seq.prompt, list(seq.prompt_token_ids), [comp], seq.is_finished,
                             seq.metrics, seq.num_cached_tokens, {"num_preemptions": seq.num_preemptions})
