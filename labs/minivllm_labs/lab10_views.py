"""What Lab 10's notebook shows: tables and figures of a lab10 results dict (recorded or measured here), the
numbers other records hold on the same question (the throughput bench's batched-vs-one-by-one check), the
evidence behind the questions, and the claims with their verdict rules. It never imports lab10.py's
measurements."""

from __future__ import annotations

from pathlib import Path

from minivllm_labs import verdicts
from minivllm_labs.quiz_data import load_claims, load_questions
from minivllm_labs.recorded import other_record

THROUGHPUT = "assets/results/h200/throughput.json"


def _rows(res: dict | None, dtype: str) -> list[dict]:
    return (((res or {}).get("disagreement") or {}).get(dtype) or {}).get("rows") or []


def _series(res: dict) -> dict[str, list[dict]]:
    """{label: disagreement rows} for every dtype / mode the results hold."""
    out = {f"default, {d}": v["rows"] for d, v in (res.get("disagreement") or {}).items()}
    inv = res.get("batch_invariant") or {}
    if inv.get("available"):
        d = inv["disagreement"]
        out[f"batch_invariant, {d['dtype']}"] = d["rows"]
    return out


def _gap(v) -> str:
    return "-" if v is None else f"{v:.3g}"


# ---- a) the disagreement ----------------------------------------------------------------------------------
def disagreement_table(res: dict | None) -> str:
    """Per engine setting and batch size: identical sequences, where the others part, the logprob gap."""
    if not res or not res.get("disagreement"):
        return "(not recorded yet: `python -m minivllm_labs.record lab10` on a GPU makes it)"
    head = (f"{'setting':<26} {'batch':>5} {'identical':>9} {'mean prefix':>11} {'max |dlogprob|':>14} "
            f"{'bitwise lp':>10}  where the others part (token index)")
    out = [head]
    for label, rows in _series(res).items():
        for r in rows:
            n = len(r["first_divergence"])
            part = sorted(k for k in r["first_divergence"] if k < r.get("tokens", max(r["first_divergence"])))
            bit = "-" if r.get("bitwise_logprobs") is None else f"{r['bitwise_logprobs']}/{n}"
            out.append(f"{label:<26} {r['batch']:>5} {r['identical']:>5}/{n:<3} {r['mean_matching_prefix']:>11.1f} "
                       f"{_gap(r.get('max_logprob_gap')):>14} {bit:>10}  {part[:12] if part else '-'}")
    if not res.get("logprobs"):
        out.append("(this engine has no SamplingParams(logprobs=k) yet: the logprob columns are empty)")
    return "\n".join(out)


def plot_disagreement(res: dict):
    """Share of sequences whose greedy tokens equal their run alone, against the batch size, per setting."""
    from minivllm_labs.plots import figure

    series = _series(res)
    batches = sorted({r["batch"] for rows in series.values() for r in rows})
    ys = {label: [next((100 * r["identical"] / r["requests"] for r in rows if r["batch"] == b), None)
                  for b in batches] for label, rows in series.items()}
    zh = {label: label.replace("default", "默认") for label in ys}
    return figure(batches, ys, kind="line", log_x=True, toggle=True, x_title="batch size",
                  y_title="% of sequences identical to their run alone",
                  title="Greedy tokens batched vs alone, by batch size",
                  zh={"title": "贪心解码：批处理与单独运行的 token 是否相同（按 batch 大小）", "x": "batch 大小",
                      "y": "与单独运行完全相同的序列（%）", "names": zh})


# ---- b) the sources ---------------------------------------------------------------------------------------
def matmul_table(res: dict | None) -> str:
    if not res or "matmul" not in res:
        return "(not recorded yet)"
    out = []
    for dtype, m in res["matmul"].items():
        out.append(f"{dtype}: row 0 of an M-row linear ({m['k']} -> {m['n']}) against the same row alone")
        for op in ("torch", "engine", "invariant"):
            cells = [f"M={r['m']}: " + ("=" if r["bitwise_equal"] else format(r["max_abs_diff"], ".2g"))
                     for r in m["rows"] if r["op"] == op]
            if cells:
                out.append(f"  {op:<9} " + ", ".join(cells))
    out.append("('=' bitwise equal; else the largest |difference|)")
    return "\n".join(out)


