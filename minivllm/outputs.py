"""What `LLM.generate` returns, mirroring vLLM's RequestOutput / CompletionOutput (vllm/outputs.py) and Logprob
(https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/logprobs.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestMetrics:
    """Wall-clock timestamps (time.perf_counter seconds) and the latencies derived from them."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    num_generated_tokens: int = 0

    @property
    def ttft(self) -> float | None:
        """Time to first token: arrival -> first sampled token."""
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first one."""
        if self.finished_time is None or self.first_token_time is None or self.num_generated_tokens < 2:
            return None
        return (self.finished_time - self.first_token_time) / (self.num_generated_tokens - 1)


@dataclass
class Logprob:
    """A token's raw log-probability (log_softmax of the model's logits in fp32, before temperature and
    top-k/top-p: vLLM's default logprobs_mode "raw_logprobs"), its 1-based rank among all tokens, its text."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def logprobs_dict(ids: list[int], values: list[float], rank: int, k: int) -> dict[int, Logprob]:
    """One position as vLLM fills it: the chosen token (ids[0], with its rank), then the top k (ranks 1..k);
    a chosen token inside the top k appears once."""
    ranks = [rank, *range(1, k + 1)]
    return {ids[i]: Logprob(values[i], ranks[i]) for i in range(k + 1)}


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None  # "stop" | "length" | "abort" | None while running
    stop_reason: int | str | None = None
    logprobs: list[dict[int, Logprob]] | None = None  # one dict per generated token (SamplingParams.logprobs)
    cumulative_logprob: float | None = None  # sum of the generated tokens' logprobs (None without logprobs)


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics
    num_cached_tokens: int = 0
    extra: dict = field(default_factory=dict)
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None  # per prompt token, the first one None
