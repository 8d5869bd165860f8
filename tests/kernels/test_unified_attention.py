"""The unified attention kernel (kernels/triton_unified_attention.py) vs the PyTorch reference.

Batches mix what one engine step holds: a prefill chunk after cached context, a fresh prompt, decodes, unused
metadata rows (query_len 0, seq_len 0, as the persistent buffers have past the real batch) and padding tokens
after the last sequence (a batch padded up to a graph's size). Contexts cross block boundaries, GQA groups
are 1, 2, 3 and 4. On CPU the kernel runs under TRITON_INTERPRET=1 in fp32 and fp16 (Triton 3.6's
interpreter computes tl.dot on bf16 wrongly, see test_kernels.py); with CUDA bf16 too, and a CUDA graph
captured once replays batches of other compositions. Outputs are poisoned (NaN) first, so a row the kernel
forgot to write fails.
"""

from __future__ import annotations

import random

import pytest
import torch

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import ops
from minivllm.kernels.torch_ref import paged_prefill_attention_ref
from tests.kernels.test_kernels import DEVICE, DTYPES, TOL, make_cache, rel_err

triton = pytest.importorskip("triton")
from minivllm.kernels.triton_unified_attention import unified_grid, unified_paged_attention

CUDA = torch.cuda.is_available()
# (num_q_heads, num_kv_heads, head_dim, block_size)
LAYOUTS = [(4, 2, 32, 16), (3, 1, 16, 8), (8, 2, 64, 32)]
if CUDA:
    LAYOUTS += [(16, 8, 128, 16), (32, 4, 128, 16)]
# Small tiles: several query blocks per sequence, so the device-side search over query_start_loc is exercised.
SMALL_TILES = (16, 16, 4, 2, False)


