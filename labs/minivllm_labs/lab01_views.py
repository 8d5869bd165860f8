"""Lab 01's views of its results: tables, figures, the numbers behind its questions, the claims' verdicts.

Why apart from lab01.py: these read a results dict (recorded on the H200, or measured here) and never touch
torch or the engine, so the book, the catalog and the tests use them without a GPU. Every sentence that states
a number takes it from the results, and says when a difference is within the noise of the repeats.
Results recorded before ranges were stored (the `*_range` keys) still render: ranges are optional.
"""

from __future__ import annotations

import html

from minivllm_labs.quiz_data import load_claims, load_questions

RESULTS_FILE = "assets/results/h200/lab01.json"


def _source(res: dict, lang: str = "en") -> str:
    prov = res.get("provenance") or {}
    if lang == "zh":
        return f"在 {prov['gpu']} 上测得" if prov.get("gpu") else "在本机测得"
    return f"Measured on {prov['gpu']}" if prov.get("gpu") else "Measured here"


def overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    """Do two [min, max] ranges overlap (the difference of their medians is within noise)? None if unknown."""
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


# ---- a) launch cost --------------------------------------------------------------------------------------------
def plot_launch(res: dict):
    from minivllm_labs.plots import figure

    lo = res["launch_overhead"]
    bars = {"eager ATen op": lo["eager_us_per_op"], "in a CUDA graph": lo.get("graph_us_per_op"),
            "engine Triton kernel, eager": lo.get("triton_us_per_op")}
    bars = {k: v for k, v in bars.items() if v is not None}
    return figure(list(bars), {f"us per op ({lo['device']})": list(bars.values())}, kind="bar",
                  y_title="microseconds per op", title=f"{lo['n_ops']} tiny ops: cost per op",
                  zh={"title": f"{lo['n_ops']} 个小算子：每个算子的开销", "y": "每个算子的微秒数",
                      "names": {f"us per op ({lo['device']})": f"每个算子的微秒数（{lo['device']}）"}})


def launch_table(res: dict) -> str:
    lo = res["launch_overhead"]
    rng = lo.get("eager_us_range")
    lines = [f"tiny ATen op (x.add_(1)), eager: {lo['eager_us_per_op']} us per op"
             + (f" (range {rng[0]}-{rng[1]} over {lo.get('reps')} repeats)" if rng else "")]
    if "graph_us_per_op" in lo:
        lines.append(f"same ops inside one CUDA graph:  {lo['graph_us_per_op']} us per op "
                     f"(the whole replay is submitted in {lo['graph_launch_us']} us)")
    if "triton_us_per_op" in lo:
        lines.append(f"engine Triton kernel, eager:     {lo['triton_us_per_op']} us per call "
                     f"({lo.get('triton_kernel', 'Triton')}, Python wrapper + Triton launcher)")
    return "\n".join(lines)


# ---- b) census -------------------------------------------------------------------------------------------------
def census_table(res: dict) -> str:
    """Ops Python dispatched and, on CUDA, kernels the GPU ran; the handbook's kernel count is compared with
    kernels only (ops and kernels are different things: one op may launch several kernels, or none)."""
    c = res["census"]
    lines = [f"One decode step, {c['num_layers']} decoder layers ({c['device']}):",
             f"  ops dispatched from Python: {c['ops_per_step']} per step ({c['ops_per_layer'] or 'n/a'} per layer)"]
    if "kernels_per_step" in c:
        lines.append(f"  GPU kernels:                {c['kernels_per_step']} per step "
                     f"({c['kernels_per_layer'] or 'n/a'} per layer, + {c['copies_per_step']} copies)")
        if c.get("kernels_per_layer"):
            rest = c["kernels_per_step"] - round(c["kernels_per_layer"] * c["num_layers"])
            lines.append(f"  an 80-layer model with these kernels: 80 x {c['kernels_per_layer']} + {rest} = "
                         f"{round(80 * c['kernels_per_layer']) + rest} kernels per step (handbook: '1000+')")
    else:
        lines.append("  (no GPU here, so no kernels to count: the handbook's '1000+ kernels' is compared with "
                     "the recorded GPU census)")
    return "\n".join(lines)


