"""Lab 03's graded questions, the handbook's claims with their verdicts, and LAB_INFO (the catalog entry).

Feedback cites this lab's own record when it is given one, and the engine's earlier H200 benchmark files
(assets/results/h200/*.json, each with its provenance) for the numbers they already hold.
"""

from __future__ import annotations

import json
from functools import cache

from minivllm_labs.catalog import Claim, LabInfo, resolve_key
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab03_views import _get
from minivllm_labs.quiz import Option, Question

RESULTS = "assets/results/h200/lab03.json"
H200 = "assets/results/h200/"


@cache
def _bench(name: str) -> dict:
    try:
        return json.loads((REPO_ROOT / H200 / f"{name}.json").read_text())
    except (OSError, ValueError):
        return {}


def bench_value(name: str, key: str):
    """A number of an earlier H200 benchmark file, None if the file or key is missing."""
    try:
        return resolve_key(_bench(name), key)
    except (KeyError, IndexError, TypeError):
        return None


def _tpot(name: str, row: int) -> float | None:
    v = bench_value(name, f"rows.{row}.tpot_s")
    return None if v is None else round(v * 1e3, 3)


def _here(res: dict | None) -> str:
    gpu = _get(res, "provenance", "gpu")
    return f"this lab's record ({gpu})" if gpu else "this run"


def q1_evidence(res: dict | None) -> str:
    lines = ["Recorded on the H200 (level 1, no graphs; attention_registered/unregistered.json):",
             f"- registered: {bench_value('attention_registered', 'modes.NONE@L1.compile_report.graph_breaks')} "
             f"breaks, TPOT batch 1 {_tpot('attention_registered', 0)} ms",
             f"- unregistered: {bench_value('attention_unregistered', 'modes.NONE@L1.compile_report.graph_breaks')}"
             f" breaks, {bench_value('attention_unregistered', 'modes.NONE@L1.compile_report.graphs_traced_at_startup')}"
             f" graphs, {bench_value('attention_unregistered', 'modes.NONE@L1.compile_report.recompiles_at_runtime')}"
             f" run-time recompiles, TPOT batch 1 {_tpot('attention_unregistered', 0)} ms"]
    reg = _get(res, "registration")
    if reg and "unregistered" in reg:
        u, fg = reg["unregistered"], reg.get("fullgraph_engine") or {}
        lines.append(f"In {_here(res)}: one layer unregistered: {u['layer']['graphs']} graphs, "
                     f"{u['layer']['graph_breaks']} breaks; level 2 (fullgraph=True): "
                     + ("started" if fg.get("ok") else f"startup fails with {fg.get('error_type')}"))
    lines.append("Registration is also what lets level 3 split the graph at attention (one node to cut at).")
    return "\n".join(lines)


def q2_evidence(res: dict | None) -> str:
    lines = ["Recorded on the H200, TPOT batch 1 / 64:",
             f"- PyTorch's own ops: graphs alone {_tpot('compile_custom_ops_none', 0)} / "
             f"{_tpot('compile_custom_ops_none', 2)} ms, level 3 + graphs {_tpot('compile_custom_ops_none', 3)} / "
             f"{_tpot('compile_custom_ops_none', 5)} ms (compile_custom_ops_none.json)",
             f"- hand-fused kernels: graphs alone {_tpot('compile_vs_graphs', 0)} / {_tpot('compile_vs_graphs', 2)} ms,"
             f" level 3 + graphs {_tpot('compile_vs_graphs', 6)} / {_tpot('compile_vs_graphs', 8)} ms "
             f"(compile_vs_graphs.json)",
             f"- compile alone (level 2, no graphs): {_tpot('compile', 6)} ms; eager {_tpot('latency', 0)} ms"]
    cfg, grid = _get(res, "configs"), _get(res, "grid")
    if cfg and grid:
        for build, names in grid.items():
            vals = [_get(cfg, names[c], "tpot_ms", "1", "median") for c in ("eager", "graphs", "compile", "both")]
            if any(v is not None for v in vals):
                lines.append(f"In {_here(res)}, {build}: eager / graphs / compile / both = "
                             f"{' / '.join(str(v) for v in vals)} ms")
    return "\n".join(lines)


