"""Lab 06's figures, tables, the numbers behind its questions, its verdicts' rules: what the notebook shows of lab06's measurements.

Split from lab06.py so each file has one job: lab06.py measures (and runs on the recorder's GPU without
plotly), this file draws and grades (the questions and claims themselves are data/lab06.yaml). Every function takes a results dict: the recorded H200 file or what the
notebook just measured on this machine.
"""

from __future__ import annotations

from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)
from minivllm_labs.quiz_data import load_claims, load_questions

RESULTS = "assets/results/h200/lab06.json"


# ---- figures ------------------------------------------------------------------------------------------
def plot_block_table(res: dict):
    """One row per step; each logical block of the request drawn as a cell labelled with its physical id."""
    import plotly.graph_objects as go

    from minivllm_labs.plots import bilingual

    tr = res["trace"]
    xs, ys, text = [], [], []
    for i, row in enumerate(tr["steps"]):
        for j, b in enumerate(row["blocks"]):
            xs.append(j)
            ys.append(i + 1)
            text.append(str(b))
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers+text", text=text, textposition="middle center",
                               marker=dict(symbol="square", size=26, color="#c6dbef",
                                           line=dict(color="#2171b5", width=1)),
                               hovertemplate="step %{y}, logical block %{x}: physical block %{text}"))
    fig.update_layout(title=f"One request's block table, step by step (block size {tr['block_size']}, "
                            f"prompt {tr['prompt_len']} tokens, {tr['new_tokens']} new)",
                      xaxis_title="logical block (position in the block table)", yaxis_title="engine step",
                      template="plotly_white", height=max(420, 140 + 28 * len(tr["steps"])),
                      margin=dict(l=60, r=20, t=60, b=50))
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1)
    return bilingual(fig, title=f"一个请求的 block table，逐步变化（block 大小 {tr['block_size']}，prompt "
                                f"{tr['prompt_len']} 个 token，新生成 {tr['new_tokens']} 个）",
                     x="逻辑 block（在 block table 中的位置）", y="引擎步")


def plot_fragmentation(res: dict):
    from minivllm_labs.plots import figure

    rows = res["fragmentation"]["rows"]
    return figure([str(r["block_size"]) for r in rows], {"slots allocated but empty (%)": [r["waste_pct"] for r in rows]},
                  kind="bar", x_title="block size (tokens)", y_title="% of allocated KV slots unused",
                  title=f"Internal fragmentation, standard workload ({res['fragmentation']['num_seqs']} requests)",
                  zh={"title": f"内部碎片，标准负载（{res['fragmentation']['num_seqs']} 个请求）",
                      "x": "block 大小（token）", "y": "已分配 KV 槽位中空闲的百分比",
                      "names": {"slots allocated but empty (%)": "已分配但空闲的槽位（%）"}})


def _label(r: dict) -> str:
    return f"seqs {r['max_num_seqs']}, tokens {r['max_num_batched_tokens']}" + ("" if r["chunked"] else ", no chunking")


def _tok_s_runs(row: dict) -> list[float]:
    """Every run's tok/s of a sweep row (a record of one run per setting has only the row's own)."""
    return row.get("tok_s_runs") or [row["output_tok_s"]]


