"""Lab 10, "Why batch 1 and batch 64 disagree": the measurements, shared by the notebook and
`python -m minivllm_labs.record lab10`.

Greedy decoding (temperature 0) picks the arg-max token, yet the same request gives other tokens alone and in a
batch. Nothing here is random: every kernel is deterministic for a fixed shape, but the batch size picks the
shape, the shape picks the kernel or its split, and a split sums in another order. In bf16 that moves a logit by
a rounding step, enough to flip a near-tie; once one token differs, everything after it differs.

a) disagreement:   the same prompts alone (batch 1) and batched (1, 2, 8, 64 on a GPU; 1, 2, 4 on a CPU), greedy:
                   sequences with identical tokens, where they part, and the largest gap in the chosen token's
                   logprob before they part (SamplingParams(logprobs=0), vLLM's logprobs).
b) the sources, one at a time, on one tensor each:
   matmul_by_m:     row 0 of an M-row matmul against the same row alone (cuBLAS picks tiles and split-K by M;
                    the engine's linear runs a Triton GEMV at M <= 2 on a GPU);
   attention_splits: decode attention over one sequence with the KV splits the decode kernel picks at batch 1
                    against those it picks at batch 64 (choose_num_splits: from occupancy, so from the batch);
   padded_graph:    (GPU) batch 5 replayed in a FULL graph captured for 8 against one captured for 5 and eager;
   fp32 vs bf16:    a) in both dtypes.
c) batch_invariant: LLM(batch_invariant=True), vLLM's VLLM_BATCH_INVARIANT mode, where the engine has it: a) again,
                    and its cost in TPOT at batch 1 and 64 against the default in the same run.
d) graphs_vs_eager: (GPU) the default engine (torch.compile + CUDA graphs) against eager at the same batch.

Plots, tables, questions and claims are in lab10_views.py.
"""

from __future__ import annotations

import statistics
import time

import torch

from minivllm_labs.common import round_floats
from minivllm_labs.lab06_engine import _cuda, _ids, _sync, free, make_llm
from minivllm_labs.lab_info import LabInfo

RESULTS = "assets/results/h200/lab10.json"
GPU_BATCHES = (1, 2, 8, 64)
CPU_BATCHES = (1, 2, 4)
#: Capture sizes of the lab's graph engines: every batch it runs, so startup stays seconds.
CAPTURE = [1, 2, 4, 5, 8, 16, 32, 64]
#: Qwen3-0.6B's MLP down projection (K = 3072 -> N = 1024): the longest reduction of a decode step's matmuls.
GPU_LINEAR = (1024, 3072)
CPU_LINEAR = (256, 768)  # the embedded model's
H200_SMS = 132


# ---- requests ---------------------------------------------------------------------------------------------
def prompts(n: int, vocab: int) -> list[dict]:
    """n prompts of 6..37 tokens, the same on every machine."""
    return [{"prompt_token_ids": _ids(6 + (7 * i) % 32, 11 + i, vocab)} for i in range(n)]


def logprobs_supported() -> bool:
    """Does this engine return logprobs (SamplingParams(logprobs=k), as vLLM's)?"""
    from minivllm import SamplingParams

    try:
        SamplingParams(max_tokens=1, logprobs=1)
    except (TypeError, ValueError):
        return False
    return True


def _greedy(new_tokens: int, logprobs: bool):
    from minivllm import SamplingParams

    extra = {"logprobs": 0} if logprobs else {}  # 0: the chosen token's logprob only
    return SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True, **extra)


def run(llm, reqs: list[dict], new_tokens: int) -> list[tuple[list[int], list[float] | None]]:
    """Greedy tokens of each request and the logprob of each chosen token (None without logprobs)."""
    lp = logprobs_supported()
    outs = llm.generate(reqs, _greedy(new_tokens, lp), use_tqdm=False)
    got = []
    for o in outs:
        c = o.outputs[0]
        chosen = [d[t].logprob for t, d in zip(c.token_ids, c.logprobs)] if lp and c.logprobs else None
        got.append((list(c.token_ids), chosen))
    return got