def q3_evidence(res: dict | None) -> str:
    lines = [f"Recorded on the H200: level 3 split Qwen3-0.6B (28 layers) into "
             f"{bench_value('compile_vs_graphs', 'modes.FULL_AND_PIECEWISE@L3.compile_report.pieces')} pieces "
             f"(compile_vs_graphs.json)"]
    sc = _get(res, "scopes")
    if sc:
        lines += [f"In {_here(res)}: scope {k}: {v['graphs_traced_at_startup']} trace(s) at startup, "
                  f"{v['recompiles_at_runtime']} more at run time, pieces {v['pieces']}" for k, v in sc.items()]
    return "\n".join(lines)


def q4_evidence(res: dict | None) -> str:
    lines = [f"Recorded on the H200, batch 1: eager {_tpot('latency', 0)} ms (latency.json), compile alone "
             f"(level 2) {_tpot('compile', 6)} ms, graphs alone {_tpot('compile', 0)} ms (compile.json)"]
    cfg = _get(res, "configs")
    if cfg:
        vals = {k: _get(cfg, k, "tpot_ms", "1", "median") for k in ("eager", "L2", "L3", "graphs")}
        lines.append(f"In {_here(res)}: " + ", ".join(f"{k} {v} ms" for k, v in vals.items() if v is not None))
    return "\n".join(lines)


Q1 = Question(
    qid="lab03.q1", source="handbook self-test 2", topic="torch-compile",
    prompt="You add an attention variant and do not register it with torch.library. What does torch.compile do "
           "with it, and is it faster or slower?",
    prompt_zh="你加了一个 attention 变体，但没有用 torch.library 注册。torch.compile 会怎么处理？更快还是更慢？",
    options=(
        Option("Compilation fails at startup whatever the settings.",
               "Only with fullgraph=True (level 2 and 3 trace that way); with stock torch.compile it breaks "
               "the graph and runs.", "无论怎么配置，启动时编译都会失败。",
               "只有 fullgraph=True 时才失败（level 2、3 这样 trace）；普通 torch.compile 会断图然后照常运行。"),
        Option("Dynamo inlines it and Inductor fuses it with its neighbours, so it gets faster.",
               "Hidden behind an extension call it cannot be inlined; left visible, Dynamo traced into the "
               "Triton launchers and the KV-cache writes, which gave wrong tokens.",
               "Dynamo 把它内联，Inductor 把它和相邻算子融合，所以更快。",
               "藏在扩展调用后面时无法内联；如果让 Dynamo 看进去，它会 trace 进 Triton launcher 和 KV cache 的写入，结果出错。"),
        Option("Nothing changes: Dynamo treats any Python function as one opaque op.",
               "Only registered ops (with a fake implementation for shapes) are opaque nodes; anything else is "
               "traced or breaks the graph.", "什么都不变：Dynamo 把任何 Python 函数都当成一个不透明算子。",
               "只有注册过（带 fake 实现推形状）的算子才是不透明节点；其他的要么被 trace，要么断图。"),
        Option("Dynamo breaks the graph at every call: many small graphs, recompiles, slower.",
               "Right: one break per layer and more; registering it also gives level 3 the node to split at.",
               "Dynamo 在每次调用处断图：很多小图，还会重新编译，所以更慢。",
               "对：每层至少一次断图；注册之后 level 3 才有可以切分的节点。"),
    ),
    correct=3,
    model_answer="a graph break at every call (76 breaks, 1.8x slower here); with fullgraph=True startup fails; "
                 "register it, which also makes it the split point for piecewise graphs",
    model_answer_zh="每次调用都断图（这里 76 次断图，慢 1.8 倍）；fullgraph=True 时启动失败；应注册它，这样它也成为分段图的切分点。",
    evidence=q1_evidence,
)

