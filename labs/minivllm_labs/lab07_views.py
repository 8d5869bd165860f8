"""Lab 07's views: the claims table of every lab (filterable in the static page), its coverage of the research
notes, and the physics floors' table and plot.

Why apart from lab07.py: these read the whole catalog (every lab's claims), and the catalog imports lab07 to
find its claims; lab07.py measures and declares, this file shows, so neither imports the other in a circle.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from minivllm_labs.catalog import all_claims, labs
from minivllm_labs.common import REPO_ROOT, round_floats
from minivllm_labs.lab07 import (
    A100_TEST,
    BANDWIDTH,
    CHECKLIST,
    MODEL_PARAMS,
    NOT_MEASURED,
    SOURCE_JUDGED,
    UNITS_ZH,
    evidence_value,
    is_verbatim,
    row_of,
    tpot_floor_ms,
    unit_of,
)
from minivllm_labs.lab01_views import VERDICT_ZH
from minivllm_labs.lab_info import SEEDS, Claim


def _columns(measured: dict[str, float]) -> dict[str, float]:
    """GPU column -> bandwidth: the article's GPUs (datasheet), then each recorded device (measured)."""
    return {**BANDWIDTH, **{f"{name} (measured)": bw for name, bw in measured.items() if bw}}


def _floors_figure(columns: dict[str, float]):
    from minivllm_labs.plots import figure

    gpus = list(columns)
    series = {m: [round(tpot_floor_ms(p, columns[g]), 3) for g in gpus] for m, p in MODEL_PARAMS.items()}
    series["article: LLaMA-2-13B on A100, 9 ms"] = [A100_TEST["tpot_ms"] if g == "A100-80GB" else None for g in gpus]
    return figure(gpus, series, kind="bar", log_y=True, y_title="ms per output token (batch 1, bf16)",
                  title="TPOT floor = weight bytes / memory bandwidth",
                  zh={"title": "TPOT 下限 = 权重字节数 / 显存带宽", "y": "每个输出 token 的毫秒数（batch 1，bf16）",
                      "names": {"article: LLaMA-2-13B on A100, 9 ms": "文章：A100 上的 LLaMA-2-13B，9 ms"}})


def plot_floors(phys: dict, device: str = "recorded device"):
    """TPOT floor per GPU for each model (log y): the article's GPUs at their datasheet bandwidth, the recorded
    device at the copy bandwidth measured on it; the article's A100 claim as a separate series."""
    return _floors_figure(_columns({device: phys.get("measured_copy_bytes_per_s")}))


def plot_floors_devices(recs: dict[str, dict]):
    """The floors with one measured column per recorded device ({slug: lab07 record}, devices.device_records)."""
    from minivllm_labs.devices import device_name

    return _floors_figure(_columns({device_name(r): (r.get("physics") or {}).get("measured_copy_bytes_per_s")
                                    for r in recs.values()}))


def floors_table(phys: dict, device: str = "recorded device") -> str:
    columns = _columns({device: phys.get("measured_copy_bytes_per_s")})
    gpus = list(columns)
    width = max(11, *(len(g) + 2 for g in gpus))
    out = [f"{'model':<12}" + "".join(f"{g:>{width}}" for g in gpus) + "   (ms per token at batch 1; GB/s: "
           + ", ".join(f"{g} {bw / 1e9:,.0f}" for g, bw in columns.items()) + ")"]
    for m, p in MODEL_PARAMS.items():
        out.append(f"{m:<12}" + "".join(f"{tpot_floor_ms(p, columns[g]):>{width}.2f}" for g in gpus))
    out.append(f"article's A100 test: at most {phys['a100_req_s_ceiling']:.2f} requests/s at batch 1 "
               f"(claimed {phys['a100_req_s_claimed']})")
    if phys.get("measured_copy_bytes_per_s"):
        out.append(f"copy bandwidth measured where this was recorded: {phys['measured_copy_bytes_per_s'] / 1e9:,.0f} GB/s")
    return "\n".join(out)


# ---- the table ----------------------------------------------------------------------------------------
def rows(claims: list[Claim] | None = None, root: Path = REPO_ROOT) -> list[dict]:
    """One dict per claim (catalog order), with the number read from its evidence file now."""

    notebooks = {i.lab: Path(i.notebook).name for i in labs()}
    out = []
    for c in (all_claims() if claims is None else claims):
        status, value = evidence_value(c, root)
        r = row_of(c)
        out.append({"id": c.cid, "seed": c.seed, "claim_zh": c.claim_zh, "claim_en": c.claim_en,
                    "verdict": c.verdict, "summary": c.summary, "summary_zh": c.summary_zh,
                    "value": round_floats(value) if status == "ok" else None, "recorded": status == "ok",
                    "evidence": f"{c.evidence_file}:{c.evidence_key}", "lab": c.lab,
                    "notebook": notebooks.get(c.lab, ""), "unit": unit_of(c.evidence_key),
                    "kind": NOT_MEASURED.get(c.evidence_key, ("measured", "", ""))[0],
                    "kind_note": NOT_MEASURED.get(c.evidence_key, ("", "", ""))[1],
                    "kind_note_zh": NOT_MEASURED.get(c.evidence_key, ("", "", ""))[2],
                    "verbatim": is_verbatim(c), "row": r.title if r else ""})
    return out


