"""Lab 03's views: tables and plots of its measurements, the numbers behind its questions, the verdicts.

Feedback cites this lab's own record (the results it is given, else the H200's), one figure per fact; an earlier
H200 benchmark file is quoted only for what this record cannot hold: the cost of graph breaks, which needs an
engine that allows them (attention_*.json: mode 1 without fullgraph, what allow_graph_breaks=True builds and no
vLLM mode does). The questions and claims themselves are data/lab03.yaml.

Every function takes a results dict, recorded on the H200 (assets/results/h200/lab03.json) or measured in
the notebook, and copes with what a CPU run lacks (no graphs, fewer setups, C++ instead of Triton).
"""

from __future__ import annotations

import json
from functools import cache

from minivllm_labs.common import REPO_ROOT, spread_verdict
from minivllm_labs.lab02_views import _get, show, show_quiz  # noqa: F401  (re-exported for the notebook)
from minivllm_labs.lab_info import resolve_key
from minivllm_labs.quiz_data import load_claims, load_questions

RESULTS = "assets/results/h200/lab03.json"
H200 = "assets/results/h200/"

NOT_RECORDED = "(not recorded yet: `python -m minivllm_labs.record lab03` on a GPU makes these numbers)"


def _ms(s: dict | None) -> str:
    return "n/a" if not s else f"{s['median']} ({s['min']}-{s['max']})"


# ---- a) Dynamo -----------------------------------------------------------------------------------------
def dynamo_text(view: dict | None, fx: bool = True) -> str:
    if not view:
        return NOT_RECORDED
    lines = [f"attention_backend={view['attention_backend']!r}: {view['graphs']} graph(s), "
             f"{view['graph_breaks']} graph break(s), {view['ops']} ops, {view['attention_nodes']} attention "
             f"node(s) in the graphs, {view['guards']} guards "
             f"({', '.join(f'{k} {v}' for k, v in sorted(view['guards_by_source'].items()))})"]
    lines += [f"  break x{n}: {r}" for r, n in view["break_reasons"].items()]
    fg = view.get("fullgraph") or {}
    lines.append("  fullgraph=True: " + ("compiles" if fg.get("ok") else
                                         f"{fg.get('error_type')}: {fg.get('message')}"))
    if fx and view.get("fx_code"):
        lines += ["", "FX graph (the first one), shortened:", view["fx_code"]]
    return "\n".join(lines)


def registration_table(res: dict | None) -> str:
    reg = _get(res, "registration")
    if not reg:
        return NOT_RECORDED
    lines = [f"{'attention':<14}{'layer graphs':>13}{'layer breaks':>13}{'engine traces':>14}{'breaks':>8}"
             f"{'recompiles':>11}"]
    for ab in ("auto", "unregistered"):
        if ab not in reg:
            continue
        r = reg[ab]
        lines.append(f"{ab:<14}{r['layer']['graphs']:>13}{r['layer']['graph_breaks']:>13}"
                     + "".join(f"{r.get(k, '-')!s:>{w}}" for k, w in (("graphs_traced_at_startup", 14),
                                                                       ("graph_breaks", 8),
                                                                       ("recompiles_at_runtime", 11))))
    fg = reg.get("fullgraph_engine")
    if fg:
        lines.append("engine at mode 1 (fullgraph=True, as every vLLM mode), attention unregistered: " +
                     ("started" if fg.get("ok") else f"startup fails: {fg.get('error_type')}: {fg.get('message')}"))
        if not fg.get("ok"):
            lines.append("(so no engine counts for it; its layer row comes from an engine without compile)")
    return "\n".join(lines)


