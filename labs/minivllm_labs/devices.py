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
import re
from collections.abc import Callable
from pathlib import Path

from minivllm_labs.common import REPO_ROOT

#: Read every device's records from another root than assets/results (a test's temp dir, a shared folder).
RESULTS_ROOT_ENV = "MINIVLLM_RESULTS_ROOT"
#: The device every lab's text is written against; it comes first in every comparison.
REFERENCE = "h200"
#: Line dashes for the second, third, ... device (the reference keeps solid lines and full colour).
_DASHES = ("dash", "dot", "dashdot", "longdash")


def results_root() -> Path:
    return Path(os.environ.get(RESULTS_ROOT_ENV) or REPO_ROOT / "assets" / "results")


def gpu_slug(name: str) -> str:
    """A folder name from `torch.cuda.get_device_name()`: 'NVIDIA H200' -> 'h200', 'NVIDIA GeForce RTX 4090'
    -> 'geforce-rtx-4090', 'NVIDIA A100-SXM4-80GB' -> 'a100-sxm4-80gb' (the vendor word dropped)."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    s = re.sub(r"^nvidia-", "", s)
    if not s:
        raise ValueError(f"cannot make a folder name from the device name {name!r}")
    return s


def this_gpu_slug() -> str | None:
    """The slug of the CUDA device this process would record on, None without one."""
    import torch

    return gpu_slug(torch.cuda.get_device_name()) if torch.cuda.is_available() else None


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
    if multi:
        for tr in out.data:
            tr.update(name=f"{tr.name} · {base_name}", legendgroup=base_name)
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


def measure_device(nbytes: int = 512 << 20, reps: int = 10) -> dict:
    """The CUDA device's memory and copy bandwidth, measured now (never looked up by name): total and free
    memory from the driver, and the median device-to-device copy rate (read + write bytes / time)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    free, total = torch.cuda.mem_get_info()
    nbytes = min(nbytes, free // 4)
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del a, b
    times.sort()
    props = torch.cuda.get_device_properties(0)
    return {"name": torch.cuda.get_device_name(), "slug": this_gpu_slug(),
            "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
            "total_memory_GiB": round(total / 2**30, 2), "free_memory_GiB": round(free / 2**30, 2),
            "copy_GBps": round(2 * nbytes / times[len(times) // 2] / 1e9, 1)}
