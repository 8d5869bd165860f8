"""Lab 11, "Speculative decoding and CUDA graphs": the measurements, shared by the notebook and
`python -m minivllm_labs.record lab11`.

N-gram speculation (vLLM's "ngram" method, prompt lookup) drafts up to k tokens by finding the sequence's
last few tokens earlier in the sequence and copying what followed them; one verify step of 1 + k query
tokens per request then keeps the longest prefix the target model agrees with, plus one token of its own.
Whether that pays depends on two things this module measures: how many drafts are accepted (the prompts
decide: repetition and copying give drafts, fresh text does not) and what the wider step costs (free while
the step is bound by reading the weights, real compute at large batches).

a) acceptance:  per model, prompt set and k: drafts, draft tokens, accepted tokens, acceptance rate, the
                mean acceptance length (tokens per verify step, vLLM's metric), accepted tokens per position.
b) tpot:        median TPOT (repeats, [min, max]) at batch 1 and at batch 64 (4 on a CPU) for k = 0, 2, 4,
                each with its acceptance, in one run.
c) graphs:      (GPU) the decode graphs each k captures: sizes, the query tokens per request
                (uniform_decode_query_len), capture seconds and the graph pool's memory.
d) equality:    greedy tokens with speculation against without (the same engine settings otherwise), and a
                sampled run's token distribution with and without speculation against the spread of two
                runs without (rejection sampling must keep the target's distribution).

Views, questions and the claim are in lab11_views.py.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter

from minivllm_labs.common import round_floats
from minivllm_labs.lab06_engine import _cuda, _ids, _sync, free, make_llm
from minivllm_labs.lab_info import LabInfo

RESULTS = "assets/results/h200/lab11.json"
K_VALUES = (0, 2, 4)
#: Prompt lookup matches a suffix of 2 to 4 tokens (vLLM's n-gram example sets prompt_lookup_max 4; a minimum of 2
#: lets a two-token suffix, such as "A:" and the answer's first token, find the earlier answer).
LOOKUP = {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
GPU_BATCHES = (1, 64)
CPU_BATCHES = (1, 4)
#: Capture sizes of the lab's GPU engines (requests): every batch it runs, so startup stays seconds.
CAPTURE = [1, 2, 4, 8, 16, 32, 64]


def spec_config(k: int) -> dict | None:
    """The speculative_config of k draft tokens (None: off), as vLLM's LLM(...) takes it."""
    return {"method": "ngram", "num_speculative_tokens": k, **LOOKUP} if k else None


# ---- prompts ----------------------------------------------------------------------------------------------
def task_prompts(n: int) -> list[str]:
    """The embedded model's own tasks (addition, reverse, sort; held-out prompts): the answer's tokens are in
    the prompt for reverse and sort, in another order, so lookup finds them only now and then."""
    from minivllm.tools.tiny_task import make_examples

    return [p for p, _ in make_examples(n, seed=11, split="test")]


def repeated_prompts(n: int) -> list[str]:
    """The same tasks asked a second time after their answer (a chat that repeats a question, a file edited
    in place): the answer is in the context, so lookup copies it."""
    from minivllm.tools.tiny_task import EOS_TEXT, make_examples

    return [f"{p} {a}{EOS_TEXT}{p}" for p, a in make_examples(n, seed=11, split="test")]


def repeat_ids(n: int, vocab: int) -> list:
    """Token ids: a 16-token pattern written four times (repetition: lookup finds the pattern)."""
    return [{"prompt_token_ids": _ids(16, 5 + i, vocab) * 4} for i in range(n)]


def novel_ids(n: int, vocab: int) -> list:
    """Token ids with no repeated pair (fresh text: lookup finds nothing in the prompt)."""
    return [{"prompt_token_ids": _ids(64, 101 + i, vocab)} for i in range(n)]