Q2 = Question(
    qid="lab03.q2", source="handbook interview 1", topic="torch-compile",
    prompt="Why can CUDA graphs not replace torch.compile, and do the two stack?",
    prompt_zh="为什么 CUDA Graph 不能替代 torch.compile？两者能叠加吗？",
    options=(
        Option("Graphs fuse the recorded kernels too, so once CUDA graphs are on, torch.compile has nothing left "
               "to add.",
               "A graph replays exactly the kernels it recorded; only a compiler changes which kernels exist.",
               "CUDA Graph 也会融合录下来的 kernel，所以开了图之后 compile 没用。",
               "图只是原样重放录下的 kernel；只有编译器才会改变有哪些 kernel。"),
        Option("Graphs remove launches, compile fuses ops: they stack when ops remain to fuse, not on "
               "hand-fused kernels.",
               "Right: with PyTorch's ops level 3 + graphs beat graphs alone 2.5-2.8x; with the hand-fused "
               "kernels kept it was 0.90x at batch 1 and within noise at batch 64.",
               "图消除 launch 开销，compile 做算子融合：还有可融合的东西时两者叠加有效，kernel 已经手工融合时则不然。",
               "对：用 PyTorch 自带算子时 level 3 + 图比只用图快 2.5-2.8 倍；保留手工融合的 kernel 时 batch 1 为 0.90 倍，batch 64 在噪声范围内。"),
        Option("They cannot be combined: a compiled model cannot be captured in a graph.",
               "The engine's level 3 does exactly that: its pieces are captured as PIECEWISE graphs.",
               "不能一起用：编译过的模型无法被捕获成图。", "引擎的 level 3 正是这样：它的分段被捕获成 PIECEWISE 图。"),
        Option("Compile removes the launch overhead as well, so once a model is compiled, CUDA graphs on top of "
               "it are redundant.",
               "Compile alone still launches every kernel from Python each step: 12.1 ms at level 2 vs 1.3 ms "
               "with graphs added (batch 1, this lab's record).",
               "compile 也消除了 launch 开销，所以编译之后图就多余了。",
               "只编译时每一步仍要从 Python 发射每个 kernel：level 2 为 12.1 ms，加上图是 1.3 ms（batch 1，本 lab 的记录）。"),
    ),
    correct=1,
    model_answer="graphs remove launches, compile changes the kernels; they stack only when compile still has "
                 "ops to fuse",
    model_answer_zh="图消除 launch，compile 改变 kernel 本身；只有 compile 还有算子可融合时两者叠加才有收益。",
    evidence=q2_evidence,
)

Q3 = Question(
    qid="lab03.q3", source="handbook §2.3", topic="torch-compile",
    prompt="The handbook says vLLM compiles per layer by default. What does vLLM (and this engine's level 3) do?",
    prompt_zh="手册说 vLLM 默认按层编译。vLLM（以及本引擎的 level 3）实际怎么做？",
    options=(
        Option("Traces the whole forward once, splits it at every attention op, compiles and graphs the "
               "pieces.",
               "Right: one trace, split at the registered attention node: 29 pieces for 28 layers.",
               "整个前向只 trace 一次，在每个 attention 处切开；各分段分别编译（相同的只编一次）并捕获成图。",
               "对：一次 trace，在注册过的 attention 节点处切开：28 层得到 29 段。"),
        Option("Compiles each decoder layer separately, one torch.compile per layer, as the handbook's "
               "chapter says.",
               "Per-layer compile traces each layer on its own (one trace per layer instance), which is not "
               "what vLLM does.", "像手册说的那样，每个 decoder 层单独编译。",
               "按层编译会对每层各 trace 一次，这不是 vLLM 的做法。"),
        Option("Compiles only selected small ops such as norms and activations.",
               "That is the most conservative scope; vLLM compiles the whole forward.",
               "只编译 RMSNorm、激活函数这类选定的小算子。", "这是最保守的范围；vLLM 编译整个前向。"),
        Option("Nothing by default: torch.compile is opt-in in vLLM.",
               "vLLM V1 compiles by default (its piecewise mode); this engine keeps level 0 as the default.",
               "默认不编译：torch.compile 需要手动打开。", "vLLM V1 默认就编译（piecewise 模式）；本引擎默认 level 0。"),
    ),
    correct=0,
    model_answer="one trace of the whole forward, split at attention into pieces compiled and captured separately",
    model_answer_zh="整个前向 trace 一次，在 attention 处切成分段，分别编译和捕获。",
    evidence=q3_evidence,
)