def compare(got: list, ref: list) -> dict:
    """Sequences of `got` with the tokens of `ref`; where each first differs (its length when it never does);
    the largest |logprob gap| of the chosen token before that point, and how many sequences have every
    logprob bitwise equal (vLLM's test_logprobs_bitwise_batch_invariance_bs1_vs_bsN)."""
    first, gaps, bitwise = [], [], 0
    for (t, lp), (rt, rlp) in zip(got, ref):
        k = next((i for i, (a, b) in enumerate(zip(t, rt)) if a != b), min(len(t), len(rt)))
        first.append(k)
        if lp is not None and rlp is not None:
            same = [abs(a - b) for a, b in zip(lp[:k], rlp[:k])]
            gaps.append(max(same, default=0.0))
            bitwise += t == rt and all(a == b for a, b in zip(lp, rlp))
    n = len(first)
    return {"requests": n, "tokens": min((len(t) for t, _ in got), default=0),
            "identical": sum(t == rt for (t, _), (rt, _) in zip(got, ref)),
            "first_divergence": first, "mean_matching_prefix": statistics.mean(first) if first else 0,
            "max_logprob_gap": max(gaps) if gaps else None, "bitwise_logprobs": bitwise if gaps else None}


# ---- a) the disagreement ----------------------------------------------------------------------------------
def disagreement(llm, batches: tuple[int, ...], new_tokens: int) -> dict:
    """Each prompt alone (the reference), then the first b prompts together for each batch size b. Batch 1
    run again is the run-to-run check: the same shapes, so it must be identical."""
    reqs = prompts(max(batches), llm.engine.model_config.vocab_size)
    ref = [run(llm, [r], new_tokens)[0] for r in reqs]
    rows = [{"batch": b, **compare(run(llm, reqs[:b], new_tokens), ref[:b])} for b in batches]
    return round_floats({"new_tokens": new_tokens, "dtype": str(llm.config.dtype).removeprefix("torch."),
                         "logprobs": logprobs_supported(), "rows": rows}, 6)


# ---- b) the sources, one at a time ------------------------------------------------------------------------
def _diff(a: torch.Tensor, b: torch.Tensor) -> dict:
    return {"max_abs_diff": float((a.float() - b.float()).abs().max()), "bitwise_equal": bool(torch.equal(a, b))}


def matmul_by_m(dtype: torch.dtype, ms: tuple[int, ...] = (1, 2, 3, 4, 5, 8, 16, 64)) -> dict:
    """Row 0 of x[:M] @ W^T against x[:1] @ W^T, for torch's matmul (cuBLAS / the CPU BLAS), the engine's
    linear (on a GPU a Triton GEMV up to 2 rows, cuBLAS above) and its batch-invariant matmul (one tiling for
    every M, no split-K; on a CPU one F.linear per row)."""
    from minivllm.kernels.elementwise_ops import invariant_linear, linear

    dev = torch.device("cuda" if _cuda() else "cpu")
    n, k = GPU_LINEAR if _cuda() else CPU_LINEAR
    g = torch.Generator(device="cpu").manual_seed(0)
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(dev, dtype)
    x = torch.randn(max(ms), k, generator=g).to(dev, dtype)
    rows = []
    for name, f in (("torch", lambda a: torch.nn.functional.linear(a, w)),
                    ("engine", lambda a: linear(a, w, None, False)),
                    ("invariant", lambda a: invariant_linear(a, w, None))):
        alone = f(x[:1])
        rows += [{"op": name, "m": m, **_diff(f(x[:m])[:1], alone)} for m in ms]
    return round_floats({"dtype": str(dtype).removeprefix("torch."), "n": n, "k": k, "rows": rows}, 8)


def split_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, splits: int) -> torch.Tensor:
    """Attention of one query [H, D] over [T, H, D] keys and values, the KV cut into `splits` pieces whose
    partial softmax sums are merged (flash-decoding), all in fp32, the result rounded to q's dtype: the
    decode kernel's arithmetic written in PyTorch, so a CPU shows the same effect."""
    scale = q.shape[-1] ** -0.5
    accs, ms, ls = [], [], []
    for kk, vv in zip(k.float().chunk(splits), v.float().chunk(splits)):
        s = torch.einsum("hd,thd->ht", q.float(), kk) * scale
        m = s.amax(-1)
        p = torch.exp(s - m[:, None])
        accs.append(torch.einsum("ht,thd->hd", p, vv))
        ms.append(m)
        ls.append(p.sum(-1))
    m = torch.stack(ms).amax(0)
    w = [torch.exp(mi - m) for mi in ms]
    out = sum(a * wi[:, None] for a, wi in zip(accs, w)) / sum(li * wi for li, wi in zip(ls, w))[:, None]
    return out.to(q.dtype)