def prompt_sets(model: str, n: int, vocab: int) -> dict[str, list]:
    """The embedded model answers its tasks (text prompts); any other model gets token-id prompts."""
    from minivllm_labs.common import describe_model

    if describe_model(model).startswith("minivllm-tiny"):
        return {"tasks": task_prompts(n), "repeated_question": repeated_prompts(n)}
    return {"repeat": repeat_ids(n, vocab), "novel": novel_ids(n, vocab)}


# ---- engines ----------------------------------------------------------------------------------------------
def engine(model: str, k: int, **kw):
    """The lab's engine with k draft tokens (0: off): CUDA graphs and torch.compile as by default on a GPU
    (capture sizes CAPTURE), eager on a CPU; fp32 on a CPU, the checkpoint's dtype on a GPU."""
    extra = ({"cudagraph_capture_sizes": CAPTURE, "max_num_seqs": 64} if _cuda()
             else {"max_num_seqs": 16, "dtype": "float32", "max_model_len": 128})
    spec = spec_config(k)
    return make_llm(model, graphs=True, **extra, **({"speculative_config": spec} if spec else {}), **kw)


def try_engine(model: str, k: int, **kw):
    """(engine, None), or (None, why) when this engine build cannot speculate."""
    try:
        return engine(model, k, **kw), None
    except (TypeError, ValueError, NotImplementedError, RuntimeError) as e:
        return None, f"{type(e).__name__}: {e}"[:300]


def _params(new_tokens: int, ignore_eos: bool, temperature: float = 0.0):
    from minivllm import SamplingParams

    return SamplingParams(temperature=temperature, max_tokens=new_tokens, ignore_eos=ignore_eos)


def stats_dict(llm) -> dict:
    """The engine's speculative-decoding counters since the last reset, as vLLM reports them, then reset."""
    s = llm.spec_decoding_stats(reset=True) if hasattr(llm, "spec_decoding_stats") else None
    if s is None:
        return {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0, "acceptance_rate": None,
                "mean_acceptance_length": 1.0, "accepted_per_pos": []}
    return round_floats({"num_drafts": s.num_drafts, "num_draft_tokens": s.num_draft_tokens,
                         "num_accepted_tokens": s.num_accepted_tokens,
                         "acceptance_rate": s.acceptance_rate if s.num_draft_tokens else None,
                         "mean_acceptance_length": s.mean_acceptance_length if s.num_drafts else 1.0,
                         "accepted_per_pos": list(s.num_accepted_tokens_per_pos)})


def generate(llm, reqs: list, new_tokens: int, ignore_eos: bool) -> list[list[int]]:
    return [list(o.outputs[0].token_ids)
            for o in llm.generate(reqs, _params(new_tokens, ignore_eos), use_tqdm=False)]


# ---- a) acceptance ----------------------------------------------------------------------------------------
def acceptance(llm, sets: dict[str, list], new_tokens: int, ignore_eos: bool) -> dict:
    """Per prompt set: the counters of one greedy run of the whole set, and the tokens it produced."""
    out = {}
    stats_dict(llm)  # start from zero
    for name, reqs in sets.items():
        tokens = generate(llm, reqs, new_tokens, ignore_eos)
        out[name] = {**stats_dict(llm), "requests": len(reqs), "generated": sum(map(len, tokens)),
                     "tokens": tokens}
    return out


# ---- b) TPOT ----------------------------------------------------------------------------------------------
def tpot(llm, reqs: list, new_tokens: int, repeats: int) -> dict:
    """Median TPOT (ms) of the requests decoding together, median over repeats, [min, max]; and the
    acceptance over those runs."""
    generate(llm, reqs, 2, True)  # warm-up: compile, autotune
    stats_dict(llm)
    meds = []
    for _ in range(repeats):
        _sync()
        outs = llm.generate(reqs, _params(new_tokens, True), use_tqdm=False)
        meds.append(statistics.median(o.metrics.tpot for o in outs) * 1e3)
    acc = stats_dict(llm)
    return round_floats({"batch": len(reqs), "tpot_ms": statistics.median(meds),
                         "tpot_ms_range": [min(meds), max(meds)], "acceptance_rate": acc["acceptance_rate"],
                         "mean_acceptance_length": acc["mean_acceptance_length"]})


