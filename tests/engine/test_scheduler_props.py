"""Property tests of the block manager and scheduler, driven without a model.

After any random sequence of adds, steps and aborts: the invariants hold after every operation, each
request ends exactly once (none lost, none duplicated), and once all are done every block is free with a
reference count of zero. Async scheduling is modelled too: a step's sampled tokens land only after the
next step was scheduled (they are pending meanwhile).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from minivllm.config import SchedulerConfig
from minivllm.engine.block_manager import BlockManager
from minivllm.engine.scheduler import Scheduler
from minivllm.engine.sequence import Sequence, SequenceStatus
from minivllm.sampling_params import SamplingParams

BLOCK = 4
MAX_LEN = 40  # prompt + output never exceeds this, and the cache always holds one such sequence

op = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 30), st.integers(1, 10), st.integers(0, 2)),
    st.tuples(st.just("step")),
)


def run_step(sched: Scheduler, finished: dict, state: dict) -> None:
    out = sched.schedule()
    assert len({id(s.seq) for s in out.scheduled}) == len(out.scheduled), "a sequence scheduled twice"
    assert out.num_tokens <= sched.config.max_num_batched_tokens
    assert len(sched.running) <= sched.config.max_num_seqs
    for s in out.scheduled:  # every scheduled token has a slot, and no finished sequence is scheduled
        assert len(s.seq.block_table) * BLOCK >= s.seq.num_computed_tokens + s.num_new_tokens
        assert not s.seq.is_finished and s.seq.num_scheduled_total <= MAX_LEN
    sampled = [s.seq for s in out.scheduled if s.completes_prompt]
    sched.update_computed(out)
    for seq in sampled:
        seq.num_pending += 1
    if state["async"]:  # the tokens of the step launched before this one land now
        done, state["inflight"] = state["inflight"], sampled
    else:
        done = sampled
    for seq in done:
        if seq.is_finished:
            continue
        seq.num_pending -= 1
        seq.append_token(seq.seq_id % 7)  # few distinct tokens -> shared prefixes and cache hits
        if seq.num_output_tokens >= seq.params.max_tokens or seq.num_tokens >= MAX_LEN:
            sched.finish(seq, SequenceStatus.FINISHED_LENGTH)
            assert seq.request_id not in finished
            finished[seq.request_id] = seq


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(op, max_size=60), num_blocks=st.integers(MAX_LEN // BLOCK, 30),
       budget=st.integers(1, 48), max_seqs=st.integers(1, 6), caching=st.booleans(), async_=st.booleans())
def test_random_workload_frees_everything(ops, num_blocks, budget, max_seqs, caching, async_):
    bm = BlockManager(num_blocks, BLOCK, enable_prefix_caching=caching)
    sched = Scheduler(SchedulerConfig(max_num_seqs=max_seqs, max_num_batched_tokens=budget), bm, MAX_LEN)
    state = {"async": async_, "inflight": []}
    added: dict[str, Sequence] = {}
    finished: dict[str, Sequence] = {}
    for o in ops:
        if o[0] == "add":
            _, plen, max_tokens, variant = o
            rid = str(len(added))
            prompt = [(i * (variant + 1)) % 5 for i in range(min(plen, MAX_LEN - 1))]
            seq = Sequence(rid, prompt, SamplingParams(max_tokens=max_tokens))
            added[rid] = seq
            sched.add(seq)
        else:
            run_step(sched, finished, state)
        bm.check_invariants()
    for _ in range(2000):  # drain: everything still queued must finish
        if not sched.has_unfinished():
            break
        run_step(sched, finished, state)
        bm.check_invariants()
    assert not sched.has_unfinished(), "a request starved"
    assert set(finished) == set(added), "a request was lost"
    assert bm.num_free_blocks == num_blocks
    assert all(b.ref_count == 0 for b in bm.blocks)
    assert all(not s.block_table for s in added.values())
