"""Lab 09's figures, tables, the numbers behind its questions and its verdicts' rules.

Split from lab09.py so each file has one job: lab09.py measures (on the recorder's GPU, without plotly), this
file draws and grades (the questions and claims are data/lab09.yaml). Every function takes a results dict: the
recorded H200 file or what the notebook just measured here. Keys a record may lack (a CPU run has no kernel
timeline, no PDL A/B) are optional: the function says what is missing instead of failing.
"""

from __future__ import annotations

from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)
from minivllm_labs.quiz_data import load_claims, load_questions

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
        noise = " (within noise: the ranges overlap)" if lo_off <= hi_on and lo_on <= hi_off else ""
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


# ---- evidence behind the questions -----------------------------------------------------------------------
def _src(res: dict | None) -> str:
    return "recorded H200 results (lab09.json)" if res and "provenance" in res else "this run"


def ev_floor(res: dict | None) -> str:
    return f"{_src(res)}:\n{floor_table(res)}" if _shapes(res) else _src(res)


def ev_where(res: dict | None) -> str:
    return f"{_src(res)}:\n{where_table(res)}\n{pdl_table(res)}" if _shapes(res) else _src(res)


def ev_sweep(res: dict | None) -> str:
    return f"{_src(res)}:\n{sweep_table(res)}" if _shapes(res) else _src(res)


QUESTIONS = load_questions("lab09", {"ev_floor": ev_floor, "ev_where": ev_where, "ev_sweep": ev_sweep})
Q_ROOF, Q_WHY, Q_BATCH, Q_FLOOR = (QUESTIONS[f"lab09.q{i}"] for i in range(1, 5))

# ---- claims (verdicts from lab09.json) ---------------------------------------------------------------------
RULES = {
    # "a graph saves the launch overhead": it saves the CPU's launch calls; every kernel boundary still runs on the GPU
    "lab09.graph-launch": lambda v: "partly" if v > 1 else "right",
    # "graphs only remove launch overhead, not the ops' own cost": right while the step stays far above its floor
    "lab09.graph-ops": lambda v: "right" if v < 0.8 else "partly",
}
CLAIMS = load_claims("lab09", RULES)
