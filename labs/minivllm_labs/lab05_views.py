"""Lab 05's drawings, tables, the numbers behind its questions, its verdicts' rules (faults and measurements:
lab05.py; the questions and claims themselves: data/lab05.yaml).

The §4.6 flowchart is drawn as inline SVG (no JavaScript, no CDN: it renders in JupyterLab, nbconvert HTML
and the book alike) with the path one fault took highlighted, above the engine's own ladder of rungs.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache

from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab_info import resolve_key  # noqa: F401
from minivllm_labs.plots import show  # noqa: F401 - the labs' one display call for figures
from minivllm_labs.quiz_data import load_claims, load_questions

RESULTS = "assets/results/h200/lab05.json"
STARTUP = "assets/results/h200/lab04.json"  # Lab 04's cold / warm starts: the figure the book quotes
UNREGISTERED = "assets/results/h200/attention_unregistered.json"
REGISTERED = "assets/results/h200/attention_registered.json"
RUNGS = ("as configured", "CUDA graphs off", "torch.compile off", "both off")


@lru_cache(maxsize=None)
def recorded_file(rel: str) -> dict:
    p = REPO_ROOT / rel
    return json.loads(p.read_text()) if p.exists() else {}


# ---- the §4.6 flowchart ----------------------------------------------------------------------------------
_NODES = {  # id: (x, y, English, Chinese)
    "A": (380, 28, "start-up or run fails", "启动 / 运行报错"),
    "B": (380, 92, "which layer failed?", "先看是哪一层报错"),
    "C": (130, 172, "capture: turn graphs off", "关 CUDA Graph (--enforce-eager)"),
    "D": (380, 172, "torch.compile: turn compile off", "关 compile (level 0)"),
    "E": (630, 172, "runs, wrong result: both off", "同时关两者 (--enforce-eager)"),
    "F": (380, 252, "still failing?", "还报错?"),
    "G": (210, 332, "fp32 / small batch: find the op", "fp32 / 小 batch 复现, 定位 op"),
    "H": (550, 332, "re-enable one at a time", "逐步打开, 找出问题层"),
}
_EDGES = (("A", "B", ""), ("B", "C", "capture"), ("B", "D", "compile"), ("B", "E", "silent"), ("C", "F", ""),
          ("D", "F", ""), ("E", "F", ""), ("F", "G", "yes 是"), ("F", "H", "no 否"))
_BRANCH = {"graph": ("C", "CUDA graphs off"), "compile": ("D", "torch.compile off"), "numerics": ("E", "both off")}


def ladder_path(fault: dict) -> list[str]:
    """The §4.6 nodes one fault walks: its diagnosed layer picks the branch; 'still failing?' is answered by
    whether the engine started at that branch's rung (or an earlier one, which turns off less)."""
    layer = (fault.get("diagnosis") or {}).get("layer", "unknown")
    node, rung = _BRANCH.get(layer, ("E", "both off"))
    upto = RUNGS[:RUNGS.index(rung) + 1]  # the handbook's rung for this branch, or one turning off less
    fixed = any(r["ok"] for r in fault.get("ladder", []) if r["step"] in upto)
    return ["A", "B", node, "F", "H" if fixed else "G"]


def ladder_html(fault: dict, title: str = "") -> str:
    """ladder_svg as an <img> with a data: URI: JupyterLab strips inline <svg> from a notebook it does not trust
    (one opened before running it), which ran the diagram's labels together; an image is drawn in every
    viewer. The alt text says the same in words."""
    import base64

    svg = ladder_svg(fault, title)
    path = " → ".join(ladder_path(fault))
    alt = html.escape(f"{title}: fallback flowchart, path {path}" if title else f"fallback flowchart, path {path}")
    src = base64.b64encode(svg.encode()).decode()
    return (f'<img class="mv-ladder" alt="{alt}" title="{alt}" style="max-width:100%;width:760px" '
            f'src="data:image/svg+xml;base64,{src}">')


