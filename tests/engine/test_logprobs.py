"""Logprobs and prompt logprobs (SamplingParams.logprobs / prompt_logprobs) against transformers in fp32.

The reference is one transformers forward over prompt + generated tokens: row j of its log_softmax scores
token j + 1. The engine's values must agree within 1e-4 and its top-k ids exactly, whether the tokens were
greedy or sampled (logprobs are raw: the model's distribution, not the one temperature/top-k sampled from),
whether the prompt was cut into chunks, computed after a preemption, or read back a step late (async).
Every engine asks for dtype="float32": "auto" runs an fp32 checkpoint in bf16 on a GPU, as vLLM's does, and
bf16 moves these logprobs by up to ~5e-3.
"""

from __future__ import annotations

import pytest
import torch

from minivllm import LLM, Logprob, SamplingParams
from minivllm.tools.make_random_checkpoint import make_random_checkpoint
from tests.helpers import hf_model, random_prompts, tiny_checkpoint

TOL = 1e-4


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ckpts"))


def hf_logprobs(path, token_ids: list[int]) -> torch.Tensor:
    """[len - 1, vocab]: row j is the log-distribution of token j + 1."""
    with torch.no_grad():
        logits = hf_model(str(path))(torch.tensor([token_ids])).logits[0, :-1]
    return logits.float().log_softmax(-1)


def check_position(entry: dict[int, Logprob], ref_row: torch.Tensor, token: int, k: int) -> None:
    """The chosen token's logprob and rank, then the top k: ids equal to the reference's, each value within TOL.
    Two logprobs closer than TOL may swap places (fp32 sums in another order), and only they."""
    assert all(isinstance(v, Logprob) for v in entry.values())
    v = ref_row[token].item()
    assert abs(entry[token].logprob - v) < TOL
    assert int((ref_row > v + TOL).sum()) + 1 <= entry[token].rank <= int((ref_row >= v - TOL).sum())
    top = ref_row.topk(k + 1).values.tolist()
    ours = sorted((lp.rank, tid) for tid, lp in entry.items() if lp.rank <= k and (tid != token or len(entry) == k))
    assert [r for r, _ in ours] == list(range(1, k + 1))
    for r, tid in ours:
        assert abs(entry[tid].logprob - ref_row[tid].item()) < TOL and abs(entry[tid].logprob - top[r - 1]) < TOL
    if k and top[k - 1] - top[k] > TOL:  # no near-tie at the boundary: the same ids exactly
        assert {tid for _, tid in ours} == set(ref_row.topk(k).indices.tolist())


def check_against_hf(path, prompts, outs, k: int | None, pk: int | None) -> None:
    for prompt, out in zip(prompts, outs):
        comp = out.outputs[0]
        ref = hf_logprobs(path, prompt + comp.token_ids)
        if k is None:
            assert comp.logprobs is None and comp.cumulative_logprob is None
        else:
            assert len(comp.logprobs) == len(comp.token_ids)
            for i, tok in enumerate(comp.token_ids):
                check_position(comp.logprobs[i], ref[len(prompt) - 1 + i], tok, k)
            want = sum(ref[len(prompt) - 1 + i, t].item() for i, t in enumerate(comp.token_ids))
            assert abs(comp.cumulative_logprob - want) < TOL * len(comp.token_ids)
        if pk is None:
            assert out.prompt_logprobs is None
        else:
            assert len(out.prompt_logprobs) == len(prompt) and out.prompt_logprobs[0] is None
            for j in range(1, len(prompt)):
                check_position(out.prompt_logprobs[j], ref[j - 1], prompt[j], pk)


