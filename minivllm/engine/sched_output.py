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
    num_new_tokens: int

    @property
    def completes_prompt(self) -> bool:
        """After this step all known tokens are computed, so the step samples a new token for it."""
        return self.seq.num_computed_tokens + self.num_new_tokens == self.seq.num_scheduled_total


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

    @property
    def is_empty(self) -> bool:
        return not self.scheduled
