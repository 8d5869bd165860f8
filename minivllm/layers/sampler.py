"""Turn the last-position logits of each sequence into its next token.

Greedy rows take the argmax. Sampled rows apply temperature, top-k and top-p, then draw with the
"exponential race" (argmax of p / Exp(1) noise, equivalent to multinomial sampling). A request with its own
seed draws its noise from its own generator, so its tokens do not depend on what else is in the batch.

The result stays on the device: the engine reads it later (async scheduling overlaps that wait with the
next step), and per-row parameters go up through pinned memory, because a plain `torch.tensor(..., device=
"cuda")` from pageable memory synchronizes the stream and would stall the CPU behind the GPU.

Logprobs (a request with SamplingParams.logprobs) are raw, as vLLM's default logprobs_mode "raw_logprobs":
log_softmax of the model's logits in fp32, before temperature and top-k/top-p, so they describe the model,
not the sampling settings. A batch where no request asks for them computes none.
(https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/sample/sampler.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from minivllm.sampling_params import SamplingParams


@dataclass
class SamplingMetadata:
    """The sampling side of one batch, one entry per sampled row (built by the input batch; vLLM:
    v1/sample/metadata.py). `generators[i]` is row i's own generator (a request with a seed) or None."""

    params: list[SamplingParams]
    generators: list[torch.Generator | None]
    all_greedy: bool
    max_num_logprobs: int | None = None  # the largest `logprobs` among the rows; None: no row asks


class LogprobsTensors(NamedTuple):
    """Per row: column 0 the chosen token, columns 1..k the top k (vLLM: v1/outputs.py)."""

    logprob_token_ids: torch.Tensor  # [rows, k + 1] int64
    logprobs: torch.Tensor  # [rows, k + 1] fp32
    selected_token_ranks: torch.Tensor  # [rows] rank of the chosen token (1 = the most likely)

    def apply(self, fn) -> LogprobsTensors:
        return LogprobsTensors(*(fn(t) for t in self))


def gather_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, k: int) -> LogprobsTensors:
    """Raw logprobs of `token_ids` (one per row) and of each row's top k (vLLM: Sampler.gather_logprobs)."""
    logprobs = logits.float().log_softmax(dim=-1)
    chosen = logprobs.gather(1, token_ids.view(-1, 1))
    ranks = (logprobs >= chosen).sum(dim=-1)  # vLLM's batched_count_greater_than: ties rank the chosen last
    # The top k of the logits in their own dtype name the same tokens (log_softmax keeps the order), as vLLM's
    # GPU model runner takes them (v1/worker/gpu/sample/logprob.py). On the H200 their kernels take 51 instead
    # of 75 us at one row (assets/results/h200/logprobs_ops.json), and logprobs=5's TPOT cost fell from 1.69x
    # to 1.18x at batch 1 and from 2.68x to 1.79x at batch 64 (logprobs_latency.json and the archive): more than
    # the kernels' difference, for a reason the op probe has not isolated yet.
    top_ids = logits.topk(k, dim=-1).indices
    top_vals = logprobs.gather(1, top_ids)
    return LogprobsTensors(torch.cat([token_ids.view(-1, 1), top_ids], 1), torch.cat([chosen, top_vals], 1), ranks)


class Sampler:
    def __init__(self, device: torch.device, seed: int = 0) -> None:
        self.device = device
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)

    def to_device(self, values: list, dtype: torch.dtype) -> torch.Tensor:
        host = torch.tensor(values, dtype=dtype, pin_memory=self.device.type == "cuda")
        return host.to(self.device, non_blocking=True)

    def __call__(self, logits: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
        """Sampled token ids [len(meta.params)] (int64, on the logits' device)."""
        if meta.all_greedy:
            return logits.argmax(dim=-1)
        params = meta.params
        greedy = [p.greedy for p in params]
        logits = logits.float()
        probs = self.probs(logits, params)
        noise = torch.empty_like(probs).exponential_(generator=self.generator)
        for i, gen in enumerate(meta.generators):
            if gen is not None and not params[i].greedy:
                noise[i].exponential_(generator=gen)
        sampled = (probs / noise).argmax(dim=-1)
        if not any(greedy):
            return sampled
        return torch.where(self.to_device(greedy, torch.bool), logits.argmax(dim=-1), sampled)

    def probs(self, logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
        """The distribution row i is sampled from: fp32 softmax of its logits after temperature (1 for a
        greedy row), top-k and top-p. The rejection sampler (spec_decode/) verifies drafts against it."""
        temps = self.to_device([1.0 if p.greedy else p.temperature for p in params], torch.float32)
        scaled = logits.float() / temps.unsqueeze(1)
        if any(p.top_k > 0 or p.top_p < 1.0 for p in params):
            scaled = self._top_k_top_p(scaled, params)
        return torch.softmax(scaled, dim=-1)

    def _top_k_top_p(self, logits: torch.Tensor, params) -> torch.Tensor:
        S, V = logits.shape
        ks = self.to_device([p.top_k if p.top_k > 0 else V for p in params], torch.int64)
        ps = self.to_device([p.top_p for p in params], torch.float32)
        sorted_logits, idx = logits.sort(dim=-1, descending=True)
        pos = torch.arange(V, device=logits.device).unsqueeze(0)
        mask = pos >= ks.unsqueeze(1)
        sorted_logits = sorted_logits.masked_fill(mask, float("-inf"))
        probs = torch.softmax(sorted_logits, dim=-1)
        mask = (probs.cumsum(dim=-1) - probs) > ps.unsqueeze(1)  # keeps at least the top token
        sorted_logits = sorted_logits.masked_fill(mask, float("-inf"))
        return torch.full_like(logits, float("-inf")).scatter(1, idx, sorted_logits)