# ---- c) the graphs speculation adds -----------------------------------------------------------------------
def graphs(llm) -> dict:
    """What the engine captured: the graph mode, the decode graphs' sizes (requests) and query tokens per
    request, the piecewise sizes (tokens), capture seconds and the graph pool (MiB)."""
    cfg, rep = llm.config, dict(getattr(llm.report, "cudagraph", None) or {})
    full, pw = rep.get("FULL") or {}, rep.get("PIECEWISE") or {}
    return round_floats({
        "mode": str(getattr(cfg.cudagraph_mode, "value", cfg.cudagraph_mode)),
        "uniform_decode_query_len": getattr(cfg, "uniform_decode_query_len", 1),
        "full_sizes": list(cfg.full_capture_sizes), "piecewise_sizes": list(cfg.piecewise_capture_sizes),
        "num_graphs": len(cfg.full_capture_sizes) + len(cfg.piecewise_capture_sizes),
        "capture_s": (full.get("total_seconds") or 0) + (pw.get("total_seconds") or 0),
        "pool_mib": pw.get("pool_mib") if pw.get("pool_mib") is not None else full.get("pool_mib"),
        "free_drop_mib": (full.get("total_mib") or 0) + (pw.get("total_mib") or 0)})


# ---- d) equality ------------------------------------------------------------------------------------------
def total_variation(a: Counter, b: Counter) -> float:
    na, nb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[x] / na - b[x] / nb) for x in set(a) | set(b))


#: Sampling temperature of d)'s check: above 1, so the trained model's distributions are wide enough that drafts
#: are both accepted and rejected.
SAMPLED_TEMPERATURE = 1.5
#: Which of repeated_prompts(3) d) samples: a sort question asked again (one token per letter, so lookup drafts
#: the earlier answer; the addition's digits tokenize differently in the prompt and in the answer).
SAMPLED_PROMPT = 2


def sampled_tokens(llm, reqs: list, new_tokens: int) -> list[list[int]]:
    """At SAMPLED_TEMPERATURE, ignoring EOS: each request's tokens."""
    from minivllm import SamplingParams

    p = SamplingParams(temperature=SAMPLED_TEMPERATURE, max_tokens=new_tokens, ignore_eos=True)
    return [list(o.outputs[0].token_ids) for o in llm.generate(reqs, p, use_tqdm=False)]


def sampled(plain_a: list, plain_b: list, spec: list) -> dict:
    """The distribution of each position's token over many samples of one prompt, with speculation against
    without, beside two runs without (the sampling spread): the mean total-variation distance per position
    (token 0 comes from the prefill, never drafted, so it is left out)."""
    n = min(map(len, plain_a))

    def tv(x, y):
        return statistics.mean(total_variation(Counter(s[i] for s in x), Counter(s[i] for s in y))
                               for i in range(1, n))
    return round_floats({"requests": len(spec), "new_tokens": n, "temperature": SAMPLED_TEMPERATURE,
                         "tv_plain_vs_plain": tv(plain_a, plain_b),
                         "tv_spec_vs_plain": tv(spec, plain_a)})


# ---- everything, for the recorder -------------------------------------------------------------------------
def model_key(model: str) -> str:
    from minivllm_labs.common import describe_model

    return "embedded" if describe_model(model).startswith("minivllm-tiny") else "qwen3-06b"


