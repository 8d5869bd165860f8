"""Lab 02's graded questions, the seeds' claims with their verdicts, and LAB_INFO (the catalog entry).

The questions' feedback cites the numbers of the results it is given (recorded on the H200 or measured in
the notebook), through the view helpers of lab02_views.py.
"""

from __future__ import annotations

from minivllm_labs.catalog import Claim, LabInfo
from minivllm_labs.lab02_views import RESULTS, _get, _gpu, _ms, _paths, _src, limits_text, padding_verdict
from minivllm_labs.quiz import Option, Question


# ---- questions -------------------------------------------------------------------------------------------
def _no_gpu(res: dict | None) -> str | None:
    if not res:
        return "No measurements available (no recorded GPU results in this checkout)."
    return None


def q1_evidence(res: dict | None) -> str:
    """Interview 2: the cost of one graph of the largest size, and what several sizes cost at startup."""
    if (msg := _no_gpu(res)) is not None:
        return msg
    p = _get(res, "padding") or {}
    if not _gpu(p):
        return f"{_src(res)}: no graphs on this device; see the recorded H200 results."
    lines = [f"{_src(res)}:"]
    for b in ("1", "8"):
        lines.append(f"- batch {b}: TPOT {_get(p, 'tpot_several', b, 'median')} ms with several sizes, "
                     f"{_get(p, 'tpot_largest_only', b, 'median')} ms padded to the size-256 graph")
    r = p.get("replay_ms", {})
    if "1" in r and "256" in r:
        lines.append(f"- one replay: size 1 {r['1']['median']} ms, size 256 {r['256']['median']} ms")
    cap = p.get("capture") or {}
    lines.append(f"- capturing all {len(cap.get('sizes') or [])} sizes cost {cap.get('seconds')} s and "
                 f"{cap.get('pool_mib')} MiB of pool at startup")
    return "\n".join(lines)


def q2_evidence(res: dict | None) -> str:
    """Interview 3: which path the prefill step took in each mode, and its TTFT."""
    if (msg := _no_gpu(res)) is not None:
        return msg
    m = _get(res, "modes") or {}
    lines = [f"{_src(res)}:"]
    for mode in m.get("modes", []):
        s, ln = m[mode]["prefill_short"], m[mode]["prefill_long"]
        lines.append(f"- {mode}: {s['prompt_len']}-token prefill ran {_paths(s)} (TTFT {s['ttft_ms']['median']} ms); "
                     f"{ln['prompt_len']} tokens ran {_paths(ln)} (TTFT {ln['ttft_ms']['median']} ms)")
    if len(lines) == 1:
        lines.append("- no mode measurements")
    return "\n".join(lines)


def q3_evidence(res: dict | None) -> str:
    if (msg := _no_gpu(res)) is not None:
        return msg
    r = _get(res, "rng") or {}
    if not _gpu(r):
        return f"{_src(res)}: no graphs on this device; see the recorded H200 results."
    return f"{_src(res)}: {r['replays']} replays of one captured sampling step gave {r['distinct']} distinct " \
           f"samples: {r['samples']}"


def q4_evidence(res: dict | None) -> str:
    if (msg := _no_gpu(res)) is not None:
        return msg
    p = _get(res, "padding") or {}
    r = p.get("replay_ms", {})
    if not ("5" in r and "8" in r):
        return f"{_src(res)}: no graphs on this device; see the recorded H200 results."
    return (f"{_src(res)}: one replay of the size-5 graph {_ms(r['5'])}, of the size-8 graph {_ms(r['8'])}: "
            f"{padding_verdict(res)}; engine TPOT at batch 5: {_get(p, 'tpot_several', '5', 'median')} ms on its "
            f"own graph")


def q5_evidence(res: dict | None) -> str:
    if (msg := _no_gpu(res)) is not None:
        return msg
    return f"{_src(res)}:\n{limits_text(res)}"


Q1 = Question(
    qid="lab02.q1", source="handbook interview 2", topic="cuda-graphs",
    prompt="Why does the engine capture graphs for several batch sizes instead of one for the largest batch?",
    prompt_zh="为什么引擎要为多个 batch size 各捕获一个 CUDA Graph，而不是只捕获最大的那一个？",
    options=(
        Option("Graphs can only be captured for powers of two, so several are needed to cover every batch.",
               "Any size can be captured: the engine's list has 24, 40, 48 ... (every 8 up to 256).",
               "CUDA Graph 只能捕获 2 的幂，所以需要多个。", "任何大小都能捕获：引擎的列表里就有 24、40、48……"),
        Option("Continuous batching re-captures the graph whenever the batch changes; more sizes mean fewer "
               "re-captures during serving.",
               "Nothing is captured while serving: every graph is captured at startup, then only replayed.",
               "连续批处理每次 batch 变化都要重新捕获，多捕获几个可以少重捕获。",
               "服务期间从不捕获：所有图都在启动时捕获，之后只重放。"),
        Option("One size-256 graph would serve every batch, but every step would compute 256 rows; "
               "more sizes keep the padding small.",
               "Right: a padded row is computed like a real one, so padding 1 -> 256 adds to every step, while "
               "the extra sizes cost seconds and some MiB once, at startup (see the numbers).",
               "只捕获 256 也能服务所有 batch，但每步都要算 256 行；多档 size 让 padding 变小。",
               "对：padding 出来的行和真实行一样要算，1 -> 256 的代价每一步都要付；多捕获几档只在启动时付一次几秒和几十 MiB（见数字）。"),
        Option("Each sequence needs its own graph, so the engine captures one graph per sequence.",
               "Graphs are keyed by batch size (FULL) or token count (PIECEWISE), not by sequence.",
               "每个序列都需要自己的图，所以每个序列捕获一个。",
               "图按 batch size（FULL）或 token 数（PIECEWISE）区分，不按序列。"),
    ),
    correct=2,
    model_answer="one graph of the largest size works but every step computes its padded rows; several sizes "
                 "bound the padding at a small startup cost",
    model_answer_zh="只捕获最大 size 也能用，但每步都要算 padding 出来的行；多档 size 用很小的启动代价限制了 padding。",
    evidence=q1_evidence,
)

Q2 = Question(
    qid="lab02.q2", source="handbook interview 3", topic="cuda-graphs",
    prompt="Does prefill use CUDA graphs in a vLLM-V1-style engine (cudagraph_mode FULL_AND_PIECEWISE)?",
    prompt_zh="在 vLLM V1 风格的引擎里（cudagraph_mode=FULL_AND_PIECEWISE），预填充用 CUDA Graph 吗？",
    options=(
        Option("Yes, up to the largest capture size in tokens: PIECEWISE graphs replay, attention outside; "
               "longer ones run eagerly.",
               "Right: piecewise graphs are keyed by token count, so a 128-token prefill replays them; the "
               "1024-token one runs eagerly.",
               "是：当这一步的 token 数不超过最大捕获尺寸时，重放 PIECEWISE 分段图，attention 在图外执行；更长的预填充走 eager。",
               "对：分段图按 token 数区分，128 token 的预填充会重放分段图，1024 token 的则走 eager。"),
        Option("No: prefill lengths vary, so only decode steps (one token per sequence) are graphed.",
               "That is the handbook's answer and vLLM V0's behaviour; V1 graphs mixed and prefill batches "
               "piecewise.",
               "不用：预填充长度不固定，只有 decode 步被捕获。",
               "这是手册的答案，也是 vLLM V0 的行为；V1 会用分段图捕获混合批和预填充。"),
        Option("Yes, always: chunked prefill cuts every prompt into fixed-size chunks, and each chunk then "
               "replays the FULL graph of its size.",
               "Chunks are not fixed-size (a chunk is whatever the token budget leaves), and FULL graphs are "
               "decode-only.",
               "总是用：chunked prefill 把 prompt 切成固定大小的块，每块重放一个 FULL 图。",
               "chunk 不是固定大小（是 token 预算剩下多少就多大），而且 FULL 图只用于 decode。"),
        Option("Only in FULL mode, which captures the whole forward, attention included, for any batch.",
               "FULL graphs are captured for decode batch sizes only; in FULL mode a prefill runs eagerly.",
               "只有 FULL 模式会，它为任何批捕获包含 attention 的整个前向。",
               "FULL 图只为 decode 的 batch size 捕获；FULL 模式下预填充走 eager。"),
    ),
    correct=0,
    model_answer="yes, piecewise (attention outside) when the step has at most max capture size tokens; longer "
                 "prefills run eagerly",
    model_answer_zh="会：token 数不超过最大捕获尺寸时走分段图（attention 在图外）；更长的预填充走 eager。",
    evidence=q2_evidence,
)

Q3 = Question(
    qid="lab02.q3", source="lab", topic="cuda-graphs",
    prompt="A sampling step (random numbers included) is captured once and replayed three times. What comes out?",
    prompt_zh="一个采样步骤（包含随机数）捕获一次、重放三次，结果是什么？",
    options=(
        Option("The same sample three times: replay reuses the RNG seed of the capture.",
               "That is the article's claim; PyTorch registers the generator with the graph and advances "
               "its offset at every replay.",
               "三次相同：重放复用捕获时的随机种子。", "这是文章的说法；PyTorch 把生成器登记到图上，每次重放都推进 offset。"),
        Option("An error: random ops cannot be captured.",
               "They can: torch.cuda.graph handles the default generator (graph-safe RNG).",
               "报错：随机算子不能被捕获。", "可以捕获：torch.cuda.graph 会处理默认生成器（graph-safe RNG）。"),
        Option("The same sample, unless torch.manual_seed is called between replays.",
               "No re-seeding is needed; each replay draws new numbers by itself.",
               "相同，除非在两次重放之间调用 torch.manual_seed。", "不需要重新设种子，每次重放自己就会取新的随机数。"),
        Option("Three different samples: each replay draws new random numbers.",
               "Right: the generator's offset advances at every replay.",
               "三个不同的样本：每次重放都会取新的随机数。", "对：每次重放生成器的 offset 都会推进。"),
    ),
    correct=3,
    model_answer="three different samples: PyTorch advances the generator offset at each replay",
    model_answer_zh="三个不同的样本：每次重放 PyTorch 都推进生成器的 offset。",
    evidence=q3_evidence,
)

Q4 = Question(
    qid="lab02.q4", source="handbook self-test 4", topic="cuda-graphs",
    prompt="A batch of 5 decode sequences runs on the size-8 graph. What do the 3 padded rows cost?",
    prompt_zh="5 条 decode 序列的批跑在 size 8 的图上，多出来的 3 行代价是多少？",
    options=(
        Option("Nothing: padded rows are skipped by every kernel.",
               "They are computed like real rows (only attention and the KV write skip them); their outputs "
               "are thrown away.",
               "没有代价：每个 kernel 都跳过 padding 行。", "padding 行和真实行一样被计算（只有 attention 和 KV 写入跳过），结果被丢弃。"),
        Option("Little: decode reads the same weights whatever the rows, so graph 8 takes about as long as "
               "graph 5.",
               "Right: decode is bound by reading the weights, not by the rows (see the replay times).",
               "很小：decode 步无论几行都读同样的权重，size 8 的图和 size 5 的差不多快；3 行被计算后丢弃。",
               "对：decode 受读权重的带宽限制，而不是行数（看重放时间）。"),
        Option("About 60% more GPU time than the batch of 5 on its own graph, since 8 rows are 1.6x the "
               "work of 5 rows.",
               "FLOPs grow 1.6x but a decode step is memory-bound: time barely moves from 5 to 8 rows.",
               "大约多 60% 的 GPU 时间，因为 8 行是 1.6 倍的计算量。", "FLOPs 多 1.6 倍，但 decode 受显存带宽限制：5 到 8 行时间几乎不变。"),
        Option("A re-capture of the size-8 graph with the 5 real rows.",
               "Graphs are never re-captured while serving; the real rows are copied into its input buffers.",
               "用 5 个真实行重新捕获 size 8 的图。", "服务时从不重新捕获；真实的行被拷进图的输入缓冲区。"),
    ),
    correct=1,
    model_answer="little: decode is memory-bound, so the size-8 replay costs about what size 5 does; padded rows "
                 "are computed and discarded",
    model_answer_zh="很小：decode 受带宽限制，size 8 的重放和 size 5 差不多；padding 行被计算后丢弃。",
    evidence=q4_evidence,
)

