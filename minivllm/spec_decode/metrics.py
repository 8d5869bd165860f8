"""The counters speculative decoding is judged by, as vLLM keeps them (vllm/v1/spec_decode/metrics.py).

Why these: speculation pays only when drafts are accepted, and how much depends on how many are accepted
per verify step. vLLM counts drafts (requests that had one in a step), draft tokens, accepted tokens and
accepted tokens per draft position; its log prints the acceptance rate (accepted / draft tokens) and the
mean acceptance length (1 + accepted / drafts: tokens a verify step yields per request, the target's own
token included). Prometheus names: vllm:spec_decode_num_drafts and the others in `as_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecDecodingStats:
    num_spec_tokens: int  # k: the longest draft
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.num_accepted_tokens_per_pos:
            self.num_accepted_tokens_per_pos = [0] * self.num_spec_tokens

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        """One request's draft in one verify step: how long, and how many of its tokens were accepted."""
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        for i in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[i] += 1

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / proposed draft tokens (0 before any draft)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted / drafts: tokens a verify step yields per request that had a draft."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    def as_metrics(self) -> dict[str, float | list[int]]:
        """The counters under vLLM's Prometheus names."""
        return {"vllm:spec_decode_num_drafts": self.num_drafts,
                "vllm:spec_decode_num_draft_tokens": self.num_draft_tokens,
                "vllm:spec_decode_num_accepted_tokens": self.num_accepted_tokens,
                "vllm:spec_decode_num_accepted_tokens_per_pos": list(self.num_accepted_tokens_per_pos)}