# ---- b) Inductor ---------------------------------------------------------------------------------------
def kernel_text(res: dict | None, max_lines: int = 45) -> str:
    ind = _get(res, "inductor")
    if not ind:
        return NOT_RECORDED
    src = ind["kernel"].splitlines()
    more = len(src) - max_lines
    return "\n".join([f"Inductor ({ind['device']}, {ind['language']}): {ind['num_kernels']} kernel(s) for the "
                      f"{ind['eager_ops']} eager ops of add + RMSNorm; max |compiled - eager| = "
                      f"{ind['max_abs_diff']}", ""] + src[:max_lines]
                     + ([f"... ({more} more lines)"] if more > 0 else []))


# ---- c) the sweep --------------------------------------------------------------------------------------
def configs_table(res: dict | None) -> str:
    cfg = _get(res, "configs")
    if not cfg:
        return NOT_RECORDED
    batches = sorted({b for r in cfg.values() for b in (r.get("tpot_ms") or {})}, key=int)
    head = f"{'setup':<17}{'mode':>5} {'graphs':<19}" + "".join(f"{'TPOT b' + b:>23}" for b in batches)
    lines = [head + f"{'kernels':>9}{'compile s':>10}{'traces':>7}{'recomp':>7}{'pieces':>7}"]
    for name, r in cfg.items():
        if "error" in r:
            lines.append(f"{name:<17}{r['level']:>5} {r['graphs']:<19}failed: {r['error']}")
            continue
        k = r.get("kernels_per_step") or r.get("ops_per_step") or "-"
        lines.append(f"{name:<17}{r['level']:>5} {r['graphs']:<19}"
                     + "".join(f"{_ms(r['tpot_ms'].get(b)):>23}" for b in batches)
                     + f"{k!s:>9}{r.get('compile_s') or 0:>10}{r.get('graphs_traced_at_startup') or 0:>7}"
                     f"{r.get('recompiles_at_runtime') or 0:>7}{r.get('pieces') or '-'!s:>7}")
    return "\n".join(lines) + "\n(TPOT ms: median (min-max); kernels per decode step (ops on a CPU), engines " \
                              "without graphs only)"


def plot_levels(res: dict):
    from minivllm_labs.plots import figure

    cfg = {k: v for k, v in res["configs"].items() if "error" not in v}
    batches = sorted({b for r in cfg.values() for b in r["tpot_ms"]}, key=int)
    series = {f"batch {b}": [_get(r, "tpot_ms", b, "median") for r in cfg.values()] for b in batches}
    return figure(list(cfg), series, kind="bar", toggle=True, log_y=True, y_title="TPOT (ms)",
                  title="Compilation modes, with and without CUDA graphs",
                  zh={"title": "各编译模式，开与不开 CUDA Graph", "y": "TPOT（毫秒）"})


def grid_table(res: dict | None) -> str:
    cfg, grid = _get(res, "configs"), _get(res, "grid")
    if not cfg or not grid:
        return NOT_RECORDED
    lines = [f"{'build':<12}" + "".join(f"{c:>12}" for c in ("eager", "graphs", "compile", "both"))
             + f"{'graphs/both':>13}"]
    for build, corners in grid.items():
        vals = {c: _get(cfg, corners[c], "tpot_ms", "1", "median") for c in corners}
        ratio = (round(vals["graphs"] / vals["both"], 3) if vals.get("graphs") and vals.get("both") else "n/a")
        lines.append(f"{build:<12}" + "".join(f"{vals[c] if vals[c] is not None else '-'!s:>12}"
                                              for c in ("eager", "graphs", "compile", "both")) + f"{ratio!s:>13}")
    return "\n".join(lines) + "\n(TPOT ms at batch 1, medians; graphs/both > 1 means adding compile to graphs " \
                              "helped, if beyond the spread: the lines below)"


def plot_grid(res: dict):
    from minivllm_labs.plots import figure

    cfg, grid = res["configs"], res["grid"]
    corners = ["eager", "graphs", "compile", "both"]
    series = {build: [_get(cfg, names[c], "tpot_ms", "1", "median") for c in corners] for build, names in grid.items()}
    return figure(corners, series, kind="bar", toggle=True, log_y=True, y_title="TPOT batch 1 (ms)",
                  title="Interview question 1: graphs, compile, both - on two builds",
                  zh={"title": "面试题 1：CUDA Graph、编译、两者都开——两个构建上的对比", "y": "TPOT batch 1（毫秒）"})


