"""Lab 01's graded questions (handbook self-test 1 and 4) and the handbook claims it measures, with verdicts.

Why here, as data: the notebook, the book, the claims lab and the interview bank cite the same questions and
verdicts; each claim names the key of its number in assets/results/h200/lab01.json, so a test can check that
the key exists and that the verdict was written against that number. The explanations in the options state
only what the recorded numbers show (a 0.6B model on an H200: every batch 1-256 CPU-bound eager).
"""

from __future__ import annotations

from minivllm_labs.catalog import Claim
from minivllm_labs.lab01_report import RESULTS_FILE, _source, bound_verdict, padding_cost
from minivllm_labs.quiz import Option, Question


def q1_evidence(res: dict | None) -> str:
    """The numbers behind Q1: per-op launch cost, the CPU/GPU split over the sweep, the engine's TPOT."""
    if not res:
        return "No measurements available (no recorded GPU results in this checkout, none measured here)."
    lines = [f"{_source(res)}:"]
    lo = res.get("launch_overhead") or {}
    if "graph_us_per_op" in lo:
        lines.append(f"- one tiny op: {lo['eager_us_per_op']} us eager, {lo['graph_us_per_op']} us inside a graph")
    elif "eager_us_per_op" in lo:
        lines.append(f"- one tiny op costs {lo['eager_us_per_op']} us eagerly on this {lo.get('device', 'device')}")
    b = res.get("bound") or {}
    if "graph_ms" in b:
        for i in sorted({0, len(b["batch"]) - 1}):
            lines.append(f"- batch {b['batch'][i]}: CPU enqueue {b['enqueue_ms'][i]} ms vs GPU {b['gpu_ms'][i]} ms "
                         f"-> exposed CPU {b['exposed_cpu_ms'][i]} ms; eager {b['eager_ms'][i]} ms, graph "
                         f"{b['graph_ms'][i]} ms: saved {b['saved_ms'][i]} ms")
        lines.append(f"- {bound_verdict(res)}")
    t = res.get("tpot") or {}
    if "graphs_ms" in t:
        lines.append(f"- engine TPOT at batch {t['batch'][0]}: {t['eager_ms'][0]} ms eager, "
                     f"{t['graphs_ms'][0]} ms with graphs")
    if len(lines) == 1:
        lines.append("- no graph measurements on this device (CPU); see the recorded GPU results")
    return "\n".join(lines)


def q4_evidence(res: dict | None) -> str:
    """The numbers behind Q4: what one capture costs, and what padding a small batch up costs on the GPU."""
    if not res:
        return "No measurements available (no recorded GPU results in this checkout, none measured here)."
    lines = [f"{_source(res)}:"]
    b = res.get("bound") or {}
    if "capture_s" in b:
        mib = b["capture_mib"][0]  # the device's free memory around one capture: negative is noise, not a cost
        lines.append(f"- capturing the batch-{b['batch'][0]} graph took {b['capture_s'][0] * 1e3:.3g} ms"
                     + (f" (and {mib} MiB)" if mib >= 0 else "") + f"; replaying it takes {b['graph_ms'][0]} ms")
        pad = padding_cost(res)
        if pad:
            lines.append(f"- {pad}")
    cap = (res.get("tpot") or {}).get("capture")
    if cap and cap.get("pool_mib") is not None:  # the allocator's pool, and what the driver holds besides
        lines.append(f"- the engine captured sizes {cap['sizes']} at startup in {cap['seconds']} s: a graph pool "
                     f"of {cap['pool_mib']} MiB shared by all sizes; free device memory fell by {cap['mib']} MiB, "
                     f"the rest being the graphs' executables, which the driver keeps outside the pool")
    elif cap:
        lines.append(f"- the engine captured sizes {cap['sizes']} at startup in {cap['seconds']} s, "
                     f"{cap['mib']} MiB")
    if len(lines) == 1:
        lines.append("- graphs cannot be captured on this device (CPU); see the recorded GPU results")
    return "\n".join(lines)


