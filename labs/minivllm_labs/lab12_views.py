"""Lab 12's tables, figures, the numbers behind its questions and its verdicts.

Split from lab12.py so each file has one job: lab12.py measures, this file shows (the questions are
data/lab12.yaml). Every function takes a results dict: the recorded H200 file or what the notebook measured
here. A CPU run has the piece and the accuracy but no TPOT; a record without a part says so instead of failing.
"""

from __future__ import annotations

import difflib
import itertools
import statistics

from minivllm_labs.common import spread_verdict
from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)
from minivllm_labs.quiz_data import load_questions

RESULTS = "assets/results/h200/lab12.json"
NOT_RECORDED = "not recorded yet: python -m minivllm_labs.record lab12 (on a CUDA GPU)"
NAMES = {"bf16": "bf16 (default)", "fp8": "FP8 (default)", "bf16@L3": "bf16, mode 3", "fp8@L3": "FP8, mode 3",
         "fp8@L3+passes": "FP8, mode 3 + passes"}
#: The ops a reader follows through the passes: the quantization, the fused ops, the norm's rsqrt.
KEY_OPS = ("minivllm.scaled_fp8_quant", "minivllm.rms_norm_dynamic_per_token_quant",
           "minivllm.fused_add_rms_norm_dynamic_per_token_quant", "minivllm.silu_and_mul_dynamic_per_token_quant",
           "aten.rsqrt", "minivllm.fp8_scaled_mm")


# ---- the piece and its passes ---------------------------------------------------------------------------------
def _stages(res: dict | None) -> list[dict]:
    return ((res or {}).get("piece") or {}).get("stages") or []


def _trim(lines: list[str]) -> tuple[list[str], int]:
    """The lines up to layer 1's qkv split; the rest (its q/k RMSNorm and RoPE) counted, not shown."""
    end = next((i for i, ln in enumerate(lines) if "split_with_sizes" in ln), len(lines) - 1)
    return lines[:end + 1], len(lines) - end - 2


def piece_before(res: dict | None) -> str:
    """The piece's graph before any pass, trimmed after layer 1's qkv projection."""
    st = _stages(res)
    if not st:
        return NOT_RECORDED
    shown, rest = _trim(st[0]["lines"])
    tail = (f"... {rest} more ops: layer 1's q/k RMSNorm and RoPE (no quantization follows them, so no pass "
            f"matches), then `{st[0]['lines'][-1]}`") if rest > 0 else ""
    return "\n".join(shown + ([tail] if tail else []))