def make_batch(query_lens: list[int], seq_lens: list[int], max_seqs: int, num_tokens: int, h: int, hkv: int,
               d: int, block_size: int, dtype: torch.dtype, seed: int):
    """Tensors laid out as the engine's persistent buffers: max_seqs metadata rows (the unused ones
    query_len 0 / seq_len 0), num_tokens query rows (those past the last sequence are padding)."""
    g = torch.Generator().manual_seed(seed)
    qsl = [0]
    for n in query_lens:
        qsl.append(qsl[-1] + n)
    assert len(query_lens) <= max_seqs and qsl[-1] <= num_tokens
    need = [-(-L // block_size) for L in seq_lens]
    num_blocks = sum(need) + 3
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed)
    perm = torch.randperm(num_blocks, generator=g).tolist()
    bt = torch.zeros(max_seqs, max(need + [1]) + 1, dtype=torch.int32)
    for s, n in enumerate(need):
        bt[s, :n] = torch.tensor(perm[:n], dtype=torch.int32)
        perm = perm[n:]
    pad = max_seqs - len(query_lens)
    qsl_full = torch.tensor(qsl + [qsl[-1]] * pad, dtype=torch.int32, device=DEVICE)
    sl_full = torch.tensor(seq_lens + [0] * pad, dtype=torch.int32, device=DEVICE)
    q = torch.randn(num_tokens, h, d, generator=g).to(DEVICE, dtype)
    return q, k_cache, v_cache, bt.to(DEVICE), qsl_full, sl_full, qsl


def check(q, k_cache, v_cache, bt, qsl_full, sl_full, qsl, seq_lens, dtype, tile_config=None):
    d = q.shape[-1]
    ref = paged_prefill_attention_ref(q, k_cache, v_cache, bt, qsl, seq_lens, d ** -0.5)
    out = torch.full_like(q, float("nan"))
    unified_paged_attention(q, k_cache, v_cache, bt, qsl_full, sl_full, d ** -0.5, out=out,
                            tile_config=tile_config)
    n = qsl[-1]
    assert not out.isnan().any(), "a row was not written"
    assert (out[n:] == 0).all(), "padding tokens must come out as zeros"
    assert n == 0 or rel_err(out[:n], ref[:n]) <= TOL[dtype]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_mixed_batch_matches_reference(dtype, layout):
    """A chunk after cached context (crossing blocks), a fresh prompt, two decodes, two unused rows, padding."""
    h, hkv, d, block_size = layout
    bs = block_size
    query_lens = [bs + 3, 2 * bs - 1, 1, 1]
    seq_lens = [3 * bs + 5, 2 * bs - 1, bs, 2 * bs + 1]  # the decodes sit right after a block boundary
    args = make_batch(query_lens, seq_lens, 6, sum(query_lens) + 5, h, hkv, d, bs, dtype, seed=hash(layout) % 97)
    check(*args, seq_lens, dtype)
    check(*args, seq_lens, dtype, tile_config=SMALL_TILES)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_only_and_prefill_only(dtype):
    h, hkv, d, bs = 4, 2, 32, 16
    for query_lens, seq_lens in (([1, 1, 1], [1, 17, 40]), ([20], [20]), ([7, 9], [30, 9])):
        args = make_batch(query_lens, seq_lens, 4, sum(query_lens) + 2, h, hkv, d, bs, dtype, seed=len(seq_lens))
        check(*args, seq_lens, dtype, tile_config=SMALL_TILES)
    # no more tokens than metadata rows: the decode-sized default tiles
    args = make_batch([1, 1, 1], [3, 17, 40], 8, 5, h, hkv, d, bs, dtype, seed=4)
    check(*args, [3, 17, 40], dtype)


def test_all_padding_writes_zeros():
    """The capture pass's dummy batch: no sequence has a query, every token is padding."""
    args = make_batch([], [], 3, 12, 4, 2, 32, 16, torch.float32, seed=0)
    out = check(*args, [], torch.float32, tile_config=SMALL_TILES)
    assert (out == 0).all()


def test_one_launch_shape_serves_every_composition():
    """What a CUDA graph needs: with the buffers rewritten in place (same addresses, same shapes), the same
    launch (grid from the token count and the number of metadata rows) is right for every batch of at most
    that many tokens."""
    h, hkv, d, bs, max_seqs, T = 4, 2, 32, 8, 4, 24
    batches = [([24], [30]), ([1, 1, 1, 1], [5, 9, 8, 17]), ([10, 1, 6], [10, 20, 14]), ([3], [3])]
    q, _k, _v, bt, qsl_full, sl_full, _ = make_batch(*batches[0], max_seqs, T, h, hkv, d, bs, torch.float32,
                                                     seed=1)
    grid = unified_grid(T, max_seqs, hkv, SMALL_TILES[0] // 2)
    for i, (query_lens, seq_lens) in enumerate(batches):
        new = make_batch(query_lens, seq_lens, max_seqs, T, h, hkv, d, bs, torch.float32, seed=10 + i)
        for buf, src in zip((q, bt, qsl_full, sl_full), (new[0], new[3], new[4], new[5])):
            buf.zero_()
            buf[tuple(slice(0, n) for n in src.shape)] = src
        # the caches change size with the batch here; in the engine they are fixed and only their contents change
        assert unified_grid(q.shape[0], sl_full.shape[0], hkv, SMALL_TILES[0] // 2) == grid
        check(q, new[1], new[2], bt, qsl_full, sl_full, new[6], seq_lens, torch.float32, tile_config=SMALL_TILES)


@pytest.mark.parametrize("seed", range(4))
def test_random_batches(seed):
    """Odd corners: GQA 1-4, head_dim 16/32, block sizes 1..32, empty rows anywhere, any padding."""
    rng = random.Random(seed)
    hkv, group = rng.choice([1, 2]), rng.choice([1, 2, 3, 4])
    d, bs = rng.choice([16, 32]), rng.choice([1, 4, 16, 32])
    query_lens, seq_lens = [], []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["decode", "chunk", "fresh", "unused"])
        ctx = rng.randint(0, 40)
        ql = {"decode": 1, "chunk": rng.randint(2, 20), "fresh": rng.randint(1, 20), "unused": 0}[kind]
        query_lens.append(ql)
        seq_lens.append(0 if kind == "unused" else ql + (0 if kind == "fresh" else ctx))
    max_seqs = len(query_lens) + rng.randint(0, 3)
    T = sum(query_lens) + rng.randint(0, 9)
    if T == 0:
        T = 1
    args = make_batch(query_lens, seq_lens, max_seqs, T, hkv * group, hkv, d, bs, torch.float32, seed)
    block_m = rng.choice([16, 32])
    check(*args, seq_lens, torch.float32, tile_config=(block_m, rng.choice([16, 32]), 4, 2, rng.random() < 0.5))


def test_registered_op_and_engine_switch():
    """torch.ops.minivllm.unified_paged_attention, and ops.paged_attention's choice for `meta.unified`."""
    h, hkv, d, bs = 4, 2, 32, 16
    query_lens, seq_lens = [5, 1], [21, 9]
    q, k_cache, v_cache, bt, qsl_full, sl_full, qsl = make_batch(query_lens, seq_lens, 3, 8, h, hkv, d, bs,
                                                                 torch.float32, seed=3)
    ref = paged_prefill_attention_ref(q, k_cache, v_cache, bt, qsl, seq_lens, d ** -0.5)
    out = torch.full_like(q, float("nan"))
    torch.ops.minivllm.unified_paged_attention(q, k_cache, v_cache, bt, qsl_full, sl_full, out, d ** -0.5)
    assert rel_err(out[:6], ref[:6]) <= 1e-5 and (out[6:] == 0).all()
    meta = AttentionMetadata(torch.full((8,), -1, device=DEVICE), qsl_full, sl_full, bt, max_query_len=5,
                             max_seq_len=21, decode_only=False, unified=True)
    out2 = ops.paged_attention(q, k_cache, v_cache, meta, d ** -0.5, "triton")
    assert torch.equal(out2, out)


def test_bad_metadata_is_refused():
    args = make_batch([2], [2], 2, 4, 4, 2, 32, 16, torch.float32, seed=0)
    q, k_cache, v_cache, bt, qsl_full, sl_full, _ = args
    with pytest.raises(ValueError, match="query_start_loc"):
        unified_paged_attention(q, k_cache, v_cache, bt, qsl_full[:-1], sl_full, 0.1)
    for block_m in (24, 8):
        with pytest.raises(ValueError, match="BLOCK_M"):
            unified_paged_attention(q, k_cache, v_cache, bt, qsl_full, sl_full, 0.1,
                                    tile_config=(block_m, 16, 4, 2, False))


GRAPH_CASES = {  # (T, metadata rows): batches replayed by one graph (prefill tiles, then decode-sized tiles)
    (64, 8): [([64], [200]), ([1] * 8, [1, 17, 33, 300, 64, 65, 2, 9]), ([30, 1, 1, 20], [90, 5, 6, 20])],
    (16, 16): [([1] * 16, [7 * i + 1 for i in range(16)]), ([16], [300]), ([9, 1, 1], [9, 40, 2])],
}


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", list(GRAPH_CASES))
def test_cuda_graph_captured_once_replays_any_composition(dtype, shape):
    (T, max_seqs), h, hkv, d, bs = shape, 16, 8, 128, 16
    batches = GRAPH_CASES[shape]
    num_blocks = 64
    k_cache, v_cache = make_cache(num_blocks, bs, hkv, d, dtype, seed=0)
    q = torch.zeros(T, h, d, device=DEVICE, dtype=dtype)
    bt = torch.zeros(max_seqs, 24, dtype=torch.int32, device=DEVICE)
    qsl_full = torch.zeros(max_seqs + 1, dtype=torch.int32, device=DEVICE)
    sl_full = torch.zeros(max_seqs, dtype=torch.int32, device=DEVICE)
    out = torch.empty_like(q)
    unified_paged_attention(q, k_cache, v_cache, bt, qsl_full, sl_full, d ** -0.5, out=out)  # compile first
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        unified_paged_attention(q, k_cache, v_cache, bt, qsl_full, sl_full, d ** -0.5, out=out)
    g = torch.Generator().manual_seed(0)
    for query_lens, seq_lens in batches:
        qsl = [0]
        for n in query_lens:
            qsl.append(qsl[-1] + n)
        pad = max_seqs - len(query_lens)
        qsl_full.copy_(torch.tensor(qsl + [qsl[-1]] * pad, dtype=torch.int32))
        sl_full.copy_(torch.tensor(seq_lens + [0] * pad, dtype=torch.int32))
        bt.copy_(torch.randint(0, num_blocks, bt.shape, generator=g, dtype=torch.int32))
        q.copy_(torch.randn(T, h, d, generator=g).to(dtype))
        out.fill_(float("nan"))
        graph.replay()
        ref = paged_prefill_attention_ref(q, k_cache, v_cache, bt, qsl, seq_lens, d ** -0.5)
        n = qsl[-1]
        assert not out.isnan().any() and (out[n:] == 0).all()
        assert rel_err(out[:n], ref[:n]) <= TOL[dtype]