def attention_splits(dtype: torch.dtype, context: int = 2048) -> dict:
    """The KV splits the decode kernel picks for one sequence alone and for the same sequence in a batch of
    64 (on this GPU, and on an H200's 132 SMs), and what that does to the sequence's attention output: in
    PyTorch (split_attention) on any device, and with the Triton kernel itself on a GPU."""
    from minivllm.kernels.triton_decode import choose_num_splits

    dev = torch.device("cuda" if _cuda() else "cpu")
    hkv, h, d = (8, 16, 128) if _cuda() else (2, 4, 64)
    s1, s64 = (choose_num_splits(b, hkv, context, dev, num_sms=H200_SMS if not _cuda() else None) for b in (1, 64))
    g = torch.Generator(device="cpu").manual_seed(1)
    q = torch.randn(h, d, generator=g).to(dev, dtype)
    k = torch.randn(context, h, d, generator=g).to(dev, dtype)
    v = torch.randn(context, h, d, generator=g).to(dev, dtype)
    out = {"dtype": str(dtype).removeprefix("torch."), "context": context, "splits_batch1": s1,
           "splits_batch64": s64, "h200_splits": [choose_num_splits(b, 8, context, dev, num_sms=H200_SMS)
                                                  for b in (1, 8, 64)],
           "torch": _diff(split_attention(q, k, v, s64), split_attention(q, k, v, s1))}
    if _cuda():
        out["kernel"] = _kernel_splits(q, k[:, ::h // hkv].contiguous(), v[:, ::h // hkv].contiguous(), s1, s64)
    return round_floats(out, 8)


def _kernel_splits(q, k, v, s1: int, s64: int) -> dict:
    """The engine's Triton decode kernel on one sequence with s1 and with s64 splits forced."""
    from minivllm.kernels.triton_decode import paged_decode_attention

    bs, t = 16, k.shape[0]
    kc, vc = (x.view(t // bs, bs, *x.shape[1:]).contiguous() for x in (k, v))
    bt = torch.arange(t // bs, dtype=torch.int32, device=q.device)[None]
    lens = torch.tensor([t], dtype=torch.int32, device=q.device)
    a, b = (paged_decode_attention(q[None], kc, vc, bt, lens, q.shape[-1] ** -0.5, num_splits=s)
            for s in (s1, s64))
    return _diff(b, a)


def padded_graph(model: str, dtype: str, new_tokens: int, eager: list) -> dict:
    """(GPU) 5 requests in full decode graphs (FULL_DECODE_ONLY) captured for sizes [8] (the batch padded to 8)
    and [5, 8] (an exact graph), against `eager` (the same 5 requests run eagerly): does a replay of 8 padded
    from 5 give batch 5's numbers? torch.compile off (mode 0), so only the graph's size differs."""
    runs = {"eager": eager}
    for name, sizes in (("exact", [5, 8]), ("padded", [8])):
        llm = make_llm(model, graphs=True, dtype=dtype, max_num_seqs=8, compilation_config={"mode": 0},
                       cudagraph_mode="FULL_DECODE_ONLY", cudagraph_capture_sizes=sizes)
        runs[name] = run(llm, prompts(5, llm.engine.model_config.vocab_size), new_tokens)
        counts = dict(llm.model_runner.cudagraph_dispatcher.counts)
        free(llm)
        runs[name + "_dispatch"] = counts
    return round_floats({"dtype": dtype, "dispatch": {k: runs[k + "_dispatch"] for k in ("exact", "padded")},
                         "padded_vs_exact": compare(runs["padded"], runs["exact"]),
                         "exact_vs_eager": compare(runs["exact"], runs["eager"]),
                         "padded_vs_eager": compare(runs["padded"], runs["eager"])}, 6)


# ---- c) the batch-invariant mode, and what it costs --------------------------------------------------------
def tpot_ms(llm, batch: int, new_tokens: int, repeats: int = 5) -> dict:
    """Median TPOT (ms) of `batch` requests decoding together, median over repeats, with [min, max]."""
    reqs = prompts(batch, llm.engine.model_config.vocab_size)
    run(llm, reqs, 2)  # warm-up: compile, autotune
    meds = []
    for _ in range(repeats):
        _sync()
        outs = llm.generate(reqs, _greedy(new_tokens, False), use_tqdm=False)
        meds.append(statistics.median(o.metrics.tpot for o in outs) * 1e3)
    return round_floats({"batch": batch, "tpot_ms": statistics.median(meds), "tpot_ms_range": [min(meds), max(meds)]})


def engine(model: str, dtype: str, **kw):
    """The lab's engine: CUDA graphs and torch.compile as by default on a GPU (eager on a CPU)."""
    extra = {"cudagraph_capture_sizes": CAPTURE, "max_num_seqs": 64} if _cuda() else {"max_num_seqs": 8}
    return make_llm(model, graphs=True, dtype=dtype, **extra, **kw)


def batch_invariant_engine(model: str, dtype: str):
    """LLM(batch_invariant=True), or the reason this engine cannot make one."""
    try:
        return engine(model, dtype, batch_invariant=True), None
    except (TypeError, ValueError, NotImplementedError, RuntimeError) as e:
        return None, f"{type(e).__name__}: {e}"[:300]


# ---- everything, for the recorder -------------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """Every measurement. On a GPU, in this order so each engine is built once: eager (the reference of d) and
    of the padded graph), the default engine (a, its TPOT, d), fp32, the padded graphs, the batch-invariant
    engine; on a CPU, a) and c) with the embedded model in fp32, and b)'s tensor measurements."""
    gpu = _cuda()
    batches = GPU_BATCHES if gpu else CPU_BATCHES
    new_tokens = (16 if quick else 32) if gpu else (8 if quick else 12)
    dtype = "bfloat16" if gpu else "float32"
    repeats = 3 if quick else 5
    tpot_batches = (1, batches[-1])
    t0 = time.perf_counter()
    out: dict = {"device": "cuda" if gpu else "cpu", "batches": list(batches), "logprobs": logprobs_supported(),
                 "new_tokens": new_tokens}
    if gpu:
        eager = make_llm(model, dtype=dtype, enforce_eager=True, max_num_seqs=64)
        reqs = prompts(max(batches), eager.engine.model_config.vocab_size)
        eager_runs = {b: run(eager, reqs[:b], new_tokens) for b in (5, *[b for b in batches if b >= 8])}
        free(eager)
    llm = engine(model, dtype)
    out["disagreement"] = {dtype: disagreement(llm, batches, new_tokens)}
    out["tpot"] = {"default": [tpot_ms(llm, b, new_tokens, repeats) for b in tpot_batches]}
    if gpu:
        out["graphs_vs_eager"] = round_floats(
            {"dtype": dtype, "rows": [{"batch": b, **compare(run(llm, reqs[:b], new_tokens), eager_runs[b])}
                                      for b in eager_runs if b >= 8]}, 6)
    free(llm)
    if gpu:  # fp32: every kernel the same, each rounding step 2^16 times finer
        llm = engine(model, "float32")
        out["disagreement"]["float32"] = disagreement(llm, batches, new_tokens)
        free(llm)
        out["padded_graph"] = padded_graph(model, dtype, new_tokens, eager_runs[5])
    inv, why = batch_invariant_engine(model, dtype)
    if inv is None:
        out["batch_invariant"] = {"available": False, "why": why}
    else:
        out["batch_invariant"] = {"available": True, "disagreement": disagreement(inv, batches, new_tokens),
                                  "tpot": [tpot_ms(inv, b, new_tokens, repeats) for b in tpot_batches]}
        free(inv)
    tdt = torch.bfloat16 if gpu else torch.float32
    out["matmul"] = {str(d).removeprefix("torch."): matmul_by_m(d) for d in dict.fromkeys((tdt, torch.float32))}
    out["attention"] = {str(d).removeprefix("torch."): attention_splits(d, 2048 if gpu else 512)
                        for d in dict.fromkeys((tdt, torch.float32))}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _lab_info() -> LabInfo:
    from minivllm_labs import lab10_views as v

    return LabInfo(
        lab="lab10", notebook="labs/10_batch_invariance.ipynb", title="Why batch 1 and batch 64 disagree",
        title_zh="为什么 batch 1 和 batch 64 的结果不一样", sections=(),
        questions=tuple(v.QUESTIONS.values()), claims=v.CLAIMS,
        code=("minivllm/kernels/triton_decode.py", "minivllm/kernels/elementwise_ops.py",
              "minivllm/kernels/triton_gemv.py", "minivllm/worker/cudagraph_dispatcher.py"))


LAB_INFO = _lab_info()