def piece_diffs(res: dict | None) -> str:
    """Each pass's change to the graph: its match count, then the lines it removed (-) and added (+)."""
    st = _stages(res)
    if not st:
        return NOT_RECORDED
    out = []
    for prev, cur in itertools.pairwise(st):
        out.append(f"== {cur['name']}: {cur['matches']} match(es), {len(cur['lines']) - 1} ops (was {len(prev['lines']) - 1})")
        diff = [ln for ln in difflib.unified_diff(prev["lines"], cur["lines"], lineterm="", n=0)
                if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        out += [f"  {ln}" for ln in diff] or ["  (graph unchanged)"]
    return "\n".join(out)


def ops_rows(res: dict | None) -> list[dict]:
    return [{"stage": s["name"], "matches": s["matches"], "ops": len(s["lines"]) - 1,
             **{k: s["ops"].get(k, 0) for k in KEY_OPS}} for s in _stages(res)]


def ops_table(res: dict | None) -> str:
    rows = ops_rows(res)
    if not rows:
        return NOT_RECORDED
    short = dict(zip(KEY_OPS, ("quant", "norm+quant", "add+norm+quant", "silu_mul+quant", "rsqrt", "fp8_mm")))
    head = f"{'after':<17}{'matches':>8}{'ops':>5}" + "".join(f"{short[k]:>16}" for k in KEY_OPS)
    lines = [head]
    for r in rows:
        m = "-" if r["matches"] is None else str(r["matches"])
        lines.append(f"{r['stage']:<17}{m:>8}{r['ops']:>5}" + "".join(f"{r[k]:>16}" for k in KEY_OPS))
    return "\n".join(lines)


def plot_ops(res: dict | None):
    """Ops in the piece after each pass: the quantizations left, the fused ops, everything else."""
    from minivllm_labs.plots import figure

    rows = ops_rows(res)
    stages = [r["stage"] for r in rows]
    fused = [sum(r[k] for k in KEY_OPS[1:4]) for r in rows]
    quant = [r["minivllm.scaled_fp8_quant"] for r in rows]
    other = [r["ops"] - f - q for r, f, q in zip(rows, fused, quant)]
    return figure(stages, {"FP8 quantization ops": quant, "fused ops": fused, "other ops": other}, kind="bar",
                  title="Ops in one piece after each pass (the embedded model, FP8 weights)",
                  x_title="after the pass", y_title="ops in the graph",
                  zh={"title": "每个 pass 之后一个 piece 里的算子（内置模型，FP8 权重）", "x": "pass 之后",
                      "y": "图中的算子数",
                      "names": {"FP8 quantization ops": "FP8 量化算子", "fused ops": "融合后的算子",
                                "other ops": "其他算子"}})


def pattern_view(res: dict | None) -> str:
    p = (res or {}).get("patterns")
    if not p:
        return NOT_RECORDED
    return ("search (residual add + RMSNorm, eps 1e-6, then the quantization):\n  " + "\n  ".join(p["search"])
            + "\nreplace:\n  " + "\n  ".join(p["replace"]))


# ---- TPOT: bf16 and FP8, with and without the passes ----------------------------------------------------------
def _summary(res: dict | None) -> dict:
    return ((res or {}).get("fp8") or {}).get("summary") or {}


def _runs(res: dict | None) -> dict:
    return ((res or {}).get("fp8") or {}).get("runs") or {}


def cell(res: dict | None, variant: str, batch: int) -> dict | None:
    """One variant at one batch: TPOT median and [min, max] over the rounds, the floor, the floor's share,
    and kernels per step at batch 1 (median of the rounds)."""
    s = _summary(res).get(variant, {}).get(str(batch))
    if not s:
        return None
    allv = s["tpot_ms_all"]
    kernels = [k for k in _summary(res)[variant].get("kernels_per_step_batch1") or [] if k]
    return {"tpot": s["tpot_ms_median"], "lo": min(allv), "hi": max(allv), "n": len(allv), "floor": s["floor_ms"],
            "weight_mb": s["weight_mb"], "share": s["floor_ms"] / s["tpot_ms_median"] if s["floor_ms"] else None,
            "kernels": statistics.median(kernels) if kernels and batch == 1 else None}


def fp8_table(res: dict | None) -> str:
    summary = _summary(res)
    if not summary:
        return "no TPOT in this record (a GPU measurement: python -m minivllm_labs.record lab12 on CUDA)"
    head = (f"{'variant':<24}{'batch':>6}{'TPOT ms':>9}{'[min, max]':>18}{'floor ms':>10}{'floor/TPOT':>11}"
            f"{'weights MB':>11}{'kernels':>9}")
    lines = [head]
    for v in summary:
        for b in sorted(int(k) for k in summary[v] if k.isdigit()):
            c = cell(res, v, b)
            k = f"{c['kernels']:.0f}" if c["kernels"] else "-"
            share = f"{100 * c['share']:.1f}%" if c["share"] else "-"
            floor = f"{c['floor']:.3f}" if c["floor"] else "-"
            spread = f"[{c['lo']:.3f}, {c['hi']:.3f}]"
            lines.append(f"{NAMES.get(v, v):<24}{b:>6}{c['tpot']:>9.3f}{spread:>18}"
                         f"{floor:>10}{share:>11}{c['weight_mb']:>11,.0f}{k:>9}")
    gbps = (res.get("fp8") or {}).get("copy_gbps")
    if gbps:
        lines.append(f"floor = bytes a step reads / the copy bandwidth measured in the same run, {gbps:,.0f} GB/s; "
                     f"kernels: one profiled batch-1 step")
    return "\n".join(lines)


def plot_tpot(res: dict | None):
    """TPOT of each variant at batch 1 and 64, beside the bf16 and FP8 byte floors."""
    from minivllm_labs.plots import figure

    summary = _summary(res)
    batches = sorted({int(b) for v in summary.values() for b in v if b.isdigit()})
    series = {NAMES.get(v, v): [(cell(res, v, b) or {}).get("tpot") for b in batches] for v in summary}
    for v, label in (("bf16", "bf16 byte floor"), ("fp8", "FP8 byte floor")):
        if v in summary:
            series[label] = [(cell(res, v, b) or {}).get("floor") for b in batches]
    zh = {"bf16 (default)": "bf16（默认）", "FP8 (default)": "FP8（默认）", "bf16, mode 3": "bf16，mode 3",
          "FP8, mode 3": "FP8，mode 3", "FP8, mode 3 + passes": "FP8，mode 3 + pass",
          "bf16 byte floor": "bf16 字节下限", "FP8 byte floor": "FP8 字节下限"}
    return figure([f"batch {b}" for b in batches], series, kind="bar", toggle=True,
                  title="Decode TPOT against the byte floor (Qwen3-0.6B shape)", x_title="batch size",
                  y_title="ms per output token",
                  zh={"title": "解码 TPOT 与字节下限（Qwen3-0.6B 形状）", "x": "batch 大小", "y": "每个输出 token 的 ms",
                      "names": zh})


def compare(res: dict | None, before: str, after: str, batch: int) -> dict | None:
    """after vs before at one batch: the ratio of medians and whether the rounds' ranges separate them."""
    b, a = cell(res, before, batch), cell(res, after, batch)
    if not b or not a:
        return None
    verdict = spread_verdict((b["lo"], b["hi"]), (a["lo"], a["hi"]))
    return {"before": b, "after": a, "ratio": a["tpot"] / b["tpot"],
            "verdict": "within the spread" if verdict == "within" else verdict}


def matches(res: dict | None, variant: str) -> dict | None:
    """The passes' match counts in the engine's own compile (compile_report), first round."""
    runs = _runs(res).get(variant) or []
    rep = (runs[0].get("compile_report") if runs else None) or {}
    return {p["name"]: p["matches"] for p in rep.get("passes", [])} or None


PAIRS = (("bf16", "fp8", "FP8 weights (default engine)"), ("fp8", "fp8@L3", "FP8: mode 3 asked for"),
         ("fp8@L3", "fp8@L3+passes", "FP8 at mode 3: the passes on"), ("bf16", "bf16@L3", "bf16: mode 3 asked for"),
         ("fp8", "fp8@L3+passes", "FP8: compiled forward with the passes vs the default plain forward"))


def passes_table(res: dict | None) -> str:
    """Each change as after / before at batch 1 and 64, with the kernels of a batch-1 step."""
    if not _summary(res):
        return "no TPOT in this record (a GPU measurement)"
    lines = []
    for before, after, what in PAIRS:
        rows = [(b, compare(res, before, after, b)) for b in (1, 64)]
        if not all(r for _, r in rows):
            continue
        lines.append(f"{what}: {NAMES[before]} -> {NAMES[after]}")
        for b, r in rows:
            lines.append(f"  batch {b:>2}: {r['before']['tpot']:.3f} -> {r['after']['tpot']:.3f} ms "
                         f"({r['ratio']:.2f}x, {r['verdict']}; {r['before']['n']} + {r['after']['n']} rounds)")
        kb, ka = cell(res, before, 1)["kernels"], cell(res, after, 1)["kernels"]
        if kb and ka:
            lines.append(f"  kernels per batch-1 step: {kb:.0f} -> {ka:.0f}")
        m = matches(res, after)
        if m and after.endswith("+passes"):
            lines.append("  matches in the engine's compile: " + ", ".join(f"{k} {v}" for k, v in m.items()))
    return "\n".join(lines)


# ---- accuracy ----------------------------------------------------------------------------------------------
def accuracy_table(res: dict | None) -> str:
    """FP8's cost in accuracy: the embedded model's checkable answers and the logprob gap to fp32."""
    res = res or {}
    lines = []
    acc = (res.get("fp8") or {}).get("accuracy")
    if acc:
        lines.append(f"embedded model with FP8 weights: demo answers right {100 * acc['embedded_demo_answers_fp8']:.0f}%")
        for where, label in (("embedded", "embedded model, held-out questions"),
                             ("checkpoint", "Qwen3-0.6B shape, random weights, random tokens")):
            for v, gap in (acc.get(where) or {}).items():
                lines.append(f"  {label:<48} {v:<5} |logprob - fp32|: max {gap['max']:.4f}, mean {gap['mean']:.4f} "
                             f"over {gap['tokens']} tokens")
    here = res.get("accuracy_here")
    if here:
        lines.append(f"embedded model on this device: demo answers right, fp32 {100 * here['fp32']['demo_answers']:.0f}%, "
                     f"FP8 {100 * here['fp8']['demo_answers']:.0f}%")
        g = here["gap_vs_fp32"]
        lines.append(f"  FP8 |logprob - fp32| on held-out questions: max {g['max']:.4f}, mean {g['mean']:.4f} over "
                     f"{g['tokens']} tokens")
    return "\n".join(lines) or NOT_RECORDED


# ---- verdicts ------------------------------------------------------------------------------------------------
def verdict_rows(res: dict | None) -> list[dict]:
    """The lab's questions answered by the record: (question, verdict, the number, where it is)."""
    rows = []
    b1, f1 = cell(res, "bf16", 1), cell(res, "fp8", 1)
    if b1 and f1 and b1["floor"] and f1["floor"]:
        r = f1["floor"] / b1["floor"]
        rows.append({"claim": "FP8 weights halve the batch-1 byte floor", "claim_zh": "FP8 权重让 batch 1 的字节下限减半",
                     "verdict": "right" if r < 0.55 else "partly", "number": f"FP8 floor / bf16 floor = {r:.2f}",
                     "number_zh": f"FP8 下限 / bf16 下限 = {r:.2f}",
                     "key": "fp8.summary.fp8.1.floor_ms / fp8.summary.bf16.1.floor_ms"})
    for batch in (1, 64):
        c = compare(res, "bf16", "fp8", batch)
        if c:
            faster = c["verdict"] == "faster"
            rows.append({"claim": f"FP8 weights make decode faster at batch {batch}",
                         "claim_zh": f"FP8 权重让 batch {batch} 的解码更快",
                         "verdict": "right" if faster else "wrong",
                         "number": f"TPOT FP8 / bf16 = {c['ratio']:.2f} ({c['verdict']})",
                         "number_zh": f"TPOT FP8 / bf16 = {c['ratio']:.2f}（{VERDICT_ZH.get(c['verdict'], c['verdict'])}）",
                         "key": f"fp8.summary.fp8.{batch}.tpot_ms_median"})
    for batch in (1, 64):
        c = compare(res, "fp8@L3", "fp8@L3+passes", batch)
        if c:
            rows.append({"claim": f"the fusion passes cut FP8 TPOT at batch {batch} beyond the spread",
                         "claim_zh": f"融合 pass 让 batch {batch} 的 FP8 TPOT 降幅超出波动",
                         "verdict": "right" if c["verdict"] == "faster" else "wrong",
                         "number": f"with / without = {c['ratio']:.2f} ({c['verdict']})",
                         "number_zh": f"开 / 关 = {c['ratio']:.2f}（{VERDICT_ZH.get(c['verdict'], c['verdict'])}）",
                         "key": f"fp8.summary.fp8@L3+passes.{batch}.tpot_ms_all"})
    acc = ((res or {}).get("fp8") or {}).get("accuracy") or {}
    if "embedded_demo_answers_fp8" in acc:
        a = acc["embedded_demo_answers_fp8"]
        rows.append({"claim": "FP8 weights keep the embedded model's checkable answers",
                     "claim_zh": "FP8 权重下内置模型的可核对答案不变",
                     "verdict": "right" if a == 1 else "partly", "number": f"{100 * a:.0f}% right",
                     "number_zh": f"答对 {100 * a:.0f}%",
                     "key": "fp8.accuracy.embedded_demo_answers_fp8"})
    return rows


def verdict_table(res: dict | None) -> str:
    """The verdict rows as an HTML table in both languages (the book's switch shows one)."""
    import html

    rows = verdict_rows(res)
    if not rows:
        return (f'<p><span class="lang-en">{html.escape(NOT_RECORDED)}</span><span class="mv-sep"> · </span>'
                '<span class="lang-zh" lang="zh">尚未录制：在 CUDA GPU 上运行 python -m minivllm_labs.record lab12</span></p>')
    cells = "".join(
        f"<tr><td><span class=\"lang-en\">{html.escape(r['claim'])}</span><span class=\"mv-sep\"> · </span>"
        f"<span class=\"lang-zh\" lang=\"zh\">{html.escape(r['claim_zh'])}</span></td><td><b>{r['verdict']}</b></td>"
        f"<td><span class=\"lang-en\">{html.escape(r['number'])}</span><span class=\"mv-sep\"> · </span>"
        f"<span class=\"lang-zh\" lang=\"zh\">{html.escape(r['number_zh'])}</span></td><td><code>lab12.json:{html.escape(r['key'])}</code></td></tr>"
        for r in rows)
    return ("<table><thead><tr><th>claim · 说法</th><th>verdict · 结论</th><th>number · 数字</th>"
            f"<th>evidence · 证据</th></tr></thead><tbody>{cells}</tbody></table>")


# ---- evidence behind the questions ----------------------------------------------------------------------------
NAMES_ZH = {"bf16": "bf16（默认）", "fp8": "FP8（默认）", "bf16@L3": "bf16，mode 3", "fp8@L3": "FP8，mode 3",
            "fp8@L3+passes": "FP8，mode 3 + pass"}
VERDICT_ZH = {"within the spread": "在波动范围内", "faster": "更快", "slower": "更慢"}


def _src(res: dict | None, lang: str = "en") -> str:
    recorded = bool(res and "provenance" in res)
    if lang == "zh":
        return "H200 实测（lab12.json）" if recorded else "本次运行"
    return "recorded H200 results (lab12.json)" if recorded else "this run"


def _fp8_zh(res: dict | None) -> list[str]:
    summary = _summary(res)
    if not summary:
        return ["这份结果里没有 TPOT（要在 CUDA GPU 上测：python -m minivllm_labs.record lab12）"]
    out = []
    for v in summary:
        for b in sorted(int(k) for k in summary[v] if k.isdigit()):
            c = cell(res, v, b)
            floor = f"，字节下限 {c['floor']:.3f} ms（占 TPOT 的 {100 * c['share']:.1f}%）" if c["floor"] and c["share"] else ""
            kernels = f"，每步 {c['kernels']:.0f} 个 kernel" if c["kernels"] else ""
            out.append(f"{NAMES_ZH.get(v, v)}，batch {b}：TPOT {c['tpot']:.3f} ms [{c['lo']:.3f}, {c['hi']:.3f}]"
                       f"{floor}，权重 {c['weight_mb']:,.0f} MB{kernels}")
    return out


def _passes_zh(res: dict | None) -> list[str]:
    if not _summary(res):
        return ["这份结果里没有 TPOT（要在 CUDA GPU 上测）"]
    out = []
    for before, after, _ in PAIRS:
        for b in (1, 64):
            r = compare(res, before, after, b)
            if r:
                out.append(f"{NAMES_ZH[before]} → {NAMES_ZH[after]}，batch {b}：{r['before']['tpot']:.3f} → "
                           f"{r['after']['tpot']:.3f} ms（{r['ratio']:.2f}x，{VERDICT_ZH.get(r['verdict'], r['verdict'])}）")
    return out


def _ops_zh(res: dict | None) -> list[str]:
    rows = ops_rows(res)
    if not rows:
        return ["还没有记录：在 CUDA GPU 上运行 python -m minivllm_labs.record lab12"]
    return [f"{r['stage']} 之后：{r['ops']} 个算子" + ("" if r["matches"] is None else f"，匹配 {r['matches']} 处")
            for r in rows]


def _evidence(res: dict | None, lang: str, tables, zh_parts) -> str:
    if lang == "zh":
        return "\n".join([f"{_src(res, lang)}：", *(line for part in zh_parts for line in part(res))])
    return "\n".join([f"{_src(res)}:", *(t(res) for t in tables)])


def ev_floor(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, (fp8_table,), (_fp8_zh,))


def ev_kernels(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, (fp8_table, passes_table), (_fp8_zh, _passes_zh))


def ev_passes(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, (ops_table, passes_table), (_ops_zh, _passes_zh))


QUESTIONS = load_questions("lab12", {"ev_floor": ev_floor, "ev_kernels": ev_kernels, "ev_passes": ev_passes})
Q_FLOOR, Q_KERNELS, Q_SLOWER, Q_PATTERN, Q_DEFAULT = (QUESTIONS[f"lab12.q{i}"] for i in range(1, 6))
