"""Lab 04's figures, tables, questions and claims (the measurements are in lab04.py).

Every function takes a results dict shaped like `lab04.run_all(...)` returns it: the recorded H200 file or
what the notebook measured here, so recorded and local numbers are drawn by the same code.
"""

from __future__ import annotations

import json
from functools import lru_cache

from minivllm_labs.catalog import Claim, LabInfo
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.quiz import Option, Question

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


def _where(res: dict | None) -> str:
    prov = (res or {}).get("provenance") or {}
    return f"Measured on {prov['gpu']}" if prov.get("gpu") else "Measured here"


# ---- figures ---------------------------------------------------------------------------------------------
def plot_phases(res: dict):
    """One bar per startup phase, one colour per mode (buttons show one mode at a time)."""
    from minivllm_labs.plots import figure

    ph = res["phases"]
    series = {f"{m} ({v['total_s']} s total)": [v["phases_s"][p] for p in PHASES] for m, v in ph.items()}
    return figure(list(PHASES), series, kind="bar", toggle=True, y_title="seconds",
                  title="Engine startup, phase by phase")


def plot_cold_warm(res: dict):
    from minivllm_labs.plots import figure

    c = res["cache"]
    series = {f"cold ({c['cold']['total_s']} s)": [c["cold"]["phases_s"][p] for p in PHASES],
              f"warm, {'new' if c.get('new_process') else 'same'} process ({c['warm']['total_s']} s)":
              [c["warm"]["phases_s"][p] for p in PHASES]}
    return figure(list(PHASES), series, kind="bar", y_title="seconds",
                  title=f"Level {c['level']}: cold vs warm start (warm = {c['warm_over_cold']}x cold)")


# ---- tables ----------------------------------------------------------------------------------------------
def phases_table(res: dict) -> str:
    ph = res["phases"]
    modes = list(ph)
    rows = [f"{'phase':<20}" + "".join(f"{m:>18}" for m in modes) + "   handbook (§3)"]
    compile_rows = {"Dynamo", "AOT + Inductor", "compile (other)"}
    for p in PHASES:
        hb = HANDBOOK["compile"] if p == "Dynamo" else "" if p in compile_rows else HANDBOOK.get(p, "")
        rows.append(f"{p:<20}" + "".join(f"{ph[m]['phases_s'][p]:>18}" for m in modes) + f"   {hb}")
    rows.append(f"{'total':<20}" + "".join(f"{ph[m]['total_s']:>18}" for m in modes) + f"   {HANDBOOK['total']}")
    rows.append(f"{'graph mode':<20}" + "".join(f"{ph[m]['cudagraph_mode']:>18}" for m in modes))
    rows.append(f"{'graphs traced':<20}" + "".join(f"{ph[m]['unique_graphs']:>18}" for m in modes))
    if any(ph[m].get("tpot_ms") for m in modes):
        rows.append(f"{'TPOT (ms)':<20}" + "".join(f"{str(ph[m]['tpot_ms']):>18}" for m in modes))
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
def q4_evidence(res: dict | None) -> str:
    s = startup_record()
    lines = []
    if s:
        lines.append(f"Recorded by `minivllm bench startup` (H200, Qwen3-0.6B, level 3): cold "
                     f"{round(s['cold']['phases_s']['total'], 1)} s, warm {round(s['warm']['phases_s']['total'], 1)} s "
                     f"({round(s['ratio_warm_over_cold']['total'], 2)}x); Dynamo {s['cold']['phases_s']['  of which Dynamo']}"
                     f" s cold, skipped warm")
    if res and "cache" in res:
        c = res["cache"]
        lines.append(f"{_where(res)}: cold {c['cold']['total_s']} s, warm {c['warm']['total_s']} s "
                     f"({c['warm_over_cold']}x), Dynamo skipped on the warm start: {c['warm']['dynamo_skipped']}")
    if res and "warmup" in res:
        w = res["warmup"]
        lines.append(f"- after requests of {len(w['shapes'])} new shapes: level 3 recompiled "
                     f"{w['level3']['recompiles_at_runtime']} times, stock torch.compile (level 1) "
                     f"{w['level1']['recompiles_at_runtime']} times")
    return "\n".join(lines)