# ---- d) scopes -----------------------------------------------------------------------------------------
def scopes_table(res: dict | None) -> str:
    sc = _get(res, "scopes")
    if not sc:
        return NOT_RECORDED
    lines = [f"{'scope':<17}{'traces':>7}{'recompiles':>11}{'breaks':>7}{'pieces':>7}{'attention splits':>17}"]
    for name, r in sc.items():
        lines.append(f"{name:<17}{r['graphs_traced_at_startup'] or 0:>7}{r['recompiles_at_runtime'] or 0:>11}"
                     f"{r['graph_breaks'] or 0:>7}{r['pieces'] or '-'!s:>7}{r['attention_splits'] or '-'!s:>17}")
    n = next(iter(sc.values()))["num_layers"]
    return "\n".join(lines) + f"\n({n} decoder layers; Dynamo only, backend 'eager')"


def split_text(split: dict | None) -> str:
    if not split:
        return NOT_RECORDED
    p = split["pieces"]
    lines = [f"one trace of the whole forward, cut at {split['attention_splits']} attention ops into {len(p)} pieces "
             f"({split['num_layers']} layers); the {len(p) - 2} middle pieces are {split['distinct_middle']} "
             f"distinct op sequence(s):"]
    shown = [0, 1, len(p) - 1] if len(p) > 3 else range(len(p))
    for i in shown:
        if i == len(p) - 1 and len(p) > 3:
            lines.append(f"  ... pieces 2-{len(p) - 2} like piece 1")
        lines.append(f"  piece {i}: {p[i]['ops']} ops, {', '.join(p[i]['first'])} ... {', '.join(p[i]['last'])}")
    return "\n".join(lines)


# ---- the questions' evidence ------------------------------------------------------------------------------
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


def _here(res: dict | None, lang: str = "en") -> str:
    gpu = _get(res, "provenance", "gpu")
    if lang == "zh":
        return f"本实验的记录（{gpu}）" if gpu else "本次运行"
    return f"this lab's record ({gpu})" if gpu else "this run"


_NOT_RECORDED_ZH = "（尚未录制：在 GPU 上运行 `python -m minivllm_labs.record lab03` 得到这些数字）"


def _with(res: dict | None, key: str) -> dict | None:
    """`res` when it holds `key`, else the H200 record when there is one: feedback always quotes a measurement."""
    if _get(res, key):
        return res
    from minivllm_labs.recorded import RecordedResultsMissing, load_recorded

    try:
        return load_recorded("lab03")
    except RecordedResultsMissing:
        return None


def q1_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return _q1_zh(res)
    lines = []
    src = _with(res, "registration")
    reg = _get(src, "registration")
    if reg and "unregistered" in reg:
        u, a, fg = reg["unregistered"]["layer"], _get(reg, "auto", "layer"), reg.get("fullgraph_engine") or {}
        if fg:
            lines.append(f"In {_here(src)}: the engine at mode 1 (fullgraph=True, as every vLLM mode), attention "
                         "unregistered: " + ("started" if fg.get("ok") else
                                             f"startup fails with {fg.get('error_type')}: {fg.get('message')}"))
        lines.append(f"One layer traced without fullgraph: unregistered {u['graphs']} graphs, {u['graph_breaks']} "
                     f"breaks, {u['attention_nodes']} attention nodes"
                     + (f"; registered {a['graphs']} graph, {a['graph_breaks']} breaks, {a['attention_nodes']} "
                        "attention node" if a else ""))
    reg_t, unreg_t = _tpot("attention_registered", 0), _tpot("attention_unregistered", 0)
    key = "modes.NONE@L1.compile_report"
    lines += [("With graph breaks allowed (attention_*.json, recorded at 8794c6b when mode 1 compiled without "
               "fullgraph; today only allow_graph_breaks=True does, and vLLM has no such mode), no graphs, batch 1:"),
              f"- registered: {bench_value('attention_registered', key + '.graph_breaks')} breaks, TPOT {reg_t} ms",
              (f"- unregistered: {bench_value('attention_unregistered', key + '.graph_breaks')} breaks, "
               f"{bench_value('attention_unregistered', key + '.graphs_traced_at_startup')} graphs, "
               f"{bench_value('attention_unregistered', key + '.recompiles_at_runtime')} run-time recompiles, "
               f"TPOT {unreg_t} ms" + (f" ({round(unreg_t / reg_t, 2)}x)" if reg_t and unreg_t else "")),
              "Registration is also what lets mode 3 split the graph at attention (one node to cut at)."]
    return "\n".join(lines)