def per_op_gap(res: dict) -> str:
    """Why an eager engine step costs far more per op than a tiny ATen op."""
    c, b, lo = res.get("census") or {}, res.get("bound") or {}, res.get("launch_overhead") or {}
    if not (c and b.get("enqueue_ms") and lo):
        return "needs the census and the sweep"
    per_op = b["enqueue_ms"][0] * 1e3 / c["ops_per_step"]
    text = (f"batch {b['batch'][0]}: {b['enqueue_ms'][0]} ms to enqueue {c['ops_per_step']} ops = "
            f"{per_op:.0f} us per op, {per_op / lo['eager_us_per_op']:.0f}x a tiny ATen op "
            f"({lo['eager_us_per_op']} us)")
    if "triton_us_per_op" in lo:
        text += f"; one of the engine's Triton kernels costs {lo['triton_us_per_op']} us per call from Python"
    return text


# ---- c) CPU-bound or GPU-bound ---------------------------------------------------------------------------------
def plot_bound(res: dict):
    from minivllm_labs.plots import figure

    b = res["bound"]
    names = {"enqueue_ms": "CPU: enqueue eager step", "gpu_ms": "GPU: run its kernels",
             "eager_ms": "eager step (wall)", "graph_ms": "graph replay (wall)"}
    series = {label: b[k] for k, label in names.items() if k in b}
    zh_names = {"CPU: enqueue eager step": "CPU：提交一步 eager 的算子", "GPU: run its kernels": "GPU：执行这些 kernel",
                "eager step (wall)": "eager 一步（墙钟）", "graph replay (wall)": "CUDA Graph 重放（墙钟）"}
    return figure(b["batch"], series, log_x=True, log_y=True, x_title="decode batch size", y_title="ms",
                  title=f"One decode forward, {b['device']}: where the time goes",
                  zh={"title": f"一次解码前向（{b['device']}）：时间花在哪里", "x": "解码 batch 大小", "y": "毫秒",
                      "names": zh_names})


def bound_table(res: dict) -> str:
    b = res["bound"]
    cols = [k for k in ("batch", "enqueue_ms", "gpu_ms", "eager_ms", "graph_ms", "saved_ms", "exposed_cpu_ms")
            if k in b]
    rows = ["  ".join(f"{c.removesuffix('_ms'):>11}" for c in cols)]
    rows += ["  ".join(f"{b[c][i]:>11}" for c in cols) for i in range(len(b["batch"]))]
    note = "(ms, medians; saved = eager - graph; exposed cpu = max(0, enqueue - gpu))"
    if "enqueue_ms_range" in b:
        spread = max(r[1] - r[0] for r in b["enqueue_ms_range"])
        note += f"\n(the enqueue time varies by up to {spread:.3g} ms between repeats: see *_range in the JSON)"
    return "\n".join(rows) + "\n" + note


def bound_verdict(res: dict, lang: str = "en") -> str:
    """Which batch sizes are CPU-bound eager, and whether the graph's saving follows the exposed CPU time."""
    b = res.get("bound") or {}
    if "gpu_ms" not in b:
        return ("本设备（CPU）上没有 GPU 时间可分：见录制的结果" if lang == "zh" else
                "no GPU split on this device (CPU): see the recorded results")
    cpu_bound = [bs for bs, e, g in zip(b["batch"], b["enqueue_ms"], b["gpu_ms"]) if e > g]
    lo, hi = min(b["exposed_cpu_ms"]), max(b["exposed_cpu_ms"])
    if lang == "zh":
        where = (f"测量的每个 batch（{b['batch'][0]}-{b['batch'][-1]}）在 eager 下都受 CPU 限制：GPU 时间始终没有超过提交时间"
                 if len(cpu_bound) == len(b["batch"]) else
                 f"eager 下受 CPU 限制的 batch：{'、'.join(map(str, cpu_bound)) or '无'}")
        return (f"{where}；整个扫描中暴露的 CPU 时间在 {lo} 到 {hi} ms 之间（不随 batch 变小，GPU 时间则从 "
                f"{b['gpu_ms'][0]} 涨到 {b['gpu_ms'][-1]} ms）；CUDA Graph 省下 {min(b['saved_ms'])}-{max(b['saved_ms'])} ms")
    if len(cpu_bound) == len(b["batch"]):
        where = (f"every batch size measured ({b['batch'][0]}-{b['batch'][-1]}) is CPU-bound eager: "
                 f"the GPU never overtakes the enqueue time here")
    else:
        where = f"CPU-bound eager at batch {', '.join(map(str, cpu_bound)) or 'none'}"
    return (f"{where}; exposed CPU time stays between {lo} and {hi} ms across the sweep (it does not shrink "
            f"with the batch, the GPU time grows from {b['gpu_ms'][0]} to {b['gpu_ms'][-1]} ms); "
            f"a graph saved {min(b['saved_ms'])}-{max(b['saved_ms'])} ms")


