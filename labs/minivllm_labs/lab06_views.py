"""Lab 06's figures, tables, questions and claims: what the notebook shows of lab06's measurements.

Split from lab06.py so each file has one job: lab06.py measures (and runs on the recorder's GPU without
plotly), this file draws and grades. Every function takes a results dict: the recorded H200 file or what the
notebook just measured on this machine.
"""

from __future__ import annotations

from minivllm_labs.catalog import Claim
from minivllm_labs.quiz import NumericQuestion, Option, Question

RESULTS = "assets/results/h200/lab06.json"

from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)


# ---- figures ------------------------------------------------------------------------------------------
def plot_block_table(res: dict):
    """One row per step; each logical block of the request drawn as a cell labelled with its physical id."""
    import plotly.graph_objects as go

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
                      template="plotly_white", height=420, margin=dict(l=60, r=20, t=60, b=50))
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1)
    return fig


def plot_fragmentation(res: dict):
    from minivllm_labs.plots import figure

    rows = res["fragmentation"]["rows"]
    return figure([str(r["block_size"]) for r in rows], {"slots allocated but empty (%)": [r["waste_pct"] for r in rows]},
                  kind="bar", x_title="block size (tokens)", y_title="% of allocated KV slots unused",
                  title=f"Internal fragmentation, standard workload ({res['fragmentation']['num_seqs']} requests)")


def _label(r: dict) -> str:
    return f"seqs {r['max_num_seqs']}, tokens {r['max_num_batched_tokens']}" + ("" if r["chunked"] else ", no chunking")


def plot_sweep(res: dict):
    """Throughput and TTFT / TPOT percentiles per scheduler setting; buttons show one series at a time."""
    from minivllm_labs.plots import figure

    rows = res["workload"]["rows"]
    series = {"output tok/s": [r["output_tok_s"] for r in rows]}
    for k in ("ttft_ms", "tpot_ms"):
        for p in ("p50", "p99"):
            series[f"{k.split('_')[0].upper()} {p} (ms)"] = [r[k][p] for r in rows]
    n = res["workload"]["spec"]["num_requests"]
    return figure([_label(r) for r in rows], series, kind="bar", toggle=True, y_title="value (see legend)",
                  title=f"{n} requests: throughput and latency per scheduler setting")


def plot_chunked(res: dict):
    from minivllm_labs.plots import figure

    runs = res["chunked"]
    steps = max(len(r["step_tokens"]) for r in runs)
    series = {("chunked prefill, budget " if r["chunked"] else "no chunking, budget ") + str(r["budget"]):
              r["step_tokens"] + [None] * (steps - len(r["step_tokens"])) for r in runs}
    return figure(list(range(1, steps + 1)), series, toggle=True, x_title="engine step",
                  y_title="tokens in the step",
                  title=f"A {runs[0]['long_len']}-token prompt arrives while 3 requests decode")


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
    out = [f"{'setting':<36} {'tok/s':>8} {'steps':>6} {'batch':>6} {'preempt':>7} {'TTFT p50/p99 ms':>17} "
           f"{'TPOT p50/p99 ms':>16}"]
    for r in res["workload"]["rows"]:
        out.append(f"{_label(r):<36} {r['output_tok_s']:>8.0f} {r['steps']:>6} {r['mean_batch_seqs']:>6.1f} "
                   f"{r['preemptions']:>7} {r['ttft_ms']['p50']:>8.1f}/{r['ttft_ms']['p99']:<8.1f} "
                   f"{r['tpot_ms']['p50']:>7.2f}/{r['tpot_ms']['p99']:<7.2f}")
    return "\n".join(out)


def chunked_table(res: dict) -> str:
    return "\n".join(f"{'chunked' if r['chunked'] else 'not chunked':<12} budget {r['budget']:>5}: "
                     f"largest step while others decode {r['max_tokens_with_decodes']} tokens, "
                     f"{r['max_ms_with_decodes']:.1f} ms" for r in res["chunked"])


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
def _src(res: dict | None) -> str:
    if not res:
        return "No results yet: run the cells above (or record lab06 on a GPU)."
    gpu = (res.get("provenance") or {}).get("gpu")
    return f"Measured ({gpu})" if gpu else "Measured here"


def q_kv_evidence(res: dict | None) -> str:
    if not res or "kv" not in res:
        return _src(res)
    return f"{_src(res)}: {kv_table(res).splitlines()[1]}"


def q_graph_evidence(res: dict | None) -> str:
    if not res or "graphs" not in res:
        return _src(res)
    return f"{_src(res)}:\n{graphs_table(res)}"


def q_preempt_evidence(res: dict | None) -> str:
    if not res or "preemption" not in res:
        return _src(res)
    return f"{_src(res)}: {preemption_table(res)}"