Q4 = Question(
    qid="lab03.q4", source="lab", topic="torch-compile",
    prompt="At batch 1, compile alone brings decode TPOT below eager, yet stays many times slower than graphs "
           "alone. Why?",
    prompt_zh="batch 1 时只开 compile 的 decode TPOT 比 eager 低，却仍比只开图慢很多倍。为什么？",
    options=(
        Option("Inductor's generated kernels are slower than PyTorch's own eager kernels, which cancels most "
               "of what fusion gains.",
               "They are at least as fast; the kernels are not what bounds this step.",
               "Inductor 生成的 kernel 比 PyTorch eager 的 kernel 慢。", "它们至少一样快；限制这一步的不是 kernel。"),
        Option("torch.compile only speeds up prefill.", "It compiles the decode forward too (same graph).",
               "torch.compile 只加速预填充。", "decode 的前向也被编译了（同一个图）。"),
        Option("CPU launches bound the step: compile issues fewer kernels than PyTorch's ops, one by one; a "
               "graph submits all.",
               "Right: fusion shortens the list of launches, a graph removes the per-launch CPU cost.",
               "这一步受 CPU 发射 kernel 的限制：compile 让 kernel 变少，但每步仍从 Python 发射；图一次全部提交。",
               "对：融合缩短了要发射的列表，图则去掉了每次发射的 CPU 开销。"),
        Option("The engine silently falls back to the eager forward at batch 1, so the compiled code never "
               "runs in decode.",
               "The compile report shows the compiled forward running, with no recompiles.",
               "引擎在 batch 1 时悄悄退回 eager。", "compile report 显示跑的是编译后的前向，没有重新编译。"),
    ),
    correct=2,
    model_answer="batch-1 decode is bound by launching kernels from the CPU: compile shortens the list, graphs "
                 "remove the launches",
    model_answer_zh="batch 1 的 decode 受 CPU 发射 kernel 的限制：compile 缩短列表，图消除发射。",
    evidence=q4_evidence,
)

