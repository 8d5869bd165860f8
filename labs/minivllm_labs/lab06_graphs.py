"""Lab 06, part h: the article's claims about PagedAttention and CUDA graphs, measured on the engine.

- paging_under_graphs: FULL-graph replays in steps where a sequence had just received a new block (the graph
  reads block ids from a persistent buffer the runner refills), whether that buffer ever moved, and the KV
  utilisation at the peak;
- graphs_vs_eager: KV capacity chosen from memory with graphs off and on, and the same requests under both;
- captures_by_config: graphs captured at block size 16 vs 32 and with max_num_batched_tokens 512, and the
  cost of finding a graph for a batch.
Everything only reads the engine's state between steps.
"""

from __future__ import annotations

import bisect
import timeit

from minivllm_labs import lab06_engine as lab06
from minivllm_labs.common import round_floats


# ---- h) paging under CUDA graphs ----------------------------------------------------------------------
def _kv_in_use(eng) -> tuple[int, int]:
    """(tokens whose K/V sit in the cache, blocks held) over the running sequences."""
    running = eng.scheduler.running
    return sum(s.num_computed_tokens for s in running), len({b for s in running for b in s.block_table})


def paging_under_graphs(llm, n_req: int = 8, prompt_len: int = 20, new_tokens: int = 24) -> dict:
    """Run requests step by step and note, read only: how often a step replayed a FULL graph while some
    sequence had just received a new block (the graph reads the block table from a persistent buffer that
    the runner refills every step); whether that buffer ever moved; the KV utilisation at the peak (tokens
    held / slots in the blocks held) and the tokens produced."""
    eng = llm.engine
    runner = llm.model_runner
    vocab = eng.model_config.vocab_size
    seqs = [eng.add_request(eng.next_request_id(), lab06._ids(prompt_len + 3 * i, 600 + i, vocab), lab06._greedy(new_tokens))
            for i in range(n_req)]
    ptr = runner.input_batch.block_tables.data_ptr()
    moved = replays_with_new_blocks = replays = 0
    peak = (0, 0)
    disp = runner.cudagraph_dispatcher
    while eng.has_unfinished_requests():
        lens = {s.seq_id: len(s.block_table) for s in seqs}
        full0 = disp.counts["full"] if disp is not None else 0
        eng.step()
        full = (disp.counts["full"] if disp is not None else 0) - full0
        grew = any(len(s.block_table) > lens[s.seq_id] for s in seqs if s.block_table)
        replays += full
        replays_with_new_blocks += int(full > 0 and grew)
        moved += int(runner.input_batch.block_tables.data_ptr() != ptr)
        tokens, blocks = _kv_in_use(eng)
        if blocks > peak[1]:
            peak = (tokens, blocks)
    bs = llm.config.cache.block_size
    return {"graphs": disp is not None and bool(disp.full_sizes), "full_replays": replays,
            "replays_with_new_blocks": replays_with_new_blocks, "block_table_buffer_moved": moved,
            "block_table_buffer_shape": list(runner.input_batch.block_tables.shape),
            "peak_blocks": peak[1], "peak_tokens": peak[0],
            "kv_utilisation_pct": round(100 * peak[0] / max(peak[1] * bs, 1), 3),
            "tokens": [s.output_token_ids for s in seqs]}


def graphs_vs_eager(model: str, max_model_len: int, quick: bool) -> dict:
    """KV capacity chosen from memory with graphs off and on, and the same requests under both (GPU);
    on a CPU only the eager side, with a block budget given directly (there is no device memory to size)."""
    out, tokens = {}, {}
    modes = ("eager", "graphs") if lab06._cuda() else ("eager",)
    kw = {} if lab06._cuda() else {"num_gpu_blocks_override": 64}
    for mode in modes:
        llm = lab06.make_llm(model, graphs=mode == "graphs", max_model_len=max_model_len, **kw)
        rep = llm.startup_report()
        run = paging_under_graphs(llm, n_req=4 if quick else 16)
        tokens[mode] = run.pop("tokens")
        out[mode] = {"num_gpu_blocks": rep.num_gpu_blocks, "kv_cache_tokens": rep.kv_cache_tokens,
                     "kv_cache_gib": round(rep.kv_cache_gib, 3), **run}
        lab06.free(llm)
    if "graphs" in out:
        e, g = out["eager"], out["graphs"]
        out["kv_capacity_diff_pct"] = round(100 * (e["kv_cache_tokens"] - g["kv_cache_tokens"])
                                            / e["kv_cache_tokens"], 3)
        out["kv_utilisation_diff_pct"] = round(e["kv_utilisation_pct"] - g["kv_utilisation_pct"], 3)
        out["same_tokens"] = sum(a == b for a, b in zip(tokens["eager"], tokens["graphs"]))
        out["requests"] = len(tokens["eager"])
    return out


def capture_sizes_from_config(block_size: int, max_num_batched_tokens: int,
                              max_num_seqs: int | None = None) -> list[int]:
    """The sizes the engine would capture, from its configuration alone (runs on a CPU; max_num_seqs None:
    the engine's default)."""
    from minivllm.config import CacheConfig, EngineConfig, SchedulerConfig

    cfg = EngineConfig.resolve(model="-", cache=CacheConfig(block_size=block_size), scheduler=SchedulerConfig(
        max_num_seqs or SchedulerConfig.max_num_seqs, max_num_batched_tokens))
    return list(cfg.cudagraph_capture_sizes)


def lookup_us(sizes: list[int], reps: int = 20000) -> float:
    """Microseconds to find the graph for a batch: the dispatcher's bisect over the sorted capture sizes."""
    probe = list(range(1, max(sizes) + 1))
    n = len(probe)
    return timeit.timeit(lambda: [bisect.bisect_left(sizes, p) for p in probe], number=max(reps // n, 1)) \
        / (max(reps // n, 1) * n) * 1e6


def captures_by_config(model: str, quick: bool) -> dict:
    """Graphs captured at block size 16 and 32, and with max_num_batched_tokens 512 (GPU: counted from the
    startup report of real engines; CPU: from the configuration, the same function the engine calls)."""
    points = [(16, 8192), (32, 8192), (16, 512)]
    rows = []
    for bs, mnbt in points:
        sizes = capture_sizes_from_config(bs, mnbt)
        row = {"block_size": bs, "max_num_batched_tokens": mnbt, "config_sizes": len(sizes),
               "lookup_us": lookup_us(sizes)}
        if lab06._cuda():
            llm = lab06.make_llm(model, graphs=True, block_size=bs, max_num_batched_tokens=mnbt, max_model_len=1024,
                           num_gpu_blocks_override=4096)
            cg = llm.startup_report().cudagraph
            row["full_graphs"] = len(cg.get("FULL", {}).get("sizes", []))
            row["piecewise_graphs"] = len(cg.get("PIECEWISE", {}).get("sizes", []))
            row["captured"] = row["full_graphs"] + row["piecewise_graphs"]
            lab06.free(llm)
        rows.append(round_floats(row))
    key = "captured" if lab06._cuda() else "config_sizes"
    return {"rows": rows, "count": key, "block32_minus_block16": rows[1][key] - rows[0][key],
            "mnbt512_minus_8192": rows[2][key] - rows[0][key]}