Q4 = Question(
    qid="lab04.q4", source="handbook interview 4", topic="compile-cache",
    prompt="torch.compile makes the first start slow. What helps?",
    prompt_zh="torch.compile 第一次很慢，怎么办？",
    options=(
        Option("Send a few dummy requests after startup so they trigger the compile.",
               "The engine compiles at startup for a symbolic batch size: later requests of new shapes "
               "recompile nothing (see the counter). A dummy request only absorbs the first request's one-time "
               "cost; it compiles nothing.",
               "启动后跑几个 dummy 请求触发编译。",
               "引擎在启动时就按符号化的 batch 维编译好了，之后新 shape 的请求不会再编译（见计数器）。dummy 请求只是替第一个请求"
               "付掉一次性的开销，并不触发编译。"),
        Option("Set VLLM_TORCH_COMPILE_CACHE_DIR so the next start reads the cache.",
               "No vLLM release reads that variable; the cache is $VLLM_CACHE_ROOT/torch_compile_cache and is on "
               "by default (VLLM_DISABLE_COMPILE_CACHE=1 turns it off).",
               "设置 VLLM_TORCH_COMPILE_CACHE_DIR，下次直接读缓存。",
               "vLLM 没有这个变量；缓存在 $VLLM_CACHE_ROOT/torch_compile_cache，默认开启（VLLM_DISABLE_COMPILE_CACHE=1 关闭）。"),
        Option("Keep the on-disk compile cache (keyed by config, model, code, torch version): a warm restart "
               "skips Dynamo and Inductor; if even that is too slow, trade TPOT for startup with enforce_eager.",
               "The warm start loads the traced graph and the compiled pieces (0.23x of the cold start in "
               "startup.json, 0.50x in this lab's record); eager skips compile and capture but every token then costs eager TPOT.",
               "保留磁盘上的编译缓存（按配置、模型、代码、torch 版本做 key）：热启动跳过 Dynamo 和 Inductor；还嫌慢就用 enforce_eager 拿 TPOT 换启动时间。",
               "热启动直接加载 trace 好的图和编译好的分段（H200 上 startup.json 为冷启动的 0.23 倍，本 lab 的记录为 0.50 倍）；eager 跳过编译和捕获，但每个 token 都付 eager 的 TPOT。"),
        Option("Lower the number of CUDA graph capture sizes.",
               "Capture takes seconds; the compile is most of a cold start and is not per size.",
               "减少 CUDA Graph 的 capture size 数量。", "捕获只占几秒；冷启动的大头是编译，而且编译不是按 size 做的。"),
    ),
    correct=2,
    model_answer="compile happens once at startup for a symbolic batch, so warm-up requests trigger nothing; "
                 "keep the compile cache ($VLLM_CACHE_ROOT/torch_compile_cache in vLLM, MINIVLLM_CACHE_DIR here) so "
                 "a restart is warm; enforce_eager only where startup matters more than TPOT.",
    model_answer_zh="编译在启动时按符号化 batch 做一次，warmup 请求触发不了什么；保留编译缓存（vLLM 是 "
                    "$VLLM_CACHE_ROOT/torch_compile_cache，这里是 MINIVLLM_CACHE_DIR）让重启变成热启动；只有启动比 TPOT 更要紧时才 enforce_eager。",
    evidence=q4_evidence,
)


def level0_evidence(res: dict | None) -> str:
    if not res or "level0" not in res:
        return ""
    l0 = res["level0"]
    return (f"{_where(res)}: LLM(compilation_config={{'level': 0}}) ran with cudagraph_mode {l0['cudagraph_mode']} "
            f"({l0['capture_sizes']} capture sizes), compile level {l0['compile_level']}; {{'mode': 0}} is read as "
            f"level {l0['mode_alias_level']}")