def padding_cost(res: dict, lang: str = "en") -> str | None:
    """What padding batch 5 up to the captured size 8 costs on the GPU, and whether that is above noise."""
    b = res.get("bound") or {}
    if "gpu_ms" not in b or not {5, 8} <= set(b["batch"]):
        return None
    i5, i8 = b["batch"].index(5), b["batch"].index(8)
    diff = round(b["gpu_ms"][i8] - b["gpu_ms"][i5], 4)
    rng = b.get("gpu_ms_range")
    same = overlap(rng[i5], rng[i8]) if rng else None
    if lang == "zh":
        noise = (("在噪声范围内：本记录没有波动范围，而 batch 8 的工作量不可能少于 batch 5" if diff <= 0 else
                  "本记录没有波动范围可比") if same is None else
                 "在噪声范围内（多次重复的范围重叠）" if same else "超出噪声")
        head = f"一步解码的 GPU 时间：batch 5 为 {b['gpu_ms'][i5]} ms，batch 8 为 {b['gpu_ms'][i8]} ms："
        if diff < 0 and same is False:
            return head + f"batch 8 比 batch 5 还快 {-diff} ms（{noise}）：padding 没有可测的代价"
        return head + f"从 5 pad 到 8 多花 {diff} ms，{noise}"
    if same is None:
        noise = ("within noise: no ranges in this record, and batch 8 cannot need less work than batch 5"
                 if diff <= 0 else "no ranges in this record to compare it with")
    else:
        noise = "within noise (the ranges over repeats overlap)" if same else "above noise"
    head = f"GPU time of a decode step: batch 5 {b['gpu_ms'][i5]} ms, batch 8 {b['gpu_ms'][i8]} ms: "
    if diff < 0 and same is False:
        return head + f"batch 8 ran {-diff} ms faster than batch 5 ({noise}): padding costs nothing measurable"
    return head + f"padding 5 -> 8 costs {diff} ms, {noise}"


# ---- d) TPOT ---------------------------------------------------------------------------------------------------
def plot_tpot(res: dict):
    from minivllm_labs.plots import figure

    t = res["tpot"]
    series = {m: t[f"{m}_ms"] for m in ("eager", "graphs") if f"{m}_ms" in t}
    return figure([f"batch {b}" for b in t["batch"]], series, kind="bar", toggle=True,
                  y_title="ms per output token", title=f"Engine TPOT ({t['new_tokens']} new tokens)",
                  zh={"title": f"引擎 TPOT（生成 {t['new_tokens']} 个 token）", "y": "每个输出 token 的毫秒数",
                      "names": {"graphs": "CUDA Graph"}})


def tpot_table(res: dict) -> str:
    t = res["tpot"]
    lines = []
    for i, b in enumerate(t["batch"]):
        cells = [f"{m} {t[f'{m}_ms'][i]} ms" for m in ("eager", "graphs") if f"{m}_ms" in t]
        lines.append(f"batch {b}: " + ", ".join(cells))
    if "graphs_steps_by_path" in t:
        lines.append(f"graphs engine, steps by path: {t['graphs_steps_by_path']}")
    return "\n".join(lines)


# ---- e) the handbook's snippet ------------------------------------------------------------------------------
def snippet_text(res: dict) -> str:
    s = res.get("snippet")
    if not s:
        return ("The capture / replay snippet is not in this record yet (it is recorded on a GPU by "
                "`python -m minivllm_labs.record lab01`).")
    return (f"{s['layers']} Linear layers, batch 4: replay matches eager: {s['matches_eager']} "
            f"(max |diff| {s['max_abs_diff']}); eager forward {s['eager_us']} us, graph replay {s['replay_us']} us")


VERDICT_ZH = {"right": "正确", "partly": "部分正确", "wrong": "错误", "unverifiable": "无法验证"}


def verdict_table(res: dict | None) -> str:
    """The summary of verdicts as an HTML table (EN and ZH spans), numbers read from `res` by each claim's key."""
    from minivllm_labs.lab_info import resolve_key

    rows = []
    for c in CLAIMS:
        try:
            number = resolve_key(res, c.evidence_key) if res else c.figure
        except (KeyError, IndexError):
            number = c.figure
        rows.append(
            f"<tr><td><span class=\"lang-en\">{html.escape(c.claim_en)}</span> "
            f"<span class=\"lang-zh\" lang=\"zh\">{html.escape(c.claim_zh)}</span></td>"
            f"<td><b>{c.verdict}</b> <span class=\"lang-zh\" lang=\"zh\">{VERDICT_ZH[c.verdict]}</span></td>"
            f"<td><span class=\"lang-en\">{html.escape(c.summary)}</span> "
            f"<span class=\"lang-zh\" lang=\"zh\">{html.escape(c.summary_zh)}</span></td>"
            f"<td><code>{html.escape(str(number))}</code><br><code>{c.evidence_key}</code></td></tr>")
    head = ("<tr><th>claim · 论断</th><th>verdict · 结论</th><th>what decides it · 依据</th>"
            f"<th>number · 数值 ({RESULTS_FILE})</th></tr>")
    return f'<table class="mv-verdicts">\n{head}\n' + "\n".join(rows) + "\n</table>"


