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
    SOURCE_JUDGED,
    evidence_value,
    row_of,
    tpot_floor_ms,
)
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
                    "notebook": notebooks.get(c.lab, ""),
                    "row": r.title if r else ""})
    return out


def coverage(claims: list[Claim] | None = None) -> list[dict]:
    """Each checklist row with the labs whose claims cover it; rows judged from sources say so."""

    claims = all_claims() if claims is None else claims
    out = []
    for r in CHECKLIST:
        labs = sorted({c.lab for c in claims if row_of(c) is r})
        judged = SOURCE_JUDGED.get(r.title)
        out.append({"seed": r.seed, "row": r.title, "expected": r.lab, "covered_by": labs,
                    "status": "judged from sources: " + judged[0] if judged else
                    ("measured" if labs else f"not measured yet (expected in {r.lab})")})
    return out


def _value(r: dict) -> str:
    if not r["recorded"]:
        return "not recorded yet"
    return html.escape(json.dumps(r["value"], ensure_ascii=False)) if not isinstance(r["value"], str) \
        else html.escape(r["value"])


def claims_markdown(claims) -> str:
    """A lab's "Summary of verdicts" table (Markdown): claim, verdict, the number, its file and key."""
    def both(en: str, zh: str) -> str:  # one cell in both languages: the book's switch shows one of them
        en, zh = html.escape(en).replace("|", "\\|"), html.escape(zh or "").replace("|", "\\|")
        return f'<span class="lang-en">{en}</span><span class="lang-zh" lang="zh">{zh}</span>' if zh else en

    lines = ["| claim · 说法 | verdict · 结论 | number · 数字 | evidence · 证据 |", "|---|---|---|---|"]
    for r in rows(list(claims)):
        value = _value(r) if r["recorded"] else both("not recorded yet", "尚未录制")
        lines.append(f"| {both(r['claim_en'], r['claim_zh'])} | **{r['verdict']}** | {value} | `{r['evidence']}` |")
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
            f'<td>{html.escape(r["claim_zh"])}<br><i>{html.escape(r["claim_en"])}</i></td>'
            f'<td><b>{r["verdict"]}</b></td><td>{_value(r)}</td>'
            f'<td>{html.escape(r["summary"])}<br>{html.escape(r["summary_zh"])}</td>'
            f'<td><code>{html.escape(r["evidence"])}</code></td><td>{lab}</td></tr>')
    verdicts = ("right", "partly", "wrong", "unverifiable")
    return (f'<div id="lab07-claims">{opts("seed", SEEDS)} {opts("verdict", verdicts)} <span class="count"></span>'
            '<table><thead><tr><th>seed</th><th>claim · 原文</th><th>verdict</th><th>number</th>'
            '<th>what was measured · 测量</th><th>evidence</th><th>lab</th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>" + _FILTER_JS)


def show_claims(table: list[dict]) -> None:
    from IPython.display import HTML, display

    display(HTML(claims_html(table)))


def coverage_table(cov: list[dict]) -> str:
    return "\n".join(f"{c['seed']:<9} {c['row']:<64} {', '.join(c['covered_by']) or '-':<12} {c['status']}"
                     for c in cov)