Q5 = Question(
    qid="lab02.q5", source="lab", topic="cuda-graphs",
    prompt="Which of these raises an error during a CUDA graph capture?",
    prompt_zh="下面哪个会在 CUDA Graph 捕获时报错？",
    options=(
        Option("Reading a CUDA tensor's value on the host with .item().",
               "Right: the host must wait for the GPU, which a capturing stream forbids.",
               "用 .item() 在 CPU 上读 CUDA 张量的值。", "对：CPU 要等 GPU 出结果，正在捕获的 stream 不允许这样做。"),
        Option("Allocating a new tensor with torch.empty inside the capture.",
               "Works: the allocator serves it from the graph's private pool (the handbook's limit 3 is wrong).",
               "在捕获里用 torch.empty 分配新张量。", "可以：分配器从图的私有显存池里给它（手册的第 3 条限制是错的）。"),
        Option("A Python if on a CPU-side flag.",
               "No error: the branch taken at capture is baked in, and later replays silently run it.",
               "根据 CPU 上的标志写一个 Python if。", "不报错：捕获时走的分支被固化，之后的重放悄悄地一直走它。"),
        Option("Rebinding the input variable to a new tensor after the capture.",
               "No error either: replay keeps reading the old tensor, so the output is for the old data.",
               "捕获后把输入变量重新绑定到一个新张量。", "也不报错：重放继续读旧张量，输出对应旧数据。"),
    ),
    correct=0,
    model_answer="only the host sync (.item()) fails; allocation works from the private pool; branch and "
                 "rebinding give silently wrong results",
    model_answer_zh="只有主机同步（.item()）会报错；分配可以（私有显存池）；分支和重新绑定会悄悄地给出错误结果。",
    evidence=q5_evidence,
)


