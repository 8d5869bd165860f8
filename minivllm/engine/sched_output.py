"""What the scheduler hands the model runner for one step (vLLM: v1/core/sched/output.py).

A module of its own because both sides import it: the engine builds a SchedulerOutput, the worker reads
it, and neither has to import the other's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from minivllm.engine.sequence import Sequence


@dataclass
class ScheduledSeq:
    seq: Sequence
    num_new_tokens: int  # tokens this step computes for it: known ones, then its draft
    # Speculative decoding: draft tokens proposed after the sequence's last token (spec_decode/), verified
    # in this step; counted in num_new_tokens (vLLM: SchedulerOutput.scheduled_spec_decode_tokens).
    spec_token_ids: list[int] = field(default_factory=list)

    @property
    def completes_prompt(self) -> bool:
        """After this step all known tokens are computed, so the step samples a new token for it."""
        return (self.seq.num_computed_tokens + self.num_new_tokens - len(self.spec_token_ids)
                == self.seq.num_scheduled_total)

    @property
    def is_decode(self) -> bool:
        """Computes only its newest token, and its draft if it has one."""
        return self.num_new_tokens == 1 + len(self.spec_token_ids) and self.completes_prompt


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)

    @cached_property
    def is_decode_only(self) -> bool:
        """Every sequence adds exactly its one newest token (asked several times a step, so cached)."""
        return bool(self.scheduled) and all(s.num_new_tokens == 1 and s.completes_prompt for s in self.scheduled)

    @cached_property
    def is_uniform_decode(self) -> bool:
        """Every sequence is decoding: its newest token, plus its draft under speculative decoding (a verify
        step). Without drafts, the same as is_decode_only. Decode FULL graphs run these batches."""
        return bool(self.scheduled) and all(s.is_decode for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled
