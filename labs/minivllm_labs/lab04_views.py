"""Lab 04's figures, tables, the numbers behind its questions and its verdicts' rules (the measurements are in
lab04.py, the questions and claims themselves in data/lab04.yaml).

Every function takes a results dict shaped like `lab04.run_all(...)` returns it: the recorded H200 file or
what the notebook measured here, so recorded and local numbers are drawn by the same code.
"""

from __future__ import annotations

import json
from functools import lru_cache

from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab_info import resolve_key  # noqa: F401
from minivllm_labs.quiz_data import load_claims, load_questions

RESULTS = "assets/results/h200/lab04.json"
STARTUP = "assets/results/h200/startup.json"
PHASES = ("load_weights", "profile_run", "kv_cache", "Dynamo", "AOT + Inductor", "compile (other)",
          "cudagraph_capture")
HANDBOOK = {"load_weights": "几秒到几分钟 (seconds to minutes)", "profile_run": "~10 秒 (~10 s)",
            "compile": "每个 size 一次, 几十秒到几分钟 (once per size, tens of s to minutes)",
            "cudagraph_capture": "几秒 (a few s)", "total": "1-5 分钟 (1-5 min)"}


@lru_cache(maxsize=1)
def startup_record() -> dict:
    """The recorded `minivllm bench startup` run (cold / warm, level 3, H200), or {} if absent."""
    p = REPO_ROOT / STARTUP
    return json.loads(p.read_text()) if p.exists() else {}


def _where(res: dict | None, lang: str = "en") -> str:
    prov = (res or {}).get("provenance") or {}
    if lang == "zh":
        return f"在 {prov['gpu']} 上测得" if prov.get("gpu") else "在本机测得"
    return f"Measured on {prov['gpu']}" if prov.get("gpu") else "Measured here"


# ---- figures ---------------------------------------------------------------------------------------------
def plot_phases(res: dict):
    """One bar per startup phase, one colour per mode (buttons show one mode at a time)."""
    from minivllm_labs.plots import figure

    ph = res["phases"]
    series = {f"{m} ({v['total_s']} s total)": [v["phases_s"][p] for p in PHASES] for m, v in ph.items()}
    zh_names = {f"{m} ({v['total_s']} s total)": f"{m}（共 {v['total_s']} 秒）" for m, v in ph.items()}
    return figure(list(PHASES), series, kind="bar", toggle=True, y_title="seconds",
                  title="Engine startup, phase by phase",
                  zh={"title": "引擎启动，逐阶段", "y": "秒", "names": zh_names})


def plot_cold_warm(res: dict):
    from minivllm_labs.plots import figure

    c = res["cache"]
    series = {f"cold ({c['cold']['total_s']} s)": [c["cold"]["phases_s"][p] for p in PHASES],
              f"warm, {'new' if c.get('new_process') else 'same'} process ({c['warm']['total_s']} s)":
              [c["warm"]["phases_s"][p] for p in PHASES]}
    cold, warm = list(series)
    proc = "新进程" if c.get("new_process") else "同一进程"
    return figure(list(PHASES), series, kind="bar", y_title="seconds",
                  title=f"Level {c['level']}: cold vs warm start (warm = {c['warm_over_cold']}x cold)",
                  zh={"title": f"Level {c['level']}：冷启动 vs 热启动（热 = 冷的 {c['warm_over_cold']} 倍）", "y": "秒",
                      "names": {cold: f"冷启动（{c['cold']['total_s']} 秒）",
                                warm: f"热启动，{proc}（{c['warm']['total_s']} 秒）"}})


# ---- tables ----------------------------------------------------------------------------------------------
def phases_table(res: dict) -> str:
    ph = res["phases"]
    modes = list(ph)
    rows = [f"{'phase':<20}" + "".join(f"{m:>20}" for m in modes) + "   handbook (§3)"]
    compile_rows = {"Dynamo", "AOT + Inductor", "compile (other)"}
    for p in PHASES:
        hb = HANDBOOK["compile"] if p == "Dynamo" else "" if p in compile_rows else HANDBOOK.get(p, "")
        rows.append(f"{p:<20}" + "".join(f"{ph[m]['phases_s'][p]:>20}" for m in modes) + f"   {hb}")
    rows.append(f"{'total':<20}" + "".join(f"{ph[m]['total_s']:>20}" for m in modes) + f"   {HANDBOOK['total']}")
    rows.append(f"{'graph mode':<20}" + "".join(f"{ph[m]['cudagraph_mode']:>20}" for m in modes))
    rows.append(f"{'graphs traced':<20}" + "".join(f"{ph[m]['unique_graphs']:>20}" for m in modes))
    if any(ph[m].get("tpot_ms") for m in modes):
        rows.append(f"{'TPOT (ms)':<20}" + "".join(f"{str(ph[m]['tpot_ms']):>20}" for m in modes))
    return "\n".join(rows) + "\n(seconds)"


def cache_table(res: dict) -> str:
    c = res["cache"]
    where = (f"a new process (which first spent {c['warm_import_s']} s importing torch and the engine)"
             if c["new_process"] else "this process (on a GPU the recorder restarts Python instead)")
    lines = [f"level {c['level']}, cold: {c['cold']['total_s']} s (torch.compile {c['cold']['compile_s']} s, "
             f"Dynamo {c['cold']['phases_s']['Dynamo']} s, graphs traced {c['cold']['unique_graphs']})",
             f"level {c['level']}, warm: {c['warm']['total_s']} s (torch.compile {c['warm']['compile_s']} s, "
             f"cache_warm={c['warm']['cache_warm']}, Dynamo skipped: {c['warm']['dynamo_skipped']}, graphs traced "
             f"{c['warm']['unique_graphs']}), started in {where}",
             f"warm / cold: {c['warm_over_cold']}x in total, {c['compile_warm_over_cold']}x for torch.compile",
             f"one cache entry holds: {', '.join(c['entry']['files'])}",
             "  and sub-directories " + ", ".join(f"{k}/ ({v} files)" for k, v in c["entry"]["subdirs"].items())]
    return "\n".join(lines)


def faults_table(res: dict) -> str:
    f = res["faults"]
    rows = [f"corrupted: {f['corrupted_file']} (bytes flipped)",
            f"{'start':<36}{'same entry':<12}{'warm?':<7}{'compile s':>10}  engine warning"]
    for r in f["rows"]:
        warn = "; ".join(r["warnings"]) or "-"
        rows.append(f"{r['start']:<36}{str(r['same_entry']):<12}{str(r['cache_warm']):<7}{str(r['compile_s']):>10}"
                    f"  {warn}")
    return "\n".join(rows)


def warmup_table(res: dict) -> str:
    w = res["warmup"]
    rows = [f"{'(batch, prompt len)':<22}" + "".join(f"{str(tuple(s)):>10}" for s in w["shapes"])]
    for name, label in (("level3", "level 3: recompiles"), ("level1", "level 1: recompiles")):
        rows.append(f"{label:<22}" + "".join(f"{n:>10}" for n in w[name]["recompiles_after_each"]))
    return "\n".join(rows) + "\n(run-time recompiles counted by compile_report(), cumulative)"


# ---- questions ------------------------------------------------------------------------------------------
def q4_evidence(res: dict | None, lang: str = "en") -> str:
    """Cold and warm start of this lab's record (the one figure per fact the lab quotes) and the warm-up requests."""
    if lang == "zh":
        return _q4_zh(res)
    lines = []
    if res and "cache" in res:
        c = res["cache"]
        lines.append(f"{_where(res)}: cold {c['cold']['total_s']} s (torch.compile {c['cold']['compile_s']} s, of which "
                     f"Dynamo {c['cold']['phases_s']['Dynamo']} s; capture {c['cold']['phases_s']['cudagraph_capture']} s), "
                     f"warm {c['warm']['total_s']} s ({c['warm_over_cold']}x), Dynamo skipped on the warm start: "
                     f"{c['warm']['dynamo_skipped']}")
    if res and "warmup" in res:
        w = res["warmup"]
        lines.append(f"- after requests of {len(w['shapes'])} new shapes: level 3 recompiled "
                     f"{w['level3']['recompiles_at_runtime']} times, stock torch.compile (level 1) "
                     f"{w['level1']['recompiles_at_runtime']} times")
    return "\n".join(lines)