Q_LEVEL0 = Question(
    qid="lab04.q_level0", source="handbook §3", topic="compile-levels",
    prompt='The handbook says --compilation-config={"level": 0} turns compile off but keeps CUDA graphs. True?',
    prompt_zh='手册说 --compilation-config={"level": 0} 关 compile、保留 CUDA Graph。对吗？',
    options=(
        Option("In this engine yes (graphs are still captured, on CUDA); in current vLLM the key is `mode` "
               "(-O.mode=0), which also turns off torch.compile only.",
               "The startup report of a level-0 engine shows FULL_AND_PIECEWISE graphs on the GPU; vLLM's debug guide "
               "lists mode=CompilationMode.NONE as 'turn off torch.compile only'.",
               "在这个引擎里对（CUDA 上照样捕获 CUDA Graph）；新版 vLLM 里这个 key 叫 `mode`（-O.mode=0），同样只关 torch.compile。",
               "level 0 引擎的启动报告在 GPU 上显示 FULL_AND_PIECEWISE 图；vLLM 调试文档写 mode=CompilationMode.NONE 只关 torch.compile。"),
        Option("No: level 0 turns graphs off too, like enforce_eager.",
               "Only enforce_eager (or cudagraph_mode NONE) turns graphs off; see the graph mode of the level-0 run.",
               "不对：level 0 也会关掉 CUDA Graph，和 enforce_eager 一样。", "只有 enforce_eager（或 cudagraph_mode NONE）关图；看 level 0 那次的图模式。"),
        Option("Yes, and it is the fastest way to start: nothing is traced.",
               "PIECEWISE graphs need the forward traced once even at level 0 (the pieces stay uncompiled); only "
               "FULL-only or eager skips Dynamo.",
               "对，而且这样启动最快：什么都不 trace。", "即使 level 0，PIECEWISE 图也要 trace 一次 forward（分段不编译）；只有纯 FULL 或 eager 才不跑 Dynamo。"),
        Option("It depends on the GPU.", "It depends on the engine version (level vs mode), not the GPU.",
               "看 GPU。", "取决于引擎版本（level 还是 mode），与 GPU 无关。"),
    ),
    correct=0,
    model_answer="here yes: level 0 keeps the default graphs; vLLM renamed the key to mode (mode 0 = no torch.compile, "
                 "graphs by cudagraph_mode).",
    model_answer_zh="这里对：level 0 保留默认的 CUDA Graph；vLLM 把 key 改名为 mode（mode 0 = 不 torch.compile，图由 cudagraph_mode 决定）。",
    evidence=level0_evidence,
)


# ---- claims ------------------------------------------------------------------------------------------------
def _claim(cid, seed, zh, en, verdict, summary, summary_zh, file, key, fig=None, rule=None) -> Claim:
    return Claim(cid, seed, zh, en, verdict, summary, summary_zh, file, key, fig, rule, lab="lab04")


