"""Speculative decoding with n-gram drafts (spec_decode/): the proposer, the rejection sampler's output
distribution, and the engine with speculation against the same engine without it (fp32 on the CPU: greedy
tokens and logprobs equal), through the limits (max_tokens, max_model_len, stop tokens), prefix caching,
chunked prefill and preemption, with every KV block given back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minivllm import LLM, SamplingParams
from minivllm.compilation.cuda_graph import CUDAGraphWrapper
from minivllm.config import CompilationConfig, CUDAGraphMode, EngineConfig, SchedulerConfig, SpeculativeConfig
from minivllm.engine.block_manager import hash_block
from minivllm.layers.sampler import Sampler
from minivllm.spec_decode.ngram_proposer import NgramProposer, propose_ngram
from minivllm.spec_decode.rejection_sampler import greedy_verify, sampled_verify
from minivllm.worker.cudagraph_dispatcher import BatchDescriptor, CudagraphDispatcher
from tests.helpers import tiny_checkpoint

FULL, NONE = CUDAGraphMode.FULL, CUDAGraphMode.NONE

REPEAT = ["a b c d e f g a b c d e f g a b c d e f g a b", "1 2 3 4 5 1 2 3 4 5 1 2 3 4 5 1 2",
          "x = foo(y); x = foo(y); x = foo(y); x ="]
GREEDY = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)


def spec(k: int, lo: int = 1, hi: int = 3) -> dict:
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": hi, "prompt_lookup_min": lo}


def tokens(llm: LLM, prompts, params=GREEDY) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]


def assert_all_blocks_free(llm: LLM) -> None:
    bm = llm.engine.block_manager
    bm.check_invariants()
    assert bm.num_free_blocks == bm.num_blocks


@pytest.fixture(scope="module")
def base():
    return LLM(dtype="float32", max_model_len=256)


@pytest.fixture(scope="module")
def spec_llms():
    return {k: LLM(dtype="float32", max_model_len=256, speculative_config=spec(k)) for k in (1, 2, 4)}


# ---- the proposer -----------------------------------------------------------------------------------
def _brute_force(t: list[int], lo: int, hi: int, k: int) -> list[int]:
    for n in range(min(hi, len(t) - 1), lo - 1, -1):
        for s in range(len(t) - n):
            if t[s:s + n] == t[len(t) - n:]:
                return t[s + n:s + n + k]
    return []


def test_proposer_takes_the_earliest_of_the_longest_matches():
    t = np.array([1, 2, 3, 9, 2, 3, 7, 8, 1, 2, 3])
    assert propose_ngram(t, 1, 3, 2) == [9, 2]  # "1 2 3" occurred at 0: what followed it
    assert propose_ngram(t, 1, 2, 2) == [9, 2]  # "2 3" at 1 and at 4: the earliest
    assert propose_ngram(t, 4, 5, 2) == []  # no 4-gram repeats
    assert propose_ngram(np.array([5, 5]), 1, 3, 4) == [5]  # only as many tokens as followed the match
    assert NgramProposer(SpeculativeConfig(4, "ngram", 3, 1)).propose([1, 2, 3, 1, 2, 3, 1, 2], 1) == [3]
    rng = np.random.default_rng(0)
    for _ in range(400):
        t = rng.integers(0, rng.integers(1, 5), rng.integers(1, 30)).tolist()
        lo = int(rng.integers(1, 4))
        hi, k = lo + int(rng.integers(0, 3)), int(rng.integers(1, 5))
        assert propose_ngram(np.array(t), lo, hi, k) == _brute_force(t, lo, hi, k), (t, lo, hi, k)


# ---- configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value, field", [
    ({"num_speculative_tokens": 0}, "num_speculative_tokens"),
    ({"num_speculative_tokens": 9}, "num_speculative_tokens"),
    ({"num_speculative_tokens": True}, "num_speculative_tokens"),
    ({"method": "ngram"}, "num_speculative_tokens"),
    ({"num_speculative_tokens": 2, "method": "eagle"}, "method"),
    ({"num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2}, "prompt_lookup_min"),
    ({"num_speculative_tokens": 2, "prompt_lookup_max": 0}, "prompt_lookup_max"),
    ({"num_speculative_tokens": 2, "model": "x"}, "model"),
    ('{"num_speculative_tokens": 2,', "JSON"),
])
def test_bad_speculative_config_names_the_field(value, field):
    with pytest.raises(ValueError, match=field):
        SpeculativeConfig.from_any(value)


def test_lookup_defaults_are_vllms():
    assert SpeculativeConfig.from_any({"num_speculative_tokens": 3}) == SpeculativeConfig(3, "ngram", 5, 5)
    assert SpeculativeConfig.from_any({"num_speculative_tokens": 3, "prompt_lookup_max": 4}).prompt_lookup_min == 4
    assert SpeculativeConfig.from_any('{"num_speculative_tokens": 3, "prompt_lookup_min": 2}').prompt_lookup_max == 2


def test_speculation_refuses_async_scheduling_and_batch_invariance():
    s = SpeculativeConfig(2)
    with pytest.raises(ValueError, match="async_scheduling"):
        EngineConfig.resolve("m", scheduler=SchedulerConfig(async_scheduling=True), speculative=s)
    with pytest.raises(ValueError, match="batch_invariant"):
        EngineConfig.resolve("m", batch_invariant=True, speculative=s)
    cfg = EngineConfig.resolve("m", speculative=s)
    assert not cfg.async_scheduling and cfg.uniform_decode_query_len == 3


# ---- the rejection sampler --------------------------------------------------------------------------
def test_greedy_verify_keeps_the_matching_prefix_and_adds_the_targets_token():
    target = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8], [1, 2, 3, 4]])
    drafts = torch.tensor([[5, 6, 9], [5, 6, 7], [2, -1, -1]])
    assert greedy_verify(target, drafts).tolist() == [[5, 6, 7, -1], [5, 6, 7, 8], [1, -1, -1, -1]]


@pytest.mark.parametrize("top_k", [0, 3])
def test_rejection_sampling_gives_the_targets_distribution(top_k):
    """Two positions of a 5-token vocabulary, one draft token: the joint law of the first two output tokens
    must be p0(x) p1(y) where x is the accepted draft, p0(x) alone (then nothing) where x differs."""
    g = torch.Generator().manual_seed(0)
    V, N, draft = 5, 100_000, 2
    logits = torch.randn(2, V, generator=g) * 1.5
    sampler = Sampler(torch.device("cpu"), seed=0)
    sp = SamplingParams(temperature=0.7, top_k=top_k)
    p = sampler.probs(logits, [sp, sp])
    probs = p.expand(N, 2, V)
    drafts = torch.full((N, 1), draft)
    out = sampled_verify(probs, drafts, torch.rand(N, 1, generator=g),
                         torch.empty(N, V).exponential_(generator=g))
    expected = torch.zeros(V, V + 1)  # column V: no second token
    for x in range(V):
        if x == draft:
            expected[x, :V] = p[0, x] * p[1]
        else:
            expected[x, V] = p[0, x]
    second = torch.where(out[:, 1] < 0, V, out[:, 1])
    got = torch.bincount(out[:, 0] * (V + 1) + second, minlength=V * (V + 1)).view(V, V + 1).float() / N
    assert (got - expected).abs().sum() / 2 < 0.01  # total variation; sampling noise here is ~0.003
    assert ((got > 0) <= (expected > 0)).all()  # nothing outside the target's support (top-k)


# ---- the engine: greedy equality, acceptance, blocks --------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 4])
def test_greedy_tokens_equal_without_speculation(base, spec_llms, k):
    llm = spec_llms[k]
    llm.spec_decoding_stats(reset=True)
    assert tokens(llm, REPEAT) == tokens(base, REPEAT)
    stats = llm.spec_decoding_stats()
    assert stats.num_accepted_tokens > 0 and 0 < stats.acceptance_rate <= 1  # drafts were really accepted
    assert stats.num_draft_tokens <= k * stats.num_drafts and len(stats.num_accepted_tokens_per_pos) == k
    assert stats.mean_acceptance_length == pytest.approx(1 + stats.num_accepted_tokens / stats.num_drafts)
    assert sum(stats.num_accepted_tokens_per_pos) == stats.num_accepted_tokens
    assert_all_blocks_free(llm)


def test_stats_reset_and_metric_names(base, spec_llms):
    llm = spec_llms[2]
    tokens(llm, REPEAT[:1])
    assert llm.spec_decoding_stats(reset=True).num_drafts > 0
    assert llm.spec_decoding_stats().num_drafts == 0
    assert set(llm.get_metrics()) == {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                                      "vllm:spec_decode_num_accepted_tokens",
                                      "vllm:spec_decode_num_accepted_tokens_per_pos"}
    assert base.spec_decoding_stats() is None and base.get_metrics() == {}


def test_random_checkpoint_greedy_equal(tmp_path_factory):
    path = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("ckpt"))))
    g = torch.Generator().manual_seed(1)
    prompts = []
    for n in (5, 9):
        r = torch.randint(3, 200, (n,), generator=g).tolist()
        prompts.append({"prompt_token_ids": r * 3 + r[:2]})
    with LLM(path, dtype="float32", max_model_len=128, skip_tokenizer_init=True) as ref:
        want = tokens(ref, prompts)
    with LLM(path, dtype="float32", max_model_len=128, skip_tokenizer_init=True,
             speculative_config=spec(3)) as llm:
        assert tokens(llm, prompts) == want
        assert llm.spec_decoding_stats().num_drafts > 0  # drafts were verified (accepted or rolled back)
        assert_all_blocks_free(llm)


# ---- limits ---------------------------------------------------------------------------------------
def test_max_tokens_max_model_len_and_stop_tokens_are_never_crossed(base, spec_llms):
    llm = spec_llms[4]
    short = SamplingParams(temperature=0, max_tokens=7, ignore_eos=True)
    assert [len(t) for t in tokens(llm, REPEAT, short)] == [7] * 3
    assert tokens(llm, REPEAT, short) == tokens(base, REPEAT, short)
    long_prompt = " ".join(["a b c d"] * 60)  # near max_model_len (256): the run ends by length
    to_end = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    got = llm.generate(long_prompt, to_end, use_tqdm=False)[0]
    want = base.generate(long_prompt, to_end, use_tqdm=False)[0]
    assert got.outputs[0].token_ids == want.outputs[0].token_ids
    assert len(got.prompt_token_ids) + len(got.outputs[0].token_ids) == 256
    assert got.outputs[0].finish_reason == "length"
    ref = tokens(base, REPEAT[:1])[0]
    stop = ref[12]  # a token the drafts propose too (the output repeats): nothing after it may be kept
    params = SamplingParams(temperature=0, max_tokens=32, stop_token_ids=[stop])
    got, want = (llm.generate(REPEAT[:1], params, use_tqdm=False)[0].outputs[0] for llm in (llm, base))
    assert got.token_ids == want.token_ids and got.token_ids[-1] == stop and got.finish_reason == "stop"
    default = SamplingParams(temperature=0, max_tokens=48)  # EOS stops as without speculation
    assert tokens(llm, REPEAT, default) == tokens(base, REPEAT, default)
    assert_all_blocks_free(llm)


def test_logprobs_are_those_of_the_accepted_tokens(base, spec_llms):
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, logprobs=3)
    got = spec_llms[2].generate(REPEAT, params, use_tqdm=False)
    want = base.generate(REPEAT, params, use_tqdm=False)
    for g, w in zip(got, want):
        assert g.outputs[0].token_ids == w.outputs[0].token_ids
        assert len(g.outputs[0].logprobs) == len(w.outputs[0].token_ids)
        for dg, dw in zip(g.outputs[0].logprobs, w.outputs[0].logprobs):
            assert dg.keys() == dw.keys()
            for t in dg:
                assert dg[t].logprob == pytest.approx(dw[t].logprob, abs=1e-4) and dg[t].rank == dw[t].rank
        assert g.outputs[0].cumulative_logprob == pytest.approx(w.outputs[0].cumulative_logprob, abs=1e-3)


def test_sampled_requests_follow_their_seed(spec_llms):
    params = [SamplingParams(temperature=0.8, top_p=0.9, max_tokens=20, seed=i, ignore_eos=True) for i in range(3)]
    llm = spec_llms[2]
    first, again = tokens(llm, REPEAT, params), tokens(llm, REPEAT, params)
    assert first == again and [len(t) for t in first] == [20] * 3
    assert_all_blocks_free(llm)


def test_prefix_caching_chunked_prefill_and_preemption(base):
    """A small token budget (prompts in chunks), a KV cache too small for every request at once (preemption
    by recompute), prompts sharing a prefix (cache hits): tokens as without speculation."""
    shared = " ".join(["p q r s t"] * 8)
    prompts = [f"{shared} {p}" for p in REPEAT * 2]
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    with LLM(dtype="float32", max_model_len=256, max_num_batched_tokens=24, num_gpu_blocks_override=20,
             block_size=16, max_num_seqs=6, speculative_config=spec(3)) as llm:
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert [o.outputs[0].token_ids for o in outs] == tokens(base, prompts, params)
        engine, bm = llm.engine, llm.engine.block_manager
        assert engine.stats["preemptions"] > 0 and bm.num_cache_hits > 0
        assert llm.spec_decoding_stats().num_accepted_tokens > 0
        assert_all_blocks_free(llm)
        # Every cached block hashes a block-aligned prefix of a request's final tokens: none holds a rejected draft.
        prefixes = set()
        for o in outs:
            ids, parent = o.prompt_token_ids + o.outputs[0].token_ids, None
            for i in range(len(ids) // 16):
                parent = hash_block(parent, ids[i * 16:(i + 1) * 16])
                prefixes.add(parent)
        assert bm.cached and set(bm.cached) <= prefixes


# ---- the decode graphs' path (CPU: the wrapper calls the forward; the graphs: test_spec_decode_gpu.py) ----
def test_decode_graph_sizes_and_dispatch_count_requests_of_1_plus_k_tokens():
    comp = CompilationConfig(cudagraph_mode="FULL_DECODE_ONLY", cudagraph_capture_sizes=[1, 2, 4, 8, 64])
    cfg = EngineConfig.resolve("m", device=torch.device("cuda"), compilation=comp, speculative=SpeculativeConfig(4),
                               scheduler=SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=64))  # as on a GPU
    assert cfg.uniform_decode_query_len == 5
    assert cfg.full_capture_sizes == (1, 2, 4, 8)  # 64 requests of 5 tokens exceed the 64-token step
    d = CudagraphDispatcher(False, 1, 5)
    d.activate(FULL, [1, 2, 4, 8])  # sizes in requests
    assert d.dispatch(5, 1, True) == BatchDescriptor(FULL, 5, 1, uniform_decode=True)
    assert d.dispatch(3, 3, True).num_padded_tokens == 5  # three requests without drafts fit one of 5 tokens
    assert d.dispatch(12, 4, True).num_padded_tokens == 20  # ceil(12 / 5) = 3 requests: the graph of 4
    assert d.dispatch(41, 9, True).mode is NONE  # past 8 requests' 40 tokens: no graph
    assert d.dispatch(12, 4, False).mode is NONE  # a prefill chunk in the batch: not a decode graph


def test_verify_steps_through_the_decode_graph_path_give_the_same_tokens(base, spec_llms):
    """The runner's decode-graph path under speculation without graphs (a CPU): the unified layout of 1 + k
    tokens per request, padded to the captured size; greedy tokens as without speculation."""
    llm = spec_llms[2]
    runner = llm.model_runner
    saved = runner.cudagraph_dispatcher, runner.full_graph
    runner.cudagraph_dispatcher = d = CudagraphDispatcher(False, 1, 3)
    runner.full_graph = CUDAGraphWrapper(runner.compiled.forward, FULL, "FULL forward")
    d.activate(FULL, [1, 2, 4, 8])  # as after a capture pass; with no graph recorded the wrapper calls the forward
    try:
        llm.spec_decoding_stats(reset=True)
        assert tokens(llm, REPEAT) == tokens(base, REPEAT)
        assert d.counts["full"] > 0 and llm.spec_decoding_stats().num_accepted_tokens > 0
        assert_all_blocks_free(llm)
    finally:
        runner.cudagraph_dispatcher, runner.full_graph = saved


def test_bench_latency_measures_with_and_without_speculation_in_one_run(tmp_path):
    from minivllm.bench import latency
    from minivllm.bench.cli import parse_args

    out = tmp_path / "spec.json"
    args = parse_args(["latency", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2, '
                       '"prompt_lookup_min": 2, "prompt_lookup_max": 4}', "--spec-tokens", "0,2", "--modes", "eager",
                       "--batch-sizes", "1", "--input-len", "32", "--output-len", "10", "--prompt-kind", "repeat",
                       "--max-model-len", "48", "--json", str(out)])
    res = latency.main(args)
    by_k = res["comparison"]["speculative"]["eager"][1]
    assert set(by_k) == {0, 2} and by_k[0]["tpot_vs_k0"] == 1.0 and by_k[2]["tpot_ms"] > 0
    assert by_k[2]["acceptance_rate"] > 0 and by_k[2]["mean_acceptance_length"] > 1
    assert res["settings"]["prompt_kind"] == "repeat" and out.exists()


def test_decode_graph_capture_records_1_plus_k_tokens_per_request_on_the_unified_layout(spec_llms, monkeypatch):
    """The capture pass of the decode graphs under speculation (CUDA's memory calls faked on a CPU): sizes in
    requests, each captured at requests x (1 + k) tokens with the dummy batch of the unified kernel."""
    from minivllm.attention.metadata import get_forward_context
    from minivllm.worker.graph_capture import capture_graphs

    for name, fake in (("synchronize", lambda: None), ("mem_get_info", lambda: (1 << 30, 1 << 31)),
                       ("empty_cache", lambda: None)):
        monkeypatch.setattr(torch.cuda, name, fake)
    runner, seen = spec_llms[2].model_runner, []

    def run(ids, pos):
        ctx = get_forward_context()
        seen.append((len(ids), ctx.num_padded_tokens, ctx.attn_metadata.unified, ctx.capturing))

    stats = capture_graphs(runner, FULL, [1, 2, 4], run, [], None, any_batch=False, query_len=3)
    assert seen == [(12, 12, True, True), (6, 6, True, True), (3, 3, True, True)] and stats.sizes == [1, 2, 4]


def test_block_table_rows_follow_a_rollback():
    """A rollback drops the blocks of rejected drafts, and the next step may get other blocks in their place:
    the input batch's block-table row must follow (it only appends to a row whose table did not shrink)."""
    from minivllm.engine.block_manager import BlockManager
    from minivllm.engine.sched_output import ScheduledSeq, SchedulerOutput
    from minivllm.engine.sequence import Sequence
    from minivllm.worker.input_batch import InputBatch

    bm = BlockManager(8, 4, enable_prefix_caching=False)
    ib = InputBatch(64, 2, 8, 4, 2, torch.device("cpu"))
    seq = Sequence("r", list(range(1, 8)), SamplingParams())  # 7 tokens
    seq.num_computed_tokens = 6
    bm.allocate(seq, 1 + 3)  # the last token and a draft of 3: 10 slots, 3 blocks
    step = SchedulerOutput([ScheduledSeq(seq, 4, [8, 9, 10])])
    ib.prepare(step)
    assert ib.cpu_block_tables[0, :3].tolist() == seq.block_table == [0, 1, 2]
    seq.append_token(11)  # every draft token rejected, then the target's own token: 8 tokens kept
    bm.free_tail(seq, seq.num_tokens)  # block 2 held only rejected drafts
    seq.num_computed_tokens = seq.num_tokens - 1
    assert seq.block_table == [0, 1]
    bm.allocate(seq, 1 + 3)  # the next draft crosses into a third block again: not block 2 this time
    assert seq.block_table == [0, 1, 3]
    ib.prepare(SchedulerOutput([ScheduledSeq(seq, 4, [12, 13, 14])]))
    assert ib.cpu_block_tables[0, :len(seq.block_table)].tolist() == seq.block_table
