"""Recorded devices side by side: the reference H200 and any GPU a reader recorded with `record all`.

Why: a learner with an A100, an L4 or a laptop RTX wants to see what their own GPU does next to the H200,
and the record must outlive the kernel. `python -m minivllm_labs.record all` writes
assets/results/<gpu-slug>/labNN.json on any CUDA machine; this module lists those folders, loads one lab's
record per device, and merges a lab's figure built once per device into one figure (a series per device).
Nothing here knows a GPU by name: a device the labs have not seen before is one more folder.

    MINIVLLM_RESULTS_ROOT=/elsewhere   read (and record to) another results root (tests build the book so)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from minivllm_labs.recorded import (  # noqa: F401 (re-exported: the devices' names and folders)
    REFERENCE,
    RESULTS_ROOT_ENV,
    gpu_slug,
    measure_device,
    results_root,
    this_gpu_slug,
)

#: Line dashes for the second, third, ... device (the reference keeps solid lines and full colour).
_DASHES = ("dash", "dot", "dashdot", "longdash")


def device_dir(slug: str) -> Path:
    if slug == REFERENCE and os.environ.get("MINIVLLM_LAB_RESULTS_DIR"):
        return Path(os.environ["MINIVLLM_LAB_RESULTS_DIR"])
    return results_root() / slug


def recorded_devices(lab: str | None = None) -> list[str]:
    """Device folders under the results root (those holding `<lab>.json` if a lab is given), the reference
    first, then the others by name."""
    root = results_root()
    slugs = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if REFERENCE not in slugs and device_dir(REFERENCE).is_dir():
        slugs.append(REFERENCE)
    if lab is not None:
        slugs = [s for s in slugs if (device_dir(s) / f"{lab}.json").is_file()]
    return sorted(slugs, key=lambda s: (s != REFERENCE, s))


def device_names() -> dict[str, str]:
    """{slug: GPU name} of every recorded device, read from the first lab record in its folder."""
    import json

    out = {}
    for slug in recorded_devices():
        for f in sorted(device_dir(slug).glob("lab[0-9][0-9].json")):
            try:
                out[slug] = device_name(json.loads(f.read_text()))
                break
            except (OSError, ValueError):
                continue
    return out


def device_records(lab: str) -> dict[str, dict]:
    """{slug: record} of one lab for every device that recorded it (a file without provenance is skipped,
    as load_recorded would refuse it)."""
    from minivllm_labs.recorded import ProvenanceError, load_recorded

    out = {}
    for slug in recorded_devices(lab):
        try:
            out[slug] = load_recorded(lab, device_dir(slug) / f"{lab}.json")
        except (ProvenanceError, OSError):
            continue
    return out


def device_name(rec: dict) -> str:
    """The GPU a record was made on, as its provenance says."""
    return (rec.get("provenance") or {}).get("gpu") or "unknown device"


def measured(rec: dict) -> dict:
    """The device's memory and bandwidth as measured when the record was made (provenance `device`), else
    Lab 07's copy bandwidth; {} when the record predates both."""
    dev = dict((rec.get("provenance") or {}).get("device") or {})
    bw = (rec.get("copy_bandwidth") or {}).get("bytes_per_s")
    if "copy_GBps" not in dev and bw:
        dev["copy_GBps"] = round(bw / 1e9, 1)
    return dev


def side_by_side(build: Callable[[dict], object], recs: dict[str, dict]):
    """One figure from `build(rec)` per device: every series named "<series> · <GPU>", the reference's drawn
    as built, each other device's dashed and in its own legend group. A plotly toggle's visibility lists
    are repeated per device, so its buttons still pick a series (on every device at once)."""
    figs = [(device_name(rec), build(rec)) for rec in recs.values()]
    if not figs:
        raise ValueError("no recorded device to show")
    base_name, out = figs[0]
    n = len(out.data)
    multi = len(figs) > 1
    for tr in out.data:
        tr.update(legendgroup=base_name)
        if multi:
            tr.update(name=f"{tr.name} · {base_name}")
    for k, (name, fig) in enumerate(figs[1:]):
        for tr in fig.data:
            tr.update(name=f"{tr.name} · {name}", legendgroup=name)
            if getattr(tr, "line", None) is not None and tr.type == "scatter":
                tr.update(line_dash=_DASHES[k % len(_DASHES)])
            if tr.type == "bar":
                tr.update(marker_pattern_shape="/", opacity=0.8)
            out.add_trace(tr)
    if multi:
        for menu in out.layout.updatemenus or ():
            for b in menu.buttons:
                vis = (b.args[0] or {}).get("visible") if b.args else None
                if isinstance(vis, (list, tuple)) and len(vis) == n:
                    b.args = [{**b.args[0], "visible": list(vis) * len(figs)}, *b.args[1:]]
        title = out.layout.title.text or ""
        out.update_layout(title_text=f"{title} · " + " vs ".join(name for name, _ in figs))
    return out


