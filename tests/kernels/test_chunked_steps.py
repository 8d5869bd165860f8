"""The attention kernels over the exact steps of a chunked prefill mixed with decodes, against the reference.

The schedule is the one tests/engine/test_logprobs.py::test_logprobs_match_hf_with_chunked_prefill runs
(max_num_batched_tokens=7, prompts of 19, 2 and 9 tokens): 7-token chunks after 7 and 14 cached tokens, a
last chunk next to a whole prompt, decode rows in the same launch as a chunk, then pure decode steps. Each
step stores its K/V through ops.store_kvcache (padding slots -1) and attends through ops.paged_attention
with metadata laid out as worker/input_batch.py lays it out: unpadded (an eager step), padded up to a capture
size (a graph's step: padding tokens, and for decode-only steps padding rows), or the unified kernel's whole
buffers. Small shapes: the query tiles are the small ones the engine picks for max_query_len <= 7.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import ops
from tests.kernels.test_kernels import DEVICE

pytest.importorskip("triton")

# Per step: (sequence, tokens cached before the step, new tokens), in the scheduler's order.
SCHEDULE = [[(0, 0, 7)], [(0, 7, 7)], [(0, 14, 5), (1, 0, 2)], [(0, 19, 1), (1, 2, 1), (2, 0, 5)],
            [(0, 20, 1), (1, 3, 1), (2, 5, 4)], [(0, 21, 1), (1, 4, 1), (2, 9, 1)],
            [(0, 22, 1), (1, 5, 1), (2, 10, 1)], [(2, 11, 1)]]
MAX_SEQS = 6
MAX_BLOCKS = 4


def step_metadata(step: list[tuple[int, int, int]], tables: torch.Tensor, block_size: int, pad_to: int | None,
                  unified: bool) -> AttentionMetadata:
    """What InputBatch.prepare builds for this step (pad_to: the graph size the batch is padded up to)."""
    S, T = len(step), sum(n for _, _, n in step)
    Tp = max(pad_to or T, T)
    decode_only = all(n == 1 for _, _, n in step)
    Sp = MAX_SEQS if unified else (Tp if decode_only else S)
    qsl, seq_lens, slots = [0], [], []
    for seq, start, n in step:
        qsl.append(qsl[-1] + n)
        seq_lens.append(start + n)
        slots += [int(tables[seq, p // block_size]) * block_size + p % block_size for p in range(start, start + n)]
    # padded decode rows own one dummy token each; otherwise padding tokens belong to no row
    qsl += [T + i + 1 for i in range(Sp - S)] if decode_only and not unified else [T] * (Sp - S)
    seq_lens += [0] * (Sp - S)
    slots += [-1] * (Tp - T)
    bt = torch.zeros(Sp, MAX_BLOCKS, dtype=torch.int32)
    bt[:S] = tables[[seq for seq, _, _ in step]]
    i32 = {"dtype": torch.int32, "device": DEVICE}
    return AttentionMetadata(
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=DEVICE), query_start_loc=torch.tensor(qsl, **i32),
        seq_lens=torch.tensor(seq_lens, **i32), block_tables=bt.to(DEVICE),
        max_query_len=max(b - a for a, b in itertools.pairwise(qsl)), max_seq_len=max(seq_lens),
        decode_only=decode_only, query_start_loc_cpu=qsl, seq_lens_cpu=seq_lens, unified=unified)


# the engine test's two checkpoints; block size 16 (the default) and 8 (a block boundary inside most chunks)
@pytest.mark.parametrize("h,hkv,d,block_size", [(4, 2, 16, 16), (8, 2, 32, 8)])
@pytest.mark.parametrize("layout", ["eager", "padded", "unified"])
def test_chunked_prefill_steps_match_reference(h, hkv, d, block_size, layout):
    g = torch.Generator().manual_seed(block_size + d)
    num_blocks = 3 * MAX_BLOCKS + 2
    tables = torch.randperm(num_blocks, generator=g)[:3 * MAX_BLOCKS].view(3, MAX_BLOCKS).to(torch.int32)
    caches = {b: [torch.zeros(num_blocks, block_size, hkv, d, device=DEVICE) for _ in range(2)]
              for b in ("torch", "triton")}
    for step in SCHEDULE:
        T = sum(n for _, _, n in step)
        pad_to = None if layout == "eager" else min(s for s in (2, 4, 8) if s >= T)  # capture sizes
        meta = step_metadata(step, tables, block_size, pad_to, unified=layout == "unified")
        Tp = meta.slot_mapping.shape[0]
        q, k, v = (torch.randn(Tp, n, d, generator=g).to(DEVICE) for n in (h, hkv, hkv))
        outs = {}
        for backend, (kc, vc) in caches.items():
            ops.store_kvcache(k, v, kc, vc, meta.slot_mapping, backend)
            outs[backend] = ops.paged_attention(q, kc, vc, meta, d ** -0.5, backend,
                                                out=torch.full_like(q, float("nan")))
        assert torch.equal(caches["triton"][0], caches["torch"][0]) and torch.equal(caches["triton"][1],
                                                                                   caches["torch"][1])
        err = (outs["triton"][:T] - outs["torch"][:T]).abs().max().item()
        assert err <= 2e-6, f"step {step}: max abs difference {err:.2e}"
        assert (outs["triton"][T:] == 0).all(), f"step {step}: padding tokens must come out as zeros"
