"""What Lab 11's notebook shows: tables and figures of a lab11 results dict (recorded on the H200, or measured
here), the evidence behind the questions, and the claim. Every function takes the results (or None) and
says "not recorded yet" rather than failing, and keys a later recorder adds are optional. It never imports
lab11.py's measurements."""

from __future__ import annotations

from minivllm_labs.quiz_data import load_claims, load_questions

NOT_RECORDED = "(not recorded yet: `python -m minivllm_labs.record lab11` on a GPU makes it; the cells below run it here)"
SET_NAMES = {"tasks": "its tasks", "repeated_question": "a question repeated", "repeat": "repeated pattern",
             "novel": "no repetition"}
SET_NAMES_ZH = {"tasks": "自身任务", "repeated_question": "重复提问", "repeat": "重复片段", "novel": "无重复"}


def _models(res: dict | None) -> dict[str, dict]:
    return ((res or {}).get("models") or {}) if isinstance(res, dict) else {}


def _ks(m: dict) -> dict[str, dict]:
    """{"k0": row, ...} of one model, only the k's whose engine was built."""
    return {k: r for k, r in (m.get("k") or {}).items() if r.get("available")}


def _k(name: str) -> int:
    return int(name[1:])


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _unavailable(res: dict | None) -> str | None:
    """Why no k > 0 engine was built, when none was (an engine without speculative_config)."""
    whys = [r.get("why") for m in _models(res).values() for r in (m.get("k") or {}).values()
            if not r.get("available")]
    return f"speculative decoding not available in this engine build: {whys[0]}" if whys else None


# ---- a) acceptance ------------------------------------------------------------------------------------------
def acceptance_table(res: dict | None) -> str:
    """Per model, prompt set and k: drafts, draft tokens, accepted, acceptance rate, mean acceptance length
    (tokens per verify step: 1 + accepted / drafts), accepted tokens per draft position."""
    if not _models(res):
        return NOT_RECORDED
    out = [(f"{'model':<10} {'prompts':<20} {'k':>2} {'drafts':>7} {'draft tok':>9} {'accepted':>8} {'rate':>5} "
            f"{'tok/step':>8}  accepted per position")]
    for mk, m in _models(res).items():
        for kn, row in _ks(m).items():
            for sn, s in (row.get("acceptance") or {}).items():
                mal = s.get("mean_acceptance_length")
                out.append(f"{mk:<10} {SET_NAMES.get(sn, sn):<20} {_k(kn):>2} {s['num_drafts']:>7} "
                           f"{s['num_draft_tokens']:>9} {s['num_accepted_tokens']:>8} {_pct(s.get('acceptance_rate')):>5} "
                           f"{'-' if mal is None else format(mal, '.2f'):>8}  {s.get('accepted_per_pos') or '-'}")
    why = _unavailable(res)
    return "\n".join(out + ([f"({why})"] if why else []))


def plot_acceptance(res: dict):
    """Tokens per verify step (mean acceptance length) against k, a line per model and prompt set."""
    from minivllm_labs.plots import figure

    ks = list(res.get("k_values") or [0, 2, 4])
    series, zh = {}, {}
    for mk, m in _models(res).items():
        rows = _ks(m)
        for sn in next((list((r.get("acceptance") or {})) for r in rows.values()), []):
            name = f"{mk}, {SET_NAMES.get(sn, sn)}"
            series[name] = [((rows.get(f"k{k}") or {}).get("acceptance") or {}).get(sn, {}).get(
                "mean_acceptance_length") for k in ks]
            zh[name] = f"{mk}，{SET_NAMES_ZH.get(sn, sn)}"
    return figure(ks, series, kind="line", toggle=True, x_title="num_speculative_tokens k",
                  y_title="tokens per step (1 + accepted / drafts)",
                  title="N-gram speculation: tokens a verify step yields, by k and prompt",
                  zh={"title": "n-gram 投机解码：每个验证步产出的 token 数（按 k 与 prompt）",
                      "x": "num_speculative_tokens k", "y": "每步 token 数（1 + 接受数 / 草稿次数）", "names": zh})


# ---- b) TPOT ----------------------------------------------------------------------------------------------
def _tpot_rows(m: dict) -> dict[str, dict[int, dict]]:
    """{"b1": {k: tpot row}} of one model."""
    out: dict[str, dict[int, dict]] = {}
    for kn, row in _ks(m).items():
        for b, t in (row.get("tpot") or {}).items():
            out.setdefault(b, {})[_k(kn)] = t
    return out


def speedup(base: dict, other: dict) -> str:
    """TPOT without over TPOT with, or "within noise" when their [min, max] over repeats overlap."""
    lo, hi = base.get("tpot_ms_range") or [base["tpot_ms"]] * 2, other.get("tpot_ms_range") or [other["tpot_ms"]] * 2
    if lo[0] <= hi[1] and hi[0] <= lo[1]:
        return "within noise"
    return f"{base['tpot_ms'] / other['tpot_ms']:.2f}x"