Q_KV = NumericQuestion(
    qid="lab06.q1", topic="paged-attention", source="lab", unit="bytes", answer=114688, rel_tol=0.05,
    prompt="Qwen3-0.6B has 28 layers, 16 query heads, 8 KV heads of head_dim 128, in bf16. How many bytes of "
           "KV cache does one token take?",
    prompt_zh="Qwen3-0.6B：28 层，16 个 query 头，8 个 KV 头，head_dim 128，bf16。每个 token 占多少字节 KV Cache？",
    model_answer="2 (K and V) x 28 layers x 8 KV heads x 128 x 2 bytes = 114,688 B = 112 KiB. GQA counts: with "
                 "16 KV heads it would be twice that.",
    model_answer_zh="2（K、V）× 28 层 × 8 个 KV 头 × 128 × 2 字节 = 114,688 B = 112 KiB。GQA 只按 KV 头算；"
                    "若 16 个 KV 头则翻倍。",
    evidence=q_kv_evidence)

Q_GRAPH = Question(
    qid="lab06.q2", topic="paged-attention", source="lab",
    prompt="A decode batch replays a FULL CUDA graph in the same step in which one sequence got a new KV block. "
           "What makes that work?",
    prompt_zh="某一步 decode 重放 FULL CUDA Graph，而同一步里有个序列刚分到新的 KV block。为什么没问题？",
    options=(Option("The graph is re-captured for the new block table.",
                    "No: capture happens once at startup; the counts show replays in steps with new blocks.",
                    "为新的 block table 重新捕获一次图。", "不对：捕获只在启动时做一次；实测新分 block 的那一步照样重放。"),
             Option("Block ids are data: the runner writes them into a persistent block-table buffer the graph "
                    "reads at replay.",
                    "Right: the graph captured the buffer's address, not its contents (input_batch.py).",
                    "block id 只是数据：runner 把它写进图读取的持久化 block table buffer。",
                    "对：图记录的是 buffer 的地址而不是内容（input_batch.py）。"),
             Option("The dispatcher notices the changed block table and runs that one step eagerly, then returns to replaying.",
                    "No: the dispatcher only looks at the batch size; those steps replayed.",
                    "这一步退回 eager 执行。", "不对：dispatcher 只看 batch 大小，这些步都是重放的。"),
             Option("Each graph pre-allocates a fixed set of physical blocks at capture.",
                    "That is the article's claim; no block is reserved by a graph here, the KV cache is one "
                    "tensor shared by all paths.",
                    "每个图在捕获时预分配一组固定的物理块。",
                    "这是文章的说法；这里没有任何块被图预留，KV Cache 是所有路径共用的一个张量。")),
    correct=1,
    model_answer="PagedAttention and CUDA graphs do not conflict: the block table is an input like the token ids, "
                 "copied every step into a buffer at a fixed address; a graph replays with whatever ids are there.",
    model_answer_zh="PagedAttention 与 CUDA Graph 并不冲突：block table 和 token id 一样是输入，每步拷进固定地址的 "
                    "buffer；图重放时读到的就是当前的 block id。",
    evidence=q_graph_evidence)

Q_PREEMPT = Question(
    qid="lab06.q3", topic="continuous-batching", source="lab",
    prompt="The KV cache runs out while 3 requests decode; the scheduler preempts the newest by recompute. "
           "What happens to it?",
    prompt_zh="3 个请求 decode 时 KV Cache 用完了，调度器以重算方式抢占最新的那个。它会怎样？",
    options=(Option("It fails with an out-of-memory error.",
                    "No: preemption exists so that the engine never has to fail a request for lack of blocks.",
                    "报 OOM 失败。", "不对：抢占就是为了不因为缺块而让请求失败。"),
             Option("Its generated tokens are dropped and it restarts from the prompt, giving different output.",
                    "No: its tokens stay; only their K/V is dropped.",
                    "丢掉已生成的 token，从 prompt 重新开始，输出会变。", "不对：token 保留，只丢 K/V。"),
             Option("Its KV blocks are swapped to CPU memory and copied back later.",
                    "That is vLLM V0's swap mode; this engine (like vLLM V1) recomputes.",
                    "把 KV 块换出到 CPU 内存，之后再拷回。", "那是 vLLM V0 的 swap；本引擎（与 V1 一样）用重算。"),
             Option("Its blocks are freed and its K/V recomputed on readmission; its tokens are kept.",
                    "Right: it continues where it stopped. In fp32 its greedy output equals a large-cache run; in "
                    "bf16 the recomputed K/V can differ by rounding and flip a near-tie (the H200 record above: "
                    "2 of 3 requests identical).",
                    "释放它的块，重新进入时重算 K/V，已生成的 token 保留。",
                    "对：从断点继续。fp32 下贪心输出与大缓存时一致；bf16 下重算的 K/V 可能因舍入不同而翻转近似平局"
                    "（上面的 H200 记录：3 个请求中 2 个完全一致）。")),
    correct=3,
    model_answer="Preemption by recompute frees the blocks and re-queues the request at the head; its tokens are "
                 "kept, so on readmission one prefill rebuilds its K/V and it continues where it stopped.",
    model_answer_zh="重算式抢占：释放块、放回队首；token 保留，重新进入时一次 prefill 重建 K/V，从断点继续。",
    evidence=q_preempt_evidence)

