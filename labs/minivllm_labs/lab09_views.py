"""Lab 09's figures, tables, the numbers behind its questions and its verdicts' rules.

Split from lab09.py so each file has one job: lab09.py measures (on the recorder's GPU, without plotly), this
file draws and grades (the questions and claims are data/lab09.yaml). Every function takes a results dict: the
recorded H200 file or what the notebook just measured here. Keys a record may lack (a CPU run has no kernel
timeline, no PDL A/B) are optional: the function says what is missing instead of failing.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass

from minivllm_labs.common import spread_verdict
from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)
from minivllm_labs import verdicts
from minivllm_labs.quiz_data import load_claims, load_questions
from minivllm_labs.recorded import ARCHIVE, archive_members  # noqa: F401  (the notebook reads the archive)

RESULTS = "assets/results/h200/lab09.json"
NAMES = {"qwen3-06b": "Qwen3-0.6B", "llama-32-1b": "Llama-3.2-1B", "tiny": "minivllm-tiny (CPU)"}
#: The published anchor (Hazy Research, "Look Ma, No Bubbles!", 2025-05-27): share of an H100's memory
#: bandwidth a batch-1 Llama-1B decode reaches in vLLM / SGLang (at most) and in their megakernel.
ANCHORS = {"vLLM / SGLang (H100, at most)": 0.50, "megakernel (H100)": 0.78}
BLOG = "https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles"


def _shapes(res: dict | None) -> dict:
    return (res or {}).get("shapes") or {}


def _name(key: str) -> str:
    return NAMES.get(key, key)


# ---- the floor ------------------------------------------------------------------------------------------
def floor_rows(res: dict | None) -> list[dict]:
    """Per model: bytes a step reads, the floor at the copy bandwidth, the step, and the floor's share of it."""
    rows = []
    for key, s in _shapes(res).items():
        fl = s["floor"]
        rows.append({"model": _name(key), "weights_mb": fl["weight_mb"], "kv_mb": fl["kv_mb"],
                     "step_range": s.get("step_wall_ms_range"),
                     "copy_gbps": s["copy_gbps"], "floor_ms": fl.get("bytes_ms"), "step_ms": s["step_wall_ms"],
                     "pct_of_floor": 100 * s["floor_share"], "kernels": s.get("kernels_per_step") or None})
    return rows


def floor_table(res: dict | None) -> str:
    rows = floor_rows(res)
    if not rows:
        return "no measurements"
    head = (f"{'model':<22}{'weights MB':>11}{'KV MB':>8}{'copy GB/s':>11}{'floor ms':>10}{'step ms':>9}"
            f"{'[min, max]':>18}{'floor/step':>11}{'kernels':>9}")
    lines = [head]
    for r in rows:
        k = f"{r['kernels']:.0f}" if r["kernels"] else "-"
        spread = f"[{r['step_range'][0]:.3f}, {r['step_range'][1]:.3f}]" if r["step_range"] else "-"
        lines.append(f"{r['model']:<22}{r['weights_mb']:>11,.0f}{r['kv_mb']:>8.1f}{r['copy_gbps']:>11,.0f}"
                     f"{r['floor_ms']:>10.3f}{r['step_ms']:>9.3f}{spread:>18}{r['pct_of_floor']:>10.1f}%{k:>9}")
    return "\n".join(lines)


# ---- one step, kernel by kernel ---------------------------------------------------------------------------
def plot_timeline(res: dict):
    """One decode step per model as a row of bars: each kernel's own time (width), its % of the copy bandwidth
    (colour; grey: a kernel that reads no weights), idle gaps as white space, the byte floor as a tick."""
    import plotly.graph_objects as go

    from minivllm_labs.plots import bilingual

    fig = go.Figure()
    rows = [(k, s) for k, s in _shapes(res).items() if s.get("timeline")]
    hover = ("%{customdata[0]} (%{customdata[1]})<br>%{x:.2f} us, %{customdata[2]:.2f} MB, %{customdata[3]:.0f}% "
             "of bandwidth<br>idle before it: %{customdata[4]:.2f} us<extra></extra>")
    for i, (key, s) in enumerate(rows):
        label = _name(key)
        for reads in (True, False):  # weight/KV readers coloured by % of bandwidth; the rest grey
            ks = [k for k in s["timeline"]["kernels"] if bool(k["bytes"]) == reads]
            marker = ({"color": [k["pct_bw"] for k in ks], "coloraxis": "coloraxis"} if reads else
                      {"color": "#bdbdbd"})
            fig.add_trace(go.Bar(
                y=[label] * len(ks), x=[k["own_us"] for k in ks], base=[k["start_us"] + k["overlap_us"] for k in ks],
                orientation="h", name="" if reads else "reads no weights", showlegend=not reads and i == 0,
                marker={**marker, "line": {"width": 0.3, "color": "white"}}, hovertemplate=hover,
                customdata=[[k["name"] + (f" ({k['weight']})" if k.get("weight") else ""), k["category"],
                         k["bytes"] / 1e6, k["pct_bw"], k["gap_us"]] for k in ks]))
        fig.add_trace(go.Scatter(x=[s["timeline"]["floor_us"]], y=[label], mode="markers", showlegend=False,
                                 marker={"symbol": "line-ns-open", "size": 30, "color": "#d62728",
                                         "line": {"width": 3}},
                                 hovertemplate="byte floor: %{x:.0f} us<extra></extra>"))
    fig.update_layout(coloraxis={"colorscale": "Viridis", "cmin": 0, "cmax": 100,
                                 "colorbar": {"title": {"text": "% of copy bandwidth · 占拷贝带宽 %", "side": "right"},
                                              "thickness": 12}})
    fig.update_layout(title="One decode step at batch 1, kernel by kernel (profiled graph replay; red tick: "
                            "bytes / copy bandwidth)", xaxis_title="time in the step (us)", barmode="overlay",
                      height=160 + 90 * max(len(rows), 1), template="plotly_white", bargap=0.35,
                      plot_bgcolor="#f4f4f4")
    return bilingual(fig, title="batch 1 的一个 decode 步，逐个 kernel（图重放的 profile；红色刻度：字节 ÷ 带宽）",
                     x="步内时间（us）", names={"reads no weights": "不读权重"})