def plot_sweep(res: dict):
    """Throughput (tok/s), TTFT and TPOT percentiles (ms) per scheduler setting: three panels, one quantity
    and one unit on each axis (TPOT is a hundredth of TTFT: on one axis its bars would not show)."""
    from plotly.subplots import make_subplots

    from minivllm_labs.plots import PALETTE, bilingual, finish, wrap_label

    rows = res["workload"]["rows"]
    x = [wrap_label(_label(r)) for r in rows]
    n = res["workload"]["spec"]["num_requests"]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    runs = [_tok_s_runs(r) for r in rows]  # the bar is the median run; whiskers span all
    fig.add_bar(x=x, y=[r["output_tok_s"] for r in rows], name="output tok/s", marker_color=PALETTE[0],
                error_y={"type": "data", "symmetric": False,
                         "array": [max(v) - r["output_tok_s"] for v, r in zip(runs, rows)],
                         "arrayminus": [r["output_tok_s"] - min(v) for v, r in zip(runs, rows)]},
                row=1, col=1)
    names_zh = {"output tok/s": "输出 tok/s"}
    for row, k in ((2, "ttft_ms"), (3, "tpot_ms")):
        for j, p in enumerate(("p50", "p99")):
            name = f"{k.split('_')[0].upper()} {p}"
            names_zh[name] = name
            fig.add_bar(x=x, y=[r[k][p] for r in rows], name=name, marker_color=PALETTE[1 + 2 * (row - 2) + j],
                        row=row, col=1)
    fig.update_yaxes(title_text="output tok/s", row=1, col=1)
    fig.update_yaxes(title_text="TTFT (ms)", row=2, col=1)
    fig.update_yaxes(title_text="TPOT (ms)", row=3, col=1)
    fig.update_xaxes(type="category")
    fig.update_layout(title=f"{n} requests: throughput and latency per scheduler setting", barmode="group",
                      height=720)
    bilingual(fig, title=f"{n} 个请求：各调度配置下的吞吐与延迟", names=names_zh,
              layout={"yaxis.title.text": "输出 tok/s", "yaxis2.title.text": "TTFT（毫秒）",
                      "yaxis3.title.text": "TPOT（毫秒）"})
    return finish(fig)


def plot_chunked(res: dict):
    from minivllm_labs.plots import figure

    runs = res["chunked"]
    steps = max(len(r["step_tokens"]) for r in runs)
    series = {("chunked prefill, budget " if r["chunked"] else "no chunking, budget ") + str(r["budget"]):
              r["step_tokens"] + [None] * (steps - len(r["step_tokens"])) for r in runs}
    zh_names = {n: n.replace("chunked prefill, budget ", "分块预填充，预算 ").replace("no chunking, budget ",
                                                                                  "不分块，预算 ") for n in series}
    return figure(list(range(1, steps + 1)), series, toggle=True, x_title="engine step",
                  y_title="tokens in the step",
                  title=f"A {runs[0]['long_len']}-token prompt arrives while 3 requests decode",
                  zh={"title": f"3 个请求解码时，来了一个 {runs[0]['long_len']} token 的 prompt", "x": "引擎步",
                      "y": "这一步的 token 数", "names": zh_names})


# ---- tables -------------------------------------------------------------------------------------------
def kv_table(res: dict) -> str:
    k = res["kv"]
    lines = [f"model: {k['layers']} layers, {k['heads']} query heads, {k['kv_heads']} KV heads, head_dim "
             f"{k['head_dim']}, {k['dtype_bytes']} bytes per element",
             f"KV bytes per token = 2 (K, V) x {k['layers']} x {k['kv_heads']} x {k['head_dim']} x "
             f"{k['dtype_bytes']} = {k['bytes_per_token']:,} B ({k['bytes_per_token'] / 1024:.1f} KiB)",
             f"  without GQA ({k['heads']} KV heads): {k['bytes_per_token_without_gqa']:,} B "
             f"({k['bytes_per_token_without_gqa'] / k['bytes_per_token']:.0f}x more)",
             f"engine's own figure: {k['engine_bytes_per_block']:,} B per block of {k['block_size']} = "
             f"{k['engine_bytes_per_token']:,} B per token"]
    d = res.get("kv_default")
    if d:
        lines.append(f"with the defaults on this GPU the engine chose {d['num_gpu_blocks']:,} blocks of "
                     f"{d['block_size']} = {d['kv_cache_tokens']:,} tokens ({d['kv_cache_gib']} GiB), capped at "
                     f"2 x max_num_seqs x blocks per sequence = 2 x {d['max_num_seqs']} x "
                     f"{d['max_model_len'] // d['block_size']}")
    return "\n".join(lines)


