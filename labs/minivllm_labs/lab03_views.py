"""Lab 03's views: tables and plots of its measurements, the numbers behind its questions, the verdicts.

Feedback cites this lab's own record when it is given one, and the engine's earlier H200 benchmark files
(assets/results/h200/*.json, each with its provenance) for the numbers they already hold. The questions and
claims themselves are data/lab03.yaml.

Every function takes a results dict, recorded on the H200 (assets/results/h200/lab03.json) or measured in
the notebook, and copes with what a CPU run lacks (no graphs, fewer setups, C++ instead of Triton).
"""

from __future__ import annotations

import json
from functools import cache

from minivllm_labs.common import REPO_ROOT
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
        lines.append("level 1 (fullgraph=True, as every vLLM mode) with unregistered attention: " +
                     ("started" if fg.get("ok") else f"startup fails: {fg.get('error_type')}: {fg.get('message')}"))
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
    head = f"{'setup':<17}{'level':>6} {'graphs':<19}" + "".join(f"{'TPOT b' + b:>18}" for b in batches)
    lines = [head + f"{'kernels':>9}{'compile s':>10}{'traces':>7}{'recomp':>7}{'pieces':>7}"]
    for name, r in cfg.items():
        if "error" in r:
            lines.append(f"{name:<17}{r['level']:>6} {r['graphs']:<19}failed: {r['error']}")
            continue
        k = r.get("kernels_per_step") or r.get("ops_per_step") or "-"
        lines.append(f"{name:<17}{r['level']:>6} {r['graphs']:<19}"
                     + "".join(f"{_ms(r['tpot_ms'].get(b)):>18}" for b in batches)
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
                  title="Compile levels, with and without CUDA graphs",
                  zh={"title": "各编译级别，开与不开 CUDA Graph", "y": "TPOT（毫秒）"})


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
    return "\n".join(lines) + "\n(TPOT ms at batch 1; graphs/both > 1 means adding compile to graphs helped)"


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
                     f"{u['layer']['graph_breaks']} breaks; the engine at level 1 (fullgraph=True): "
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


def _ratio_text(a: dict | None, b: dict | None) -> str:
    """a / b of two medians, and whether the ranges overlap (then the difference is within the spread)."""
    if not a or not b:
        return "n/a"
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    return f"{round(a['median'] / b['median'], 2)}x ({a['median']} vs {b['median']} ms, " \
           f"{'within' if overlap else 'beyond'} the spread)"


def stacking_text(res: dict | None) -> str:
    """Interview question 1 on this record: graphs alone against graphs + compile, on both builds."""
    cfg, grid = _get(res, "configs"), _get(res, "grid")
    if not cfg or not grid:
        return NOT_RECORDED
    lines = []
    for build, corners in grid.items():
        for batch in ("1", "64"):
            g, both = _config_tpot(cfg, corners["graphs"], batch), _config_tpot(cfg, corners["both"], batch)
            lines.append(f"{build}, batch {batch}: graphs alone / graphs + mode 3 = {_ratio_text(g, both)}")
    return "\n".join(lines) + "\n(> 1: adding compile to graphs made the step faster)"


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
            lines.append(f"{label:<40} {k:>5} kernels, TPOT {t} ms at batch 1: {round(1000 * t / k, 1)} us per kernel")
    return "\n".join(lines) or NOT_RECORDED
