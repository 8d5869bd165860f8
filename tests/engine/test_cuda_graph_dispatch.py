"""The CPU-checkable half of CUDA graphs: capture sizes, the dispatcher's padding choice, padded inputs."""

from __future__ import annotations

import torch

from minivllm.config import (
    CompilationConfig,
    CUDAGraphMode,
    EngineConfig,
    SchedulerConfig,
    default_capture_sizes,
)
from minivllm.engine.sched_output import ScheduledSeq, SchedulerOutput
from minivllm.engine.sequence import Sequence
from minivllm.sampling_params import SamplingParams
from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher
from minivllm.worker.input_batch import InputBatch


def test_default_capture_sizes_follow_vllm():
    sizes = default_capture_sizes(512)
    assert sizes[:4] == [1, 2, 4, 8] and 248 in sizes and 256 in sizes and 264 not in sizes
    assert sizes[-3:] == [480, 496, 512]
    cfg = EngineConfig.resolve(model="m", scheduler=SchedulerConfig(max_num_seqs=8))
    assert cfg.cudagraph_capture_sizes == (1, 2, 4, 8, 16)  # up to min(2 x max_num_seqs, 512)
    cfg = EngineConfig.resolve(model="m", compilation=CompilationConfig(cudagraph_capture_sizes=[4, 1, 4]))
    assert cfg.cudagraph_capture_sizes == (1, 4)
    assert EngineConfig.resolve(model="m", enforce_eager=True).cudagraph_mode == "NONE"


def _decode_batch(n: int) -> SchedulerOutput:
    out = SchedulerOutput()
    for i in range(n):
        seq = Sequence(str(i), [1, 2, 3], SamplingParams())
        seq.num_computed_tokens = 2  # the newest token is the one to compute: a decode step
        seq.block_table = [i]
        out.scheduled.append(ScheduledSeq(seq, 1))
    return out


def _prefill_batch(lengths: list[int]) -> SchedulerOutput:
    out = SchedulerOutput()
    for i, n in enumerate(lengths):
        seq = Sequence(f"p{i}", list(range(1, n + 1)), SamplingParams())
        seq.block_table = [10 + i, 20 + i]
        out.scheduled.append(ScheduledSeq(seq, n))
    return out


def _dispatch(d: CudagraphDispatcher, sched: SchedulerOutput):
    pick = d.dispatch(sched.num_tokens, len(sched.scheduled), sched.is_decode_only)
    return pick.mode, pick.num_padded_tokens, pick.num_padded_seqs


def test_dispatcher_pads_to_the_nearest_captured_size():
    d = CudagraphDispatcher(full_graphs_by_tokens=False)  # FULL_AND_PIECEWISE: decode graphs by batch size
    assert _dispatch(d, _decode_batch(1)) == (CUDAGraphMode.NONE, None, None)  # nothing captured yet
    d.activate(CUDAGraphMode.FULL, [1, 2, 4, 8])  # as after a capture pass
    d.activate(CUDAGraphMode.PIECEWISE, [1, 2, 4, 8])
    for batch, padded in [(1, 1), (3, 4), (5, 8), (8, 8)]:
        mode, pad_t, pad_s = _dispatch(d, _decode_batch(batch))
        assert mode is CUDAGraphMode.FULL and pad_t == pad_s == padded
    assert _dispatch(d, _decode_batch(9)) == (CUDAGraphMode.NONE, None, None)  # above the largest size: eager
    mode, pad_t, pad_s = _dispatch(d, _prefill_batch([3, 2]))  # mixed/prefill: PIECEWISE by token count
    assert mode is CUDAGraphMode.PIECEWISE and pad_t == 8 and pad_s is None
    assert _dispatch(d, _prefill_batch([9]))[1] is None
    assert d.counts == {"full": 4, "piecewise": 1, "eager": 3}


