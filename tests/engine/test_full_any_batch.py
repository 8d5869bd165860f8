"""vLLM's FULL cudagraph mode on the CPU: the dispatcher's choice per mode and batch composition, the input
batch's fixed-shape layout for a FULL graph of any batch, and the runner's FULL step run through (no graph
on a CPU: the wrapper calls the forward) giving eager's greedy tokens. The graphs themselves are checked on
a GPU (tests/engine/test_cuda_graphs_gpu.py::test_full_mode_matches_eager_with_prefill_mixed_and_decode_steps).
"""

from __future__ import annotations

import pytest
import torch

from minivllm import LLM, SamplingParams
from minivllm.compilation.cuda_graph import CUDAGraphWrapper
from minivllm.config import CUDAGraphMode
from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher
from minivllm.worker.input_batch import InputBatch
from tests.engine.test_cuda_graph_dispatch import _decode_batch, _prefill_batch
from tests.helpers import random_prompts, tiny_checkpoint

FULL, PIECEWISE, NONE = CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE, CUDAGraphMode.NONE
SIZES = [1, 2, 4, 8, 16, 32]
MAX_NUM_SEQS = 8


def _mixed_batch(decodes: int, chunk: int):
    """`decodes` decode rows and one prefill chunk of `chunk` tokens in one step."""
    out = _decode_batch(decodes)
    out.scheduled += _prefill_batch([chunk]).scheduled
    return out


def _dispatcher(mode: str) -> CudagraphDispatcher:
    """A dispatcher with the sizes the worker would capture for `mode` activated (no graphs needed)."""
    d = CudagraphDispatcher(full_graphs_by_tokens=CUDAGraphMode(mode) is FULL)
    m = CUDAGraphMode(mode)
    if m.has_full:
        d.activate(FULL, SIZES if m is FULL else [s for s in SIZES if s <= MAX_NUM_SEQS])
    if m.has_piecewise:
        d.activate(PIECEWISE, SIZES)
    return d


def _pick(d, sched):
    p = d.dispatch(sched.num_tokens, len(sched.scheduled), sched.is_decode_only)
    return p.mode, p.num_padded_tokens, p.num_padded_seqs, p.uniform_decode


# (mode, batch, expected (runtime mode, padded tokens, padded seqs, uniform_decode))
CASES = [
    ("FULL", _decode_batch(3), (FULL, 4, None, False)),  # by token count: decode is just 3 tokens
    ("FULL", _prefill_batch([13]), (FULL, 16, None, False)),
    ("FULL", _mixed_batch(5, 20), (FULL, 32, None, False)),  # above max_num_seqs: still a FULL graph
    ("FULL", _prefill_batch([33]), (NONE, None, None, False)),  # above the largest size: eager
    ("FULL_DECODE_ONLY", _decode_batch(3), (FULL, 4, 4, True)),
    ("FULL_DECODE_ONLY", _mixed_batch(5, 20), (NONE, None, None, False)),
    ("FULL_DECODE_ONLY", _prefill_batch([13]), (NONE, None, None, False)),
    ("FULL_AND_PIECEWISE", _decode_batch(3), (FULL, 4, 4, True)),
    ("FULL_AND_PIECEWISE", _mixed_batch(5, 20), (PIECEWISE, 32, None, False)),
    ("FULL_AND_PIECEWISE", _prefill_batch([13]), (PIECEWISE, 16, None, False)),
    ("FULL_AND_PIECEWISE", _decode_batch(9), (PIECEWISE, 16, None, False)),  # above max_num_seqs: piecewise
    ("PIECEWISE", _decode_batch(3), (PIECEWISE, 4, None, False)),
    ("PIECEWISE", _mixed_batch(5, 20), (PIECEWISE, 32, None, False)),
]


@pytest.mark.parametrize("mode, sched, want", CASES, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CASES)])
def test_dispatch_per_mode_and_composition(mode, sched, want):
    assert _pick(_dispatcher(mode), sched) == want


def test_full_ignores_the_composition():
    """Three batches of 7 tokens (all decode, all prefill, mixed) replay the same FULL graph of 8 tokens."""
    d = _dispatcher("FULL")
    picks = {_pick(d, b) for b in (_decode_batch(7), _prefill_batch([3, 4]), _mixed_batch(2, 5))}
    assert picks == {(FULL, 8, None, False)}
    assert d.counts == {"full": 3, "piecewise": 0, "eager": 0}


def test_unified_layout_has_one_shape_for_every_composition():
    ib = InputBatch(max_num_tokens=32, max_num_seqs=MAX_NUM_SEQS, max_blocks_per_seq=4, block_size=4, num_kv_heads=2,
                    device=torch.device("cpu"))
    ptrs = {k: v.data_ptr() for k, v in ib.buffers().items()}
    shapes = set()
    for sched in (_decode_batch(3), _prefill_batch([5, 2]), _mixed_batch(2, 5)):
        b = ib.prepare(sched, pad_tokens_to=8, unified=True)
        m = b.attn_metadata
        T, S = sched.num_tokens, len(sched.scheduled)
        assert m.unified and b.num_padded_tokens == 8
        shapes.add((m.slot_mapping.shape, m.query_start_loc.shape, m.seq_lens.shape, m.block_tables.shape))
        assert m.query_start_loc.data_ptr() == ib.query_start_loc.data_ptr()
        assert (m.query_start_loc[S:] == T).all() and (m.seq_lens[S:] == 0).all()  # unused rows: nothing
        assert (m.slot_mapping[T:] == -1).all()  # padding tokens write no KV
        assert m.query_start_loc[:S + 1].tolist() == m.query_start_loc_cpu[:S + 1]
    assert shapes == {((8,), (MAX_NUM_SEQS + 1,), (MAX_NUM_SEQS,), (MAX_NUM_SEQS, 4))}
    m = ib.dummy_unified(16)
    assert m.unified and (m.query_start_loc == 0).all() and (m.slot_mapping == -1).all()
    assert ptrs == {k: v.data_ptr() for k, v in ib.buffers().items()}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c"))))


def test_full_steps_run_through_give_eager_tokens(ckpt):
    """The runner's FULL path without graphs (a CPU): the unified layout, padding to the token count, the LM
    head outside on the sampled rows. Prefill chunks, mixed steps and decodes; eager's greedy tokens."""
    prompts = [{"prompt_token_ids": p} for p in random_prompts(500, [30, 3, 17, 9, 1, 12], seed=2)]
    sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    common = dict(max_model_len=64, max_num_seqs=4, max_num_batched_tokens=16)
    eager = LLM(ckpt, enforce_eager=True, **common)
    want = [o.outputs[0].token_ids for o in eager.generate(prompts, sp, use_tqdm=False)]
    llm = LLM(ckpt, **common)
    runner = llm.model_runner
    sizes = [1, 2, 4, 8, 16]
    runner.cudagraph_dispatcher = d = CudagraphDispatcher(full_graphs_by_tokens=True)
    runner.full_graph = CUDAGraphWrapper(runner.compiled.forward, FULL, "FULL forward")
    d.activate(FULL, sizes)  # as after a capture pass; with no graph recorded the wrapper calls the forward
    got = [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]
    assert got == want
    assert d.counts["full"] > 0 and d.counts["eager"] == 0 and d.counts["piecewise"] == 0