def measure_model(model: str, quick: bool, repeats: int) -> dict:
    """a)-d) for one model, one engine per k (each freed before the next sizes its KV cache): acceptance on
    its prompt sets, TPOT at batch 1 and 64 (1 and 4 on a CPU), the graphs, greedy equality against k = 0
    and, for the embedded model at the largest k, the sampled distribution."""
    gpu = _cuda()
    embedded = model_key(model) == "embedded"
    new_tokens = 8 if embedded else (32 if quick else 64)  # the embedded model's answers end by 8 tokens
    tpot_tokens = (32 if quick else 64) if gpu else 8
    n_prompts = (16 if quick else 32) if gpu else 8
    n_sampled = (64 if quick else 512) if gpu else 32
    out: dict = {"k": {}}
    ref, plain_samples = None, None
    for k in K_VALUES:
        llm, why = try_engine(model, k)
        if llm is None:
            out["k"][f"k{k}"] = {"available": False, "why": why}
            continue
        vocab = llm.engine.model_config.vocab_size
        sets = prompt_sets(model, n_prompts, vocab)
        row: dict = {"available": True, "acceptance": acceptance(llm, sets, new_tokens, ignore_eos=not embedded)}
        row["tpot"] = {f"b{b}": tpot(llm, task_prompts(b) if embedded else repeat_ids(b, vocab), tpot_tokens,
                                     repeats) for b in (GPU_BATCHES if gpu else CPU_BATCHES)}
        if gpu:
            row["graphs"] = graphs(llm)
        tokens = {name: s.pop("tokens") for name, s in row["acceptance"].items()}
        if k == 0:
            ref = tokens
        elif ref is not None:
            pairs = [(a, b) for name in ref for a, b in zip(tokens[name], ref[name])]
            row["greedy_equal"] = {"identical": sum(a == b for a, b in pairs), "requests": len(pairs)}
        if embedded:
            reqs = [repeated_prompts(3)[SAMPLED_PROMPT]] * n_sampled
            if k == 0:
                plain_samples = [sampled_tokens(llm, reqs, 6) for _ in range(2)]
            elif k == max(K_VALUES) and plain_samples:
                stats_dict(llm)
                row["sampled"] = sampled(*plain_samples, sampled_tokens(llm, reqs, 6))
                row["sampled"]["accepted"] = stats_dict(llm)["num_accepted_tokens"]  # rejection sampling ran
        free(llm)
        out["k"][f"k{k}"] = row
    return out


def draft_for(tokens: list[int], k: int, min_n: int = 2, max_n: int = 4) -> list[int]:
    """What the engine's n-gram proposer drafts after `tokens` (at most k tokens; [] when no suffix of min_n to
    max_n tokens occurred earlier)."""
    import numpy as np

    from minivllm.spec_decode.ngram_proposer import propose_ngram

    return list(propose_ngram(np.asarray(tokens, dtype=np.int64), min_n, max_n, k))


def run_here(model: str) -> dict:
    """The notebook's run-it-here cell: a)-d) for one model at the quick settings (on a CPU: eager, fp32,
    batches 1 and 4, a few seconds)."""
    return {"device": "cuda" if _cuda() else "cpu", "k_values": list(K_VALUES),
            "models": {model_key(model): measure_model(model, quick=True, repeats=5)}}


def run_all(model: str, quick: bool = False) -> dict:
    """Every measurement: on a GPU the Qwen3-0.6B shape given (random weights) and the embedded model; on a CPU
    the embedded model. Each model's engines are built one k at a time."""
    from minivllm_labs.common import lab_model

    t0 = time.perf_counter()
    repeats = 3 if quick else 5
    models = [model] + ([lab_model()] if _cuda() and model_key(model) != "embedded" else [])
    out: dict = {"device": "cuda" if _cuda() else "cpu", "k_values": list(K_VALUES), "lookup": dict(LOOKUP),
                 "batches": list(GPU_BATCHES if _cuda() else CPU_BATCHES), "models": {}}
    for m in models:
        out["models"][model_key(m)] = measure_model(m, quick, repeats)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _lab_info() -> LabInfo:
    from minivllm_labs import lab11_views as v

    return LabInfo(
        lab="lab11", notebook="labs/11_speculative_decoding.ipynb", title="Speculative decoding and CUDA graphs",
        title_zh="投机解码与 CUDA Graph", sections=(), questions=tuple(v.QUESTIONS.values()), claims=v.CLAIMS,
        code=("minivllm/spec_decode/ngram_proposer.py", "minivllm/config.py",
              "minivllm/worker/cudagraph_dispatcher.py"))


LAB_INFO = _lab_info()
