"""Batch-invariant mode's kernels: a row's result does not depend on what else is in the batch.

The invariant matmul against torch (allclose) and row by row against itself (bitwise, M=1 vs M=N); decode
attention's KV splits with batch_invariant (a function of the context, not of the batch) and a sequence's
output alone vs in a batch, bitwise; the prefill kernel's fixed tiles, the same. On a CPU the kernels run
under TRITON_INTERPRET=1 (conftest.py) with tiny shapes; bf16 only on a GPU (the interpreter's bf16 tl.dot
is wrong, see test_kernels.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import ops

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16] if CUDA else [torch.float32, torch.float16]
# (N, K): ragged against the tiles; on a GPU also Qwen3-0.6B's o_proj and down_proj
SHAPES = [(50, 72), (33, 160)] + ([(1024, 2048), (1024, 3072)] if CUDA else [])
ROWS = [1, 2, 5, 17] + ([64, 100, 256] if CUDA else [])

triton = pytest.importorskip("triton")
from minivllm.kernels.triton_decode import choose_num_splits, invariant_num_splits  # noqa: E402
from minivllm.kernels.triton_matmul import invariant_matmul  # noqa: E402


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N,K", SHAPES)
def test_invariant_matmul_matches_torch_and_every_row_is_the_row_alone(dtype, N, K):
    g = torch.Generator().manual_seed(N + K)
    x = torch.randn(max(ROWS), K, generator=g).to(DEVICE, dtype)
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(DEVICE, dtype)
    b = torch.randn(N, generator=g).to(DEVICE, dtype)
    alone = torch.cat([invariant_matmul(x[i:i + 1], w, b) for i in range(x.shape[0])])
    ref = F.linear(x.float(), w.float(), b.float())
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(alone.float(), ref, atol=tol, rtol=tol)
    for m in ROWS:
        assert torch.equal(invariant_matmul(x[:m], w, b), alone[:m]), f"M={m}: a row differs from itself alone"
    assert torch.equal(invariant_matmul(x[:3], w), invariant_matmul(x[:3], w, None))  # no bias: the same kernel
    assert invariant_matmul(x[:0], w).shape == (0, N)


def test_invariant_matmul_refuses_mismatched_inputs():
    w = torch.zeros(8, 16, device=DEVICE)
    with pytest.raises(ValueError, match="share K"):
        invariant_matmul(torch.zeros(2, 15, device=DEVICE), w)
    with pytest.raises(ValueError, match="dtype"):
        invariant_matmul(torch.zeros(2, 16, device=DEVICE, dtype=torch.float16), w)


def test_decode_splits_follow_the_context_not_the_batch():
    h200 = {"device": torch.device("cuda"), "num_sms": 132}
    # the default rule reads occupancy, so one context gets different splits at batch 1 and 64 ...
    assert choose_num_splits(1, 8, 2048, **h200) != choose_num_splits(64, 8, 2048, **h200)
    # ... the invariant one only the longest context the block tables hold
    assert [invariant_num_splits(c) for c in (16, 256, 257, 1024, 40960, 1 << 20)] == [1, 1, 2, 4, 64, 64]


def _meta(seq_lens, query_lens, block_tables, decode_only):
    qsl = [0]
    for n in query_lens:
        qsl.append(qsl[-1] + n)
    return AttentionMetadata(
        slot_mapping=torch.zeros(qsl[-1], dtype=torch.int64, device=DEVICE),
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=DEVICE),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE), block_tables=block_tables,
        max_query_len=max(query_lens), max_seq_len=max(seq_lens), decode_only=decode_only,
        query_start_loc_cpu=qsl, seq_lens_cpu=list(seq_lens))


@pytest.mark.parametrize("decode", [True, False], ids=["decode", "prefill"])
def test_attention_of_a_sequence_alone_equals_it_in_a_batch(decode):
    """Sequence 0 alone and among others of other lengths (a longer query changes the prefill tiles, more
    sequences the decode splits): with batch_invariant its output is the same bits."""
    h, hkv, d, bs = 4, 2, 64, 16
    seq_lens = [300, 40, 520, 7, 130, 260] if decode else [70, 3, 150, 33]
    query_lens = [1] * len(seq_lens) if decode else [9, 3, 150, 20]
    width = 40  # 640-token block tables: 3 invariant splits
    g = torch.Generator().manual_seed(3)
    k_cache = torch.randn(width * len(seq_lens), bs, hkv, d, generator=g).to(DEVICE)
    v_cache = torch.randn(width * len(seq_lens), bs, hkv, d, generator=g).to(DEVICE)
    bt = torch.randperm(width * len(seq_lens), generator=g).view(len(seq_lens), width).to(DEVICE, torch.int32)
    q = torch.randn(sum(query_lens), h, d, generator=g).to(DEVICE)

    def attend(n, invariant):
        meta = _meta(seq_lens[:n], query_lens[:n], bt[:n], decode)
        return ops.paged_attention(q[:sum(query_lens[:n])], k_cache, v_cache, meta, 0.125, "triton",
                                   batch_invariant=invariant)

    alone, batch = attend(1, True), attend(len(seq_lens), True)
    assert torch.equal(alone, batch[:query_lens[0]])
    ref = ops.paged_attention(q, k_cache, v_cache, _meta(seq_lens, query_lens, bt, decode), 0.125, "torch")
    torch.testing.assert_close(batch, ref, atol=1e-4, rtol=1e-4)


def test_invariant_prefill_tiles_ignore_the_longest_query():
    from minivllm.kernels.triton_prefill import invariant_tiles, prefill_tile_config

    q, kc = torch.zeros(1, 16, 128), torch.zeros(1, 16, 8, 128, dtype=torch.bfloat16)
    assert prefill_tile_config(1, 2, 128, torch.bfloat16) != prefill_tile_config(512, 2, 128, torch.bfloat16)
    assert invariant_tiles(q, kc) == invariant_tiles(q.expand(300, 16, 128), kc)