def test_padded_rows_write_no_kv_and_attend_to_nothing():
    ib = InputBatch(max_num_tokens=16, max_num_seqs=8, max_blocks_per_seq=4, block_size=4, num_kv_heads=2,
                    device=torch.device("cpu"))
    ptrs = {k: v.data_ptr() for k, v in ib.buffers().items()}
    batch = ib.prepare(_decode_batch(3), pad_tokens_to=4, pad_seqs_to=4)
    m = batch.attn_metadata
    assert m.decode_only and m.slot_mapping.tolist() == [2, 6, 10, -1]  # block i, offset 2; pad row: -1
    assert m.seq_lens.tolist() == [3, 3, 3, 0]  # pad row: seq_len 0 -> zeros, discarded
    assert m.query_start_loc.tolist() == [0, 1, 2, 3, 4]
    assert ib.input_ids[:4].tolist() == [3, 3, 3, 0] and ib.positions[:4].tolist() == [2, 2, 2, 0]
    mixed = ib.prepare(_prefill_batch([3, 2]), pad_tokens_to=8)
    assert mixed.attn_metadata.slot_mapping.tolist() == [40, 41, 42, 44, 45, -1, -1, -1]
    assert mixed.attn_metadata.query_start_loc.tolist() == [0, 3, 5]
    assert {k: v.data_ptr() for k, v in ib.buffers().items()} == ptrs  # persistent buffers never move


def test_block_table_rows_are_rewritten_after_preemption():
    ib = InputBatch(max_num_tokens=16, max_num_seqs=4, max_blocks_per_seq=4, block_size=4, num_kv_heads=2,
                    device=torch.device("cpu"))
    sched = _decode_batch(1)
    seq = sched.scheduled[0].seq
    seq.block_table = [5]
    assert ib.prepare(sched).attn_metadata.slot_mapping.tolist() == [22]
    seq.reset_for_recompute()  # preempted: same sequence, brand-new blocks after readmission
    seq.num_computed_tokens, seq.block_table = 2, [7]
    assert ib.prepare(_with(seq)).attn_metadata.slot_mapping.tolist() == [30]
    seq.block_table = [7, 9]  # grows: only the new entry is written
    seq.token_ids += [4, 5, 6]
    seq.num_computed_tokens = 5
    assert ib.prepare(_with(seq)).attn_metadata.slot_mapping.tolist() == [37]


def _with(seq: Sequence) -> SchedulerOutput:
    return SchedulerOutput(scheduled=[ScheduledSeq(seq, 1)])


def test_capture_bookkeeping_largest_first_and_per_size_memory(monkeypatch):
    """capture_all_sizes (shared by FULL and PIECEWISE), with the CUDA memory calls faked on a CPU."""
    import gc

    import pytest

    from minivllm.compilation.cuda_graph import CudaGraphCaptureError
    from minivllm.worker.graph_capture import MiB, capture_all_sizes

    free = {"bytes": 1000 * MiB}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (free["bytes"], 2000 * MiB))
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(len(order)))
    order = []

    def capture_one(n):
        assert gc.isenabled() and gc.get_freeze_count() > 0  # GC frozen during capture
        assert emptied and emptied[-1] == len(order)  # the allocator's cache was emptied just before measuring
        order.append(n)
        free["bytes"] -= (8 if n == 4 else 1) * MiB  # the largest graph takes most of the pool

    # the allocator's view: segments of our pool (7 MiB) next to other pools' and the default pool's
    segments = [{"total_size": 4 * MiB, "segment_pool_id": (0, 7)}, {"total_size": 3 * MiB, "segment_pool_id": [0, 7]},
                {"total_size": 64 * MiB, "segment_pool_id": (0, 0)}, {"total_size": 5 * MiB, "segment_pool_id": (0, 9)}]
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: segments)
    stats = capture_all_sizes("FULL", [1, 4, 2], "test", capture_one, pool=(0, 7))
    assert order == [4, 2, 1] and stats.sizes == [1, 2, 4]
    assert stats.pool_growth_mib == {4: 8.0, 2: 1.0, 1: 1.0} and stats.total_mib == 10.0
    assert stats.pool_mib == 7.0 and stats.as_dict()["pool_mib"] == 7.0
    assert gc.get_freeze_count() == 0
    order.clear()
    assert capture_all_sizes("FULL", [1], "test", capture_one).pool_mib is None  # no pool handle given

    def failing(n):
        raise CudaGraphCaptureError(f"mode FULL, batch size {n}")

    with pytest.raises(CudaGraphCaptureError, match="batch size 2"):
        capture_all_sizes("FULL", [2], "test", failing)
    assert gc.get_freeze_count() == 0  # unfrozen even when a capture fails


