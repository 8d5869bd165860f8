"""Continuous batching: each step, decide which sequences run and how many tokens each contributes.

The policy follows vLLM V1: running sequences first (a decode is one token; an unfinished chunked prefill
continues), then waiting sequences in arrival order while the token budget (max_num_batched_tokens) and
max_num_seqs allow. A long prompt is cut into chunks (chunked prefill). When blocks run out, the most
recently admitted running sequence is preempted and will be recomputed from scratch; it goes back to the
head of the queue, so nothing is lost and nothing starves.

Speculative decoding: a decoding sequence also gets its draft (the proposer's, spec_decode/), scheduled as
1 + len(draft) tokens with KV slots for all of them; after the verify step the rejected ones are rolled back
(rollback_rejected).

Async scheduling: a sequence's pending token (sampled by the step still in flight) counts as a token to
compute, so its next decode is scheduled before the CPU knows its value. A sequence whose pending token is
its last one (max_tokens or max_model_len reached) is not scheduled again: it finishes when the token lands.
"""

from __future__ import annotations

from collections import deque

from minivllm.config import SchedulerConfig
from minivllm.engine.block_manager import BlockManager
from minivllm.engine.sched_output import ScheduledSeq, SchedulerOutput
from minivllm.engine.sequence import Sequence, SequenceStatus
from minivllm.spec_decode.ngram_proposer import NgramProposer

__all__ = ["Scheduler", "ScheduledSeq", "SchedulerOutput"]


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: BlockManager, max_model_len: int,
                 proposer: NgramProposer | None = None, stop_token_ids: frozenset[int] = frozenset()) -> None:
        self.config = config
        self.max_model_len = max_model_len
        self.block_manager = block_manager
        self.proposer = proposer  # speculative decoding: drafts for decoding sequences (spec_decode/)
        self.stop_token_ids = stop_token_ids  # EOS ids (unless ignore_eos): no draft token is kept past one
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.block_manager.free(seq)
        seq.reset_for_recompute()
        self.waiting.appendleft(seq)
        out.preempted.append(seq)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        bm = self.block_manager

        # 1. Running sequences: decodes and unfinished prefill chunks.
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            if seq.num_pending and self._last_token_pending(seq):
                i += 1  # nothing left to compute: it finishes when its pending token lands
                continue
            n = min(seq.num_scheduled_total - seq.num_computed_tokens, budget)
            draft = self._draft(seq, budget - 1) if self.proposer is not None and n == 1 else []
            if draft and not bm.can_allocate(seq, n + len(draft)):
                draft = []  # no room for the draft's slots: decode plainly rather than preempt for it
            n += len(draft)
            while not bm.can_allocate(seq, n):
                victim = self.running.pop()  # the newest admitted gives way
                self._preempt(victim, out)
                if victim is seq:
                    break
            else:
                bm.allocate(seq, n)
                out.scheduled.append(ScheduledSeq(seq, n, draft))
                budget -= n
                i += 1
                continue
            break  # seq itself was preempted: nothing after it is left to look at

        # 2. Waiting sequences, first come first served (none if someone was just preempted).
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs and not out.preempted:
            seq = self.waiting[0]
            if seq.num_pending:
                break  # preempted while its token was in flight: admit it once the token has landed
            # A cached prefix has no logits: a request for prompt logprobs skips the cache, as vLLM's
            # get_computed_blocks (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_manager.py).
            cached = bm.find_cached_prefix(seq) if seq.params.prompt_logprobs is None else []
            n = seq.num_tokens - len(cached) * bm.block_size
            if n > budget:
                if not self.config.enable_chunked_prefill:
                    break
                n = budget
            if not bm.can_admit(cached, n):
                break
            self.waiting.popleft()
            bm.admit(seq, cached)
            bm.allocate(seq, n)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append(ScheduledSeq(seq, n))
            budget -= n
        return out

    def _draft(self, seq: Sequence, room: int) -> list[int]:
        """The proposer's draft for a decoding sequence, cut so that accepting all of it plus the target's own
        token crosses neither max_tokens nor max_model_len, fits `room` budget tokens, and ends at the first
        stop token (nothing after a stop is ever kept, so nothing after it is worth verifying)."""
        p = seq.params
        room = min(room, p.max_tokens - seq.num_output_tokens - 1, self.max_model_len - seq.num_tokens - 1)
        draft = self.proposer.propose(seq.token_ids, room)  # none when room <= 0
        stops = set(p.stop_token_ids or ()) | (set() if p.ignore_eos else self.stop_token_ids)
        for j, tok in enumerate(draft):
            if tok in stops:
                return draft[:j + 1]
        return draft

    def rollback_rejected(self, seq: Sequence) -> None:
        """After a verify step: the KV of the rejected draft tokens is not the sequence's. Every token but the
        newest is computed; the blocks past the kept tokens go back to the free queue (they held only rejected
        drafts, so no prefix-cache hash covers them: hashes cover known tokens only)."""
        seq.num_computed_tokens = seq.num_tokens - 1
        self.block_manager.free_tail(seq, seq.num_tokens)

    def _last_token_pending(self, seq: Sequence) -> bool:
        return (seq.num_output_tokens + seq.num_pending >= seq.params.max_tokens
                or seq.num_scheduled_total >= self.max_model_len)

    def update_computed(self, out: SchedulerOutput) -> None:
        """After the forward pass: the scheduled tokens are now in the cache."""
        for s in out.scheduled:
            s.seq.num_computed_tokens += s.num_new_tokens
            self.block_manager.cache_full_blocks(s.seq)

    def finish(self, seq: Sequence, status: SequenceStatus) -> None:
        seq.status = status
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.block_manager.free(seq)

    def abort_all(self) -> None:
        """Abort every request; their blocks are the caller's to reclaim (BlockManager.reconcile)."""
        for seq in (*self.waiting, *self.running):
            seq.status = SequenceStatus.FINISHED_ABORTED
        self.waiting.clear()
        self.running.clear()
