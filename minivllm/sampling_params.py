"""Per-request sampling settings, mirroring vLLM's SamplingParams (temperature 0 means greedy).

Frozen: the engine validates a SamplingParams once, at construction, and then trusts it on every step. A
field set afterwards (`sp.temperature = -1`) would skip that check and sample garbage, so it raises instead;
`dataclasses.replace(sp, temperature=0.5)` makes a checked copy.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

from minivllm.config import check_seed, is_int

# vLLM's _SAMPLING_EPS: below it, dividing the logits by the temperature overflows fp32 (1e-38 gives inf
# everywhere and the sampler picks token 0), and the distribution is a spike on the argmax anyway.
SAMPLING_EPS = 1e-5
# The sampler puts top_k into an int64 tensor and compares it with token positions; a bound far above any
# vocabulary keeps that in range (2**63 overflows the conversion) and still means "all tokens".
TOP_K_MAX = 2**31 - 1
# vLLM's default ModelConfig.max_logprobs: a request may ask for at most this many alternatives per position.
MAX_LOGPROBS = 20


def _is_real(value: object) -> bool:
    """A float, an int or a numpy float (np.float32 is no subclass of float), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _as_int(value: object) -> object:
    """numpy integers as Python ints (they come out of arrays a learner builds); anything else unchanged,
    for the checks to judge."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
        return int(value)
    return value


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: off (vLLM accepts both)
    max_tokens: int = 16
    ignore_eos: bool = False
    seed: int | None = None
    stop: tuple[str, ...] | list[str] | str | None = None
    stop_token_ids: tuple[int, ...] | list[int] | None = field(default=None)
    # Top-k alternatives returned per generated / prompt token (0: the chosen token only). Raw logprobs, as
    # vLLM's default logprobs_mode: log_softmax of the model's logits, before temperature and top-k/top-p.
    logprobs: int | None = None
    prompt_logprobs: int | None = None

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str, value: object) -> ValueError:
            return ValueError(f"SamplingParams.{name} must be {allowed}, got {value!r}")

        def put(name: str, value: object) -> None:  # frozen: normalised values are set once, here
            object.__setattr__(self, name, value)

        for name in ("top_k", "max_tokens", "seed", "logprobs", "prompt_logprobs"):
            put(name, _as_int(getattr(self, name)))
        if not _is_real(self.temperature) or math.isnan(self.temperature) or self.temperature < 0 \
                or math.isinf(self.temperature):
            raise bad("temperature", "a finite number >= 0 (0 = greedy)", self.temperature)
        if not _is_real(self.top_p) or math.isnan(self.top_p) or not 0 < self.top_p <= 1:
            raise bad("top_p", "in (0, 1]", self.top_p)
        if not is_int(self.top_k) or not -1 <= self.top_k <= TOP_K_MAX:
            raise bad("top_k", "an int: -1 or 0 (off) or in [1, 2**31 - 1] (above the vocabulary size means all "
                               "tokens)", self.top_k)
        if not is_int(self.max_tokens) or self.max_tokens < 1:
            raise bad("max_tokens", "an int >= 1", self.max_tokens)
        for name in ("logprobs", "prompt_logprobs"):
            k = getattr(self, name)
            if k is not None and (not is_int(k) or not 0 <= k <= MAX_LOGPROBS):
                raise bad(name, f"None or an int in [0, {MAX_LOGPROBS}] (0: the chosen token only; "
                                f"{MAX_LOGPROBS} is vLLM's default max_logprobs)", k)
        if not isinstance(self.ignore_eos, bool):
            raise bad("ignore_eos", "True or False", self.ignore_eos)
        if self.seed is not None:
            try:
                check_seed(self.seed, "seed")
            except ValueError:
                raise bad("seed", "None or an int in [-2**63, 2**63 - 1] (a 64-bit integer)", self.seed) from None
            put("seed", int(self.seed))
        stop = [self.stop] if isinstance(self.stop, str) else self.stop
        if stop is not None:
            if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
                raise bad("stop", "a non-empty string or a list of non-empty strings", self.stop)
            put("stop", tuple(stop))
        if self.stop_token_ids is not None:
            if not isinstance(self.stop_token_ids, (list, tuple)) or not all(
                    is_int(_as_int(t)) and t >= 0 for t in self.stop_token_ids):
                raise bad("stop_token_ids", "a list of non-negative ints", self.stop_token_ids)
            put("stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        put("temperature", float(self.temperature))
        put("top_p", float(self.top_p))
        put("top_k", -1 if self.top_k == 0 else int(self.top_k))
        put("max_tokens", int(self.max_tokens))
        if self.temperature < SAMPLING_EPS:  # greedy, as vLLM: the top-k / top-p filters cannot matter
            put("temperature", 0.0)
            put("top_p", 1.0)
            put("top_k", -1)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