def kernel_rows(res: dict, key: str, top: int = 10) -> list[dict]:
    """A model's kernels grouped by name, GEMMs by the weight they read (qkv_proj, o_proj, ...: the small ones
    reach the least bandwidth): count, own us per step, MB, % of bandwidth (bytes / own time), gaps before."""
    groups: dict[str, dict] = {}
    for k in _shapes(res)[key]["timeline"]["kernels"]:
        name = f"{k['name']} ({k['weight']})" if k.get("weight") else k["name"]
        g = groups.setdefault(name, {"name": name, "category": k["category"], "n": 0, "us": 0.0,
                                     "bytes": 0, "gap_us": 0.0})
        g["n"] += 1
        g["us"] += k["own_us"]
        g["bytes"] += k["bytes"]
        g["gap_us"] += k["gap_us"]
    bw = _shapes(res)[key]["copy_gbps"] * 1e3  # bytes per us
    out = sorted(groups.values(), key=lambda g: -g["us"])[:top]
    for g in out:
        g["pct_bw"] = 100 * g["bytes"] / bw / g["us"] if g["us"] and g["bytes"] else 0.0
    return out


def kernel_table(res: dict | None) -> str:
    lines = []
    for key, s in _shapes(res).items():
        if not s.get("timeline"):
            continue
        t = s["timeline"]
        lines.append(f"{_name(key)}: {t['n_kernels']} kernels in one step; bytes matched to GEMMs: "
                     f"{t['bytes_matched']} ({t['gemm_kernels']} GEMM kernels, {t['linear_weights']} weights)")
        lines.append(f"  {'kernel (weight it reads)':<40}{'per step':>9}{'us':>9}{'us each':>9}{'MB each':>9}"
                     f"{'% of bw':>9}{'gaps us':>9}")
        for g in kernel_rows(res, key):
            lines.append(f"  {g['name'][:39]:<40}{g['n']:>9}{g['us']:>9.1f}{g['us'] / g['n']:>9.2f}"
                         f"{g['bytes'] / 1e6 / g['n']:>9.2f}{g['pct_bw']:>8.0f}%{g['gap_us']:>9.1f}")
    return "\n".join(lines) or "no kernel timeline (a CPU run has no GPU kernels)"


# ---- where the rest goes -------------------------------------------------------------------------------------
PARTS = (("floor_us", "bytes at copy bandwidth", "字节 ÷ 拷贝带宽"),
         ("excess_reading_us", "weight/KV kernels beyond it (ramp, tail, idle SMs)",
          "读权重/KV 的 kernel 超出部分（爬升、收尾、空闲 SM）"),
         ("no_weight_kernels_us", "kernels that read no weights (norm, RoPE, KV store, sampler)",
          "不读权重的 kernel（norm、RoPE、KV 写入、采样）"),
         ("gaps_us", "GPU idle between replayed kernels", "重放的 kernel 之间 GPU 空闲"),
         ("host_gaps_us", "GPU idle around the step's input copies", "步的输入拷贝前后 GPU 空闲"))


def where_rows(res: dict | None) -> list[dict]:
    rows = []
    for key, s in _shapes(res).items():
        t = s.get("timeline")
        if t:
            rows.append({"model": _name(key), **{p: t[p] for p, _, _ in PARTS}, "span_us": t["span_us"],
                         "overlap_us": t["overlap_us"]})
    return rows