def coverage(claims: list[Claim] | None = None) -> list[dict]:
    """Each checklist row with the labs whose claims cover it; rows judged from sources say so."""

    claims = all_claims() if claims is None else claims
    out = []
    for r in CHECKLIST:
        labs = sorted({c.lab for c in claims if c.cid in r.claims})
        judged = SOURCE_JUDGED.get(r.title)
        out.append({"seed": r.seed, "row": r.title, "expected": r.lab, "covered_by": labs,
                    "status": "judged from sources: " + judged[0] if judged else
                    ("measured" if labs else f"not measured yet (expected in {r.lab})")})
    return out


#: The units of lab07.UNITS that are words, in Chinese (the 中文 view of the table and the figure).
UNIT_WORDS_ZH = {**UNITS_ZH, "x (ratio)": "x（倍数）", "percentage points": "个百分点",
                 "fraction of the KV cache": "占 KV Cache 的比例", "fraction of GPU memory": "占 GPU 显存的比例",
                 "kernels per layer": "个 kernel/层", "(batch size)": "（batch 大小）", "graphs": "个图", "layers": "层",
                 "graph breaks": "处断图", "pieces": "个分段", "kernels": "个 kernel", "recompiles": "次重编译",
                 "distinct samples of 3": "种不同采样（共 3 次）", "runs of 5": "次（共 5 次）", "requests of 16": "个请求（共 16 个）",
                 "steps": "步", "calls": "次调用", "fraction of the step": "占每步的比例", "kernels per step": "个 kernel/步"}


def _value(r: dict) -> str:
    """The number with its unit, and what it is when it is not a measurement (a constant, or arithmetic)."""
    if not r["recorded"]:
        return "not recorded yet"
    v = r["value"]
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    unit = r.get("unit") if r.get("unit") and not isinstance(v, (bool, str)) else ""
    if r.get("kind", "measured") == "measured":
        if unit not in UNIT_WORDS_ZH:
            return html.escape(f"{text} {unit}".strip())
        return (f'<span class="lang-en">{html.escape(f"{text} {unit}")}</span><span class="mv-sep"> · </span>'
                f'<span class="lang-zh" lang="zh">{html.escape(f"{text} {UNIT_WORDS_ZH[unit]}")}</span>')
    en = f"{text} {unit}".strip() + f" ({r['kind']}, not measured: {r['kind_note']})"
    zh = f"{text} {UNIT_WORDS_ZH.get(unit, unit)}".strip() + f"（{r.get('kind_note_zh') or r['kind_note']}）"
    return (f'<span class="lang-en">{html.escape(en)}</span><span class="mv-sep"> · </span>'
            f'<span class="lang-zh" lang="zh">{html.escape(zh)}</span>')


def _verdict(v: str) -> str:
    """A verdict in both languages, one shown at a time by the book's switch."""
    zh = VERDICT_ZH.get(v, "")
    return (f'<span class="lang-en">{v}</span><span class="mv-sep"> · </span><span class="lang-zh" lang="zh">{zh}</span>'
            if zh else v)


def _claim_zh(r: dict) -> str:
    """The seed's words marked 原文 only when they are verbatim; a paraphrase says so."""
    label = {True: "原文：", False: "转述 · paraphrase："}.get(r.get("verbatim"), "")
    return label + r["claim_zh"]


def claims_markdown(claims) -> str:
    """A lab's "Summary of verdicts" table (Markdown): claim, verdict, the number, its file and key."""
    def both(en: str, zh: str) -> str:  # one cell in both languages: the book's switch shows one of them
        en, zh = html.escape(en).replace("|", "\\|"), html.escape(zh or "").replace("|", "\\|")
        return f'<span class="lang-en">{en}</span><span class="mv-sep"> · </span><span class="lang-zh" lang="zh">{zh}</span>' if zh and zh != en else en

    lines = ["| claim · 说法 | verdict · 结论 | number · 数字 | evidence · 证据 |", "|---|---|---|---|"]
    for r in rows(list(claims)):
        value = _value(r) if r["recorded"] else both("not recorded yet", "尚未录制")
        lines.append(f"| {both(r['claim_en'], r['claim_zh'])} | **{_verdict(r['verdict'])}** | {value} | `{r['evidence']}` |")
    return "\n".join(lines)