def ladder_svg(fault: dict, title: str = "") -> str:
    """The flowchart with this fault's path highlighted, and the engine's rungs (ok / failed / not tried)."""
    path = ladder_path(fault)
    on = set(zip(path, path[1:]))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 760 470" width="760" role="img" '
             'style="font-family: sans-serif; max-width: 100%">',
             '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
             '<path d="M0,0 L8,4 L0,8 z" fill="#475569"/></marker></defs>']
    if title:
        parts.append(f'<text x="10" y="14" font-size="12" font-weight="bold">{html.escape(title)}</text>')
    for a, b, label in _EDGES:
        (x1, y1, *_), (x2, y2, *_) = _NODES[a], _NODES[b]
        hot = (a, b) in on
        parts.append(f'<line x1="{x1}" y1="{y1 + 20}" x2="{x2}" y2="{y2 - 22}" stroke="{"#d97706" if hot else "#94a3b8"}" '
                     f'stroke-width="{3 if hot else 1.2}" marker-end="url(#arr)"/>')
        if label:
            parts.append(f'<text x="{(x1 + x2) / 2 + 4}" y="{(y1 + y2) / 2 + 2}" font-size="10" fill="#475569">'
                         f'{html.escape(label)}</text>')
    for nid, (x, y, en, zh) in _NODES.items():
        hot = nid in path
        parts.append(f'<rect x="{x - 108}" y="{y - 20}" width="216" height="40" rx="6" '
                     f'fill="{"#fde68a" if hot else "#eff5ff"}" stroke="{"#d97706" if hot else "#2563eb"}" '
                     f'stroke-width="{2.5 if hot else 1}"/>')
        parts.append(f'<text x="{x}" y="{y - 4}" font-size="11" text-anchor="middle">{html.escape(en)}</text>')
        parts.append(f'<text x="{x}" y="{y + 12}" font-size="11" text-anchor="middle">{html.escape(zh)}</text>')
    parts.append('<text x="10" y="392" font-size="11" font-weight="bold">The engine\'s ladder, '
                 'LLM(..., fallback="auto") · 引擎的降级路径</text>')
    report = {r["step"]: r for r in fault.get("ladder", [])}
    for i, rung in enumerate(RUNGS):
        r = report.get(rung)
        fill, mark = ("#dcfce7", "ok ✓") if r and r["ok"] else ("#fee2e2", f"✗ {r.get('layer', '')}") if r \
            else ("#f1f5f9", "not tried")
        x = 10 + i * 187
        parts.append(f'<rect x="{x}" y="402" width="177" height="50" rx="6" fill="{fill}" stroke="#64748b"/>')
        parts.append(f'<text x="{x + 88}" y="423" font-size="11" text-anchor="middle">{html.escape(rung)}</text>')
        parts.append(f'<text x="{x + 88}" y="441" font-size="11" text-anchor="middle">{html.escape(mark)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---- tables ----------------------------------------------------------------------------------------------
def fault_summary(fault: dict | None, name: str) -> str:
    if not fault:
        return f"{name}: needs a CUDA GPU (recorded on the H200 by `python -m minivllm_labs.record lab05`)"
    d = fault.get("diagnosis") or {}
    lines = [f"{name} fault ({fault['kind']}, engine {fault['config']}):"]
    if fault.get("error"):
        lines.append(f"  error:      {fault['error'][:300]}")
        lines.append(f"  innermost:  {fault['raw_error'][:300]}")
    else:
        lines.append(f"  no error; greedy tokens differ from eager: {fault.get('silent')} "
                     f"({fault.get('identical_probes')} of 3 probes identical)")
        lines.append(f"  with verify=True: {fault.get('verify_error', 'no error')}")
    lines.append(f"  diagnose:   [{d.get('layer')}] -> {d.get('suggestion', '')[:120]}")
    lines.append("  ladder:     " + " -> ".join(f"{r['step']} {'ok' if r['ok'] else 'FAILED [' + r['layer'] + ']'}"
                                               for r in fault["ladder"]))
    lines.append(f"  after the fallback, tokens equal eager's: {fault['tokens_match_eager_after_fallback']}")
    return "\n".join(lines)


def heuristics_table(res: dict) -> str:
    rows = [f"{'fault':<10}{'§4.6 rule says':<18}{'diagnose() says':<18}{'the ladder blames':<18}"]
    for h in res["heuristics"]:
        rows.append(f"{h['fault']:<10}{h['handbook_says']:<18}{str(h['diagnose_says']):<18}{h['ladder_blames']:<18}")
    return "\n".join(rows) + ("\n(rules: 'cudaGraphExec*/graphExec*' -> graph; 'inductor/dynamo/FX' -> compile; "
                              "no error -> numerics; 'none' = no rule matched the message)")


def locate_table(res: dict) -> str:
    loc = res["locate"]
    rows = [f"decoder layers run eagerly vs traced (Dynamo), {loc['dtype']}, batch {loc['batch']}:",
            f"{'layer':<7}{'layer output max |diff|':>24}   sub-modules max |diff|"]
    for r in loc["layers"]:
        subs = ", ".join(f"{k} {v}" for k, v in r["submodules"].items())
        rows.append(f"{r['layer']:<7}{r['max_abs_diff']:>24}   {subs}")
    rows.append(f"first layer that differs: {loc['first_bad_layer']} (the fault was planted in layer "
                f"{loc['planted_in']}); its sub-modules agree, so the op is in the layer's own forward code")
    return "\n".join(rows)


def scenario_rows(res: dict | None) -> list[dict]:
    """§4.5, one row per scenario: the measurement that decides it, and the verdict it gives."""
    res = res or {}
    st, un, reg = recorded_file(STARTUP), recorded_file(UNREGISTERED), recorded_file(REGISTERED)
    dbg, oom, rc = res.get("debug") or {}, res.get("oom"), res.get("recompiles") or {}
    num = (res.get("faults") or {}).get("numerics") or {}
    rows = []
    g = dbg.get("FULL graphs")
    rows.append({"scenario": "debugging 调试模型正确性", "measured": (
        f"layer {1}'s Python forward ran {g['calls_while_generating']}x while generating {dbg['new_tokens']} tokens "
        f"with FULL graphs ({g['calls_at_startup']}x at startup: warm-up and capture), "
        f"{dbg['eager']['calls_while_generating']}x eagerly" if g else
        f"eager: {dbg['eager']['calls_while_generating']} calls for {dbg['new_tokens']} tokens; graphs need CUDA"
        if dbg else "not measured"), "verdict": "right" if g and g["calls_while_generating"] < dbg["new_tokens"]
        else "unverifiable here"})
    rows.append({"scenario": "new architecture 新模型架构", "measured": (
        f"a mistraced layer: no error, {3 - num.get('identical_probes', 3)} of 3 greedy probes wrong; verify=True "
        f"caught it at startup" if num else "not measured"),
        "verdict": "right" if num.get("silent") else "unverifiable here"})
    capture_mib = round(1024 * ((oom or {}).get("graphs") or {}).get("capture_gib", 0.0), 1)
    rows.append({"scenario": "OOM margin 严重 OOM 边缘", "measured": (
        f"enforce_eager gives the KV cache {oom['eager_frees_mib']} MiB more ({oom['freed_fraction_of_kv']:.2%} of "
        f"the KV cache, {oom['freed_fraction_of_gpu']:.2%} of the GPU): handbook '几百 MB', article '10-15%'. "
        f"That is the graph reserve the engine subtracts before sizing (an estimate); the capture itself measured "
        f"{capture_mib} MiB, so the estimate is generous. vLLM (by default since v0.21) subtracts the graph memory it "
        f"estimates while profiling instead (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, "
        f"https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)"
        if oom else "KV sizing from free memory needs CUDA"),
        "verdict": ("right" if 100 <= oom["eager_frees_mib"] <= 1000 else "partly") if oom else "unverifiable here"})
    cache = st.get("cache") or {}
    rows.append({"scenario": "cold start 冷启动敏感", "measured": (
        f"mode 3 + graphs: {round(cache['cold']['total_s'], 1)} s cold, {round(cache['warm']['total_s'], 1)} s "
        f"warm from the compile cache (Lab 04, lab04.json); mode 0 keeps the full decode graphs without compiling "
        f"here (vLLM's mode 0 alone sets NONE: https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py); "
        f"eager skips both, at eager TPOT" if cache.get("cold") and cache.get("warm") else "see Lab 04"),
        "verdict": "partly"})
    rows.append({"scenario": "sparse dynamic shapes 动态 shape 稀疏", "measured": (
        "run-time recompiles after 5 new shapes: " + ", ".join(f"{k} {v}" for k, v in rc.items())
        if rc else "not measured"),
        "verdict": "wrong" if rc.get("symbolic batch (level 2)") == 0 else "unverifiable here"})
    m, r = (un.get("modes") or {}).get("NONE@L1", {}), (reg.get("rows") or [{}])[0]
    rows.append({"scenario": "unregistered op 自定义 op 未注册", "measured": (
        f"stock torch.compile without fullgraph (level 1 at 8794c6b, allow_graph_breaks today): "
        f"{m['compile_report']['graph_breaks']} graph breaks, "
        f"{m['compile_report']['recompiles_at_runtime']} recompiles, TPOT {round(un['rows'][0]['tpot_s'] * 1e3, 1)} "
        f"vs {round(r['tpot_s'] * 1e3, 1)} ms registered; with fullgraph (modes 1-3, here and in vLLM: "
        f"https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/wrapper.py) startup fails instead"
        if m else "see Lab 03"), "verdict": "partly"})
    return rows


def source_of(data: dict | None, name: str = "") -> str:
    """Where a row's numbers come from: a GPU's record (with its commit) or this machine, now."""
    prov = (data or {}).get("provenance") or {}
    if prov.get("gpu"):
        gpu = "H200" if "H200" in prov["gpu"] else prov["gpu"]
        return f"{gpu} record{' ' + name if name else ''}, commit {str(prov.get('commit', '?'))[:12]}"
    return "this machine, now" if data else "no record"


def scenario_table(res: dict | None) -> str:
    """The rows with the source of each: `res` (the record or this run) for the rows it measures, the recorded
    Lab 04 / Lab 03 files for cold start and the unregistered op (never re-measured here)."""
    here = source_of(res)
    files = {"cold start 冷启动敏感": source_of(recorded_file(STARTUP), "lab04.json"),
             "unregistered op 自定义 op 未注册": source_of(recorded_file(UNREGISTERED), UNREGISTERED.rsplit("/", 1)[-1])}
    return "\n".join(f"{r['scenario']}\n    measured: {r['measured']}\n    source:   {files.get(r['scenario'], here)}"
                     f"\n    verdict:  {r['verdict']}" for r in scenario_rows(res))


# ---- questions ------------------------------------------------------------------------------------------
def _where(res: dict | None, lang: str = "en") -> str:
    prov = (res or {}).get("provenance") or {}
    if lang == "zh":
        return f"在 {prov['gpu']} 上测得" if prov.get("gpu") else "在本机测得"
    return f"Measured on {prov['gpu']}" if prov.get("gpu") else "Measured here"


def q3_evidence(res: dict | None, lang: str = "en") -> str:
    g = ((res or {}).get("faults") or {}).get("graph")
    if lang == "zh":
        if not g:
            return "捕获故障需要 CUDA GPU；录制后在 lab05.json（faults.graph）里。"
        return (f"{_where(res, 'zh')}：FULL 图下第 1 层里的 .item() 报错：“{g['raw_error'][:160]}”；"
                f"诊断 -> [{g['diagnosis']['layer']}]；回退阶梯："
                + " -> ".join(f"{r['step']} {'成功' if r['ok'] else '失败'}" for r in g["ladder"]))
    if not g:
        return "The capture fault needs a CUDA GPU; its recording is in lab05.json (faults.graph) once made."
    return (f"{_where(res)}: a .item() in layer 1 under FULL graphs failed with: {g['raw_error'][:160]}; "
            f"diagnose -> [{g['diagnosis']['layer']}]; ladder: "
            + " -> ".join(f"{r['step']} {'ok' if r['ok'] else 'failed'}" for r in g["ladder"]))


def silent_evidence(res: dict | None, lang: str = "en") -> str:
    n = ((res or {}).get("faults") or {}).get("numerics")
    if not n:
        return ""
    loc = (res or {}).get("locate") or {}
    if lang == "zh":
        return (f"{_where(res, 'zh')}：追踪错了的那一层让 3 个贪心探针中 {3 - n['identical_probes']} 个出错，且没有报错；"
                f"verify=True 报出：“{n.get('verify_error', '')[:100]}”；回退阶梯用 "
                f"{next((r['step'] for r in n['ladder'] if r['ok']), '?')} 跑通；逐层 fp32 比对，第一个出现差异的层是 "
                f"{loc.get('first_bad_layer')}")
    return (f"{_where(res)}: the mistraced layer gave {3 - n['identical_probes']} of 3 wrong greedy probes with no "
            f"error; verify=True raised: {n.get('verify_error', '')[:100]}; the ladder ran with "
            f"{next((r['step'] for r in n['ladder'] if r['ok']), '?')}; layer by layer in fp32 the first layer "
            f"that differs is {loc.get('first_bad_layer')}")


# ---- claims ------------------------------------------------------------------------------------------------


QUESTIONS = load_questions("lab05", {"q3_evidence": q3_evidence, "silent_evidence": silent_evidence})
Q3, Q_SILENT = QUESTIONS["lab05.q3"], QUESTIONS["lab05.q_silent"]
#: The claims whose verdict is recomputed from their number (data/lab05.yaml marks them `rule: true`).
RULES = {
    "lab05.rule_compile": lambda v: "right" if v == "compile" else "wrong",
    "lab05.rule_silent": lambda v: "right" if v else "wrong",
    "lab05.sparse_shapes": lambda n: "wrong" if n == 0 else "right",
}
CLAIMS = load_claims("lab05", RULES)

