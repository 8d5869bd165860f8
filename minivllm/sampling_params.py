"""Per-request sampling settings, mirroring vLLM's SamplingParams (temperature 0 means greedy)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: off (vLLM accepts both)
    max_tokens: int = 16
    ignore_eos: bool = False
    seed: int | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = field(default=None)

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str, value: object) -> ValueError:
            return ValueError(f"SamplingParams.{name} must be {allowed}, got {value!r}")

        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or math.isnan(self.temperature) or self.temperature < 0 or math.isinf(self.temperature):
            raise bad("temperature", "a finite number >= 0 (0 = greedy)", self.temperature)
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) \
                or math.isnan(self.top_p) or not 0 < self.top_p <= 1:
            raise bad("top_p", "in (0, 1]", self.top_p)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < -1:
            raise bad("top_k", "an int: -1 or 0 (off) or >= 1", self.top_k)
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise bad("max_tokens", "an int >= 1", self.max_tokens)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise bad("seed", "an int or None", self.seed)
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None:
            if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop):
                raise bad("stop", "a non-empty string or a list of non-empty strings", self.stop)
        if self.stop_token_ids is not None:
            if not isinstance(self.stop_token_ids, (list, tuple)) or not all(
                    isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.stop_token_ids):
                raise bad("stop_token_ids", "a list of non-negative ints", self.stop_token_ids)
            self.stop_token_ids = list(self.stop_token_ids)
        self.temperature = float(self.temperature)
        self.top_p = float(self.top_p)
        if self.top_k == 0:
            self.top_k = -1

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