def trace_table(res: dict) -> str:
    tr = res["trace"]
    out = [f"{'step':>4}  {'tokens':>6}  {'in cache':>8}  block table"]
    for i, r in enumerate(tr["steps"], 1):
        out.append(f"{i:>4}  {r['tokens']:>6}  {r['computed']:>8}  {r['blocks'] or '[] (finished: freed)'}")
    return "\n".join(out)


def fragmentation_table(res: dict) -> str:
    out = [f"{'block':>5}  {'blocks':>7}  {'slots':>9}  {'tokens':>9}  {'empty':>7}  {'% empty':>7}  per request"]
    for r in res["fragmentation"]["rows"]:
        out.append(f"{r['block_size']:>5}  {r['blocks']:>7,}  {r['slots']:>9,}  {r['tokens']:>9,}  "
                   f"{r['wasted_slots']:>7,}  {r['waste_pct']:>7.2f}  {r['wasted_per_seq']:.1f} slots")
    return "\n".join(out)


def prefix_table(res: dict) -> str:
    p = res["prefix"]
    out = [f"shared prompt {p['shared_len']} tokens + {p['own_len']} own tokens per request, block size "
           f"{p['block_size']}"]
    for i, (t, c) in enumerate(zip(p["tables"], p["cached_tokens"])):
        out.append(f"request {i}: block table {t}, {c} prompt tokens served from the cache")
    out.append(f"blocks shared by all: {p['shared_blocks']}")
    out.append("reference counts: " + ", ".join(f"block {b}: {n}" for b, n in p["ref_counts"].items()))
    out.append(f"cache hit rate of these requests: {p['hit_rate']:.0%} of their prompt tokens")
    return "\n".join(out)


def preemption_table(res: dict) -> str:
    p = res["preemption"]
    return (f"{p['requests']} requests need {p['blocks_needed_at_once']} blocks at once; the cache has "
            f"{p['small_blocks']}.\npreemptions: {p['preemptions']} (per request {p['per_request']}); finished "
            f"{p['finished']}/{p['requests']}; greedy tokens identical to a large cache: "
            f"{p['same_tokens']}/{p['requests']} (the large cache preempted {p['large_preemptions']} times)")


def sweep_table(res: dict) -> str:
    """One row per setting: the median run's figures, and the range of tok/s over every run (a single run
    says "1 run": its difference from another row cannot be judged)."""
    out = [f"{'setting':<36} {'tok/s':>8} {'range over runs':>17} {'steps':>6} {'batch':>6} {'preempt':>7} "
           f"{'TTFT p50/p99 ms':>17} {'TPOT p50/p99 ms':>16}"]
    for r in res["workload"]["rows"]:
        runs = _tok_s_runs(r)
        spread = f"{min(runs):.0f}-{max(runs):.0f} ({len(runs)})" if len(runs) > 1 else "1 run"
        out.append(f"{_label(r):<36} {r['output_tok_s']:>8.0f} {spread:>17} {r['steps']:>6} "
                   f"{r['mean_batch_seqs']:>6.1f} {r['preemptions']:>7} "
                   f"{r['ttft_ms']['p50']:>8.1f}/{r['ttft_ms']['p99']:<8.1f} "
                   f"{r['tpot_ms']['p50']:>7.2f}/{r['tpot_ms']['p99']:<7.2f}")
    return "\n".join(out)


def chunked_table(res: dict) -> str:
    def runs(r):
        rs = r.get("max_ms_runs") or [r["max_ms_with_decodes"]]
        return f" (median of {len(rs)} runs: {', '.join(f'{x:.1f}' for x in rs)})" if len(rs) > 1 else " (one run)"
    return "\n".join(f"{'chunked' if r['chunked'] else 'not chunked':<12} budget {r['budget']:>5}: "
                     f"largest step while others decode {r['max_tokens_with_decodes']} tokens, "
                     f"{r['max_ms_with_decodes']:.1f} ms" + runs(r) for r in res["chunked"])