CLAIMS = (
    _claim("lab04.total", "handbook", "总共可能 1-5 分钟", "startup may take 1-5 minutes in total", "partly",
           "level 3 + graphs, 0.6B on the H200: 38.5 s cold, 8.7 s warm, about 1 s eager; weights scale with the "
           "model, the compile does not", "0.6B 在 H200 上 level 3 + 图：冷启动 38.5 s，热启动 8.7 s，eager 约 1 s；权重随模型变大，编译不随",
           STARTUP, "cold.phases_s.total", 38.4639),
    _claim("lab04.profile", "handbook", "Profile run（测显存，~10 秒）", "the profile run takes ~10 s", "wrong",
           "one dummy forward: 0.28 s on the H200", "一次 dummy forward：H200 上 0.28 s", STARTUP,
           "cold.phases_s.profile_run", 0.282),
    _claim("lab04.compile_per_size", "handbook", "torch.compile（每个 size 一次，几十秒到几分钟）",
           "torch.compile runs once per size, tens of seconds to minutes", "partly",
           "28 s is the right order, but one graph is traced for a symbolic size, not one per size",
           "28 s 量级对，但只按符号化的 size trace 一张图，不是每个 size 一次", STARTUP, "cold.compile.unique_graphs", 1),
    _claim("lab04.capture", "handbook", "CUDA Graph capture（几秒）", "graph capture takes a few seconds", "right",
           "9.2 s cold for 34 FULL + 50 PIECEWISE sizes (4.1 s warm)", "冷启动 9.2 s（34 个 FULL + 50 个 PIECEWISE size），热启动 4.1 s",
           STARTUP, "cold.phases_s.cudagraph_capture", 9.1833),
    _claim("lab04.cache_env", "handbook", "缓存 compile 结果到磁盘（VLLM_TORCH_COMPILE_CACHE_DIR）",
           "cache compile results on disk with VLLM_TORCH_COMPILE_CACHE_DIR", "wrong",
           "the variable does not exist in vLLM (vllm/envs.py: VLLM_CACHE_ROOT, VLLM_DISABLE_COMPILE_CACHE; "
           "vllm/compilation/backends.py: $VLLM_CACHE_ROOT/torch_compile_cache/<hash>); the cache itself works: warm = 0.23x cold "
           "in startup.json; this lab's record reads 15.2 s warm vs 30.3 s cold (0.50x: Dynamo skipped, capture "
           "and loading the pieces not)",
           "vLLM 没有这个变量（vllm/envs.py 里是 VLLM_CACHE_ROOT、VLLM_DISABLE_COMPILE_CACHE；缓存在 $VLLM_CACHE_ROOT/torch_compile_cache/<hash>）；缓存本身有效：startup.json 里热启动 = 冷启动的 0.23 倍；本 lab 的记录是 15.2 s 对 30.3 s（0.50 倍：跳过了 Dynamo，没跳过捕获和加载分段）",
           STARTUP, "ratio_warm_over_cold.total", 0.2273),
    _claim("lab04.level0", "handbook", '--compilation-config={"level": 0} 关 compile（保留 CG）',
           'level 0 turns compile off and keeps CUDA graphs', "partly",
           "right for this engine (graphs captured at level 0) and for vLLM's mode 0; the key is `mode` since vLLM renamed it",
           "对这个引擎成立（level 0 仍捕获图），对 vLLM 的 mode 0 也成立；只是 key 已改名为 mode", RESULTS,
           "level0.cudagraph_mode"),
    _claim("lab04.warmup", "handbook", "warmup（启动后跑几个 dummy 请求触发编译）",
           "warm-up requests after startup trigger the compile", "partly",
           "compiled at startup for a symbolic batch: no run-time recompile after requests of new shapes; the "
           "first request still took 1.0 s against ~15 ms for the next ones (a one-time first-run cost, not a "
           "compile), which a warm-up request would absorb",
           "启动时已按符号化 batch 编译：新 shape 的请求不会触发重编译；但第一个请求仍要 1.0 s，之后约 15 ms（一次性的首次运行"
           "开销，不是编译），warm-up 请求可以替它付掉", RESULTS, "warmup.level3.recompiles_at_runtime",
           rule=lambda n: "partly" if n == 0 else "right"),
    _claim("lab04.enforce_eager", "handbook", "--enforce-eager 跳过 CG + compile（启动快但跑慢）",
           "--enforce-eager skips graphs and compile: fast start, slow run", "right",
           "eager starts in about a second but its TPOT is many times the graphs' TPOT",
           "eager 约 1 秒启动，但 TPOT 是图模式的许多倍", RESULTS, "recipes.eager_tpot_over_graphs"),
)

LAB_INFO = LabInfo(
    lab="lab04", notebook="labs/04_startup_and_cache.ipynb", title="Startup and the compile cache",
    title_zh="启动耗时与编译缓存", sections=("§3", "interview 4"), questions=(Q4, Q_LEVEL0), claims=CLAIMS,
    code=("minivllm/llm.py", "minivllm/worker/startup.py", "minivllm/compilation/cache.py",
          "minivllm/compilation/graph_cache.py", "minivllm/compilation/backend.py"))


# ---- the summary of verdicts (both labs use it) ------------------------------------------------------------
def verdicts_table(claims: tuple, rec: dict | None, own_file: str) -> str:
    """Claim, verdict, the number that decides it and where it lives. Numbers in `own_file` (this lab's
    record) come from `rec`; other files are read from assets/results/h200/."""
    from minivllm_labs.catalog import resolve_key

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