def _q4_zh(res: dict | None) -> str:
    lines = []
    if res and "cache" in res:
        c = res["cache"]
        lines.append(f"{_where(res, 'zh')}：冷启动 {c['cold']['total_s']} s（torch.compile {c['cold']['compile_s']} s，其中 "
                     f"Dynamo {c['cold']['phases_s']['Dynamo']} s；CUDA Graph 捕获 {c['cold']['phases_s']['cudagraph_capture']} s），"
                     f"热启动 {c['warm']['total_s']} s（{c['warm_over_cold']}x），热启动跳过了 Dynamo："
                     f"{c['warm']['dynamo_skipped']}")
    if res and "warmup" in res:
        w = res["warmup"]
        lines.append(f"- 来了 {len(w['shapes'])} 个新形状的请求之后：level 3 重编译 {w['level3']['recompiles_at_runtime']} 次，"
                     f"原生 torch.compile（level 1）{w['level1']['recompiles_at_runtime']} 次")
    return "\n".join(lines)


def level0_compiled_nothing(res: dict) -> bool:
    """True when the mode-0 ("graphs") start ran no Dynamo and traced no graph: its compile phase is empty."""
    g = res["phases"]["graphs"]
    return g["phases_s"]["Dynamo"] == 0 and g["phases_s"]["AOT + Inductor"] == 0 and g["unique_graphs"] == 0


def level0_text(res: dict | None) -> str:
    """What {"mode": 0} did in this record: its compile phase, its graphs, and its startup and TPOT beside the
    other two engines (the "graphs" run is the mode-0 engine)."""
    if not res or "phases" not in res or "graphs" not in res["phases"]:
        return ""
    ph, g = res["phases"], res["phases"]["graphs"]
    l0 = res.get("level0") or {"cudagraph_mode": g["cudagraph_mode"], "capture_sizes": g["capture_sizes"],
                               "mode_alias_level": "?"}
    compiled = ("no Dynamo, no graph traced: nothing compiled" if level0_compiled_nothing(res) else
                f"Dynamo ran and traced {g['unique_graphs']} graph(s): this mode 0 compiled")
    graphs = (f"cudagraph_mode {l0['cudagraph_mode']}, {l0['capture_sizes']} sizes captured in "
              f"{g['phases_s']['cudagraph_capture']} s" if l0["capture_sizes"] else
              f"cudagraph_mode {l0['cudagraph_mode']}: no CUDA graphs on this device")
    lines = [(f'{{"mode": 0}} (read as level {l0["mode_alias_level"]}): compile phase '
              f"{g['compile_s']} s (Dynamo {g['phases_s']['Dynamo']} s, AOT + Inductor "
              f"{g['phases_s']['AOT + Inductor']} s, graphs traced {g['unique_graphs']}): {compiled}; {graphs}"),
             "startup, s: " + ", ".join(f"{m} {v['total_s']}" for m, v in ph.items())]
    if any(v.get("tpot_ms") for v in ph.values()):
        lines.append("TPOT, ms: " + ", ".join(f"{m} {v['tpot_ms']}" for m, v in ph.items()))
    return "\n".join(lines)


def level0_evidence(res: dict | None, lang: str = "en") -> str:
    if not res or "level0" not in res:
        return ""
    l0 = res["level0"]
    if lang == "zh":
        text = (f"{_where(res, 'zh')}：LLM(compilation_config={{'mode': 0}}) 以 cudagraph_mode {l0['cudagraph_mode']} 运行"
                f"（{l0['capture_sizes']} 个捕获尺寸），编译 level {l0['compile_level']}（{{'mode': 0}} 被读作 level "
                f"{l0['mode_alias_level']}）")
        if "graphs" in (res.get("phases") or {}):
            g = res["phases"]["graphs"]
            text += f"；编译阶段 {g['compile_s']} s（Dynamo {g['phases_s']['Dynamo']} s，追踪的图 {g['unique_graphs']} 个）"
        return text
    text = (f"{_where(res)}: LLM(compilation_config={{'mode': 0}}) ran with cudagraph_mode {l0['cudagraph_mode']} "
            f"({l0['capture_sizes']} capture sizes), compile level {l0['compile_level']} ({{'mode': 0}} is read as "
            f"level {l0['mode_alias_level']})")
    if "graphs" in (res.get("phases") or {}):
        g = res["phases"]["graphs"]
        text += (f"; compile phase {g['compile_s']} s (Dynamo {g['phases_s']['Dynamo']} s, graphs traced "
                 f"{g['unique_graphs']})")
    return text


# ---- claims ------------------------------------------------------------------------------------------------


QUESTIONS = load_questions("lab04", {"q4_evidence": q4_evidence, "level0_evidence": level0_evidence})
Q4, Q_LEVEL0 = QUESTIONS["lab04.q4"], QUESTIONS["lab04.q_level0"]
#: The claims whose verdict is recomputed from their number (data/lab04.yaml marks them `rule: true`).
RULES = {
    "lab04.warmup": lambda n: "partly" if n == 0 else "right",
}
CLAIMS = load_claims("lab04", RULES)