@pytest.mark.parametrize("name", ["qwen3-gqa2-d16", "llama-gqa4-d32"])
@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 0.8, "top_k": 4, "seed": 7}])
def test_logprobs_match_hf_with_chunked_prefill(name, sampling, ckpt_root):
    path = tiny_checkpoint(name, ckpt_root)
    llm = LLM(str(path), max_model_len=128, max_num_batched_tokens=7, dtype="float32")  # prompts cut into 7-token chunks
    prompts = random_prompts(llm.engine.model_config.vocab_size, [19, 2, 9], seed=11)
    sp = SamplingParams(max_tokens=6, ignore_eos=True, logprobs=3, prompt_logprobs=2, **sampling)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    check_against_hf(path, prompts, outs, 3, 2)
    # top_k=4 restricts what is sampled, not what is reported: a raw rank can exceed 4 only if sampling ignored it
    if sampling.get("top_k"):
        assert all(d[t].rank <= 4 for o in outs for d, t in zip(o.outputs[0].logprobs, o.outputs[0].token_ids))


def test_prompt_logprobs_of_a_long_chunk(ckpt_root):
    """A chunk of more rows than the runner scores at a time (256): the slices join in order."""
    path = tiny_checkpoint("qwen3-gqa2-d16", ckpt_root)
    llm = LLM(str(path), max_model_len=512, dtype="float32")
    prompts = random_prompts(llm.engine.model_config.vocab_size, [300, 40], seed=15)
    sp = SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=1)
    check_against_hf(path, prompts, llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False),
                     None, 1)


def test_mixed_batch_and_zero(ckpt_root):
    """Requests that ask and requests that do not share a batch; logprobs=0 is the chosen token alone; asking
    changes no token."""
    path = tiny_checkpoint("qwen3-gqa2-d16", ckpt_root)
    llm = LLM(str(path), max_model_len=128, dtype="float32")
    prompts = random_prompts(llm.engine.model_config.vocab_size, [5, 8, 3, 6], seed=12)
    base = {"temperature": 0, "max_tokens": 5, "ignore_eos": True}
    params = [SamplingParams(**base), SamplingParams(**base, logprobs=0), SamplingParams(**base, logprobs=5),
              SamplingParams(**base, prompt_logprobs=0)]
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    plain = llm.generate([{"prompt_token_ids": p} for p in prompts], SamplingParams(**base), use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in plain]
    for (k, pk), p, o in zip([(None, None), (0, None), (5, None), (None, 0)], prompts, outs):
        check_against_hf(path, [p], [o], k, pk)
    assert all(len(d) == 1 and next(iter(d.values())).decoded_token is not None for d in outs[1].outputs[0].logprobs)


def test_prefix_cache_skipped_and_preemption(ckpt_root):
    """A cached prefix has no logits: a request for prompt logprobs recomputes it (vLLM skips the cache too).
    A preempted request recomputes its prompt; its prompt logprobs are not doubled."""
    path = tiny_checkpoint("llama-gqa4-d32", ckpt_root)
    llm = LLM(str(path), max_model_len=48, block_size=8, num_gpu_blocks_override=6, enable_prefix_caching=True,
              dtype="float32")
    prompts = random_prompts(llm.engine.model_config.vocab_size, [20, 14, 25, 9], seed=5)
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=2, prompt_logprobs=1)
    plain = SamplingParams(temperature=0, max_tokens=1)
    for params, cached in [(plain, 0), (sp, 0), (plain, 16)]:  # the first run fills the cache
        assert llm.generate([{"prompt_token_ids": prompts[0]}], params, use_tqdm=False)[0].num_cached_tokens == cached
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    assert llm.engine.stats["preemptions"] > 0
    check_against_hf(path, prompts, outs, 2, 1)


def test_async_scheduling_equals_sync(ckpt_root):
    """Async reads a step's logprobs one step late, and a prefill chunk with no sampled row still carries
    prompt logprobs: the results equal the synchronous engine's."""
    path = tiny_checkpoint("qwen3-gqa2-d16", ckpt_root)
    prompts = random_prompts(256, [23, 4, 11], seed=13)
    sp = SamplingParams(temperature=0.7, seed=3, max_tokens=5, ignore_eos=True, logprobs=2, prompt_logprobs=2)
    res = {}
    for a in (False, True):
        llm = LLM(str(path), max_model_len=128, max_num_batched_tokens=6, async_scheduling=a, dtype="float32")
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        res[a] = [(o.outputs[0].token_ids, o.outputs[0].logprobs, o.prompt_logprobs) for o in outs]
    assert res[True] == res[False]
    check_against_hf(path, prompts, outs, 2, 2)