# ---- claims (verdicts) and the lab's index entry ------------------------------------------------------
CVG = "assets/results/h200/compile_vs_graphs.json"
CLAIMS = (
    Claim("lab02.fixed-address", "handbook", "输入 tensor 地址、shape 必须固定",
          "input tensor addresses and shapes must be fixed", "right",
          "rebinding the input instead of copy_: no error, the replay computes on the old tensor",
          "重新绑定输入而不是 copy_：不报错，重放算的是旧张量", RESULTS, "limits.fixed_address.output_is_for_old_input",
          lab="lab02"),
    Claim("lab02.branch", "handbook", "kernel 序列必须确定（不能有依赖运行时数据的 if）",
          "the kernel sequence must be fixed (no if on run-time data)", "right",
          "a host-side branch is baked in at capture: replay gives a wrong result and raises nothing",
          "主机侧分支在捕获时被固化：重放给出错误结果且不报错", RESULTS, "limits.branch.replay_matches_eager", lab="lab02"),
    Claim("lab02.alloc", "handbook", "显存分配不能在 graph 内", "no memory allocation inside a graph", "wrong",
          "allocation inside a capture works (the graph's private pool); a host sync (.item()) is what fails",
          "捕获内分配显存可以（图的私有池）；真正失败的是主机同步（.item()）", RESULTS, "limits.alloc.replay_correct",
          lab="lab02"),
    Claim("lab02.sizes", "handbook", "启动时 capture 多个 batch_size（如 1, 2, 4, 8, ..., max）",
          "capture batch sizes 1, 2, 4, 8, ..., max at startup", "partly",
          "vLLM's list is 1, 2, 4, then every 8 to 256 (the sixth size is 24, not 32), then every 16, "
          "up to 2 x max_num_seqs", "vLLM 的列表是 1、2、4，然后每 8 一档到 256（第 6 档是 24 不是 32），再每 16 一档，"
          "上限 2 x max_num_seqs", CVG, "modes.FULL.capture_sizes.5", figure=24, lab="lab02"),
    Claim("lab02.padding", "handbook", "batch=5 用 size=8 的 graph，多出来的 3 行不算",
          "batch 5 runs the size-8 graph; the 3 extra rows don't count", "right",
          "batch 5 replays graph 8, and its 3 padded rows are computed and discarded, at no cost in time here: the "
          "size-8 graph replays in 1.150 ms (1.150-1.152 over 7 repeats), faster than an exact size-5 graph "
          "(1.226 ms)",
          "batch 5 重放 size 8 的图，多出的 3 行会被计算再丢弃，但这里不花时间：size 8 的图重放 1.150 ms（7 次重复 "
          "1.150-1.152），比正好 size 5 的图（1.226 ms）还快", RESULTS, "padding.replay_ms.8.median", figure=1.15,
          lab="lab02"),
    Claim("lab02.prefill", "handbook", "prefill 的输入长度 variable 且大，不适合 CG；vLLM 主要在 decode 用 CG",
          "prefill is not graphed; only decode uses CUDA graphs", "wrong",
          "FULL_AND_PIECEWISE (level 3) graphed every step of a batch-1 run, prefill included (FULL alone: "
          "255 of 256 steps, the prefill eager)", "FULL_AND_PIECEWISE（level 3）在 batch 1 时每一步都走图，包括预填充"
          "（只用 FULL：256 步里 255 步，预填充走 eager）", CVG, "rows.6.graph_step_frac", figure=1.0, lab="lab02"),
    Claim("lab02.pool", "article", "7B 模型每个 graph 约 150 MB，10 个 graph 就是 1.5 GB",
          "~150 MB per graph for a 7B model; 10 graphs = 1.5 GB", "wrong",
          "one shared pool captured largest first: 35 FULL graphs of Qwen3-0.6B took a 234 MiB pool in all",
          "一个共享显存池、从大到小捕获：Qwen3-0.6B 的 35 个 FULL 图总共 234 MiB", CVG, "modes.FULL.graph_pool_mib",
          figure=234.0, lab="lab02"),
    Claim("lab02.max-num-seqs", "article", "每个序列一个 graph；--max-num-seqs 就是 graph 的数量",
          "one graph per sequence; --max-num-seqs is the number of graphs", "wrong",
          "graphs are keyed by batch size; max_num_seqs=256 gives 51 sizes up to 512 (2 x max_num_seqs)",
          "图按 batch size 区分；max_num_seqs=256 得到 51 档，最大 512（2 x max_num_seqs）", RESULTS,
          "capture_sizes.rows.4.num_graphs", lab="lab02"),
    Claim("lab02.rng", "article", "重放复用捕获时的随机种子，结果永远不变",
          "replay reuses the capture's RNG seed, so results never change", "wrong",
          "a captured sampling step replayed 3 times gave 3 different samples",
          "捕获的采样步骤重放 3 次得到 3 个不同样本", RESULTS, "rng.distinct", lab="lab02"),
)

LAB_INFO = LabInfo(
    lab="lab02", notebook="labs/02_inside_a_cuda_graph.ipynb", title="Inside a CUDA graph",
    title_zh="CUDA Graph 内部", sections=("§1.2", "§1.3", "§1.4", "§5"),
    questions=(Q1, Q2, Q3, Q4, Q5), claims=CLAIMS,
    code=("minivllm/worker/cuda_graph.py", "minivllm/config.py", "minivllm/compilation/backend.py",
          "minivllm/worker/input_batch.py"),
)


def _figure_of(c: Claim, res: dict | None):
    """The number behind a claim: recorded in this lab's results (when present), else the claim's figure."""
    if c.evidence_file == RESULTS and res:
        from minivllm_labs.catalog import resolve_key

        try:
            return resolve_key(res, c.evidence_key)
        except (KeyError, IndexError):
            return None
    return c.figure


def verdicts_table(res: dict | None) -> str:
    """The summary: one line per claim, its verdict, the number that decides it and where it lives."""
    lines = [f"{'claim':<58} {'verdict':<8} {'number':>8}  file:key"]
    for c in CLAIMS:
        fig = _figure_of(c, res)
        shown = "(record)" if fig is None else str(fig)
        lines.append(f"{c.claim_en[:58]:<58} {c.verdict:<8} {shown:>8}  "
                     f"{c.evidence_file.rsplit('/', 1)[-1]}:{c.evidence_key}")
    return "\n".join(lines)