def _corner(cfg: dict, name: str, batch: str = "1") -> str:
    t = _config_tpot(cfg, name, batch)
    return "-" if not t else f"{t['median']} ({t['min']}-{t['max']})"


def q2_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return _q2_zh(res)
    src = _with(res, "configs")
    cfg, grid = _get(src, "configs"), _get(src, "grid")
    if not cfg or not grid:
        return NOT_RECORDED
    lines = [f"In {_here(src)}, TPOT at batch 1, ms, median (min-max over the repeats):"]
    for build, names in grid.items():
        lines.append(f"- {build}: eager / graphs / compile / both = "
                     + " / ".join(_corner(cfg, names[c]) for c in ("eager", "graphs", "compile", "both")))
    return "\n".join(lines + [stacking_text(src)])


def q3_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return _q3_zh(res)
    src = _with(res, "scopes")
    sc = _get(src, "scopes")
    if not sc:
        return NOT_RECORDED
    lines = [f"In {_here(src)}: scope {k}: {v['graphs_traced_at_startup']} trace(s) at startup, "
             f"{v['recompiles_at_runtime']} more at run time, pieces {v['pieces'] or '-'}" for k, v in sc.items()]
    l3 = _get(src, "configs", "L3+graphs")
    if l3 and l3.get("pieces"):
        lines.append(f"mode 3 with Inductor and graphs: {l3['pieces']} pieces, {l3.get('compiled_pieces')} of them "
                     f"compiled (the identical middle pieces once)")
    return "\n".join(lines)