def plot_where(res: dict):
    """Each model's profiled step as one stacked bar: the byte floor, then what each kind of loss adds."""
    import plotly.graph_objects as go

    from minivllm_labs.plots import PALETTE, bilingual

    rows = where_rows(res)
    fig = go.Figure([go.Bar(y=[r["model"] for r in rows], x=[r[p] for r in rows], name=en, orientation="h",
                            marker=dict(color=PALETTE[i % len(PALETTE)]),
                            hovertemplate="%{x:.0f} us<extra>" + en + "</extra>")
                     for i, (p, en, _) in enumerate(PARTS)])
    fig.update_layout(barmode="stack", title="Where one profiled decode step goes (batch 1)",
                      xaxis_title="us per step (under the profiler)", height=340)
    return bilingual(fig, title="一个 decode 步（batch 1，profile 下）的时间去向", x="每步 us（profile 下）",
                     names={en: zh for _, en, zh in PARTS})


def where_table(res: dict | None) -> str:
    rows = where_rows(res)
    if not rows:
        return "no kernel timeline (a CPU run has no GPU kernels)"
    lines = []
    for r in rows:
        lines.append(f"{r['model']}: one profiled step, {r['span_us']:,.0f} us (kernels that ran beside the previous "
                     f"one, PDL: {r['overlap_us']:,.0f} us)")
        lines += [f"  {en:<62}{r[p]:>8,.0f} us {100 * r[p] / r['span_us']:>5.1f}%" for p, en, _ in PARTS]
    return "\n".join(lines)


def pdl_table(res: dict | None) -> str:
    """The batch-1 step with programmatic dependent launch on (the default) and off: wall time and idle GPU."""
    lines = []
    for key, s in _shapes(res).items():
        off = s.get("pdl_off")
        if not off:
            continue
        on = s.get("profile", {})
        diff = 1e3 * (off["step_wall_ms"] - s["step_wall_ms"])
        lo_on, hi_on = s.get("step_wall_ms_range") or [s["step_wall_ms"]] * 2
        lo_off, hi_off = off.get("step_wall_ms_range") or [off["step_wall_ms"]] * 2
        same = spread_verdict((lo_off, hi_off), (lo_on, hi_on)) == "within"
        noise = " (within noise: the ranges overlap)" if same else ""
        lines.append(f"{_name(key):<16} step {s['step_wall_ms']:.3f} ms with PDL, {off['step_wall_ms']:.3f} ms "
                     f"without ({diff:+.0f} us{noise}); GPU idle per profiled step "
                     f"{on.get('idle_us_per_step', 0):.0f} us with, {off['idle_us_per_step']:.0f} us without")
    return "\n".join(lines) or "no PDL A/B in this record (CUDA only)"


# ---- batch sweep and the roofline ---------------------------------------------------------------------------
def plot_sweep(res: dict):
    """Step time against batch size (short prompts): flat while the step is memory-bound, rising after."""
    from minivllm_labs.plots import figure

    shapes = _shapes(res)
    batches = sorted({r["batch"] for s in shapes.values() for r in s["sweep"]})
    series = {}
    for key, s in shapes.items():
        by_b = {r["batch"]: r["step_wall_ms"] for r in s["sweep"]}
        series[_name(key)] = [by_b.get(b) for b in batches]
    return figure(batches, series, log_x=True, x_title="batch size (sequences per decode step)",
                  y_title="ms per decode step", title="Step time against batch size",
                  zh={"title": "每步时间随 batch 大小的变化", "x": "batch 大小（每个 decode 步的序列数）",
                      "y": "每个 decode 步 ms"})


def sweep_table(res: dict | None) -> str:
    lines = []
    for key, s in _shapes(res).items():
        if not s.get("sweep"):
            continue
        b1 = s["sweep"][0]["step_wall_ms"]
        cells = ", ".join(f"{r['batch']}: {r['step_wall_ms']:.3f} ({r['step_wall_ms'] / b1:.2f}x)" for r in s["sweep"])
        lines.append(f"{_name(key)}: batch: ms per step (x batch 1) {cells}")
    roof = (res or {}).get("roofline") or {}
    if roof:
        lines.append(f"ridge point: {roof['peak_bf16_flops'] / 1e12:.0f} TFLOP/s (datasheet) / "
                     f"{res['copy_gbps']:,.0f} GB/s (measured) = {roof['ridge_flops_per_byte']:.0f} FLOP/byte")
    return "\n".join(lines) or "no measurements"


def first_compute_batch(res: dict, key: str, factor: float = 1.5) -> int | None:
    """The first swept batch whose step takes `factor` x the batch-1 step (None if none does)."""
    sweep = _shapes(res)[key]["sweep"]
    return next((r["batch"] for r in sweep if r["step_wall_ms"] >= factor * sweep[0]["step_wall_ms"]), None)


# ---- what the engine changed, before and after ------------------------------------------------------------
#: Two runs of one change count as one measurement only at one commit within this many minutes of each
#: other (one session on one machine): machines and fresh GEMV autotunes move batch-1 TPOT by more than
#: most of these changes do.
SESSION_MINUTES = 20