@pytest.mark.parametrize("field", ["logprobs", "prompt_logprobs"])
@pytest.mark.parametrize("value", [-1, 21, 1.5, True, "2"])
def test_bad_values_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"SamplingParams.{field} must be None or an int in \\[0, 20\\]"):
        SamplingParams(**{field: value})


def test_more_than_the_vocabulary_is_rejected_and_the_engine_stays_usable(tmp_path):
    path = make_random_checkpoint("tiny", tmp_path / "v16", vocab_size=16, num_hidden_layers=1)
    llm = LLM(str(path), max_model_len=64, dtype="float32")
    for field in ("logprobs", "prompt_logprobs"):
        with pytest.raises(ValueError, match=f"{field}=17 exceeds the vocabulary size 16"):
            llm.generate([{"prompt_token_ids": [3, 4]}], SamplingParams(**{field: 17}), use_tqdm=False)
    out = llm.generate([{"prompt_token_ids": [3, 4]}], SamplingParams(max_tokens=3, logprobs=16), use_tqdm=False)
    assert len(out[0].outputs[0].logprobs) == len(out[0].outputs[0].token_ids)
    assert all(len(d) == 16 for d in out[0].outputs[0].logprobs)


def test_no_logprob_work_when_nobody_asks(ckpt_root, monkeypatch):
    """The step computes no log_softmax/top-k and copies nothing extra unless a request asks."""
    import minivllm.worker.model_runner as mr

    def boom(*a, **kw):
        raise AssertionError("logprobs computed for a batch where no request asked")

    path = tiny_checkpoint("qwen3-gqa2-d16", ckpt_root)
    llm = LLM(str(path), max_model_len=128, max_num_batched_tokens=7, dtype="float32")
    monkeypatch.setattr(mr, "gather_logprobs", boom)
    prompts = random_prompts(256, [12, 3], seed=14)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts],
                        SamplingParams(temperature=0.5, seed=1, max_tokens=4), use_tqdm=False)
    assert all(o.outputs[0].logprobs is None and o.prompt_logprobs is None for o in outs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gather_logprobs_top_k_from_the_logits_own_dtype(dtype):
    """The top k come from the logits in their own dtype (no fp32 top-k on the GPU): the values must still be
    fp32 log_softmax's k largest, in order, and each id's logprob its value; the chosen token's rank counts
    every token at least as likely."""
    from minivllm.layers.sampler import gather_logprobs

    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(5, 1000, generator=g) * 4).to(dtype)  # bf16: many exact ties among 1000 values
    chosen = torch.tensor([0, 7, 999, 500, 3])
    ids, vals, ranks = gather_logprobs(logits, chosen, 6)
    ref = logits.float().log_softmax(-1)
    assert torch.equal(ids[:, 0], chosen)
    assert torch.equal(vals[:, 1:], ref.topk(6, dim=-1).values)
    assert torch.equal(vals, ref.gather(1, ids))
    assert torch.equal(ranks, (ref >= ref.gather(1, chosen.view(-1, 1))).sum(-1))
    assert gather_logprobs(logits, chosen, 0)[0].shape == (5, 1)


def test_the_logprobs_ops_probe_runs_each_op_on_cpu_tensors():
    """scripts/maint/logprobs_ops.py only times on a GPU; each op it times must at least run (a broken lambda
    would only show on the device)."""
    from minivllm.bench.common import maint_script

    probe = maint_script("logprobs_ops")
    logits = torch.randn(2, 300).to(torch.bfloat16)
    ops = probe.ops(logits, logits.argmax(-1), 5)
    assert "gather_logprobs alone" in ops and len(ops) == 10
    for fn in ops.values():
        fn()
    assert probe.main(["--rows", "1"]) == 2  # no CUDA here: a clear refusal, not a crash