def attention_table(res: dict | None) -> str:
    if not res or "attention" not in res:
        return "(not recorded yet)"
    out = []
    for dtype, a in res["attention"].items():
        line = (f"{dtype}: one sequence of {a['context']} tokens; KV splits at batch 1: {a['splits_batch1']}, at "
                f"batch 64: {a['splits_batch64']} (an H200 picks {a['h200_splits']} at batch 1, 8, 64); output "
                f"{'bitwise equal' if a['torch']['bitwise_equal'] else 'differs by ' + format(a['torch']['max_abs_diff'], '.2g')}"
                " (PyTorch)")
        if "kernel" in a:
            k = a["kernel"]
            line += f", {'bitwise equal' if k['bitwise_equal'] else 'differs by ' + format(k['max_abs_diff'], '.2g')} (Triton kernel)"
        out.append(line)
    return "\n".join(out)


def graphs_table(res: dict | None) -> str:
    """(GPU) The padded graph against the exact one and eager; the default engine against eager."""
    if not res or "padded_graph" not in res:
        return "(GPU only: the padded-graph and graphs-vs-eager rows are recorded on a GPU)"
    p = res["padded_graph"]
    out = [f"batch 5, {p['dtype']}: " + "; ".join(
        f"{name.replace('_', ' ')}: {p[name]['identical']}/{p[name]['requests']} identical, max |dlogprob| "
        f"{_gap(p[name].get('max_logprob_gap'))}" for name in ("padded_vs_exact", "exact_vs_eager", "padded_vs_eager"))]
    if "dispatch" in p:
        out.append("graph dispatches (full / piecewise / eager steps): " + "; ".join(
            f"{k} {v.get('full')}/{v.get('piecewise')}/{v.get('eager')}" for k, v in p["dispatch"].items()))
    for r in res.get("graphs_vs_eager", {}).get("rows", []):
        out.append(f"default engine (torch.compile + CUDA graphs) vs eager, batch {r['batch']}: {r['identical']}/"
                   f"{r['requests']} identical, max |dlogprob| {_gap(r.get('max_logprob_gap'))}")
    return "\n".join(out)


# ---- c) the batch-invariant mode and its cost ---------------------------------------------------------------
def invariant_table(res: dict | None) -> str:
    if not res:
        return "(not recorded yet)"
    inv = res.get("batch_invariant") or {}
    if not inv.get("available"):
        return f"batch_invariant: not available in this engine build ({inv.get('why', 'not recorded')})"
    if "tpot" not in inv or "tpot" not in res:
        return "batch_invariant: available; its TPOT cost is measured by the recorder (`record lab10`), not here"
    out = [f"{'batch':>5} {'default TPOT ms':>22} {'batch_invariant TPOT ms':>26} {'cost':>8}"]
    for d, b in zip(res["tpot"]["default"], inv["tpot"]):
        lo, hi = d["tpot_ms_range"], b["tpot_ms_range"]
        noise = b["tpot_ms_range"][0] <= d["tpot_ms_range"][1] and d["tpot_ms_range"][0] <= b["tpot_ms_range"][1]
        cost = "within noise" if noise else f"{100 * (b['tpot_ms'] / d['tpot_ms'] - 1):+.0f}%"
        out.append(f"{d['batch']:>5} {d['tpot_ms']:>8.3f} [{lo[0]:.3f}, {lo[1]:.3f}] {b['tpot_ms']:>11.3f} "
                   f"[{hi[0]:.3f}, {hi[1]:.3f}] {cost:>8}")
    return "\n".join(out)


# ---- what other records say ---------------------------------------------------------------------------------
def throughput_check_text() -> str:
    """The throughput bench's own check on the H200: batched vs one by one, bf16 and fp32 (throughput.json)."""
    t = other_record(Path(THROUGHPUT).name)
    if not t or "correctness" not in t:
        return f"(no {THROUGHPUT} in this checkout)"
    lines = []
    for key, dtype in (("correctness", "bf16"), ("correctness_fp32", "fp32")):
        c = t.get(key)
        if c:
            parts = sorted(k for k in c["first_divergence"] if k < c["tokens_compared"])
            lines.append(f"{dtype}: {c['matching']}/{c['requests']} requests identical over {c['tokens_compared']} "
                         f"tokens; the others part at tokens {parts or '-'} ({THROUGHPUT}:{key}.matching)")
    return "\n".join(lines)