def devices_line(lab: str) -> str:
    """One stable line naming the devices whose records a lab shows, and how to add one's own."""
    recs = device_records(lab)
    names = [f"{device_name(r)} ({s})" for s, r in recs.items()]
    if len(names) <= 1:
        return (f"Recorded devices: {', '.join(names) or 'none'}. Record yours on any CUDA GPU with "
                f"`python -m minivllm_labs.record all` (or `make labs-record`); it appears beside the H200 here.")
    return f"Recorded devices, side by side: {', '.join(names)}."


#: What each lab compares across devices: (the views' figure of a record, the views' table of a record).
#: A figure function ending in `_devices` takes {slug: record} itself (Lab 07's floors, a column per device).
COMPARE = {
    "lab01": ("plot_tpot", "tpot_table"),
    "lab02": ("plot_padding", "padding_table"),
    "lab03": ("plot_levels", "grid_table"),
    "lab04": ("plot_phases", "phases_table"),
    "lab05": (None, "scenario_table"),
    "lab06": ("plot_sweep", "sweep_table"),
    "lab07": ("plot_floors_devices", None),
    "lab09": (None, "floor_table"),
    "lab10": ("plot_disagreement", "disagreement_table"),
    "lab11": ("plot_acceptance", "tpot_table"),
}


def _views(lab: str):
    import importlib

    try:
        return importlib.import_module(f"minivllm_labs.lab{lab[3:]}_views")
    except ModuleNotFoundError:
        return importlib.import_module(f"minivllm_labs.lab{lab[3:]}")


def compare_figure(lab: str, recs: dict[str, dict]):
    """The lab's comparison figure with a series per device, None if the lab has none."""
    name = COMPARE.get(lab, (None, None))[0]
    if not name or not recs:
        return None
    build = getattr(_views(lab), name)
    return build(recs) if name.endswith("_devices") else side_by_side(build, recs)


def compare_tables(lab: str, recs: dict[str, dict]) -> dict[str, str]:
    """{GPU name: the lab's comparison table of that device's record}."""
    name = COMPARE.get(lab, (None, None))[1]
    if not name:
        return {}
    table = getattr(_views(lab), name)
    return {device_name(r): table(r) for r in recs.values()}


def claims_of(lab: str) -> tuple:
    """The lab's claims (its views' CLAIMS, else its module's: Lab 07 declares them in lab07.py)."""
    import importlib

    return tuple(getattr(_views(lab), "CLAIMS", ()) or
                 getattr(importlib.import_module(f"minivllm_labs.lab{lab[3:]}"), "CLAIMS", ()))


def verdict_rows(lab: str, recs: dict[str, dict]) -> list[dict]:
    """The lab's claims measured in its own record, per device: the number at the claim's key and, where the
    claim has a rule, the verdict that number gives on that device. `differs` marks a claim whose verdict
    on some device is not the one the lab states (which rests on the reference)."""
    from minivllm_labs.lab_info import resolve_key

    own = f"assets/results/{REFERENCE}/{lab}.json"
    out = []
    for c in claims_of(lab):
        if c.evidence_file != own:
            continue
        per = {}
        for rec in recs.values():
            try:
                value = resolve_key(rec, c.evidence_key)
            except (KeyError, IndexError, TypeError):
                value = None
            verdict = c.rule(value) if (c.rule and value is not None) else None
            per[device_name(rec)] = {"value": value, "verdict": verdict}
        differs = any(v["verdict"] not in (None, c.verdict) for v in per.values())
        out.append({"id": c.cid, "claim": c.claim_en, "claim_zh": c.claim_zh, "verdict": c.verdict, "devices": per, "differs": differs})
    return out


def rests_on(lab: str) -> str:
    """Which device a lab's stated verdicts rest on (a stable line)."""
    rec = device_records(lab).get(REFERENCE)
    if rec is None:
        return f"No reference record of {lab} in this checkout · 本仓库中没有 {lab} 的参考记录。"
    gpu = device_name(rec)
    return (f"The verdicts of this lab rest on the {gpu} record (assets/results/{REFERENCE}/{lab}.json) · "
            f"本实验的结论基于 {gpu} 的记录。")


def verdicts_text(lab: str, recs: dict[str, dict]) -> str:
    lines = [rests_on(lab)]
    for r in verdict_rows(lab, recs):
        cells = "; ".join(f"{gpu}: {_short(v['value'])}" + (f" -> {v['verdict']}" if v["verdict"] else "")
                          for gpu, v in r["devices"].items())
        flag = "  ** differs on another device · 在其他设备上结论不同 **" if r["differs"] else ""
        lines.append(f"- {r['id']} ({r['verdict']}): {cells}{flag}")
    return "\n".join(lines)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def compare(lab: str) -> None:
    """The notebook's side-by-side cell: the devices recorded for this lab, the comparison figure and tables
    with a series / a block per device, and the verdicts with the device they rest on."""
    from minivllm_labs.plots import show

    recs = device_records(lab)
    print(devices_line(lab))
    print(verdicts_text(lab, recs))
    if len(recs) < 2:
        return
    fig = compare_figure(lab, recs)
    if fig is not None:
        show(fig)
    for gpu, table in compare_tables(lab, recs).items():
        print(f"== {gpu} ==\n{table}")
