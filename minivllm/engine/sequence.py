"""A request as the scheduler sees it: its tokens, how many are in the KV cache, and its blocks."""

from __future__ import annotations

import enum
import time
from itertools import count

import torch

from minivllm.outputs import Logprob, RequestMetrics
from minivllm.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED_STOPPED = "stop"
    FINISHED_LENGTH = "length"
    FINISHED_ABORTED = "abort"

    @property
    def finished(self) -> bool:
        return self in (SequenceStatus.FINISHED_STOPPED, SequenceStatus.FINISHED_LENGTH,
                        SequenceStatus.FINISHED_ABORTED)


_seq_counter = count()


class Sequence:
    """One request. `num_computed_tokens` counts tokens whose K/V are in the cache; the rest are scheduled.

    After a prefill (or a decode) step every token but the newest sampled one is computed, so a decode step
    schedules exactly one token. Preemption by recompute simply resets `num_computed_tokens` to 0.

    With async scheduling the next step is scheduled before the CPU has read the token just sampled: that
    token is *pending* (`num_pending` = 1). It already counts for scheduling (the next decode computes it;
    its id is copied on the device from the previous step's sampler output) but not in `token_ids` yet.
    """

    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 prompt: str | None = None, arrival_time: float | None = None) -> None:
        self.seq_id = next(_seq_counter)
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = list(prompt_token_ids)
        self.output_token_ids: list[int] = []
        self.token_ids = list(prompt_token_ids)  # prompt + output, the sequence the cache holds
        self.params = params
        self.status = SequenceStatus.WAITING
        self.num_computed_tokens = 0
        self.num_pending = 0  # sampled on the device, not yet read by the CPU (async scheduling)
        self.num_cached_tokens = 0  # prefix-cache hits at the last (re)admission
        self.block_table: list[int] = []
        self.block_hashes: list[bytes] = []  # hash chain over this sequence's full, computed blocks
        self.num_preemptions = 0
        # Bumped whenever blocks leave block_table (preemption; the rollback of rejected drafts): the input
        # batch then rewrites this sequence's block-table row instead of only appending to it.
        self.block_table_epoch = 0
        self.output_text = ""
        self.stop_reason: int | str | None = None
        self.metrics = RequestMetrics(arrival_time=arrival_time or time.perf_counter())
        self.generator: torch.Generator | None = None  # per-request seed, created by the input batch
        # Filled only when asked for (SamplingParams.logprobs / prompt_logprobs), as vLLM's outputs carry them.
        self.logprobs: list[dict[int, Logprob]] | None = None if params.logprobs is None else []
        self.cumulative_logprob: float | None = None if params.logprobs is None else 0.0
        self.prompt_logprobs: list[dict[int, Logprob] | None] | None = \
            None if params.prompt_logprobs is None else [None]

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_scheduled_total(self) -> int:
        """Tokens the scheduler plans with: the known ones plus the pending one (if any)."""
        return len(self.token_ids) + self.num_pending

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status.finished

    def append_token(self, token_id: int) -> None:
        self.output_token_ids.append(token_id)
        self.token_ids.append(token_id)

    def reset_for_recompute(self) -> None:
        """Preemption by recompute: forget the cache state; the tokens (prompt + output so far) stay."""
        self.status = SequenceStatus.WAITING
        self.num_computed_tokens = 0
        self.block_table = []
        self.block_hashes = []
        self.num_preemptions += 1
        self.block_table_epoch += 1

    def __repr__(self) -> str:
        return (f"Sequence(id={self.request_id}, status={self.status.value}, tokens={self.num_tokens}, "
                f"computed={self.num_computed_tokens}, blocks={self.block_table})")