# ---- the questions' evidence; the questions and claims themselves are data/lab01.yaml ----------------------
_NONE_ZH = "没有可用的测量（本仓库没有录制的 GPU 结果，本机也没有测）。"


def q1_evidence(res: dict | None, lang: str = "en") -> str:
    """The numbers behind Q1: per-op launch cost, the CPU/GPU split over the sweep, the engine's TPOT."""
    if lang == "zh":
        return _q1_zh(res)
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


def _q1_zh(res: dict | None) -> str:
    if not res:
        return _NONE_ZH
    lines = [f"{_source(res, 'zh')}："]
    lo = res.get("launch_overhead") or {}
    if "graph_us_per_op" in lo:
        lines.append(f"- 一个极小的算子：eager {lo['eager_us_per_op']} us，图内 {lo['graph_us_per_op']} us")
    elif "eager_us_per_op" in lo:
        lines.append(f"- 一个极小的算子在本机（{lo.get('device', 'device')}）eager 执行耗时 {lo['eager_us_per_op']} us")
    b = res.get("bound") or {}
    if "graph_ms" in b:
        for i in sorted({0, len(b["batch"]) - 1}):
            lines.append(f"- batch {b['batch'][i]}：CPU 提交 {b['enqueue_ms'][i]} ms，GPU {b['gpu_ms'][i]} ms "
                         f"-> 暴露的 CPU 时间 {b['exposed_cpu_ms'][i]} ms；eager {b['eager_ms'][i]} ms，图 "
                         f"{b['graph_ms'][i]} ms：省下 {b['saved_ms'][i]} ms")
        lines.append(f"- {bound_verdict(res, 'zh')}")
    t = res.get("tpot") or {}
    if "graphs_ms" in t:
        lines.append(f"- 引擎在 batch {t['batch'][0]} 的 TPOT：eager {t['eager_ms'][0]} ms，开图 {t['graphs_ms'][0]} ms")
    if len(lines) == 1:
        lines.append("- 本设备（CPU）上没有图的测量；见录制的 GPU 结果")
    return "\n".join(lines)


def q4_evidence(res: dict | None, lang: str = "en") -> str:
    """The numbers behind Q4: what one capture costs, and what padding a small batch up costs on the GPU."""
    if lang == "zh":
        return _q4_zh(res)
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


def _q4_zh(res: dict | None) -> str:
    if not res:
        return _NONE_ZH
    lines = [f"{_source(res, 'zh')}："]
    b = res.get("bound") or {}
    if "capture_s" in b:
        mib = b["capture_mib"][0]
        lines.append(f"- 捕获 batch {b['batch'][0]} 的图用了 {b['capture_s'][0] * 1e3:.3g} ms"
                     + (f"（以及 {mib} MiB）" if mib >= 0 else "") + f"；回放一次 {b['graph_ms'][0]} ms")
        if pad := padding_cost(res, "zh"):
            lines.append(f"- {pad}")
    cap = (res.get("tpot") or {}).get("capture")
    if cap and cap.get("pool_mib") is not None:
        lines.append(f"- 引擎启动时用 {cap['seconds']} s 捕获了尺寸 {cap['sizes']}：所有尺寸共享一个 {cap['pool_mib']} MiB 的"
                     f"图显存池；设备空闲显存减少了 {cap['mib']} MiB，多出的部分是图的可执行体，由驱动在池外持有")
    elif cap:
        lines.append(f"- 引擎启动时用 {cap['seconds']} s 捕获了尺寸 {cap['sizes']}，{cap['mib']} MiB")
    if len(lines) == 1:
        lines.append("- 本设备（CPU）上无法捕获图；见录制的 GPU 结果")
    return "\n".join(lines)


QUESTIONS = load_questions("lab01", {"q1_evidence": q1_evidence, "q4_evidence": q4_evidence})
Q1, Q4 = QUESTIONS["lab01.q1"], QUESTIONS["lab01.q4"]
CLAIMS = load_claims("lab01")