def chunked_verdict(res: dict | None, lang: str = "en") -> str:
    """Did chunked prefill shorten the decoders' worst wait in this record? Computed from the runs, so the
    sentence follows the record: a difference counts only when the runs' ranges do not overlap."""
    rows = (res or {}).get("chunked") or []
    ch = next((r for r in rows if r["chunked"]), None)
    un = next((r for r in rows if not r["chunked"]), None)
    if not ch or not un:
        return "(not recorded yet)" if lang == "en" else "（尚未录制）"
    a, b = ch.get("max_ms_runs") or [ch["max_ms_with_decodes"]], un.get("max_ms_runs") or [un["max_ms_with_decodes"]]
    mode = ch.get("cudagraph_mode") or "FULL_DECODE_ONLY"
    x, y = ch["max_ms_with_decodes"], un["max_ms_with_decodes"]
    if min(len(a), len(b)) < 2:  # one run each: no spread to judge a difference by
        en = (f"gave a worst wait of {x:.1f} ms against {y:.1f} ms unchunked, from one run each: too few runs to call "
              f"the difference")
        zh = f"给出的最坏等待是 {x:.1f} ms，不分块为 {y:.1f} ms；各只跑了一次，不足以判定差别"
    elif max(a) < min(b):
        en = f"shortened the decoders' worst wait from {y:.1f} to {x:.1f} ms ({y / x:.1f}x), beyond the spread"
        zh = f"把 decode 最坏的等待从 {y:.1f} ms 缩短到 {x:.1f} ms（{y / x:.1f} 倍），超出了多次运行的波动"
    elif min(a) > max(b):
        en = f"made the decoders' worst wait longer: {x:.1f} ms against {y:.1f} ms unchunked, beyond the spread"
        zh = f"反而让 decode 最坏的等待变长：{x:.1f} ms，不分块为 {y:.1f} ms，超出了多次运行的波动"
    else:
        en = f"left the decoders' worst wait within the spread of the runs ({x:.1f} vs {y:.1f} ms unchunked)"
        zh = f"没有让 decode 最坏的等待超出多次运行的波动（{x:.1f} ms 对不分块的 {y:.1f} ms）"
    n = len(a)
    if lang == "en":
        return (f"Chunked prefill (budget {ch['budget']}, {ch['long_len']}-token prompt, cudagraph_mode {mode}, "
                f"{n} run{'s' if n > 1 else ''} each) {en}.")
    return f"分块预填充（预算 {ch['budget']}，{ch['long_len']} token 的 prompt，cudagraph_mode {mode}，各跑 {n} 次）{zh}。"