def tpot_table(res: dict | None) -> str:
    """Per model and batch: TPOT (ms, median [min, max]) at each k, its change against k = 0, tokens per step."""
    if not _models(res):
        return NOT_RECORDED
    out = [f"{'model':<10} {'batch':>5} {'k':>2} {'TPOT ms [min, max]':>26} {'vs k=0':>13} {'tok/step':>8}"]
    for mk, m in _models(res).items():
        for by_k in _tpot_rows(m).values():
            for k, t in sorted(by_k.items()):
                r = t.get("tpot_ms_range") or [t["tpot_ms"]] * 2
                vs = "-" if k == 0 or 0 not in by_k else speedup(by_k[0], t)
                out.append(f"{mk:<10} {t['batch']:>5} {k:>2} {t['tpot_ms']:>9.3f} [{r[0]:.3f}, {r[1]:.3f}] {vs:>13} "
                           f"{t.get('mean_acceptance_length') or 1.0:>8.2f}")
    out.append("(vs k=0: TPOT without / with speculation, >1x is faster; 'within noise' when the ranges overlap)")
    return "\n".join(out)


def tpot_summary(res: dict | None) -> str:
    """One line per model and batch, EN then ZH: what k = 4 did to TPOT against k = 0."""
    lines = []
    for mk, m in _models(res).items():
        for by_k in _tpot_rows(m).values():
            if 0 in by_k and 4 in by_k:
                s = speedup(by_k[0], by_k[4])
                t0, t4 = by_k[0]["tpot_ms"], by_k[4]["tpot_ms"]
                verdict = ("within noise" if s == "within noise" else
                           ("faster" if t4 < t0 else "slower"))
                zh = {"within noise": "在噪声范围内", "faster": "更快", "slower": "更慢"}[verdict]
                ratio_en, ratio_zh = ("", "") if verdict == "within noise" else (f" ({s})", f"（{s}）")
                lines.append(f"{mk}, batch {by_k[0]['batch']}: k=4 {t4:.3f} ms vs k=0 {t0:.3f} ms: {verdict}{ratio_en} · "
                             f"{mk}，batch {by_k[0]['batch']}：k=4 {t4:.3f} ms，k=0 {t0:.3f} ms：{zh}{ratio_zh}")
    return "\n".join(lines) or NOT_RECORDED


# ---- c) graphs --------------------------------------------------------------------------------------------
def graphs_table(res: dict | None) -> str:
    """(GPU) Per model and k: the graph mode, query tokens per request of a decode graph, the decode (FULL)
    sizes in requests and the piecewise sizes in tokens, capture seconds and the graph pool."""
    rows = [(mk, _k(kn), r["graphs"]) for mk, m in _models(res).items() for kn, r in _ks(m).items() if r.get("graphs")]
    if not rows:
        return "(GPU only: the graphs each k captures are recorded on a GPU)" if _models(res) else NOT_RECORDED
    out = [(f"{'model':<10} {'k':>2} {'mode':<19} {'q/req':>5} {'decode sizes (requests)':<28} {'piecewise':>9} "
            f"{'capture s':>9} {'pool MiB':>8}")]
    for mk, k, g in rows:
        full = g.get("full_sizes") or []
        sizes = f"{len(full)}: {full[0]}..{full[-1]}" if full else "-"
        out.append(f"{mk:<10} {k:>2} {g.get('mode', '?'):<19} {g.get('uniform_decode_query_len', 1):>5} {sizes:<28} "
                   f"{len(g.get('piecewise_sizes') or []):>9} {g.get('capture_s') or 0:>9.2f} "
                   f"{'-' if g.get('pool_mib') is None else format(g['pool_mib'], '.1f'):>8}")
    out.append("(a decode graph of b requests runs b x q query tokens; piecewise graphs are keyed by token count)")
    by = {(mk, k): g for mk, k, g in rows}
    for mk in dict.fromkeys(mk for mk, _, _ in rows):
        g0, g4 = by.get((mk, 0)), by.get((mk, max(k for m, k in by if m == mk)))
        if g0 and g4 is not g0 and g0.get("pool_mib") is not None and g4.get("pool_mib") is not None:
            out.append(f"{mk}: the graph pool with k={g4['uniform_decode_query_len'] - 1} is {g4['pool_mib']:.1f} MiB "
                       f"against {g0['pool_mib']:.1f} MiB without speculation ({g4['pool_mib'] - g0['pool_mib']:+.1f} MiB)")
    return "\n".join(out)


# ---- d) equality ------------------------------------------------------------------------------------------
def equality_text(res: dict | None) -> str:
    """Greedy tokens with speculation against without, and the sampled check, per model."""
    if not _models(res):
        return NOT_RECORDED
    out = []
    for mk, m in _models(res).items():
        for kn, r in _ks(m).items():
            g, s = r.get("greedy_equal"), r.get("sampled")
            if g:
                out.append(f"{mk}, k={_k(kn)}: greedy tokens identical to k=0 in {g['identical']}/{g['requests']} "
                           "sequences")
            if s:
                out.append(f"{mk}, k={_k(kn)}: temperature {s.get('temperature', 1)}, {s['requests']} samples of one "
                           "prompt: mean total-"
                           f"variation distance per position {s['tv_spec_vs_plain']:.3f} with vs without speculation, "
                           f"{s['tv_plain_vs_plain']:.3f} between two runs without (the sampling spread)")
    return "\n".join(out) or "(no speculative engine ran)"