QUESTIONS = (Q_KV, Q_GRAPH, Q_PREEMPT)


# ---- claims (verdicts from lab06.json, recorded on the H200) --------------------------------------------
def _wrong_if_positive(v) -> str:
    return "wrong" if v > 0 else "unverifiable"


def _kv_rule(v) -> str:
    return "right" if 5 <= v <= 8 else ("wrong" if abs(v) < 1 else "partly")


CLAIMS = (
    Claim(cid="article.paged_attention_conflicts_with_graphs", seed="article", lab="lab06",
          claim_zh="两者在实现上存在冲突：PagedAttention的动态块分配无法在捕获阶段确定。vLLM的解决方案是在图捕获时预分配"
                   "固定数量的物理块，并在重放时复用。",
          claim_en="PagedAttention conflicts with CUDA graphs: dynamic block allocation cannot be known at capture, "
                   "so vLLM pre-allocates a fixed set of physical blocks at capture and reuses them at replay.",
          verdict="wrong",
          summary="FULL graphs replayed in steps where sequences had just received new blocks; the block-table "
                  "buffer never moved: block tables are graph inputs copied into a persistent buffer.",
          summary_zh="在序列刚分到新块的步里 FULL 图照常重放，block table buffer 地址从未改变：block table 是图的输入，"
                     "每步拷进持久化 buffer。",
          evidence_file=RESULTS, evidence_key="graphs.graphs.replays_with_new_blocks", figure=None,
          rule=_wrong_if_positive),
    Claim(cid="article.graphs_lower_kv_utilisation", seed="article", lab="lab06",
          claim_zh="这导致图重放时的KV cache利用率略低于动态模式，约降低5%至8%。",
          claim_en="So under graph replay KV-cache utilisation is 5-8% lower than in dynamic (eager) mode.",
          verdict="wrong",
          summary="Peak KV utilisation (tokens held / slots in held blocks) of the same requests, eager minus "
                  "graphs, in percentage points; the capacity cost of graphs (memory reserved before sizing) "
                  "is recorded next to it (graphs.kv_capacity_diff_pct).",
          summary_zh="同一批请求的峰值 KV 利用率（已存 token / 已占块的槽位），eager 减图模式的百分点差；图的容量代价"
                     "（定容前预留的显存）另记于 graphs.kv_capacity_diff_pct。",
          evidence_file=RESULTS, evidence_key="graphs.kv_utilisation_diff_pct", figure=None, rule=_kv_rule),
    Claim(cid="article.block_size_32_fewer_captures", seed="article", lab="lab06",
          claim_zh="增大至32可减少图捕获次数，但可能增加内部碎片。",
          claim_en="Raising --block-size to 32 reduces the number of graph captures (but may add internal "
                   "fragmentation).",
          verdict="wrong",
          summary="Graphs captured at block size 32 minus at 16: capture sizes are batch / token counts, "
                  "independent of the block size. The fragmentation half is right (fragmentation.*).",
          summary_zh="block size 32 与 16 捕获的图数之差：捕获尺寸是 batch / token 数，与 block size 无关。"
                     "碎片增加的后半句是对的（见 fragmentation）。",
          evidence_file=RESULTS, evidence_key="captures.block32_minus_block16", figure=None,
          rule=lambda v: "wrong" if v >= 0 else "right"),
    Claim(cid="article.block_size_32_more_fragmentation", seed="article", lab="lab06",
          claim_zh="增大至32可减少图捕获次数，但可能增加内部碎片。",
          claim_en="A block size of 32 may add internal fragmentation.",
          verdict="right",
          summary="Share of allocated KV slots left empty on the standard workload, block 32 minus block 16, in "
                  "percentage points: positive, but small next to the prompt + output lengths (about half a "
                  "block per request).",
          summary_zh="标准负载下已分配 KV 槽位的空置比例，block 32 减 block 16 的百分点差：为正，但相对于请求长度很小"
                     "（每个请求约半个块）。",
          evidence_file=RESULTS, evidence_key="fragmentation.block32_minus_block16_waste_pct", figure=None,
          rule=lambda v: "right" if v > 0 else "wrong"),
    Claim(cid="article.mnbt_512_faster_graph_matching", seed="article", lab="lab06",
          claim_zh="对于短序列场景（<128 tokens），可将--max-num-batched-tokens设为512以加速图匹配。",
          claim_en="For short sequences (<128 tokens), set --max-num-batched-tokens 512 to speed up graph matching.",
          verdict="wrong",
          summary="The same graphs are captured with 512 as with 8192 (difference in count), and finding one is "
                  "a bisect over the sorted sizes taking well under a microsecond (captures.rows.*.lookup_us).",
          summary_zh="512 与 8192 捕获的图完全相同（数量差），查找只是对有序尺寸做一次二分，远小于 1 微秒。",
          evidence_file=RESULTS, evidence_key="captures.mnbt512_minus_8192", figure=None,
          rule=lambda v: "wrong" if v == 0 else "partly"),
)