@dataclass(frozen=True)
class Change:
    """One change tried on the batch-1 decode step, and the runs that measured it.

    before / after: the runs of each side, as "member.json" (an archived `bench latency` file, its FULL rows
    unless "@MODE" names another), "member.json#side" (one side of an archived A/B that `bench gemv-tune`
    interleaved in one call) or "lab09:shape[:pdl_off]" (this lab's record). kept: whether the engine runs it
    today (tests/labs/test_lab09.py checks the claim against the engine's code under the key `engine`).
    also: other records the row rests on (shown, not computed). kernels: (before, after) profiles of one
    session, for the kernel count of a batch-1 step."""

    name: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    kept: bool
    engine: str
    batches: tuple[int, ...] = (1, 64)
    also: tuple[str, ...] = ()
    kernels: tuple[str, str] | None = None
    note: str = ""


CHANGES = (
    Change("q/k RMSNorm + RoPE in one kernel (qk_norm_rope): one launch per layer instead of three",
           ("qk_norm_rope_off.json",), ("qk_norm_rope_on.json",), True, "op:qk_norm_rope"),
    Change("Triton GEMV for 1-2 rows (gemv): cuBLAS's tiles are built for many rows, a GEMV streams the weight",
           ("gemv_off.json",), ("gemv_on.json",), True, "op:gemv", (1, 2, 64), also=("gemv.json",)),
    Change("the same GEMV at 4 and 8 rows: one kernel for every small batch",
           ("gemv_off.json",), ("gemv_on.json",), False, "gemv_rows", (4, 8), also=("latency_gemv_up_to_8_rows.json",)),
    Change("residual add + RMSNorm in the GEMV, first design (norm in the prologue, add in the epilogue)",
           ("pdl_off.json",), ("gemv_norm_v1.json",), False, "gemv_norm_epilogue", (1, 2, 64)),
    Change("residual add + RMSNorm in the 1-row GEMV's prologue (gemv_norm): two kernels fewer per layer",
           ("gemv_norm_pdl_off.json",), ("gemv_norm_1row.json",), True, "op:gemv_norm", (1, 2)),
    Change("the same fusion at 2 rows as well",
           ("gemv_norm_1row.json",), ("gemv_norm_2rows.json",), False, "norm_rows", (2,)),
    Change("programmatic dependent launch (pdl) before gemv_norm: a kernel starts while the previous drains",
           ("pdl_off.json",), ("pdl_on.json",), True, "op:pdl", (1, 2, 64),
           note="with gemv_norm: next row"),
    Change("programmatic dependent launch on top of gemv_norm",
           ("gemv_norm_1row.json",), ("gemv_norm_pdl_1row.json",), True, "op:pdl", (1, 2),
           also=("gemv_norm_pdl_2rows.json",)),
    Change("programmatic dependent launch off vs on in today's engine, Qwen3-0.6B shape",
           ("lab09:qwen3-06b:pdl_off",), ("lab09:qwen3-06b",), True, "op:pdl", (1,)),
    Change("programmatic dependent launch off vs on in today's engine, Llama-3.2-1B shape",
           ("lab09:llama-32-1b:pdl_off",), ("lab09:llama-32-1b",), True, "op:pdl", (1,)),
    Change("narrow GEMV tiles in the autotune set: 1-4 rows per program, K in one or two steps",
           ("narrow_tiles_off_1.json", "narrow_tiles_off_2.json"), ("narrow_tiles_on_1.json", "narrow_tiles_on_2.json"),
           True, "narrow_tiles", (1, 2)),
    Change("narrow tiles on a fresh machine (FULL_AND_PIECEWISE) against the old tiles' FULL run",
           ("rope_kv_store_off_new_defaults.json",), ("latency_b1_narrow_tiles.json@FULL_AND_PIECEWISE",),
           True, "narrow_tiles", (1, 64)),
    Change("GEMV block sizes ranked by TPOT inside the graph (bench gemv-tune) vs a fresh autotune, GPU 0",
           ("gemv_tune_gpu0.json#autotune",), ("gemv_tune_gpu0.json#tuned",), True, "shipped_configs", (1, 2)),
    Change("the same ranking on GPU 1", ("gemv_tune_gpu1.json#autotune",), ("gemv_tune_gpu1.json#tuned",), True,
           "shipped_configs", (1, 2)),
    Change("replaying the fastest fresh autotune's picks vs a fresh autotune",
           ("gemv_fresh_autotune_call1.json",), ("gemv_fastest_b1_replayed.json",), True, "shipped_configs", (1, 2),
           also=("gemv_configs_fastest_b1.json",)),
    Change("the shipped NVIDIA_H200.json GEMV configs vs fresh autotunes",
           ("gemv_fresh_autotune_call2_1.json", "gemv_fresh_autotune_call2_2.json"),
           ("gemv_shipped_1.json", "gemv_shipped_2.json"), True, "shipped_configs", (1, 2),
           also=("gemv_autotune_spread.json",)),
    Change("decode kernel reads seq_lens and its first block ids before the PDL wait (decode_prefetch)",
           ("decode_ab_default_1.json", "decode_ab_default_2.json"), ("decode_ab_prefetch.json",), True,
           "op:decode_prefetch", (1, 2, 64)),
    Change("decode_prefetch again, another machine", ("decode_prefetch_final_off.json",),
           ("decode_prefetch_final_on.json",), True, "op:decode_prefetch", (1, 2, 64)),
    Change("split-KV merge inside the decode kernel (decode_merge): no merge kernel, one launch per layer fewer",
           ("decode_ab_default_1.json", "decode_ab_default_2.json"), ("decode_ab_merge_1.json", "decode_ab_merge_2.json"),
           False, "gone:decode_merge", (1, 2, 64), also=("decode_ab_merge_prefetch.json",)),
    Change("GEMV loads its first weight tile before the PDL wait (gemv_prefetch), with decode_prefetch on",
           ("pdl_prefetch_decode_prefetch_1.json", "pdl_prefetch_decode_prefetch_2.json"),
           ("pdl_prefetch_both_prefetch_1.json", "pdl_prefetch_both_prefetch_2.json"), False, "gone:gemv_prefetch",
           (1, 2, 64), also=("pdl_prefetch_gemv_prefetch_1.json", "pdl_prefetch_gemv_prefetch_2.json",
                             "profile_prefetch.json")),
    Change("RoPE + KV-cache store in one kernel (rope_kv_store), with the GEMV",
           ("gemv_on.json",), ("gemv_rope_kv_store.json",), False, "gone:rope_kv_store"),
    Change("rope_kv_store again, on later defaults", ("rope_kv_store_off_new_defaults.json",),
           ("rope_kv_store_on_new_defaults.json",), False, "gone:rope_kv_store", (1, 2, 64)),
    Change("rope_kv_store, first run (its off side is another commit's qk_norm_rope_on)",
           ("qk_norm_rope_on.json",), ("rope_kv_store.json",), False, "gone:rope_kv_store",
           kernels=("profile.json", "profile_rope_kv_store.json")),
    Change("RoPE and the KV store inside the decode kernel (rope_attention), first design",
           ("rope_attention_v1_default_1.json", "rope_attention_v1_default_2.json"),
           ("rope_attention_v1_on_1.json", "rope_attention_v1_on_2.json"), False, "gone:rope_attention",
           also=("profile_rope_attention_v1.json",)),
    Change("rope_attention, second design (the new token added after the loop)",
           ("rope_attention_default_1.json", "rope_attention_default_2.json"),
           ("rope_attention_on_1.json", "rope_attention_on_2.json"), False, "gone:rope_attention",
           kernels=("profile_default_288d026.json", "profile_rope_attention.json")),
)