Q1 = Question(
    qid="lab01.q1", source="handbook self-test 1", topic="cuda-graphs",
    prompt="A decode step takes 20 ms, of which 5 ms is kernel-launch overhead. What can a CUDA graph give?",
    prompt_zh="一个 decode 步 forward 20 ms，其中 launch overhead 约 5 ms。开 CUDA Graph 能优化到多少？",
    options=(
        Option("15 ms, always: the graph deletes the 5 ms of launch overhead from the step, whatever the GPU is "
               "doing at the time.",
               "Launches are asynchronous: the CPU enqueues while the GPU computes, so launch time overlaps GPU "
               "time. Only the CPU time the GPU waits for is lost, and only that can be won back.",
               "总是 15 ms：无论 GPU 在做什么，graph 都把这 5 ms 从一步里删掉。",
               "launch 是异步的：CPU 排队的同时 GPU 在算，两者重叠。只有 GPU 空等 CPU 的那部分时间才是损失，"
               "也只有这部分能省回来。"),
        Option("About 10 ms: replaying a graph also fuses its kernels, so the 15 ms of compute shrinks too.",
               "A graph replays the very same kernels it captured; fusing kernels is torch.compile's job (算子融合), "
               "not the graph's.",
               "约 10 ms：重放 graph 还会融合 kernel，15 ms 的计算也会变短。",
               "graph 重放的是捕获时的同一串 kernel；算子融合是 torch.compile 的事，不是 CUDA Graph 的。"),
        Option("Up to 15 ms if those 5 ms are CPU time the GPU waits for; no gain if the GPU is the bottleneck.",
               "A graph removes only exposed CPU time, max(0, enqueue - GPU time). In the recording that is most "
               "of the eager step at every batch size measured, because a 0.6B model gives the GPU little work.",
               "最多到 15 ms，前提是这 5 ms 是 GPU 在等的 CPU 时间；若瓶颈在 GPU，则几乎没有收益。",
               "graph 只能去掉暴露出来的 CPU 时间 max(0, 排队时间 - GPU 时间)。实测中，0.6B 模型给 GPU 的活很少，"
               "每个 batch 的 eager 步几乎全是这部分。"),
        Option("Nothing: kernel launches are asynchronous, so a CUDA graph can never shorten a decode step at all.",
               "Asynchrony hides launch time only while the GPU has work queued. When the CPU enqueues slower than "
               "the GPU computes (every batch from 1 to 256 in the recording), the GPU idles and a graph helps.",
               "完全没有：launch 是异步的，所以 CUDA Graph 永远不能缩短 decode 步。",
               "异步只在 GPU 有活排着时才能掩盖 launch 时间。CPU 排队比 GPU 计算慢时（实测 batch 1 到 256 全是），"
               "GPU 会空等，graph 就有用。"),
    ),
    correct=2,
    model_answer="at best ~15 ms, and only if all 5 ms is exposed CPU time (CPU work the GPU waits for); near no "
                 "gain if the GPU is the bottleneck.",
    model_answer_zh="最好约 15 ms，且只有这 5 ms 全是暴露的 CPU 时间（GPU 在等 CPU）时才成立；GPU 是瓶颈时几乎没有收益。",
    evidence=q1_evidence,
)

Q4 = Question(
    qid="lab01.q4", source="handbook self-test 4", topic="cuda-graphs",
    prompt="When the batch size changes, why does the engine pad to a captured size instead of re-capturing?",
    prompt_zh="同样的模型，batch 变化时引擎为什么不重新捕获，而是 pad 到已捕获的尺寸？",
    options=(
        Option("Re-capturing a graph would cost about as much as one decode step; padding is just simpler to code.",
               "A capture runs the forward, synchronises and sets up the graph's memory: in the recording one "
               "capture costs tens of graph-replayed decode steps (see the numbers below), and it stalls every "
               "request while it runs.",
               "重新捕获和跑一步 decode 差不多快；pad 只是写起来简单。",
               "一次捕获要跑一遍 forward、同步并准备显存池：实测一次捕获抵得上几十个图重放的 decode 步（见下方数字），"
               "而且捕获期间所有请求都得等。"),
        Option("CUDA graphs cannot be captured any more once the engine has started serving requests.",
               "They can: nothing forbids a capture mid-serving. Its cost is what rules it out.",
               "引擎开始服务后就不能再捕获 CUDA Graph 了。",
               "可以捕获，没有任何限制禁止；排除它的是捕获的代价。"),
        Option("Padding makes the outputs more accurate, because every row of a captured graph then sees a "
               "full batch of neighbours.",
               "Rows of a batch do not see each other in decode; padded rows are computed and thrown away, and "
               "change nothing in the real rows.",
               "pad 让输出更准确，因为被捕获的 graph 中每一行都能看到满 batch 的邻居。",
               "decode 时一个 batch 的各行互不可见；pad 出来的行会被计算然后丢弃，不影响真实的行。"),
        Option("A graph fixes its shapes; capturing stalls serving, and padded rows cost little GPU time.",
               "A graph replays one shape only. Capturing each new size would stall every request; a decode step "
               "reads all the weights whatever the batch, so a few padded rows cost next to nothing.",
               "graph 的 shape 是固定的；捕获会卡住服务，而 pad 的几行几乎不花 GPU 时间。",
               "graph 只能重放一个 shape。每来一个新尺寸就捕获会让所有请求停下；decode 步无论 batch 多大都要读完"
               "全部权重，多几行 pad 几乎不要时间。"),
    ),
    correct=3,
    model_answer="a graph replays one shape only; capture costs time and memory and would stall serving; padding a "
                 "memory-bound decode step to the next captured size is cheap.",
    model_answer_zh="graph 只能重放一个 shape；捕获耗时又占显存，会卡住服务；把受显存带宽限制的 decode 步 pad 到下一个已捕获尺寸很便宜。",
    evidence=q4_evidence,
)