def budget_steps_text(res: dict | None) -> str:
    """Why a small token budget costs throughput: the prompt tokens are cut into at least
    prompt tokens / budget steps, each of which costs more than a decode step's graph replay."""
    rows = ((res or {}).get("workload") or {}).get("rows") or []
    out = []
    for r in rows:
        if not r.get("chunked") or "mean_batch_tokens" not in r:
            continue
        prompt = r["mean_batch_tokens"] * r["steps"] - r["output_tokens"]  # tokens scheduled that were prompts
        least = -(-int(prompt) // r["max_num_batched_tokens"])
        out.append(f"seqs {r['max_num_seqs']}, budget {r['max_num_batched_tokens']:>5}: {int(prompt):,} prompt tokens "
                   f"-> at least {least} steps with prefill; {r['steps']} steps in {r['wall_s']} s "
                   f"({round(1000 * r['wall_s'] / r['steps'], 1)} ms per step on average)")
    most = max((r["max_num_seqs"] for r in rows), default=None)
    same = sorted((r for r in rows if r.get("chunked") and r["max_num_seqs"] == most),
                  key=lambda r: r["max_num_batched_tokens"])
    lo = same[0] if same else None
    for hi in same[1:]:  # what one more step costs, tokens held equal: the smallest budget against each larger one
        extra, gap = lo["steps"] - hi["steps"], lo["wall_s"] - hi["wall_s"]
        if extra > 0:
            out.append(f"budget {lo['max_num_batched_tokens']} vs {hi['max_num_batched_tokens']}: {extra} more steps, "
                       f"{gap:.3f} s more: {1000 * gap / extra:.2f} ms per extra step")
    return "\n".join(out) or "(not recorded yet: `python -m minivllm_labs.record lab06` on a GPU makes them)"


def chunked_steps_text(res: dict | None) -> str:
    """Every step that carried prefill tokens, tokens and wall time, per configuration, with the graph mode the
    engine ran (records made before the mode was stored ran full decode graphs only: every such step eager)."""
    rows = (res or {}).get("chunked") or []
    out = []
    for r in rows:
        mode = r.get("cudagraph_mode") or "FULL_DECODE_ONLY (recorded as FULL at 135d8b1)"
        steps = [f"{t} tok {ms:.1f} ms" for t, ms in zip(r["step_tokens"], r["step_ms"]) if t >= 16]
        out.append(f"{'chunked' if r['chunked'] else 'not chunked':<12} budget {r['budget']:>5}, graphs {mode}: "
                   + ", ".join(steps))
    return "\n".join(out) or "(not recorded yet: `python -m minivllm_labs.record lab06` on a GPU makes them)"


def graphs_table(res: dict) -> str:
    g = res["graphs"]
    out = []
    for mode in ("eager", "graphs"):
        if mode in g:
            m = g[mode]
            out.append(f"{mode:<7} KV {m['kv_cache_tokens']:>10,} tokens ({m['kv_cache_gib']} GiB); FULL replays "
                       f"{m['full_replays']}, of which with a new block {m['replays_with_new_blocks']}; "
                       f"block-table buffer {m['block_table_buffer_shape']} moved {m['block_table_buffer_moved']}x; "
                       f"KV utilisation at peak {m['kv_utilisation_pct']:.1f}%")
    if "kv_capacity_diff_pct" in g:
        out.append(f"graphs cost {g['kv_capacity_diff_pct']:.2f}% of the KV capacity (memory reserved for "
                   f"graphs before sizing); utilisation differs by {g['kv_utilisation_diff_pct']:.2f} points; "
                   f"identical greedy tokens {g['same_tokens']}/{g['requests']}")
    return "\n".join(out)


def captures_table(res: dict) -> str:
    c = res["captures"]
    out = [f"{'block':>5} {'max tokens':>10} {'sizes (config)':>14} {'captured':>8} {'lookup us':>9}"]
    for r in c["rows"]:
        out.append(f"{r['block_size']:>5} {r['max_num_batched_tokens']:>10} {r['config_sizes']:>14} "
                   f"{r.get('captured', '-')!s:>8} {r['lookup_us']:>9.3f}")
    out.append(f"block 32 minus block 16: {c['block32_minus_block16']} graphs; max_num_batched_tokens 512 minus "
               f"8192: {c['mnbt512_minus_8192']}")
    return "\n".join(out)


# ---- questions ----------------------------------------------------------------------------------------
def _src(res: dict | None, lang: str = "en") -> str:
    gpu = ((res or {}).get("provenance") or {}).get("gpu")
    if lang == "zh":
        if not res:
            return "还没有结果：运行上面的单元（或在 GPU 上录制 lab06）。"
        return f"在 {gpu} 上测得" if gpu else "在本机测得"
    if not res:
        return "No results yet: run the cells above (or record lab06 on a GPU)."
    return f"Measured ({gpu})" if gpu else "Measured here"


def q_kv_evidence(res: dict | None, lang: str = "en") -> str:
    if not res or "kv" not in res:
        return _src(res, lang)
    if lang == "zh":
        k = res["kv"]
        return (f"{_src(res, lang)}：每 token 的 KV 字节 = 2（K、V）× {k['layers']} × {k['kv_heads']} × {k['head_dim']} × "
                f"{k['dtype_bytes']} = {k['bytes_per_token']:,} B（{k['bytes_per_token'] / 1024:.1f} KiB）")
    return f"{_src(res)}: {kv_table(res).splitlines()[1]}"


def q_graph_evidence(res: dict | None, lang: str = "en") -> str:
    if not res or "graphs" not in res:
        return _src(res, lang)
    if lang != "zh":
        return f"{_src(res)}:\n{graphs_table(res)}"
    g, out = res["graphs"], [f"{_src(res, lang)}："]
    for mode in ("eager", "graphs"):
        if m := g.get(mode):
            out.append(f"{mode}：KV {m['kv_cache_tokens']:,} 个 token（{m['kv_cache_gib']} GiB）；FULL 图回放 {m['full_replays']} 次，"
                       f"其中分配了新块的 {m['replays_with_new_blocks']} 次；block table 缓冲区 {m['block_table_buffer_shape']} "
                       f"移动 {m['block_table_buffer_moved']} 次；峰值 KV 利用率 {m['kv_utilisation_pct']:.1f}%")
    if "kv_capacity_diff_pct" in g:
        out.append(f"图占去 KV 容量的 {g['kv_capacity_diff_pct']:.2f}%（确定 KV 大小之前为图预留的显存）；利用率相差 "
                   f"{g['kv_utilisation_diff_pct']:.2f} 个百分点；贪心 token 相同 {g['same_tokens']}/{g['requests']}")
    return "\n".join(out)


def q_preempt_evidence(res: dict | None, lang: str = "en") -> str:
    if not res or "preemption" not in res:
        return _src(res, lang)
    if lang != "zh":
        return f"{_src(res)}: {preemption_table(res)}"
    p = res["preemption"]
    return (f"{_src(res, lang)}：{p['requests']} 个请求同时需要 {p['blocks_needed_at_once']} 个块，缓存只有 {p['small_blocks']} 个。\n"
            f"抢占 {p['preemptions']} 次（各请求 {p['per_request']}）；完成 {p['finished']}/{p['requests']}；贪心 token 与大缓存"
            f"运行相同：{p['same_tokens']}/{p['requests']}（大缓存抢占 {p['large_preemptions']} 次）")




# ---- claims (verdicts from lab06.json, recorded on the H200) --------------------------------------------
def _wrong_if_positive(v) -> str:
    return "wrong" if v > 0 else "unverifiable"


def _kv_rule(v) -> str:
    return "right" if 5 <= v <= 8 else ("wrong" if abs(v) < 1 else "partly")


QUESTIONS = load_questions("lab06", {"q_kv_evidence": q_kv_evidence, "q_graph_evidence": q_graph_evidence, "q_preempt_evidence": q_preempt_evidence})
Q_KV, Q_GRAPH, Q_PREEMPT = QUESTIONS["lab06.q1"], QUESTIONS["lab06.q2"], QUESTIONS["lab06.q3"]
#: The claims whose verdict is recomputed from their number (data/lab06.yaml marks them `rule: true`).
RULES = {
    "article.paged_attention_conflicts_with_graphs": _wrong_if_positive,
    "article.graphs_lower_kv_utilisation": _kv_rule,
    "article.block_size_32_fewer_captures": lambda v: "wrong" if v >= 0 else "right",
    "article.block_size_32_more_fragmentation": lambda v: "right" if v > 0 else "wrong",
    "article.mnbt_512_faster_graph_matching": lambda v: "wrong" if v == 0 else "partly",
}
CLAIMS = load_claims("lab06", RULES)