def q4_evidence(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return _q4_zh(res)
    src = _with(res, "configs")
    cfg = _get(src, "configs")
    if not cfg:
        return NOT_RECORDED
    parts = []
    for name in ("eager", "L2", "L3", "graphs"):
        c = cfg.get(name) or {}
        if _get(c, "tpot_ms", "1"):
            k = c.get("kernels_per_step")
            parts.append(f"{name} {_corner(cfg, name)} ms" + (f" ({k} kernels per step)" if k else ""))
    return f"In {_here(src)}, TPOT at batch 1, median (min-max): " + ", ".join(parts)


def _q1_zh(res: dict | None) -> str:
    lines = []
    src = _with(res, "registration")
    reg = _get(src, "registration")
    if reg and "unregistered" in reg:
        u, a, fg = reg["unregistered"]["layer"], _get(reg, "auto", "layer"), reg.get("fullgraph_engine") or {}
        if fg:
            lines.append(f"{_here(src, 'zh')}：引擎在 mode 1（fullgraph=True，vLLM 的每个模式都如此）下、attention 未注册："
                         + ("能启动" if fg.get("ok") else f"启动失败，{fg.get('error_type')}：“{fg.get('message')}”"))
        lines.append(f"不加 fullgraph 追踪一层：未注册时 {u['graphs']} 个图、{u['graph_breaks']} 处断图、"
                     f"{u['attention_nodes']} 个 attention 节点"
                     + (f"；注册后 {a['graphs']} 个图、{a['graph_breaks']} 处断图、{a['attention_nodes']} 个 attention 节点"
                        if a else ""))
    reg_t, unreg_t = _tpot("attention_registered", 0), _tpot("attention_unregistered", 0)
    key = "modes.NONE@L1.compile_report"
    lines += [("允许断图时（attention_*.json，录于 8794c6b，那时 mode 1 编译不加 fullgraph；现在只有 allow_graph_breaks=True "
               "如此，vLLM 没有这种模式），不开图，batch 1："),
              f"- 已注册：{bench_value('attention_registered', key + '.graph_breaks')} 处断图，TPOT {reg_t} ms",
              (f"- 未注册：{bench_value('attention_unregistered', key + '.graph_breaks')} 处断图、"
               f"{bench_value('attention_unregistered', key + '.graphs_traced_at_startup')} 个图、运行时重编译 "
               f"{bench_value('attention_unregistered', key + '.recompiles_at_runtime')} 次，TPOT {unreg_t} ms"
               + (f"（{round(unreg_t / reg_t, 2)}x）" if reg_t and unreg_t else "")),
              "注册成自定义算子也是 mode 3 能在 attention 处切分图的前提（有一个可切的节点）。"]
    return "\n".join(lines)


def _q2_zh(res: dict | None) -> str:
    src = _with(res, "configs")
    cfg, grid = _get(src, "configs"), _get(src, "grid")
    if not cfg or not grid:
        return _NOT_RECORDED_ZH
    lines = [f"{_here(src, 'zh')}，batch 1 的 TPOT（ms，中位数，括号内为多次重复的最小-最大）："]
    for build, names in grid.items():
        lines.append(f"- {build}：eager / 图 / 编译 / 两者 = "
                     + " / ".join(_corner(cfg, names[c]) for c in ("eager", "graphs", "compile", "both")))
    return "\n".join(lines + [stacking_text(src, "zh")])


def _q3_zh(res: dict | None) -> str:
    src = _with(res, "scopes")
    sc = _get(src, "scopes")
    if not sc:
        return _NOT_RECORDED_ZH
    lines = [f"{_here(src, 'zh')}：编译范围 {k}：启动时追踪 {v['graphs_traced_at_startup']} 次，运行时再追踪 "
             f"{v['recompiles_at_runtime']} 次，分段 {v['pieces'] or '-'}" for k, v in sc.items()]
    l3 = _get(src, "configs", "L3+graphs")
    if l3 and l3.get("pieces"):
        lines.append(f"mode 3 + Inductor + 图：{l3['pieces']} 个分段，其中编译了 {l3.get('compiled_pieces')} 个"
                     f"（相同的中间分段只编译一次）")
    return "\n".join(lines)


def _q4_zh(res: dict | None) -> str:
    src = _with(res, "configs")
    cfg = _get(src, "configs")
    if not cfg:
        return _NOT_RECORDED_ZH
    parts = []
    for name in ("eager", "L2", "L3", "graphs"):
        c = cfg.get(name) or {}
        if _get(c, "tpot_ms", "1"):
            k = c.get("kernels_per_step")
            parts.append(f"{name} {_corner(cfg, name)} ms" + (f"（每步 {k} 个 kernel）" if k else ""))
    return f"{_here(src, 'zh')}，batch 1 的 TPOT（中位数，最小-最大）：" + "，".join(parts)


QUESTIONS = load_questions("lab03", {f"q{i}_evidence": f for i, f in enumerate((q1_evidence, q2_evidence, q3_evidence, q4_evidence), 1)})
Q1, Q2, Q3, Q4 = (QUESTIONS[f"lab03.q{i}"] for i in range(1, 5))
CLAIMS = load_claims("lab03")


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


# ---- prose numbers, read from the record ------------------------------------------------------------------
def _config_tpot(cfg: dict, name: str, batch: str) -> dict | None:
    return _get(cfg, name, "tpot_ms", batch)


def _ratio_text(a: dict | None, b: dict | None, lang: str = "en") -> str:
    """a / b of two medians, and whether the ranges overlap (then the difference is within the spread)."""
    if not a or not b:
        return "无数据" if lang == "zh" else "n/a"
    within = spread_verdict((a["min"], a["max"]), (b["min"], b["max"])) == "within"
    if lang == "zh":
        return (f"{round(a['median'] / b['median'], 2)}x（{a['median']} 对 {b['median']} ms，"
                f"{'在波动范围内' if within else '超出波动范围'}）")
    return f"{round(a['median'] / b['median'], 2)}x ({a['median']} vs {b['median']} ms, " \
           f"{'within' if within else 'beyond'} the spread)"


def stacking_effect(g: dict | None, both: dict | None) -> str | None:
    """What adding mode 3 to graphs did, counted only beyond the spread: "faster", "slower" or "within"."""
    if not g or not both:
        return None
    return spread_verdict((g["min"], g["max"]), (both["min"], both["max"]))


_EFFECT = {"faster": "faster beyond the spread", "slower": "slower beyond the spread",
           "within": "no difference beyond the spread"}


_EFFECT_ZH = {"faster": "更快，超出波动范围", "slower": "更慢，超出波动范围", "within": "差异不超出波动范围"}


def stacking_text(res: dict | None, lang: str = "en") -> str:
    """Interview question 1 on this record: graphs alone against graphs + compile, on both builds, and what
    adding compile did per build (a difference counts only beyond the spread over the repeats)."""
    cfg, grid = _get(res, "configs"), _get(res, "grid")
    zh = lang == "zh"
    if not cfg or not grid:
        return _NOT_RECORDED_ZH if zh else NOT_RECORDED
    lines, verdicts = [], []
    for build, corners in grid.items():
        effects = {}
        for batch in ("1", "64"):
            g, both = _config_tpot(cfg, corners["graphs"], batch), _config_tpot(cfg, corners["both"], batch)
            lines.append(f"{build}，batch {batch}：只开图 / 图 + mode 3 = {_ratio_text(g, both, lang)}" if zh else
                         f"{build}, batch {batch}: graphs alone / graphs + mode 3 = {_ratio_text(g, both)}")
            if stacking_effect(g, both):
                effects[batch] = stacking_effect(g, both)
        if effects and zh:
            verdicts.append(f"{build}：在图之上加 mode 3：" + "；".join(
                f"batch {b} {_EFFECT_ZH[e]}" for b, e in effects.items()))
        elif effects:
            same = len(set(effects.values())) == 1
            verdicts.append(f"{build}: adding mode 3 to graphs: " + (
                f"{_EFFECT[next(iter(effects.values()))]} at batch {' and '.join(effects)}" if same else
                "; ".join(f"batch {b} {_EFFECT[e]}" for b, e in effects.items())))
    if zh:
        return "\n".join(lines + verdicts) + "\n（只开图 / 图 + mode 3 > 1：编译让这一步更快）"
    return "\n".join(lines + verdicts) + "\n(graphs alone / graphs + mode 3 > 1: compile made the step faster)"


def kernels_vs_time_text(res: dict | None) -> str:
    """Kernels per decode step against TPOT, for the engines without graphs: the count does not set the time."""
    cfg = _get(res, "configs")
    if not cfg:
        return NOT_RECORDED
    lines = []
    for name, label in (("torch-ops eager", "PyTorch's own ops, eager"), ("eager", "hand-written kernels, eager"),
                        ("L2", "mode 2 (Inductor's kernels)"), ("L3", "mode 3 (Inductor's kernels)"),
                        ("fused L3", "mode 3 with the hand-written kernels")):
        c = cfg.get(name) or {}
        k, t = c.get("kernels_per_step"), _get(c, "tpot_ms", "1", "median")
        if k and t:
            lines.append(f"{label:<37} {k:>5} kernels, TPOT {t} ms at batch 1: {round(1000 * t / k, 1)} us per kernel")
    return "\n".join(lines) or NOT_RECORDED
