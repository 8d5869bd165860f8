"""Lab 06, "Paged KV cache and continuous batching": the measurements, shared by the notebook and
`python -m minivllm_labs.record lab06`.

The engine's own block manager and scheduler, made visible by *reading* them while the engine runs (no engine
code is changed or patched here; `llm.engine.scheduler`, `.block_manager` and each Sequence's `block_table`
are only inspected between steps):

a) kv_sizing / kv_bytes_per_token: bytes of K/V per token from the model config (GQA included) and the
   number of blocks the engine chose.
b) block_table_trace:  one request's block table, step by step, as it grows.
c) fragmentation:      slots allocated but unused per block size (8 / 16 / 32), with the engine's BlockManager.
d) prefix_sharing:     requests with a shared prompt: the blocks they share and their reference counts.
e) preemption:         a KV cache too small for the batch: preemptions, every request still finishing, and
                       how many end with the same greedy tokens as with a large cache (all in fp32; bf16
                       recompute can flip a near-tie).
f) workload_sweep:     throughput and TTFT / TPOT percentiles vs max_num_seqs, max_num_batched_tokens and
                       chunked prefill on the standard workload (nano-vllm's; scaled down on a CPU).
g) chunked_prefill:    a long prompt arriving while requests decode: the longest step the decoders wait for.
h) the article's claims about paging and graphs (lab06_graphs.py): block tables as graph inputs, KV capacity
   and utilisation with and without graphs, capture count vs block size.

Plots, tables and questions are in lab06_views.py.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from minivllm_labs.common import round_floats
from minivllm_labs.lab06_engine import _cuda, _greedy, _ids, _sync, free, make_llm  # noqa: F401
from minivllm_labs.lab_info import LabInfo

RESULTS = "assets/results/h200/lab06.json"
#: nano-vllm's bench.py workload: 256 requests, prompt and output lengths uniform in [100, 1024].
STANDARD_WORKLOAD = {"num_requests": 256, "input_len": [100, 1024], "output_len": [100, 1024]}
#: The same shape, scaled down for a CPU (seconds, not minutes).
CPU_WORKLOAD = {"num_requests": 5, "input_len": [8, 40], "output_len": [3, 6]}
#: The "run it here" cell on a GPU: the embedded model has 512 positions, so prompt + output stay below 512.
SMALL_GPU_WORKLOAD = {"num_requests": 32, "input_len": [100, 256], "output_len": [100, 255]}
BLOCK_SIZES = (8, 16, 32)


# ---- a) KV bytes per token -------------------------------------------------------------------------------
def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """K and V (x2), for every layer, for every KV head: GQA shares one KV head among several query heads,
    so it is num_key_value_heads, not num_attention_heads, that sets the cache size."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


def kv_sizing(llm) -> dict:
    """The model's KV bytes per token from its config, the engine's own per-block figure, and the number of
    blocks the engine chose at startup."""
    m, runner, rep = llm.engine.model_config, llm.model_runner, llm.startup_report()
    elem = torch.empty(0, dtype=llm.config.dtype).element_size()
    per_token = kv_bytes_per_token(m.num_hidden_layers, m.num_key_value_heads, m.head_dim, elem)
    bs = llm.config.cache.block_size
    return {"layers": m.num_hidden_layers, "heads": m.num_attention_heads, "kv_heads": m.num_key_value_heads,
            "head_dim": m.head_dim, "dtype_bytes": elem, "bytes_per_token": per_token,
            "bytes_per_token_without_gqa": kv_bytes_per_token(m.num_hidden_layers, m.num_attention_heads,
                                                              m.head_dim, elem),
            "engine_bytes_per_block": runner.kv_bytes_per_block(), "block_size": bs,
            "engine_bytes_per_token": runner.kv_bytes_per_block() // bs,
            "num_gpu_blocks": rep.num_gpu_blocks, "kv_cache_tokens": rep.kv_cache_tokens,
            "kv_cache_gib": round(rep.kv_cache_gib, 4), "max_model_len": llm.config.max_model_len,
            "max_num_seqs": llm.config.scheduler.max_num_seqs}