def show_markdown(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


_FILTER_JS = """
<script>
(function () {
  var root = document.getElementById("lab07-claims");
  function apply() {
    var seed = root.querySelector("select[name=seed]").value;
    var verdict = root.querySelector("select[name=verdict]").value;
    var shown = 0;
    root.querySelectorAll("tbody tr").forEach(function (tr) {
      var ok = (seed === "all" || tr.dataset.seed === seed) && (verdict === "all" || tr.dataset.verdict === verdict);
      tr.style.display = ok ? "" : "none";
      if (ok) { shown += 1; }
    });
    root.querySelector(".count").textContent = shown + " shown";
  }
  root.querySelectorAll("select").forEach(function (s) { s.addEventListener("change", apply); });
  apply();
})();
</script>
"""


def claims_html(table: list[dict]) -> str:
    """A self-contained HTML table with seed and verdict filters (plain JS: works in the book, no kernel)."""
    def opts(name: str, values) -> str:
        o = "".join(f'<option value="{v}">{v}</option>' for v in ["all", *values])
        return f'<label>{name} · {"材料" if name == "seed" else "结论"} <select name="{name}">{o}</select></label>'

    body = []
    for r in table:
        lab = f'<a href="{r["notebook"]}">{r["lab"]}</a>' if r["notebook"] else r["lab"]
        body.append(
            f'<tr data-seed="{r["seed"]}" data-verdict="{r["verdict"]}"><td>{r["seed"]}</td>'
            f'<td>{html.escape(_claim_zh(r))}<br><i>{html.escape(r["claim_en"])}</i></td>'
            f'<td><b>{_verdict(r["verdict"])}</b></td><td>{_value(r)}</td>'
            f'<td>{html.escape(r["summary"])}<br>{html.escape(r["summary_zh"])}</td>'
            f'<td><code>{html.escape(r["evidence"])}</code></td><td>{lab}</td></tr>')
    verdicts = ("right", "partly", "wrong", "unverifiable")
    return (f'<div id="lab07-claims">{opts("seed", SEEDS)} {opts("verdict", verdicts)} <span class="count"></span>'
            '<table><thead><tr><th>seed · 材料</th><th>claim · 说法</th><th>verdict · 结论</th><th>number · 数字</th>'
            '<th>what was measured · 测量</th><th>evidence · 证据</th><th>lab · 实验</th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>" + _FILTER_JS)


def show_claims(table: list[dict]) -> None:
    from IPython.display import HTML, display

    display(HTML(claims_html(table)))


def coverage_table(cov: list[dict]) -> str:
    return "\n".join(f"{c['seed']:<9} {c['row']:<64} {', '.join(c['covered_by']) or '-':<12} {c['status']}"
                     for c in cov)


# ---- claimed against measured ---------------------------------------------------------------------------
def _pct_less(d: dict, slow: str, fast: str) -> float:
    from minivllm_labs.lab_info import resolve_key

    return 100 * (1 - resolve_key(d, fast) / resolve_key(d, slow))


#: Claims whose seed states a number and whose record holds the same quantity: (claim id, what is compared
#: and its unit, the seed's number, the record file, how to read the measured number from it). A range in the
#: seed is shown by its middle ("5-10 us" as 7.5); "a few seconds" by its low end, 2 s.
VERSUS = (
    ("lab01.launch-cost", "launch cost of one op, µs", 7.5, "lab01.json",
     lambda d: d["launch_overhead"]["eager_us_per_op"]),
    ("lab01.kernel-count", "kernels per forward of 80 layers", 1000, "lab01.json",
     lambda d: 80 * d["census"]["kernels_per_layer"]),
    ("lab02.pool", "memory of the graphs, MiB (article: 10 graphs; measured: 35)", 1.5e9 / 2**20,
     "compile_vs_graphs.json", lambda d: d["modes"]["FULL"]["graph_pool_mib"]),
    ("handbook.weight_loading", "loading the weights, s", 2.0, "startup.json",
     lambda d: d["cold"]["phases_s"]["load_weights"]),
    ("lab04.profile", "profile run, s", 10.0, "lab04.json", lambda d: d["cache"]["cold"]["phases_s"]["profile_run"]),
    ("lab04.total", "startup in total, s", 60.0, "lab04.json", lambda d: d["cache"]["cold"]["total_s"]),
    ("lab05.oom_article", "memory --enforce-eager frees, % of the GPU", 12.5, "lab05.json",
     lambda d: 100 * d["oom"]["freed_fraction_of_gpu"]),
    ("article.sources_gtc2023_vllm040", "graph speed-up of TPOT at batch 1, x", 1.8, "latency.json",
     lambda d: d["rows"][0]["tpot_s"] / d["rows"][9]["tpot_s"]),
    ("article.gains_at_batch_8", "TPOT saved by graphs at batch 8, %", 20.0, "latency.json",
     lambda d: _pct_less(d, "rows.3.tpot_s", "rows.12.tpot_s")),
    ("article.gains_by_gpu_generation", "TPOT saved by graphs at batch 1 on Hopper, %", 50.0, "latency.json",
     lambda d: _pct_less(d, "rows.0.tpot_s", "rows.9.tpot_s")),
    ("article.graphs_same_results", "requests with identical tokens, of 16", 16, "lab06.json",
     lambda d: d["graphs"]["same_tokens"]),
    ("article.a100_13b_tpot", "13B TPOT on an A100, ms (measured: the computed floor)", 9.0, "lab07.json",
     lambda d: d["physics"]["a100_13b"]["floor_ms"]),
    ("article.a100_13b_requests_per_s", "13B requests/s at batch 1 (measured: computed from its TTFT, TPOT)",
     15.8, "lab07.json", lambda d: d["physics"]["a100_req_s_ceiling"]),
)


#: VERSUS's labels in Chinese, by claim id (the figure's legend in the 中文 view).
VERSUS_ZH = {
    "lab01.launch-cost": "单个算子的 launch 开销，µs", "lab01.kernel-count": "80 层一次 forward 的 kernel 数",
    "lab02.pool": "图占用的显存，MiB（文章：10 个图；实测：35 个）", "handbook.weight_loading": "加载权重，s",
    "lab04.profile": "profile run，s", "lab04.total": "启动总耗时，s",
    "lab05.oom_article": "--enforce-eager 释放的显存，占 GPU 的 %",
    "article.sources_gtc2023_vllm040": "batch 1 时图对 TPOT 的加速，x",
    "article.gains_at_batch_8": "batch 8 时图省下的 TPOT，%", "article.gains_by_gpu_generation": "Hopper 上 batch 1 时图省下的 TPOT，%",
    "article.graphs_same_results": "token 完全相同的请求数（共 16 个）",
    "article.a100_13b_tpot": "A100 上 13B 的 TPOT，ms（实测列为计算出的下限）",
    "article.a100_13b_requests_per_s": "batch 1 时 13B 的请求/s（实测列由其 TTFT、TPOT 算出）",
}


def versus(root: Path = REPO_ROOT, results: str = "assets/results/h200") -> list[dict]:
    """One row per claim of VERSUS whose record exists: its label, the seed's number and the measured one."""
    out = []
    for cid, label, claimed, name, read in VERSUS:
        p = root / results / name
        if p.exists():
            out.append({"id": cid, "label": label, "claimed": claimed,
                        "measured": round_floats(read(json.loads(p.read_text())), 4)})
    return out


def plot_versus(points: list[dict]):
    """Claimed (x) against measured (y), log-log, one mark per claim; on the diagonal the seed was right."""
    from minivllm_labs.plots import figure

    xs = sorted({p["claimed"] for p in points})
    series = {f"{p['id']}: {p['label']}": [p["measured"] if x == p["claimed"] else None for x in xs]
              for p in points}
    series["measured = claimed"] = list(xs)
    names_zh = {f"{p['id']}: {p['label']}": f"{p['id']}：{VERSUS_ZH.get(p['id'], p['label'])}" for p in points}
    fig = figure(xs, series, log_x=True, log_y=True, x_title="the seed's number", y_title="measured on the H200",
                 title="Claimed against measured, one mark per claim (units in the legend)",
                 zh={"title": "说法与实测对照，每条说法一个点（单位见图例）", "x": "材料中的数字", "y": "H200 实测",
                     "names": {**names_zh, "measured = claimed": "实测 = 说法"}})
    for tr in fig.data[:-1]:
        tr.mode = "markers"
        tr.marker.size = 11
    fig.data[-1].mode = "lines"
    fig.data[-1].line.dash = "dot"
    fig.update_layout(height=520, legend=dict(font=dict(size=10)))
    return fig


def versus_table(points: list[dict]) -> str:
    width = max((len(p["label"]) for p in points), default=10)
    lines = [f"{'claim':<36} {'what, unit':<{width}} {'claimed':>10} {'measured':>10}"]
    lines += [f"{p['id']:<36} {p['label']:<{width}} {p['claimed']:>10.4g} {p['measured']:>10.4g}" for p in points]
    return "\n".join(lines)