def _member_runs(src: str, archive: dict, rec: dict | None) -> dict:
    """One source of a Change: {batch: [TPOT ms of each run]}, its commit, its time, and what ran it."""
    if src.startswith("lab09:"):
        _, shape, *off = src.split(":")
        s = _shapes(rec).get(shape)
        if not s:
            return {}
        r = s["pdl_off"] if off else s
        lo, hi = r.get("step_wall_ms_range") or [r["step_wall_ms"]] * 2
        return {"tpot": {1: {"median": r["step_wall_ms"], "lo": lo, "hi": hi, "n": s.get("repeats", 1)}},
                "commit": rec["provenance"]["commit"][:7], "call": "lab09.json", "date": rec["provenance"]["date"]}
    name, _, side = src.partition("#")
    name, _, mode = name.partition("@")
    m = archive.get(name)
    if m is None:
        return {}
    prov = m["provenance"]
    out = {"commit": str((prov.get("git") or {}).get("commit") or prov.get("commit"))[:7],
           "date": prov.get("date_utc") or prov.get("date"), "call": name if side else None}
    if side:  # one side of an A/B interleaved in one call: each repeat's TPOT
        out["tpot"] = {int(b): _spread(v) for b, v in m["ab_tpot_ms"][side].items()}
    else:
        rows = [r for r in m["rows"] if r["system"] == (mode or "FULL")]
        out["tpot"] = {r["batch"]: _spread([1e3 * r["tpot_s"]]) for r in rows}
    return out


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "lo": min(values), "hi": max(values), "n": len(values)}


def _pool(runs: list[dict], batch: int) -> dict | None:
    """Every run of one side at one batch: the median of their values, their [min, max], how many."""
    cells = [r["tpot"][batch] for r in runs if batch in r.get("tpot", {})]
    if not cells:
        return None
    if len(cells) == 1:
        return cells[0]
    return _spread([c["median"] for c in cells])