# ---- questions ----------------------------------------------------------------------------------------------
MODEL_ZH = {"embedded": "内置模型", "qwen3-06b": "Qwen3-0.6B 形状"}


def _src(res: dict | None, lang: str = "en") -> str:
    gpu = ((res or {}).get("provenance") or {}).get("gpu")
    if lang == "zh":
        if not res:
            return "还没有实验 11 的结果：先运行上面的单元格（或在 GPU 上录制 lab11）。"
        return f"在 {gpu} 上测得" if gpu else "在本机测得"
    if not res:
        return "No lab11 results yet: run the cells above (or record lab11 on a GPU)."
    return f"Measured ({gpu})" if gpu else "Measured here"


def _acceptance_zh(res: dict) -> list[str]:
    out = []
    for mk, m in _models(res).items():
        for kn, row in _ks(m).items():
            for sn, a in (row.get("acceptance") or {}).items():
                if _k(kn) and a.get("num_drafts"):
                    out.append(f"{MODEL_ZH.get(mk, mk)}，{SET_NAMES_ZH.get(sn, sn)}，k = {_k(kn)}：草稿 {a['num_drafts']} 次，"
                               f"接受率 {_pct(a.get('acceptance_rate'))}，每个验证步 "
                               f"{a.get('mean_acceptance_length') or 1.0:.2f} 个 token")
    return out


def _tpot_zh(res: dict) -> list[str]:
    out = []
    for mk, m in _models(res).items():
        for by_k in _tpot_rows(m).values():
            for k, t in sorted(by_k.items()):
                r = t.get("tpot_ms_range") or [t["tpot_ms"]] * 2
                vs = "" if k == 0 or 0 not in by_k else "，对 k = 0：" + speedup(by_k[0], t).replace(
                    "within noise", "在噪声范围内")
                out.append(f"{MODEL_ZH.get(mk, mk)}，batch {t['batch']}，k = {k}：TPOT {t['tpot_ms']:.3f} ms "
                           f"[{r[0]:.3f}, {r[1]:.3f}]{vs}，每步 {t.get('mean_acceptance_length') or 1.0:.2f} 个 token")
    return out


def _graphs_zh(res: dict) -> list[str]:
    return [f"{MODEL_ZH.get(mk, mk)}，k = {_k(kn)}：{r['graphs'].get('mode', '?')}，decode 图每个请求 "
            f"{r['graphs'].get('uniform_decode_query_len', 1)} 个 query token，decode 尺寸（请求数）"
            f"{r['graphs'].get('full_sizes') or '-'}，显存池 {r['graphs'].get('pool_mib')} MiB"
            for mk, m in _models(res).items() for kn, r in _ks(m).items() if r.get("graphs")]


def _equality_zh(res: dict) -> list[str]:
    out = []
    for mk, m in _models(res).items():
        for kn, r in _ks(m).items():
            if g := r.get("greedy_equal"):
                out.append(f"{MODEL_ZH.get(mk, mk)}，k = {_k(kn)}：{g['identical']}/{g['requests']} 条贪心序列与 k = 0 完全相同")
            if s := r.get("sampled"):
                out.append(f"{MODEL_ZH.get(mk, mk)}，k = {_k(kn)}：采样（温度 {s.get('temperature', 1)}）每个位置的平均总变差距离，"
                           f"开与不开投机解码之间 {s['tv_spec_vs_plain']:.3f}，两次都不开之间 {s['tv_plain_vs_plain']:.3f}（采样本身的波动）")
    return out


def _evidence(res: dict | None, lang: str, table, zh_lines) -> str:
    if not res:
        return _src(res, lang)
    if lang == "zh":
        return "\n".join([f"{_src(res, lang)}：", *zh_lines(res)])
    return f"{_src(res)}:\n{table(res)}"


def q_lookup_evidence(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, acceptance_table, _acceptance_zh)


def q_batch_evidence(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, tpot_table, _tpot_zh)


def q_graphs_evidence(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, graphs_table, _graphs_zh)


def q_greedy_evidence(res: dict | None, lang: str = "en") -> str:
    return _evidence(res, lang, equality_text, _equality_zh)


QUESTIONS = load_questions("lab11", {"q_lookup_evidence": q_lookup_evidence, "q_batch_evidence": q_batch_evidence,
                                     "q_graphs_evidence": q_graphs_evidence, "q_greedy_evidence": q_greedy_evidence})
Q_LOOKUP, Q_BATCH, Q_GRAPHS, Q_GREEDY = (QUESTIONS[f"lab11.q{i}"] for i in range(1, 5))

CLAIMS = load_claims("lab11")