CLAIMS = (
    Claim("lab03.faster", "handbook", "比 eager 快 10-30%", "torch.compile is 10-30% faster than eager", "partly",
          "it depends on what compile replaces: level 2 (PyTorch's ops) 18.8 ms vs the hand-fused eager engine "
          "20.5 ms at batch 1 (8%, two single runs); in this lab's record, on the same torch-ops build, 12.1 vs "
          "32.2 ms (2.7x), and level 3 on the hand-fused build slower (30.5 vs 20.5 ms); all far behind graphs "
          "(about 1 ms): the step is launch-bound",
          "取决于 compile 替换了什么：level 2（PyTorch 算子）batch 1 为 18.8 ms，手工融合的 eager 引擎 20.5 ms（快 8%，"
          "两次单独运行）；本 lab 的记录里，同样的 PyTorch 算子构建为 12.1 对 32.2 ms（2.7 倍），而手工融合构建上的 level 3 "
          "更慢（30.5 对 20.5 ms）；都远慢于图（约 1 ms）：这一步受 launch 限制", H200 + "compile.json", "rows.6.tpot_s", figure=0.018845280462745098,
          lab="lab03"),
    Claim("lab03.scope", "handbook", "只 compile 每个 layer（默认）", "compiling per layer is vLLM's default", "wrong",
          "vLLM traces the whole forward once and splits it at attention: 29 pieces for 28 layers",
          "vLLM 整个前向 trace 一次，在 attention 处切开：28 层得到 29 段", H200 + "compile_vs_graphs.json",
          "modes.FULL_AND_PIECEWISE@L3.compile_report.pieces", figure=29, lab="lab03"),
    Claim("lab03.unregistered", "handbook", "自定义 op（如 paged attention）通过 torch.library 注册，让 compile 能识别",
          "custom ops such as paged attention are registered with torch.library so compile can see them", "right",
          "unregistered attention: 76 graph breaks, 34 graphs, 48 recompiles, TPOT 19.7 vs 10.8 ms (1.8x slower)",
          "未注册的 attention：76 次断图、34 个图、48 次重编译，TPOT 19.7 对 10.8 ms（慢 1.8 倍）",
          H200 + "attention_unregistered.json", "modes.NONE@L1.compile_report.graph_breaks", figure=76, lab="lab03"),
    Claim("lab03.stack-fused", "handbook", "两者叠加最佳", "compile and CUDA graphs stack best", "partly",
          "with hand-fused kernels level 3 + graphs is 0.94x graphs alone at batch 64 (2.006 vs 1.882 ms); with "
          "PyTorch's own ops it is 2.5x faster (1.53 vs 3.82 ms at batch 1)",
          "手工融合 kernel 时 level 3 + 图在 batch 64 只有单用图的 0.94 倍（2.006 对 1.882 ms）；用 PyTorch 自带算子时快 2.5 倍"
          "（batch 1 为 1.53 对 3.82 ms）", H200 + "compile_vs_graphs.json", "rows.8.tpot_s", figure=0.002005669450980407,
          lab="lab03"),
    Claim("lab03.stack-torch-ops", "handbook", "torch.compile 先把 op 融合成更少更大的 kernel，再 CUDA Graph capture：双重收益",
          "compile fuses ops into fewer kernels, then graphs capture them: a double gain", "right",
          "true when compile has ops to fuse: PyTorch's own ops, graphs alone 3.82 ms, level 3 + graphs 1.53 ms",
          "compile 有可融合的算子时成立：PyTorch 自带算子只用图 3.82 ms，level 3 + 图 1.53 ms",
          H200 + "compile_custom_ops_none.json", "rows.3.tpot_s", figure=0.0015307173254901906, lab="lab03"),
    Claim("lab03.fusion-kernel", "handbook", "Inductor 把 graph 转成 Triton kernel（融合多个 op 到一个 GPU kernel）",
          "Inductor turns the graph into Triton kernels, fusing several ops into one", "right",
          "add + RMSNorm: seven eager ops become the number of generated kernels recorded here",
          "add + RMSNorm：7 个 eager 算子变成这里记录的生成 kernel 个数", RESULTS, "inductor.num_kernels", lab="lab03"),
)

LAB_INFO = LabInfo(
    lab="lab03", notebook="labs/03_torch_compile.ipynb", title="torch.compile in the engine",
    title_zh="引擎里的 torch.compile", sections=("§2.1", "§2.2", "§2.3", "§2.4", "§5"),
    questions=(Q1, Q2, Q3, Q4), claims=CLAIMS,
    code=("minivllm/compilation/backend.py", "minivllm/attention/layer.py", "minivllm/layers/custom_op.py",
          "minivllm/kernels/triton_norm.py", "minivllm/config.py"),
)


def verdicts_table(res: dict | None) -> str:
    lines = [f"{'claim':<58} {'verdict':<8} {'number':>9}  file:key"]
    for c in CLAIMS:
        if c.evidence_file == RESULTS:
            fig = _get(res, *c.evidence_key.split(".")) if res else None
        else:
            fig = bench_value(c.evidence_file.rsplit("/", 1)[-1].removesuffix(".json"), c.evidence_key)
        shown = "(record)" if fig is None else str(round(fig, 6) if isinstance(fig, float) else fig)
        lines.append(f"{c.claim_en[:58]:<58} {c.verdict:<8} {shown:>9}  "
                     f"{c.evidence_file.rsplit('/', 1)[-1]}:{c.evidence_key}")
    return "\n".join(lines)