def _minutes(date: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(date).timestamp() / 60


def _pairing(before: list[dict], after: list[dict]) -> tuple[bool, str]:
    """(one measurement?, how it was run): one call, or one session (one commit, within SESSION_MINUTES)."""
    runs = before + after
    calls = {r.get("call") for r in runs}
    if None not in calls and len(calls) == 1:
        return True, f"one call ({runs[0]['commit']})"
    commits = {r["commit"] for r in runs}
    if len(commits) > 1:
        return False, "not one run: " + " vs ".join(sorted(commits, key=lambda c: [r["commit"] for r in runs].index(c)))
    times = [_minutes(r["date"]) for r in runs]
    if max(times) - min(times) > SESSION_MINUTES:
        return False, f"not one run: {commits.pop()}, {max(times) - min(times):.0f} min apart"
    how = "interleaved" if len(before) > 1 or len(after) > 1 else "back to back"
    return True, f"one session at {commits.pop()}, {how}"


def _measured(b: dict, a: dict) -> str:
    """Faster / slower only when the ranges of the repeats do not overlap; one run a side has no spread."""
    if b["n"] == 1 and a["n"] == 1:
        return "one run each"
    verdict = spread_verdict((b["lo"], b["hi"]), (a["lo"], a["hi"]))
    return "within the spread" if verdict == "within" else verdict


def _kernel_count(name: str, archive: dict) -> float | None:
    runs = (archive.get(name) or {}).get("runs") or []
    return next((r["kernels_per_step"] for r in runs if r["batch"] == 1 and r["mode"] == "FULL"), None)


def change_rows(archive: dict | None, rec: dict | None = None) -> list[dict]:
    """Each Change with its numbers read from the archive (and lab09.json): per batch TPOT before and after,
    after / before, and whether the runs' spread separates them; no ratio where the two sides were not
    measured in one run."""
    archive = archive or {}
    rows = []
    for c in CHANGES:
        before = [_member_runs(s, archive, rec) for s in c.before]
        after = [_member_runs(s, archive, rec) for s in c.after]
        if not all(before) or not all(after):
            continue
        paired, how = _pairing(before, after)
        cells = []
        for batch in c.batches:
            b, a = _pool(before, batch), _pool(after, batch)
            if b and a:
                cells.append({"batch": batch, "before": b, "after": a,
                              "ratio": a["median"] / b["median"] if paired else None,
                              "measured": _measured(b, a) if paired else "not paired"})
        kernels = None
        if c.kernels:
            kernels = tuple(_kernel_count(k, archive) for k in c.kernels)
        records = [s.split("#")[0].split("@")[0] for s in (*c.before, *c.after)]
        records = list(dict.fromkeys(r if not r.startswith("lab09:") else "lab09.json" for r in records))
        rows.append({"change": c, "name": c.name, "records": records + list(c.also), "paired": paired, "how": how,
                     "runs": (sum(r["tpot"][c.batches[0]]["n"] if c.batches[0] in r["tpot"] else 0 for r in before),
                              sum(r["tpot"][c.batches[0]]["n"] if c.batches[0] in r["tpot"] else 0 for r in after)),
                     "cells": cells, "kernels": kernels, "kept": c.kept,
                     "verdict": ("kept in main" if c.kept else "dropped") + (f" ({c.note})" if c.note else "")})
    return rows


def _cell(x: dict) -> str:
    b, a = x["before"], x["after"]
    if x["ratio"] is None:
        return f"batch {x['batch']}: {b['median']:.3f} vs {a['median']:.3f}"
    return f"batch {x['batch']}: {b['median']:.3f} -> {a['median']:.3f} ({x['ratio']:.3f}x, {x['measured']})"


#: Line width of the change and goal tables: the book's text column shows about 80 monospace characters.
TEXT_WIDTH = 80


def _wrapped(line: str) -> str:
    """One table line folded to TEXT_WIDTH, its continuation indented past the line's own indent."""
    indent = " " * (len(line) - len(line.lstrip()))
    return textwrap.fill(line, TEXT_WIDTH, subsequent_indent=indent + "  ")


def changes_table(rows: list[dict]) -> str:
    """The rows as text: what the change does, the records, TPOT before -> after with after / before, the
    verdict."""
    if not rows:
        return f"no archived A/B runs here ({RESULTS.rsplit('/', 1)[0]}/{ARCHIVE})"
    lines = ["Qwen3-0.6B shape (random bf16 weights) unless named, FULL graphs, TPOT in ms, median of the runs; "
             "ratio = after / before (below 1: faster); faster / slower only where the [min, max] of the runs do "
             "not overlap; a pair not measured in one run gets no ratio.", ""]
    for i, r in enumerate(rows, 1):
        lines.append(f"{i:>2}. {r['name']}")
        runs = f", {r['runs'][0]} + {r['runs'][1]} runs" if r["paired"] else ""
        lines.append(f"    records: {', '.join(r['records'])} ({r['how']}{runs})")
        lines += [f"    {_cell(x)}" + ("" if r["paired"] else ": no ratio") for x in r["cells"]]
        if r["kernels"] and None not in r["kernels"]:
            lines.append(f"    kernels per batch-1 step: {r['kernels'][0]:.0f} -> {r['kernels'][1]:.0f}")
        lines.append(f"    verdict: {r['verdict']}")
    return "\n".join(_wrapped(line) for line in lines)


def kernel_alone_table() -> str:
    """The same kernels timed alone, each pair in one bench call: the Triton GEMV against cuBLAS at 1 row
    (gemv.json), decode attention at batch 1 unsplit against the split count the engine picks
    (decode_splits_sweep.json)."""
    from minivllm_labs.recorded import other_record

    lines = []
    g = other_record("gemv.json")
    if g:
        cells = ", ".join(f"{r['name']} {r['speedup']:.2f}x" for r in g["gemv"] if r["M"] == 1)
        lines.append(f"GEMV alone at 1 row, cuBLAS time / Triton time (gemv.json): {cells}")
    d = other_record("decode_splits_sweep.json")
    if d:
        b1 = {(r["num_splits"], r["auto"]): r for r in d["decode"] if r["batch"] == 1 and r["context"] == 512}
        one = next((r for (s, _), r in b1.items() if s == 1), None)
        auto = next((r for (_, a), r in b1.items() if a), None)
        if one and auto:
            lines.append(f"decode attention alone, batch 1 x 512 tokens, graph replay (decode_splits_sweep.json): "
                         f"unsplit {1e3 * one['ms_graph']:.1f} us, {auto['num_splits']} splits "
                         f"{1e3 * auto['ms_graph']:.1f} us ({auto['ms_graph'] / one['ms_graph']:.2f}x)")
    return "\n".join(lines) or "no kernel records here"


# ---- the engine's goals ---------------------------------------------------------------------------------------
#: The engine's goals for a batch-1 decode step on the H200: a step time for the Qwen3-0.6B shape, a share of
#: the copy bandwidth (floor / step) for the Llama-3.2-1B shape, the one Hazy Research measured.
GOALS = {"qwen3-06b": ("step_ms", 0.80), "llama-32-1b": ("floor_share", 0.70)}


def goal_rows(res: dict | None) -> list[dict]:
    """Each goal against the record, and the bound the profile sets: the GEMM kernels' own time and their
    aggregate share of the copy bandwidth (a step cannot beat its GEMMs while they run one after another)."""
    rows = []
    for key, (kind, goal) in GOALS.items():
        s = _shapes(res).get(key)
        if not s or not s.get("timeline"):
            continue
        t = s["timeline"]
        gemm = [k for k in t["kernels"] if k["category"] == "gemm"]
        gemm_us = sum(k["own_us"] for k in gemm)
        gemm_share = sum(k["bytes"] for k in gemm) / (s["copy_gbps"] * 1e3) / gemm_us
        value = s["step_wall_ms"] if kind == "step_ms" else s["floor_share"]
        off = s.get("pdl_off") or {}
        rows.append({"model": _name(key), "kind": kind, "goal": goal, "value": value,
                     "over": value / goal - 1 if kind == "step_ms" else None,
                     "of_goal": goal / value if kind == "step_ms" else value / goal,
                     "step_ms": s["step_wall_ms"], "floor_ms": s["floor"]["bytes_ms"], "floor_share": s["floor_share"],
                     "goal_step_ms": goal if kind == "step_ms" else s["floor"]["bytes_ms"] / goal,
                     "gemm_kernels": len(gemm), "gemm_ms": gemm_us / 1e3, "gemm_share": gemm_share,
                     "cap_share": t["floor_us"] / gemm_us, "kernels": t["n_kernels"],
                     "rest_ms": (t["span_us"] - gemm_us) / 1e3, "gaps_us": t["gaps_us"],
                     "host_gaps_us": t["host_gaps_us"], "pdl_off_ms": off.get("step_wall_ms")})
    return rows


def goals_table(res: dict | None) -> str:
    rows = goal_rows(res)
    if not rows:
        return "no kernel timeline in this record (the goals are read on the H200's)"
    lines = []
    for r in rows:
        if r["kind"] == "step_ms":
            head = (f"goal {r['goal']:.2f} ms per step, recorded {r['value']:.3f} ms: {100 * r['over']:.0f}% over "
                    f"({100 * r['floor_share']:.1f}% of copy bandwidth)")
        else:
            head = (f"goal {100 * r['goal']:.0f}% of copy bandwidth, recorded {100 * r['value']:.1f}% "
                    f"({r['step_ms']:.3f} ms; the goal is {r['goal_step_ms']:.3f} ms)")
        lines.append(f"{r['model']}: {head}")
        lines.append(f"  its {r['gemm_kernels']} GEMM kernels alone: {r['gemm_ms']:.3f} ms, "
                     f"{100 * r['gemm_share']:.0f}% of copy bandwidth together; with every other kernel free "
                     f"the step would reach {100 * r['cap_share']:.0f}% (floor {r['floor_ms']:.3f} ms)")
        if r["kind"] == "step_ms":
            lines.append(f"  the goal leaves {r['goal'] - r['gemm_ms']:.3f} ms beside these GEMMs for every other "
                         f"kernel and gap")
        elif r["cap_share"] < r["goal"]:
            lines.append(f"  {100 * r['cap_share']:.0f}% < {100 * r['goal']:.0f}%: these GEMMs alone keep the step "
                         f"below the goal")
        lines.append(f"  {r['kernels']} kernels per step; the other {r['kernels'] - r['gemm_kernels']} and the gaps "
                     f"take {r['rest_ms']:.3f} ms of the profiled step; GPU idle between replayed kernels "
                     f"{r['gaps_us']:.1f} us, around the step's input copies {r['host_gaps_us']:.0f} us")
        if r["pdl_off_ms"]:
            lines.append(f"  PDL off: {r['pdl_off_ms']:.3f} ms per step ({r['step_ms'] / r['pdl_off_ms']:.2f}x with it)")
    return "\n".join(_wrapped(line) for line in lines)


# ---- evidence behind the questions -----------------------------------------------------------------------
def _src(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return "录制的 H200 结果（lab09.json）" if res and "provenance" in res else "本次运行"
    return "recorded H200 results (lab09.json)" if res and "provenance" in res else "this run"


def _floor_zh(res: dict | None) -> str:
    return "\n".join(f"{r['model']}：权重 {r['weights_mb']:,.0f} MB，KV {r['kv_mb']:.1f} MB，拷贝带宽 {r['copy_gbps']:,.0f} GB/s，"
                     f"字节下限 {r['floor_ms']:.3f} ms，每步 {r['step_ms']:.3f} ms"
                     + (f" [{r['step_range'][0]:.3f}, {r['step_range'][1]:.3f}]" if r["step_range"] else "")
                     + f"，下限占每步 {r['pct_of_floor']:.1f}%" + (f"，{r['kernels']:.0f} 个 kernel" if r["kernels"] else "")
                     for r in floor_rows(res)) or "没有测量"


def _where_zh(res: dict | None) -> str:
    lines = []
    for r in where_rows(res):
        lines.append(f"{r['model']}：profile 下的一步 {r['span_us']:,.0f} us（与上一个 kernel 重叠执行的部分，PDL："
                     f"{r['overlap_us']:,.0f} us）")
        lines += [f"  {zh}：{r[p]:,.0f} us（{100 * r[p] / r['span_us']:.1f}%）" for p, _, zh in PARTS]
    for key, sh in _shapes(res).items():
        if off := sh.get("pdl_off"):
            lines.append(f"{_name(key)}：开 PDL 每步 {sh['step_wall_ms']:.3f} ms，关 PDL {off['step_wall_ms']:.3f} ms；"
                         f"profile 下每步 GPU 空闲：开 {sh.get('profile', {}).get('idle_us_per_step', 0):.0f} us，"
                         f"关 {off['idle_us_per_step']:.0f} us")
    return "\n".join(lines) or "没有 kernel 时间线（CPU 运行没有 GPU kernel）"


def _sweep_zh(res: dict | None) -> str:
    lines = []
    for key, sh in _shapes(res).items():
        if sh.get("sweep"):
            b1 = sh["sweep"][0]["step_wall_ms"]
            lines.append(f"{_name(key)}：batch：每步 ms（相对 batch 1）" + "，".join(
                f"{r['batch']}：{r['step_wall_ms']:.3f}（{r['step_wall_ms'] / b1:.2f}x）" for r in sh["sweep"]))
    if roof := (res or {}).get("roofline") or {}:
        lines.append(f"拐点：{roof['peak_bf16_flops'] / 1e12:.0f} TFLOP/s（数据手册）/ {res['copy_gbps']:,.0f} GB/s（实测）"
                     f"= {roof['ridge_flops_per_byte']:.0f} FLOP/byte")
    return "\n".join(lines) or "没有测量"


def ev_floor(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return f"{_src(res, lang)}：\n{_floor_zh(res)}" if _shapes(res) else _src(res, lang)
    return f"{_src(res)}:\n{floor_table(res)}" if _shapes(res) else _src(res)


def ev_where(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return f"{_src(res, lang)}：\n{_where_zh(res)}" if _shapes(res) else _src(res, lang)
    return f"{_src(res)}:\n{where_table(res)}\n{pdl_table(res)}" if _shapes(res) else _src(res)


def ev_sweep(res: dict | None, lang: str = "en") -> str:
    if lang == "zh":
        return f"{_src(res, lang)}：\n{_sweep_zh(res)}" if _shapes(res) else _src(res, lang)
    return f"{_src(res)}:\n{sweep_table(res)}" if _shapes(res) else _src(res)


QUESTIONS = load_questions("lab09", {"ev_floor": ev_floor, "ev_where": ev_where, "ev_sweep": ev_sweep})
Q_ROOF, Q_WHY, Q_BATCH, Q_FLOOR = (QUESTIONS[f"lab09.q{i}"] for i in range(1, 5))

# ---- claims (verdicts from lab09.json) ---------------------------------------------------------------------
RULES = {
    # "a graph saves the launch overhead": one launch for the whole chain (Lab 01's record); the GPU-side cost of
    # each kernel is the next claim's
    "lab09.graph-launch": verdicts.graph_launch_saves,
    # "graphs only remove launch overhead, not the ops' own cost": right while the step stays far above its floor
    "lab09.graph-ops": lambda v: "right" if v < 0.8 else "partly",
}
CLAIMS = load_claims("lab09", RULES)