# ---- the summary of verdicts (both labs use it) ------------------------------------------------------------
def verdicts_table(claims: tuple, rec: dict | None, own_file: str) -> str:
    """Claim, verdict, the number that decides it and where it lives. Numbers in `own_file` (this lab's
    record) come from `rec`; other files are read from assets/results/h200/."""

    rows = []
    for c in claims:
        data = rec if c.evidence_file == own_file else (json.loads((REPO_ROOT / c.evidence_file).read_text())
                                                          if (REPO_ROOT / c.evidence_file).exists() else None)
        try:
            number = resolve_key(data, c.evidence_key) if data else "not recorded yet"
        except (KeyError, IndexError, TypeError):
            number = "not recorded yet"
        if isinstance(number, float):
            number = round(number, 4)
        rows.append(f"- {c.claim_en}\n    verdict: {c.verdict}; number: {number} "
                    f"({c.evidence_file.rsplit('/', 1)[-1]}: {c.evidence_key})")
    return "\n".join(rows)


def bench_startup_table() -> str:
    """The recorded `minivllm bench startup` (H200, level 3 + graphs, cold and warm) next to the handbook."""
    s = startup_record()
    if not s:
        return "assets/results/h200/startup.json is not in this checkout"
    c, w = s["cold"]["phases_s"], s["warm"]["phases_s"]
    rows = [f"{'phase':<22}{'cold s':>9}{'warm s':>9}   handbook (§3)"]
    for key, label, hb in (("load_weights", "load_weights", HANDBOOK["load_weights"]),
                           ("profile_run", "profile_run", HANDBOOK["profile_run"]),
                           ("kv_cache", "kv_cache", ""), ("  of which Dynamo", "  Dynamo", ""),
                           ("  of which AOT + Inductor", "  AOT + Inductor", ""),
                           ("torch.compile", "torch.compile", HANDBOOK["compile"]),
                           ("cudagraph_capture", "cudagraph_capture", HANDBOOK["cudagraph_capture"]),
                           ("total", "total", HANDBOOK["total"]), ("import", "(process) import", ""),
                           ("process_wall", "(process) wall", "")):
        cv, wv = c.get(key), w.get(key)
        rows.append(f"{label:<22}{'-' if cv is None else round(cv, 2):>9}{'skipped' if wv is None else round(wv, 2):>9}"
                    f"   {hb}")
    return "\n".join(rows) + (f"\nwarm / cold total: {round(s['ratio_warm_over_cold']['total'], 3)}x; "
                              f"warm tokens equal cold: {s['warm_tokens_equal_cold']}")


def startup_figures_text(res: dict | None, bench: dict | None = None) -> str:
    """The two recorded cold / warm starts side by side, with their trees, and which one the book quotes.

    Both are mode 3 + FULL_AND_PIECEWISE, default sizes, each start a new process; they ran different trees, so
    their totals differ. One figure per fact: this lab's record, the newer, is the one quoted."""
    bench = startup_record() if bench is None else bench
    cache = (res or {}).get("cache") or {}
    lines = []
    if cache.get("cold") and cache.get("warm"):
        commit = ((res or {}).get("provenance") or {}).get("commit", "?")
        lines.append(f"lab04.json (this lab's recorder, {commit}): cold {cache['cold']['total_s']} s, warm "
                     f"{cache['warm']['total_s']} s ({round(cache['warm']['total_s'] / cache['cold']['total_s'], 2)}x)"
                     f"; the warm start still loads the compiled pieces "
                     f"({cache['warm']['phases_s'].get('compile (other)')} s) and captures "
                     f"({cache['warm']['phases_s'].get('cudagraph_capture')} s): the figure the book quotes")
    if bench.get("cold") and bench.get("warm"):
        commit = (bench.get("provenance") or {}).get("git", {}).get("commit", "?")
        c, w = bench["cold"]["phases_s"], bench["warm"]["phases_s"]
        lines.append(f"startup.json (`minivllm bench startup`, {commit}, an older tree): cold "
                     f"{round(c['total'], 1)} s, warm {round(w['total'], 1)} s: what that tree's bench printed, "
                     f"superseded by the line above")
    return "\n".join(lines) or "(not recorded yet: `python -m minivllm_labs.record lab04` on a GPU makes them)"
