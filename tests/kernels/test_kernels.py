"""Triton kernels vs the PyTorch reference, and the reference vs plain dense attention.

On CPU the kernels run under TRITON_INTERPRET=1 (set in conftest.py), which is slow, so shapes stay tiny
there; with CUDA the same tests use longer contexts and also cover bf16. (bf16 is GPU-only because
Triton 3.6's interpreter computes tl.dot on bf16 inputs wrongly; fp16 exercises the same low-precision
casts on CPU.) Every output buffer is poisoned first (NaN), so an element the kernel forgot to write fails.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import ops
from minivllm.kernels.torch_ref import (paged_decode_attention_ref, paged_prefill_attention_ref,
                                        store_kvcache_ref)

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16] if CUDA else [torch.float32, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}
CTX = 1000 if CUDA else 100  # longest context in the random cases

triton = pytest.importorskip("triton")
from minivllm.kernels.triton_decode import choose_num_splits, paged_decode_attention  # noqa: E402
from minivllm.kernels.triton_prefill import paged_prefill_attention  # noqa: E402
from minivllm.kernels.triton_store_kv import store_kvcache  # noqa: E402

# (num_q_heads, num_kv_heads, head_dim, block_size): every GQA ratio, both head sizes, both block sizes.
LAYOUTS = [(4, 4, 64, 16), (4, 2, 128, 32), (8, 2, 64, 32), (8, 1, 128, 16)]
if CUDA:
    LAYOUTS += [(16, 8, 128, 16), (32, 4, 128, 32), (8, 8, 32, 16), (8, 2, 256, 16)]


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-6)).item()


def make_cache(num_blocks: int, block_size: int, hkv: int, d: int, dtype: torch.dtype, seed: int):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(num_blocks, block_size, hkv, d, generator=g).to(DEVICE, dtype)
    v = torch.randn(num_blocks, block_size, hkv, d, generator=g).to(DEVICE, dtype)
    return k, v


def shuffled_block_tables(seq_lens: list[int], block_size: int, num_blocks: int, seed: int) -> torch.Tensor:
    """Each sequence gets distinct, randomly ordered physical blocks; the table is padded with 0."""
    need = [-(-L // block_size) for L in seq_lens]
    width = max(max(need), 1) + 1  # one spare column: padding past the last block
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
    assert sum(need) <= num_blocks
    table = torch.zeros(len(seq_lens), width, dtype=torch.int32)
    for s, n in enumerate(need):
        table[s, :n] = torch.tensor(perm[:n], dtype=torch.int32)
        perm = perm[n:]
    return table.to(DEVICE)


def num_blocks_for(seq_lens: list[int], block_size: int) -> int:
    return sum(-(-L // block_size) for L in seq_lens) + 3


# ---- store_kvcache ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hkv,d,block_size", [(2, 64, 16), (1, 128, 32), (3, 32, 16)])
def test_store_kvcache(dtype, hkv, d, block_size):
    num_blocks, T = 6, 20
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed=1)  # random = poison
    slots = torch.randperm(num_blocks * block_size)[:T]
    slots[torch.tensor([0, 5, 6, 19])] = -1  # padding tokens
    slots = slots.to(DEVICE)
    # key/value as strided views of a fused buffer, like slices of a qkv projection
    fused = torch.randn(T, 3 * hkv, d).to(DEVICE, dtype)
    key, value = fused[:, hkv:2 * hkv], fused[:, 2 * hkv:]
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    store_kvcache_ref(key, value, k_ref, v_ref, slots)
    store_kvcache(key, value, k_cache, v_cache, slots)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)  # written and untouched slots


# ---- decode -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("num_splits", [None, 1, 3])
def test_paged_decode(dtype, layout, num_splits):
    h, hkv, d, block_size = layout
    rng = random.Random(hash((layout, num_splits)))
    seq_lens = [rng.randint(1, CTX) for _ in range(3)] + [0, block_size, 2 * block_size + 1]
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed=2)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=3)
    sl = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    q = torch.randn(len(seq_lens), h, d).to(DEVICE, dtype)
    out = torch.full_like(q, float("nan"))
    paged_decode_attention(q, k_cache, v_cache, bt, sl, d ** -0.5, out=out, num_splits=num_splits)
    ref = paged_decode_attention_ref(q, k_cache, v_cache, bt, sl, d ** -0.5)
    assert not out.isnan().any()
    assert (out[3] == 0).all()  # seq_len 0 row
    assert rel_err(out, ref) <= TOL[dtype]



@pytest.mark.parametrize("num_splits", [1, 3])
def test_paged_decode_launch_choices_change_no_result(num_splits):
    """prefetch_metadata (custom op "decode_prefetch") reads seq_lens and the first tile's block ids before the
    PDL wait, use_pdl launches with PDL (a no-op off Hopper): the same bits as without them."""
    h, hkv, d, block_size = LAYOUTS[1]
    seq_lens = [CTX, 1, 0, 3 * block_size, 2 * block_size + 5]
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, torch.float32, seed=2)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=3)
    sl = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    q = torch.randn(len(seq_lens), h, d).to(DEVICE)
    outs = [paged_decode_attention(q, k_cache, v_cache, bt, sl, d ** -0.5, num_splits=num_splits,
                                   use_pdl=pdl, prefetch_metadata=prefetch)
            for pdl, prefetch in ((False, False), (True, True))]
    assert torch.equal(outs[0], outs[1])
    assert rel_err(outs[1], paged_decode_attention_ref(q, k_cache, v_cache, bt, sl, d ** -0.5)) <= TOL[torch.float32]


@pytest.mark.parametrize("num_splits", [1, 3])
def test_second_launch_of_a_shape_is_direct_and_correct(num_splits):
    """kernels/launch.py: the first launch of a shape goes through Triton's JIT path, the next ones call the
    compiled kernel directly (on CUDA; the interpreter always takes Triton's path). Both are checked against
    the reference, with new data each time, and the KV store between them: a wrong argument order or a
    stale constexpr in the direct launch would show here."""
    from minivllm.kernels import launch

    h, hkv, d, block_size = LAYOUTS[1]
    seq_lens = [CTX, 1, 0, 3 * block_size + 2]
    num_blocks = num_blocks_for(seq_lens, block_size)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=3)
    sl = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    direct0 = launch.stats["direct"]
    for seed in (1, 2, 3):
        k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, torch.float32, seed=seed)
        k_ref, v_ref = k_cache.clone(), v_cache.clone()
        kv = torch.randn(2, len(seq_lens), hkv, d, generator=torch.Generator().manual_seed(seed)).to(DEVICE)
        slots = torch.tensor([5, block_size + 1, -1, 2 * block_size], device=DEVICE)
        store_kvcache(kv[0], kv[1], k_cache, v_cache, slots)
        store_kvcache_ref(kv[0], kv[1], k_ref, v_ref, slots)
        assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)
        q = torch.randn(len(seq_lens), h, d, generator=torch.Generator().manual_seed(seed)).to(DEVICE)
        out = torch.full_like(q, float("nan"))
        paged_decode_attention(q, k_cache, v_cache, bt, sl, d ** -0.5, out=out, num_splits=num_splits)
        assert rel_err(out, paged_decode_attention_ref(q, k_cache, v_cache, bt, sl, d ** -0.5)) <= TOL[torch.float32]
    if CUDA:  # store + decode (+ merge) per round; rounds 2 and 3 direct
        assert launch.stats["direct"] - direct0 >= 2 * (2 + (num_splits > 1))


@pytest.mark.parametrize("dtype", DTYPES if CUDA else [torch.float32])  # (the interpreter: slow, fp32 is enough)
@pytest.mark.parametrize("layout", LAYOUTS[:2])
@pytest.mark.parametrize("num_splits", [None, 1, 3])
def test_one_launch_decode_gives_the_bits_of_store_decode_merge(dtype, layout, num_splits):
    """new_kv + split_counters (attention launched from Python: one launch) against the KV store, the decode
    kernel and the merge kernel (what a CUDA graph captures): the same cache and the same bits, so graph modes
    and eager give the same tokens. The new tokens' cache slots hold NaN before the one launch, so a program
    that read them there instead of from the step's k/v would show. The split counters come back zeroed
    (the next launch counts from 0), so a second call is right too."""
    h, hkv, d, block_size = layout
    seq_lens = [CTX, 1, 0, 3 * block_size, 2 * block_size + 5]
    num_blocks = num_blocks_for(seq_lens, block_size)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=3)
    sl = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    slots = torch.tensor([int(bt[s, (n - 1) // block_size]) * block_size + (n - 1) % block_size if n else -1
                          for s, n in enumerate(seq_lens)], device=DEVICE)
    counters = torch.zeros(len(seq_lens) * hkv, dtype=torch.int32, device=DEVICE)
    for seed in (1, 2):
        k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed=seed)
        kv = torch.randn(2, len(seq_lens), hkv, d, generator=torch.Generator().manual_seed(seed)).to(DEVICE, dtype)
        q = torch.randn(len(seq_lens), h, d, generator=torch.Generator().manual_seed(seed)).to(DEVICE, dtype)
        k_ref, v_ref = k_cache.clone(), v_cache.clone()
        store_kvcache(kv[0], kv[1], k_ref, v_ref, slots)
        apart = paged_decode_attention(q, k_ref, v_ref, bt, sl, d ** -0.5, num_splits=num_splits)
        for cache in (k_cache, v_cache):
            cache.view(-1, hkv, d)[slots[slots >= 0]] = float("nan")
        one = paged_decode_attention(q, k_cache, v_cache, bt, sl, d ** -0.5, num_splits=num_splits,
                                     new_kv=(kv[0], kv[1], slots), split_counters=counters)
        assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)
        assert torch.equal(one, apart)
        assert (one[2] == 0).all() and (counters == 0).all()  # seq_len 0: nothing stored, zeros out
        assert rel_err(one, paged_decode_attention_ref(q, k_ref, v_ref, bt, sl, d ** -0.5)) <= TOL[dtype]


def test_num_splits_depends_on_shapes_only():
    dev = torch.device(DEVICE)
    assert choose_num_splits(1, 8, 8192, dev) > 1  # one long sequence: split it
    assert choose_num_splits(1, 8, 128, dev) == 1  # too short to be worth it
    assert choose_num_splits(4096, 8, 8192, dev) == 1  # plenty of programs already


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_decode_cuda_graph_replay_with_new_seq_lens():
    h, hkv, d, block_size = 16, 8, 128, 16
    seq_lens = [3000, 17, 0, 1500]
    num_blocks = num_blocks_for([4096] * 4, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, torch.bfloat16, seed=4)
    bt = shuffled_block_tables([4096] * 4, block_size, num_blocks, seed=5)
    sl = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    q = torch.randn(4, h, d, device=DEVICE, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    paged_decode_attention(q, k_cache, v_cache, bt, sl, 0.1, out=out)  # warm up / compile
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paged_decode_attention(q, k_cache, v_cache, bt, sl, 0.1, out=out)
    for new_lens in ([1, 4096, 5, 0], [2048, 2049, 16, 1]):
        sl.copy_(torch.tensor(new_lens, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        ref = paged_decode_attention_ref(q, k_cache, v_cache, bt, sl, 0.1)
        assert not out.isnan().any() and rel_err(out, ref) <= 1e-2


# ---- prefill (packed varlen, prefix hits, mixed decode rows) ----------------------------------------------

def prefill_batch(block_size: int, seed: int) -> tuple[list[int], list[int]]:
    """(query_lens, seq_lens): fresh prompt, prefix hit ending mid-block, decode row, padded rows."""
    rng = random.Random(seed)
    fresh = rng.randint(block_size + 1, CTX)
    prefix_q = rng.randint(2, CTX // 2)
    prefix_len = prefix_q + rng.randint(1, CTX // 2)
    decode_len = rng.randint(2, CTX)
    query_lens = [fresh, prefix_q, 1, 0, 1]
    seq_lens = [fresh, prefix_len, decode_len, 0, 0]  # last two: padded rows -> zeros
    return query_lens, seq_lens


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_paged_prefill(dtype, layout):
    h, hkv, d, block_size = layout
    query_lens, seq_lens = prefill_batch(block_size, seed=hash(layout) % 1000)
    qsl = [0]
    for n in query_lens:
        qsl.append(qsl[-1] + n)
    T = qsl[-1] + 3  # three batch-padding tokens after the last sequence
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed=6)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=7)
    q = torch.randn(T, h, d).to(DEVICE, dtype)
    qsl_t = torch.tensor(qsl, dtype=torch.int32, device=DEVICE)
    sl_t = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    ref = paged_prefill_attention_ref(q, k_cache, v_cache, bt, qsl, seq_lens, d ** -0.5)
    out = torch.full_like(q, float("nan"))
    paged_prefill_attention(q, k_cache, v_cache, bt, qsl_t, sl_t, max(query_lens), d ** -0.5, out=out)
    n = qsl[-1]
    assert not out[:n].isnan().any()
    assert (out[qsl[4]:n] == 0).all()  # padded row with query_len 1, seq_len 0
    assert rel_err(out[:n], ref[:n]) <= TOL[dtype]
    fresh = paged_prefill_attention(q, k_cache, v_cache, bt, qsl_t, sl_t, max(query_lens), d ** -0.5)
    assert (fresh[n:] == 0).all() and rel_err(fresh, ref) <= TOL[dtype]
    # The K-as-rows variant the tuning sweep tries (small tiles: the CPU interpreter is slow).
    rows = paged_prefill_attention(q, k_cache, v_cache, bt, qsl_t, sl_t, max(query_lens), d ** -0.5,
                                   tile_config=(32, 16, 4, 2, True))
    assert (rows[n:] == 0).all() and rel_err(rows, ref) <= TOL[dtype]


@pytest.mark.parametrize("seed", range(6))
def test_random_batches(seed):
    """Odd corners in one sweep: GQA 3 and 16, head_dim 16/32, block sizes 1..64, forced split counts."""
    rng = random.Random(seed)
    hkv, group = rng.choice([1, 2]), rng.choice([1, 3, 4, 16])
    d, block_size = rng.choice([16, 32, 64]), rng.choice([1, 8, 16, 64])
    seq_lens = [rng.choice([0, rng.randint(1, CTX)]) for _ in range(rng.randint(1, 4))]
    query_lens = [rng.randint(1, L) if L else rng.randint(0, 1) for L in seq_lens]
    qsl = [0]
    for n in query_lens:
        qsl.append(qsl[-1] + n)
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, torch.float32, seed=seed)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=seed)
    sl_t = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    scale = rng.uniform(0.05, 1.0)
    q = torch.randn(qsl[-1], hkv * group, d, device=DEVICE)
    qsl_t = torch.tensor(qsl, dtype=torch.int32, device=DEVICE)
    if qsl[-1]:  # max_query_len may be any upper bound
        max_q = max(query_lens) + rng.randint(0, 2)
        out = paged_prefill_attention(q, k_cache, v_cache, bt, qsl_t, sl_t, max_q, scale)
        ref = paged_prefill_attention_ref(q, k_cache, v_cache, bt, qsl, seq_lens, scale)
        assert not out.isnan().any() and rel_err(out, ref) <= 1e-5
    q1 = torch.randn(len(seq_lens), hkv * group, d, device=DEVICE)
    out = paged_decode_attention(q1, k_cache, v_cache, bt, sl_t, scale, num_splits=rng.choice([None, 2, 5]))
    ref = paged_decode_attention_ref(q1, k_cache, v_cache, bt, sl_t, scale)
    assert not out.isnan().any() and rel_err(out, ref) <= 1e-5


# ---- the reference itself vs dense attention ------------------------------------------------------------

def test_torch_ref_matches_dense_sdpa():
    h, hkv, d, block_size = 8, 2, 32, 16
    query_lens, seq_lens = [20, 5, 1], [20, 37, 50]
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache = torch.zeros(num_blocks, block_size, hkv, d)
    v_cache = torch.zeros_like(k_cache)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=8).cpu()
    ks = [torch.randn(L, hkv, d) for L in seq_lens]
    vs = [torch.randn(L, hkv, d) for L in seq_lens]
    for s, L in enumerate(seq_lens):  # scatter each sequence's dense K/V into its paged blocks
        slots = bt[s, torch.arange(L) // block_size].long() * block_size + torch.arange(L) % block_size
        store_kvcache_ref(ks[s], vs[s], k_cache, v_cache, slots)
    qs = [torch.randn(n, h, d) for n in query_lens]
    qsl = [0, 20, 25, 26]
    out = paged_prefill_attention_ref(torch.cat(qs), k_cache, v_cache, bt, qsl, seq_lens, 0.2)
    for s, (n, L) in enumerate(zip(query_lens, seq_lens)):
        visible = torch.arange(L)[None, :] <= torch.arange(L - n, L)[:, None]  # causal with a prefix
        k_dense = ks[s].repeat_interleave(h // hkv, 1).transpose(0, 1)
        v_dense = vs[s].repeat_interleave(h // hkv, 1).transpose(0, 1)
        dense = F.scaled_dot_product_attention(qs[s].transpose(0, 1), k_dense, v_dense, attn_mask=visible,
                                               scale=0.2).transpose(0, 1)
        assert rel_err(out[qsl[s]:qsl[s + 1]], dense) <= 1e-5
    # decode reference: last token of each sequence, plus a padded row
    q_dec = torch.randn(4, h, d)
    sl = torch.tensor(seq_lens + [0], dtype=torch.int32)
    bt4 = torch.cat([bt, torch.zeros(1, bt.shape[1], dtype=torch.int32)])
    dec = paged_decode_attention_ref(q_dec, k_cache, v_cache, bt4, sl, 0.2)
    for s, L in enumerate(seq_lens):
        dense = F.scaled_dot_product_attention(
            q_dec[s, :, None], ks[s].repeat_interleave(h // hkv, 1).transpose(0, 1),
            vs[s].repeat_interleave(h // hkv, 1).transpose(0, 1), scale=0.2)[:, 0]
        assert rel_err(dec[s], dense) <= 1e-5
    assert (dec[3] == 0).all()


# ---- ops: backend dispatch and torch.compile ---------------------------------------------------------------

def make_step(decode_only: bool, dtype: torch.dtype = torch.float32):
    """A batch whose new tokens still have to be stored: returns (q, k, v, k_cache, v_cache, meta)."""
    h, hkv, d, block_size = 4, 2, 64, 16
    query_lens = [1, 1, 1] if decode_only else [7, 1, 12]
    seq_lens = [40, 17, 0] if decode_only else [30, 17, 12]
    num_blocks = num_blocks_for(seq_lens, block_size)
    k_cache, v_cache = make_cache(num_blocks, block_size, hkv, d, dtype, seed=9)
    bt = shuffled_block_tables(seq_lens, block_size, num_blocks, seed=10)
    qsl, slots = [0], []
    for s, (n, L) in enumerate(zip(query_lens, seq_lens)):
        qsl.append(qsl[-1] + n)
        for pos in range(L - n, L):  # padded rows (seq_len 0) get slot -1
            slots.append(int(bt[s, pos // block_size]) * block_size + pos % block_size if pos >= 0 else -1)
    T = qsl[-1]
    meta = AttentionMetadata(
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=DEVICE),
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=DEVICE),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE), block_tables=bt,
        max_query_len=max(query_lens), max_seq_len=max(seq_lens), decode_only=decode_only,
        query_start_loc_cpu=qsl, seq_lens_cpu=seq_lens)
    q = torch.randn(T, h, d).to(DEVICE, dtype)
    k = torch.randn(T, hkv, d).to(DEVICE, dtype)
    v = torch.randn(T, hkv, d).to(DEVICE, dtype)
    return q, k, v, k_cache, v_cache, meta


def attention_step(q, k, v, k_cache, v_cache, meta, backend):
    ops.store_kvcache(k, v, k_cache, v_cache, meta.slot_mapping, backend)
    return ops.paged_attention(q, k_cache, v_cache, meta, 0.125, backend)


@pytest.mark.parametrize("decode_only", [True, False])
def test_backends_agree(decode_only):
    q, k, v, kc, vc, meta = make_step(decode_only)
    ref = attention_step(q, k, v, kc.clone(), vc.clone(), meta, "torch")
    kc2, vc2 = kc.clone(), vc.clone()
    out = attention_step(q, k, v, kc2, vc2, meta, "triton")
    assert rel_err(out, ref) <= 1e-5 and not out.isnan().any()
    for bad in ("flash", "unregistered"):  # "unregistered" is the layer's choice, not a kernel backend
        with pytest.raises(ValueError, match="unknown attention kernel backend"):
            ops.paged_attention(q, kc, vc, meta, 0.125, bad)


@pytest.mark.parametrize("decode_only", [True, False])
def test_compile_fullgraph_no_graph_breaks(decode_only):
    """The engine's attention op (store + attend, reading the forward context) is one opaque node for
    Dynamo: fullgraph=True raises on any graph break."""
    from minivllm.attention.layer import Attention
    from minivllm.attention.metadata import set_forward_context

    torch._dynamo.reset()
    q, k, v, kc, vc, meta = make_step(decode_only)
    expected = attention_step(q, k, v, kc.clone(), vc.clone(), meta, "torch")
    h, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    attn = Attention(h, hkv, d, scale=0.125, layer_idx=0)

    def step(q, k, v):
        return attn(q.reshape(q.shape[0], -1), k.reshape(k.shape[0], -1), v.reshape(v.shape[0], -1)) * 2

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    with set_forward_context(meta, "triton", [(kc, vc)]):
        out = compiled(q, k, v)
    assert rel_err(out.view_as(expected), 2 * expected) <= 1e-5


def test_kernels_are_leaves():
    """minivllm/kernels imports nothing of the engine (outside type hints): no layer flags, no forward context;
    what a kernel needs (caches, PDL, prefetch) comes in as arguments."""
    import ast
    from pathlib import Path

    import minivllm.kernels

    for path in Path(minivllm.kernels.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        hinted = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                  and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and id(node) not in hinted and (node.module or "").startswith("minivllm"):
                assert node.module.startswith("minivllm.kernels") or node.module == "minivllm" and all(
                    a.name == "kernels" for a in node.names), (path.name, node.module)
            assert not (isinstance(node, ast.Name) and node.id == "get_forward_context"), path.name