# ---- b) a block table as it grows ---------------------------------------------------------------------
def block_table_trace(llm, prompt_len: int = 10, new_tokens: int = 20) -> dict:
    """Run one request step by step and note its block table after each step (read only)."""
    eng = llm.engine
    vocab = eng.model_config.vocab_size
    seq = eng.add_request(eng.next_request_id(), _ids(prompt_len, 1, vocab), _greedy(new_tokens))
    rows = []
    while eng.has_unfinished_requests():
        eng.step()
        rows.append({"computed": seq.num_computed_tokens, "tokens": seq.num_tokens,
                     "blocks": list(seq.block_table)})
    return {"block_size": llm.config.cache.block_size, "prompt_len": prompt_len, "new_tokens": new_tokens,
            "steps": rows}


# ---- c) internal fragmentation ------------------------------------------------------------------------
def standard_lengths(workload: dict, seed: int = 0) -> list[int]:
    """Final lengths (prompt + output) of the workload's requests, drawn as nano-vllm's bench.py draws them."""
    from minivllm.bench.throughput import workload as draw

    prompts, max_tokens = draw(workload["num_requests"], workload["input_len"], workload["output_len"], 10000,
                               seed)
    return [len(p) + n for p, n in zip(prompts, max_tokens)]


def fragmentation(lengths: list[int], block_sizes: tuple[int, ...] = BLOCK_SIZES) -> dict:
    """Allocate every sequence with the engine's BlockManager and count the slots left empty in its last
    block. Paging wastes at most block_size - 1 slots per sequence, about block_size / 2 on average."""
    from minivllm.engine.block_manager import BlockManager
    from minivllm.engine.sequence import Sequence
    from minivllm.sampling_params import SamplingParams

    rows = []
    for bs in block_sizes:
        bm = BlockManager(sum(-(-n // bs) for n in lengths), bs, enable_prefix_caching=False)
        slots = 0
        for i, n in enumerate(lengths):
            seq = Sequence(str(i), [3] * n, SamplingParams(max_tokens=1))
            bm.allocate(seq, n)
            slots += len(seq.block_table) * bs
        tokens = sum(lengths)
        rows.append({"block_size": bs, "blocks": bm.num_blocks - bm.num_free_blocks, "slots": slots,
                     "tokens": tokens, "wasted_slots": slots - tokens,
                     "waste_pct": 100 * (slots - tokens) / slots,
                     "wasted_per_seq": (slots - tokens) / len(lengths)})
    by = {str(r["block_size"]): r["waste_pct"] for r in rows}
    return round_floats({"num_seqs": len(lengths), "rows": rows, "waste_pct_by_block": by,
                         "block32_minus_block16_waste_pct": by.get("32", 0) - by.get("16", 0)})


# ---- d) prefix caching --------------------------------------------------------------------------------
def prefix_sharing(llm, shared_len: int = 40, own_len: int = 5, n_users: int = 3, new_tokens: int = 3) -> dict:
    """A first request fills the cache with a shared prompt; then n_users requests with the same prefix run
    together. After their first step: which blocks each one holds, and each shared block's reference count."""
    eng, bm = llm.engine, llm.engine.block_manager
    vocab = eng.model_config.vocab_size
    shared = _ids(shared_len, 2, vocab)
    llm.generate([{"prompt_token_ids": shared + _ids(own_len, 100, vocab)}], _greedy(1), use_tqdm=False)
    q0, h0 = bm.num_cache_queries, bm.num_cache_hits
    seqs = [eng.add_request(eng.next_request_id(), shared + _ids(own_len, 200 + u, vocab), _greedy(new_tokens))
            for u in range(n_users)]
    eng.step()
    tables = [list(s.block_table) for s in seqs]
    common = [b for b in tables[0] if all(b in t for t in tables[1:])]
    refs = {str(b): bm.blocks[b].ref_count for b in sorted({b for t in tables for b in t})}
    cached = [s.num_cached_tokens for s in seqs]
    while eng.has_unfinished_requests():
        eng.step()
    return {"block_size": bm.block_size, "shared_len": shared_len, "own_len": own_len, "tables": tables,
            "shared_blocks": common, "ref_counts": refs, "cached_tokens": cached,
            "hit_rate": (bm.num_cache_hits - h0) / max(bm.num_cache_queries - q0, 1)}


# ---- e) preemption ------------------------------------------------------------------------------------
def preemption(model: str, num_blocks: int = 8, n_req: int = 3, prompt_len: int = 12, new_tokens: int = 16,
               block_size: int = 8) -> dict:
    """The same greedy requests on a KV cache too small for all of them (num_gpu_blocks_override) and on a
    large one: the small engine preempts (recompute) and every request finishes; `same_tokens` counts those
    whose greedy tokens equal the large engine's (all of them in fp32; in bf16 a recomputed K/V can differ by
    rounding)."""
    max_len = prompt_len + new_tokens
    kw = dict(block_size=block_size, max_num_seqs=n_req, max_model_len=max_len, enable_prefix_caching=False)
    runs = {}
    for name, blocks in (("small", num_blocks), ("large", n_req * -(-max_len // block_size) + 4)):
        llm = make_llm(model, num_gpu_blocks_override=blocks, **kw)
        vocab = llm.engine.model_config.vocab_size
        reqs = [{"prompt_token_ids": _ids(prompt_len, 300 + i, vocab)} for i in range(n_req)]
        outs = llm.generate(reqs, _greedy(new_tokens), use_tqdm=False)
        runs[name] = {"blocks": blocks, "tokens": [o.outputs[0].token_ids for o in outs],
                      "finished": sum(o.finished for o in outs),
                      "preemptions": llm.engine.stats["preemptions"],
                      "per_request": [o.extra["num_preemptions"] for o in outs]}
        free(llm)
    same = sum(a == b for a, b in zip(runs["small"]["tokens"], runs["large"]["tokens"]))
    need = n_req * -(-max_len // block_size)
    return {"block_size": block_size, "requests": n_req, "blocks_needed_at_once": need,
            "small_blocks": num_blocks, "preemptions": runs["small"]["preemptions"],
            "per_request": runs["small"]["per_request"], "finished": runs["small"]["finished"],
            "same_tokens": same, "large_preemptions": runs["large"]["preemptions"]}


# ---- f) the standard workload -------------------------------------------------------------------------
def run_workload(llm, workload: dict, seed: int = 0) -> dict:
    """The whole workload in one generate call (after a two-request warm-up): output tok/s, TTFT / TPOT."""
    from minivllm.bench.common import percentiles
    from minivllm.bench.throughput import workload as draw

    vocab = llm.engine.model_config.vocab_size
    prompts, max_tokens = draw(workload["num_requests"], workload["input_len"], workload["output_len"],
                               min(10000, vocab - 1), seed)
    llm.generate([{"prompt_token_ids": _ids(8, 9, vocab)}] * 2, _greedy(2), use_tqdm=False)
    s0 = dict(llm.engine.stats)
    params = [_greedy(n) for n in max_tokens]
    _sync()
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    _sync()
    wall = time.perf_counter() - t0
    st = {k: llm.engine.stats[k] - s0[k] for k in ("steps", "scheduled_seqs", "scheduled_tokens", "preemptions")}
    out_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    ms = {k: {p: v * 1e3 for p, v in percentiles(vals).items()}
          for k, vals in (("ttft_ms", [o.metrics.ttft for o in outs]), ("tpot_ms", [o.metrics.tpot for o in outs]))}
    return round_floats({"output_tok_s": out_tokens / wall, "wall_s": wall, "output_tokens": out_tokens,
                         "finished": sum(o.finished for o in outs), "steps": st["steps"],
                         "mean_batch_seqs": st["scheduled_seqs"] / max(st["steps"], 1),
                         "mean_batch_tokens": st["scheduled_tokens"] / max(st["steps"], 1),
                         "preemptions": st["preemptions"], **ms})


def sweep_configs(quick: bool) -> list[dict]:
    """(max_num_seqs, max_num_batched_tokens, chunked prefill) points of the sweep."""
    if not _cuda():
        return [{"max_num_seqs": s, "max_num_batched_tokens": 64, "chunked": True} for s in (1, 5)] + \
            ([] if quick else [{"max_num_seqs": 5, "max_num_batched_tokens": 16, "chunked": True}])
    seqs = [{"max_num_seqs": s, "max_num_batched_tokens": 8192, "chunked": True}
            for s in ((32, 256) if quick else (16, 64, 256))]
    tokens = [{"max_num_seqs": 256, "max_num_batched_tokens": t, "chunked": True} for t in (512, 2048)]
    return seqs + tokens + [{"max_num_seqs": 256, "max_num_batched_tokens": 2048, "chunked": False}]


def workload_sweep(model: str, workload: dict, configs: list[dict], max_model_len: int,
                   repeats: int = 1) -> list[dict]:
    """One engine per setting, the workload run `repeats` times in it: the row is the run of median tok/s, and
    `tok_s_runs` keeps every run, so a difference between settings counts only beyond their spread."""
    rows = []
    for c in configs:
        llm = make_llm(model, graphs=True, max_model_len=max_model_len,  # the default mode, as a user runs it
                       max_num_seqs=c["max_num_seqs"], max_num_batched_tokens=c["max_num_batched_tokens"],
                       enable_chunked_prefill=c["chunked"], enable_prefix_caching=False)
        runs = sorted((run_workload(llm, workload) for _ in range(repeats)), key=lambda r: r["output_tok_s"])
        rows.append({**c, **runs[len(runs) // 2], "tok_s_runs": [r["output_tok_s"] for r in runs]})
        free(llm)
    return rows


# ---- g) chunked prefill: what the decoders wait for ---------------------------------------------------
def chunked_prefill(model: str, chunked: bool, budget: int, long_len: int, n_short: int = 3,
                    short_new: int = 12, max_model_len: int = 256, repeats: int = 1) -> dict:
    """n_short requests decode; after 3 steps a long prompt arrives. Per step: tokens scheduled and wall
    time. Without chunking the long prompt runs in one step that every decoder waits for; with chunking it
    is cut into pieces of at most the token budget, shared with the decodes. The engine runs the default
    cudagraph_mode (FULL_AND_PIECEWISE: decode steps replay full graphs, steps with prompt tokens replay
    piecewise graphs up to the largest capture size, as in vLLM). The scenario runs `repeats` times in the same
    engine: the worst wait is reported as the median of the runs, with every run kept as its spread."""
    llm = make_llm(model, graphs=True, max_model_len=max_model_len, max_num_batched_tokens=budget,
                   enable_chunked_prefill=chunked, enable_prefix_caching=False, max_num_seqs=n_short + 1)
    eng = llm.engine
    vocab = eng.model_config.vocab_size
    llm.generate([{"prompt_token_ids": _ids(8, 9, vocab)}], _greedy(2), use_tqdm=False)  # warm-up
    runs = [_chunked_scenario(eng, n_short, short_new, long_len, vocab, salt=100 * r) for r in range(repeats)]
    mode = str(llm.config.cudagraph_mode)  # after vLLM's downgrades: which steps could replay a graph
    free(llm)
    worst = [max(s["ms"] for s in steps if s["decoding"]) for steps in runs]
    steps = runs[0]
    return round_floats({"chunked": chunked, "budget": budget, "long_len": long_len, "cudagraph_mode": mode,
                         "step_tokens": [s["tokens"] for s in steps], "step_ms": [s["ms"] for s in steps],
                         "max_tokens_with_decodes": max(s["tokens"] for s in steps if s["decoding"]),
                         "max_ms_with_decodes": sorted(worst)[len(worst) // 2], "max_ms_runs": worst})


def _chunked_scenario(eng, n_short: int, short_new: int, long_len: int, vocab: int, salt: int) -> list[dict]:
    """One run of the scenario on a live engine: every step's tokens, wall time and decoders waiting."""
    shorts = [eng.add_request(eng.next_request_id(), _ids(8, 400 + salt + i, vocab), _greedy(short_new))
              for i in range(n_short)]
    steps, i = [], 0
    while eng.has_unfinished_requests():
        if i == 3:
            eng.add_request(eng.next_request_id(), _ids(long_len, 500 + salt, vocab), _greedy(2))
        before = eng.stats["scheduled_tokens"]
        decoding = sum(not s.is_finished and s.num_output_tokens > 0 for s in shorts)
        _sync()
        t0 = time.perf_counter()
        eng.step()
        _sync()
        steps.append({"tokens": eng.stats["scheduled_tokens"] - before, "ms": (time.perf_counter() - t0) * 1e3,
                      "decoding": decoding})
        i += 1
    return steps


# ---- everything, for the recorder ---------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 06 with `model` (random Qwen3-0.6B on the H200: about 4.5 minutes; --quick on a CPU: seconds)."""
    gpu = _cuda()
    out: dict[str, Any] = {}
    small = make_llm(model, block_size=8, max_num_seqs=4, num_gpu_blocks_override=256, max_model_len=128)
    out["kv"] = kv_sizing(small)
    out["trace"] = block_table_trace(small, 10, 12 if quick else 20)
    out["prefix"] = prefix_sharing(small)
    free(small)
    out["kv_default"] = _default_sizing(model) if gpu else None
    out["fragmentation"] = fragmentation(standard_lengths(STANDARD_WORKLOAD))
    out["preemption"] = preemption(model, new_tokens=8 if quick else 16)
    workload = STANDARD_WORKLOAD if gpu and not quick else CPU_WORKLOAD
    if gpu and quick:
        workload = {**STANDARD_WORKLOAD, "num_requests": 32}
    reps = 3 if gpu else 1  # a GPU verdict needs a spread; --quick keeps the chunked runs, not the sweep's
    out["workload"] = {"spec": workload, "rows": workload_sweep(model, workload, sweep_configs(quick),
                                                                2048 if gpu else 128, repeats=1 if quick else reps)}
    long_len, budget = (1536, 256) if gpu else (96, 32)
    short_new = 6 if quick else 12
    out["chunked"] = [chunked_prefill(model, chunked, budget if chunked else (2048 if gpu else 128), long_len,
                                      short_new=short_new, max_model_len=2048 if gpu else 128, repeats=reps)
                      for chunked in (True, False)]
    out["graphs"] = graphs_vs_eager(model, 32768 if gpu else 128, quick)
    out["captures"] = captures_by_config(model, quick)
    return out


def _default_sizing(model: str) -> dict:
    """KV sizing of an engine with the defaults (max_model_len 2048, memory-derived, graphs on)."""
    llm = make_llm(model, graphs=True, max_model_len=2048)
    try:
        return kv_sizing(llm)
    finally:
        free(llm)


from minivllm_labs.lab06_graphs import (  # noqa: E402,F401  (part h, kept in its own file)
    capture_sizes_from_config,
    captures_by_config,
    graphs_vs_eager,
    lookup_us,
    paging_under_graphs,
)
from minivllm_labs.lab06_views import CLAIMS, QUESTIONS  # noqa: E402  (the views import this module's names)

LAB_INFO = LabInfo(
    lab="lab06", notebook="labs/06_paged_kv_and_batching.ipynb",
    title="Paged KV cache and continuous batching", title_zh="分页 KV Cache 与连续批处理",
    sections=("§1.4", "article: PagedAttention and CUDA graphs", "article: tuning"),
    questions=tuple(QUESTIONS.values()), claims=CLAIMS,
    code=("minivllm/engine/block_manager.py", "minivllm/engine/scheduler.py", "minivllm/engine/sequence.py",
          "minivllm/worker/input_batch.py", "minivllm/worker/graph_capture.py", "minivllm/worker/startup.py"))