# ---- questions --------------------------------------------------------------------------------------------
def _src(res: dict | None, lang: str = "en") -> str:
    gpu = ((res or {}).get("provenance") or {}).get("gpu")
    if lang == "zh":
        if not res:
            return "还没有 lab10 的结果：运行上面的单元（或在 GPU 上录制 lab10）。"
        return f"在 {gpu} 上测得" if gpu else "在本机测得"
    if not res:
        return "No lab10 results yet: run the cells above (or record lab10 on a GPU)."
    return f"Measured ({gpu})" if gpu else "Measured here"


# ---- the evidence in Chinese: the same numbers as the tables above ------------------------------------------
def _same(equal: bool, diff: float) -> str:
    return "逐位相同" if equal else f"相差 {diff:.2g}"


def _throughput_zh() -> str:
    t = other_record(Path(THROUGHPUT).name)
    if not t or "correctness" not in t:
        return f"（本仓库没有 {THROUGHPUT}）"
    lines = []
    for key, dtype in (("correctness", "bf16"), ("correctness_fp32", "fp32")):
        if c := t.get(key):
            parts = sorted(k for k in c["first_divergence"] if k < c["tokens_compared"])
            lines.append(f"{dtype}：{c['requests']} 个请求中 {c['matching']} 个在 {c['tokens_compared']} 个 token 内完全相同；"
                         f"其余在第 {parts or '-'} 个 token 分叉（{THROUGHPUT}:{key}.matching）")
    return "\n".join(lines)


def _graphs_zh(res: dict) -> list[str]:
    if "padded_graph" not in res:
        return ["（仅 GPU：pad 图与图对 eager 的对比在 GPU 上录制）"]
    p = res["padded_graph"]
    names = {"padded_vs_exact": "pad 图对精确尺寸图", "exact_vs_eager": "精确尺寸图对 eager", "padded_vs_eager": "pad 图对 eager"}
    out = [f"batch 5，{p['dtype']}：" + "；".join(
        f"{zh}：{p[n]['identical']}/{p[n]['requests']} 相同，最大 |dlogprob| {_gap(p[n].get('max_logprob_gap'))}"
        for n, zh in names.items())]
    if "dispatch" in p:
        out.append("图的分派（full / piecewise / eager 步数）：" + "；".join(
            f"{k} {v.get('full')}/{v.get('piecewise')}/{v.get('eager')}" for k, v in p["dispatch"].items()))
    out += [f"默认引擎（torch.compile + CUDA Graph）对 eager，batch {r['batch']}：{r['identical']}/{r['requests']} 相同，"
            f"最大 |dlogprob| {_gap(r.get('max_logprob_gap'))}" for r in res.get("graphs_vs_eager", {}).get("rows", [])]
    return out


def _matmul_zh(res: dict) -> list[str]:
    out = []
    for dtype, m in (res.get("matmul") or {}).items():
        out.append(f"{dtype}：M 行 linear（{m['k']} -> {m['n']}）的第 0 行对单独计算的同一行")
        for op in ("torch", "engine", "invariant"):
            cells = [f"M={r['m']}：" + ("=" if r["bitwise_equal"] else format(r["max_abs_diff"], ".2g"))
                     for r in m["rows"] if r["op"] == op]
            if cells:
                out.append(f"  {op}：" + "，".join(cells))
    return out + (["（“=” 表示逐位相同，否则为最大 |差|）"] if out else [])


def _attention_zh(res: dict) -> list[str]:
    out = []
    for dtype, a in (res.get("attention") or {}).items():
        line = (f"{dtype}：一条 {a['context']} token 的序列；batch 1 时 {a['splits_batch1']} 个 KV split，batch 64 时 "
                f"{a['splits_batch64']} 个（H200 在 batch 1、8、64 选 {a['h200_splits']}）；输出"
                f"{_same(a['torch']['bitwise_equal'], a['torch']['max_abs_diff'])}（PyTorch）")
        if k := a.get("kernel"):
            line += f"，{_same(k['bitwise_equal'], k['max_abs_diff'])}（Triton kernel）"
        out.append(line)
    return out


