"""Verifying drafts: which draft tokens the target model keeps, and the one token it adds (vLLM:
vllm/v1/sample/rejection_sampler.py).

Why the output is the target model's: for a greedy request a draft token is kept only where it equals the
target's argmax at its position, so the kept tokens plus the target's own next token are exactly what plain
greedy decoding would have produced. For a sampled request (temperature > 0) the draft is a one-hot proposal
q: draft token x is accepted with probability min(1, p(x) / q(x)) = p(x), p the target's distribution after
temperature, top-k and top-p; at the first rejection the token is drawn from max(p - q, 0) renormalized (p
with x removed), and after all k accepted, a bonus token from the next position's p. Each emitted token
then has the target's distribution (Leviathan et al. 2023, Theorem 1), which tests/engine/test_spec_decode.py
checks by sampling.

Layout: S requests, W = 1 + the longest draft in the step. logits [S, W, V] are the target's logits at each
request's last known token and at each draft token (rows past a short draft repeat its last row); drafts
[S, W - 1] padded with -1. The result [S, W] holds each request's new tokens, -1 after them.
"""

from __future__ import annotations

import torch

from minivllm.layers.sampler import Sampler, SamplingMetadata

PLACEHOLDER = -1  # a position with no token (past a request's draft, or after its first rejection)


def greedy_verify(target_argmax: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
    """[S, W] new tokens: the longest draft prefix equal to the target's argmax, then the target's token."""
    accepted = (drafts == target_argmax[:, :-1]).int().cumprod(dim=1).sum(dim=1)
    pos = torch.arange(target_argmax.shape[1], device=drafts.device)
    return torch.where(pos <= accepted.unsqueeze(1), target_argmax, PLACEHOLDER)


def sampled_verify(probs: torch.Tensor, drafts: torch.Tensor, uniform: torch.Tensor,
                   noise: torch.Tensor) -> torch.Tensor:
    """[S, W] new tokens by rejection sampling with one-hot proposals. probs [S, W, V]: the target's
    distributions; uniform [S, W - 1] in [0, 1): the acceptance draws; noise [S, V]: Exp(1) draws for the
    token at the first rejection (or the bonus token), picked by the exponential race argmax(q / noise)."""
    S, W, V = probs.shape
    has_draft = drafts >= 0
    p_draft = probs[:, :-1].gather(2, drafts.clamp(min=0).unsqueeze(2)).squeeze(2)
    accept = has_draft & (uniform < p_draft)
    accepted = accept.int().cumprod(dim=1).sum(dim=1)  # [S]
    rows = torch.arange(S, device=probs.device)
    p_next = probs[rows, accepted]  # [S, V]: the distribution at the first rejection, or the bonus position
    rejected = accepted < has_draft.sum(dim=1)
    x = drafts.gather(1, accepted.clamp(max=W - 2).unsqueeze(1)).squeeze(1) if W > 1 else rows
    # max(p - onehot(x), 0) is p with x's mass removed (p(x) <= 1); renormalizing changes no argmax of the race
    remove = torch.zeros_like(p_next, dtype=torch.bool)
    if W > 1:
        remove[rows, x.clamp(min=0)] = rejected
    q = p_next.masked_fill(remove, 0.0)
    token = (q / noise).argmax(dim=1)
    pos = torch.arange(W, device=probs.device)
    out = torch.cat([drafts, drafts.new_full((S, 1), PLACEHOLDER)], dim=1)
    out = torch.where(pos == accepted.unsqueeze(1), token.unsqueeze(1), out)
    return torch.where(pos <= accepted.unsqueeze(1), out, PLACEHOLDER)


class RejectionSampler:
    """Greedy and sampled verification for one step; random draws from the sampler's generator, or from a
    seeded request's own one (so its tokens do not depend on the batch)."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def __call__(self, logits: torch.Tensor, drafts: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
        S, W, V = logits.shape
        target_argmax = logits.argmax(dim=-1)
        greedy_out = greedy_verify(target_argmax, drafts)
        if meta.all_greedy:
            return greedy_out
        params = meta.params
        probs = self.sampler.probs(logits.reshape(S * W, V), [p for p in params for _ in range(W)]).view(S, W, V)
        gen = self.sampler.generator
        uniform = torch.rand(S, W - 1, device=logits.device, generator=gen)
        noise = torch.empty(S, V, device=logits.device).exponential_(generator=gen)
        for i, own in enumerate(meta.generators):
            if own is not None and not params[i].greedy:
                uniform[i] = torch.rand(W - 1, device=logits.device, generator=own)
                noise[i].exponential_(generator=own)
        sampled_out = sampled_verify(probs, drafts, uniform, noise)
        greedy = self.sampler.to_device([p.greedy for p in params], torch.bool)
        return torch.where(greedy.unsqueeze(1), greedy_out, sampled_out)