def test_graph_memory_is_reserved_for_the_pool_and_the_graph_executables():
    """Before the KV cache is sized, the engine reserves the pool (the activation peak scaled to the largest
    captured size, per mode) plus the driver's graph executables (~12 KiB per kernel node). On the H200 the
    default FULL_AND_PIECEWISE capture of Qwen3-0.6B lowered free memory by 354 MiB, 58 of them the pool:
    the reservation must cover that; before, a fixed 64 MiB stood for the executables."""
    from minivllm.worker.graph_capture import GRAPH_NODE_BYTES, GRAPH_NODES_PER_LAYER, graph_memory_estimate

    def reserve(mode: str, layers: int = 28, peak: int = 0, **engine) -> float:
        cfg = EngineConfig.resolve(model="m", device=torch.device("cuda"),  # resolved as on a GPU (mode 3)
                                   compilation=CompilationConfig(cudagraph_mode=mode), **engine)
        return graph_memory_estimate(cfg, layers, peak) / 2 ** 20

    default = reserve("FULL_AND_PIECEWISE")  # 35 decode sizes + 51 token counts, 28 layers
    assert 354 - 58 <= default <= 2 * 354
    assert reserve("FULL_DECODE_ONLY") >= 162 - 58 and reserve("PIECEWISE") >= 190 - 26
    assert reserve("FULL_DECODE_ONLY") + reserve("PIECEWISE") == default
    # graphs of any batch: one per token count, as PIECEWISE, whose traced forward pads size 1 to 2
    assert reserve("FULL") == reserve("PIECEWISE") + GRAPH_NODES_PER_LAYER * 28 * GRAPH_NODE_BYTES / 2 ** 20
    assert reserve("NONE") == 0
    assert reserve("FULL_DECODE_ONLY", layers=2, scheduler=SchedulerConfig(max_num_seqs=4)) == 64  # the floor
    peak = 1 << 30  # the pool part: the activation peak scaled to the largest size (512 of 8192 tokens), per mode
    assert reserve("FULL_AND_PIECEWISE", peak=peak) - default == 2 * 1024 * 512 / 8192


def test_graph_wrapper_calls_through_in_other_modes_and_replays_in_its_own():
    """One wrapper class for FULL and PIECEWISE: it acts only when the forward context names its mode."""
    from types import SimpleNamespace

    import pytest

    from minivllm.attention.metadata import set_forward_context
    from minivllm.compilation.cuda_graph import CapturedGraph, CUDAGraphWrapper

    calls, replays = [], []
    w = CUDAGraphWrapper(lambda x: calls.append(x) or x, CUDAGraphMode.PIECEWISE, "piece 0")
    x = torch.zeros(4)
    with set_forward_context(None, "torch"):  # an eager step
        w(x)
    with set_forward_context(None, "torch", None, CUDAGraphMode.FULL, 4):  # a piece inside a FULL step
        w(x)
    with set_forward_context(None, "torch", None, CUDAGraphMode.PIECEWISE, 4):  # no graph, not capturing
        w(x)
    assert len(calls) == 3 and not w.graphs
    w.graphs[4] = CapturedGraph(SimpleNamespace(replay=lambda: replays.append(4)), [x.data_ptr()], "out")
    with set_forward_context(None, "torch", None, CUDAGraphMode.PIECEWISE, 4):
        with pytest.raises(RuntimeError, match="input 0 moved since capture"):  # checked at the first replay
            w(torch.zeros(4))
        assert w(x) == "out" and w(x) == "out"
        assert w(torch.zeros(4)) == "out"  # later replays are not checked (vLLM: only when debugging)
        w.check_every_replay, w.graphs[4].verified = True, False
        assert w(x) == "out"
        with pytest.raises(RuntimeError, match="input 0 moved since capture"):
            w(torch.zeros(4))
    assert len(calls) == 3 and replays == [4, 4, 4, 4]
    w.release()
    with set_forward_context(None, "torch"), pytest.raises(RuntimeError, match="shut down"):
        w(x)


def test_dummy_decode_batch_on_the_persistent_buffers():
    ib = InputBatch(max_num_tokens=16, max_num_seqs=4, max_blocks_per_seq=4, block_size=4, num_kv_heads=2,
                    device=torch.device("cpu"))
    ptrs = {k: v.data_ptr() for k, v in ib.buffers().items()}
    m = ib.dummy_decode(3)  # capture / warm-up: writes nothing, attends to nothing
    assert m.decode_only and m.slot_mapping.tolist() == [-1] * 3 and m.seq_lens.tolist() == [0] * 3
    m = ib.dummy_decode(10)  # more tokens than sequences: one sequence of 10 query tokens
    assert not m.decode_only and m.query_start_loc.tolist() == [0, 10] and m.max_query_len == 10
    assert {k: v.data_ptr() for k, v in ib.buffers().items()} == ptrs