def _invariant_zh(res: dict) -> list[str]:
    inv = res.get("batch_invariant") or {}
    if not inv.get("available"):
        return [f"batch_invariant：本引擎构建不可用（{inv.get('why', '未录制')}）"]
    if "tpot" not in inv or "tpot" not in res:
        return ["batch_invariant：可用；它的 TPOT 代价由录制脚本（`record lab10`）测量，这里不测"]
    out = []
    for d, b in zip(res["tpot"]["default"], inv["tpot"]):
        lo, hi = d["tpot_ms_range"], b["tpot_ms_range"]
        noise = hi[0] <= lo[1] and lo[0] <= hi[1]
        cost = "在噪声范围内" if noise else f"{100 * (b['tpot_ms'] / d['tpot_ms'] - 1):+.0f}%"
        out.append(f"batch {d['batch']}：默认 TPOT {d['tpot_ms']:.3f} ms [{lo[0]:.3f}, {lo[1]:.3f}]，batch_invariant "
                   f"{b['tpot_ms']:.3f} ms [{hi[0]:.3f}, {hi[1]:.3f}]，代价 {cost}")
    return out


def q_determinism_evidence(res: dict | None, lang: str = "en") -> str:
    rows = next(iter(((res or {}).get("disagreement") or {}).values()), {}).get("rows", [])
    if not rows:
        return _src(res, lang)
    r1, rn = rows[0], rows[-1]
    if lang == "zh":
        return (f"{_src(res, lang)}：batch 1 跑两次，{r1['identical']}/{r1['requests']} 相同（同样的形状，同样的比特）；"
                f"batch {rn['batch']} 对单独运行，{rn['identical']}/{rn['requests']} 相同。")
    return (f"{_src(res)}: batch 1 run twice {r1['identical']}/{r1['requests']} identical (same shapes, same "
            f"bits); batch {rn['batch']} vs alone {rn['identical']}/{rn['requests']} identical.")


def q_fp32_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        lines = [_throughput_zh()]
        if res and "matmul" in res and "float32" in res["matmul"]:
            diffs = [r["max_abs_diff"] for r in res["matmul"]["float32"]["rows"] if r["op"] == "torch"]
            lines.append(f"{_src(res, lang)}：fp32 matmul，M > 1 时第 0 行对单独计算：最大 |差| {max(diffs):.2g}")
        return "\n".join(lines)
    lines = [throughput_check_text()]
    if res and "matmul" in res and "float32" in res["matmul"]:
        diffs = [r["max_abs_diff"] for r in res["matmul"]["float32"]["rows"] if r["op"] == "torch"]
        lines.append(f"{_src(res)}: fp32 matmul, row 0 at M > 1 vs alone: largest |difference| {max(diffs):.2g}")
    return "\n".join(lines)


def q_padding_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return "\n".join([f"{_src(res, lang)}：", *_graphs_zh(res), *_matmul_zh(res)]) if res else _src(res, lang)
    return f"{_src(res)}:\n{graphs_table(res)}\n{matmul_table(res)}" if res else _src(res)


def q_invariant_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return "\n".join([f"{_src(res, lang)}：", *_attention_zh(res), *_invariant_zh(res)]) if res else _src(res, lang)
    return f"{_src(res)}:\n{attention_table(res)}\n{invariant_table(res)}" if res else _src(res)


QUESTIONS = load_questions("lab10", {"q_determinism_evidence": q_determinism_evidence,
                                     "q_fp32_evidence": q_fp32_evidence, "q_padding_evidence": q_padding_evidence,
                                     "q_invariant_evidence": q_invariant_evidence})
Q_DETERMINISM, Q_FP32, Q_PADDING, Q_INVARIANT = (QUESTIONS[f"lab10.q{i}"] for i in range(1, 5))


# ---- claims -----------------------------------------------------------------------------------------------
#: The article's claim that graphs change nothing is judged from the records and the text; no rule recomputes it.
CLAIMS = load_claims("lab10", {"article.graphs_do_not_change_results": verdicts.graphs_same_results})