def _claim(cid: str, claim_zh: str, claim_en: str, verdict: str, summary: str, summary_zh: str, key: str,
           figure) -> Claim:
    return Claim(cid=cid, seed="handbook", claim_zh=claim_zh, claim_en=claim_en, verdict=verdict, summary=summary,
                 summary_zh=summary_zh, evidence_file=RESULTS_FILE, evidence_key=key, figure=figure, lab="lab01")


CLAIMS = (
    _claim("lab01.launch-cost", "每个 kernel launch overhead 约 5-10 μs", "a kernel launch costs about 5-10 us",
           "partly",
           "One eager ATen op costs 9.1 us (in the range), but that is Python + dispatcher + driver; inside a graph "
           "the same op costs 0.85 us, and a Triton kernel launched from Python costs 43.7 us (see a-c).",
           "一个 eager ATen 小算子 9.1 μs（在范围内），但那是 Python + dispatcher + 驱动的开销；放进 graph 里只要 "
           "0.85 μs，而从 Python launch 一个 Triton kernel 要 43.7 μs（见 a-c）。",
           "launch_overhead.eager_us_per_op", 9.116),
    _claim("lab01.kernel-count", "一个 80 层 Llama-70B 一次 forward 可能 launch 1000+ 个 kernel",
           "an 80-layer Llama-70B launches 1000+ kernels per forward", "partly",
           "This engine's fused kernels run 8 kernels per layer: an 80-layer model would launch about 644 per "
           "step. The order of magnitude is right; the count depends on fusion.",
           "本引擎的融合 kernel 每层 8 个：80 层模型每步约 644 个。数量级对，具体多少取决于算子融合。",
           "census.kernels_per_layer", 8.0),
    _claim("lab01.overhead-share", "decode forward 20 ms，launch overhead 占 25-50%",
           "in a 20 ms decode step, launch overhead is 25-50% (and a graph removes it)", "wrong",
           "Launches overlap GPU work, so only exposed CPU time max(0, enqueue - GPU) is lost. For a 0.6B model it "
           "is nearly the whole eager step at every batch 1-256: 27.84 ms at batch 1 against 0.91 ms of GPU work.",
           "launch 与 GPU 计算重叠，只有暴露的 CPU 时间 max(0, 排队 - GPU) 才是损失。对 0.6B 模型，batch 1-256 "
           "的 eager 步几乎全是这部分：batch 1 暴露 27.84 ms，而 GPU 只算 0.91 ms。",
           "bound.exposed_cpu_ms.0", 27.84),
    _claim("lab01.graph-replay", "CUDA Graph 把 kernel 录制成静态图，一次性提交，省去 launch overhead",
           "a CUDA graph submits the recorded kernels at once and removes the launch overhead", "right",
           "The engine's TPOT at batch 1 falls from 29.85 ms eager to 0.93 ms with FULL decode graphs, about the "
           "GPU time of the step.",
           "batch 1 时引擎 TPOT 从 eager 的 29.85 ms 降到 FULL decode graph 的 0.93 ms，约等于这一步的 GPU 时间。",
           "tpot.graphs_ms.0", 0.9288),
)
