"""Recorded results: measurements made once on a real GPU, stored with their provenance, shown everywhere.

Why: most readers (and CI) have no H200, yet a lab about launch overhead means little without GPU numbers.
So `python -m minivllm_labs.record <lab>` runs a lab's measurements on the GPU and writes
assets/results/<gpu>/<lab>.json (assets/results/h200/ is the reference every lab is written against); the
notebook loads and plots it, beside any other device's (devices.py). A number without its provenance (which
GPU, which torch, which commit, when, by what command) cannot be checked or reproduced, so the loader
refuses a file that lacks any of them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

from minivllm_labs.common import REPO_ROOT

#: Read every device's records from another root than assets/results (a test's temp dir, a shared folder).
RESULTS_ROOT_ENV = "MINIVLLM_RESULTS_ROOT"
#: The device every lab's text is written against; it comes first in every comparison.
REFERENCE = "h200"


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


RESULTS_DIR = REPO_ROOT / "assets" / "results" / REFERENCE
#: Set to read the reference's recorded results from elsewhere (tests render a lab with a stand-in file).
RESULTS_DIR_ENV = "MINIVLLM_LAB_RESULTS_DIR"
#: Every recorded file must say where its numbers come from.
PROVENANCE_FIELDS = ("gpu", "torch", "commit", "date", "command")


class RecordedResultsMissing(FileNotFoundError):
    """No recorded file for this lab; the message says how to make one."""


class ProvenanceError(ValueError):
    """A recorded file without complete provenance."""


def results_path(lab: str, device: str = REFERENCE) -> Path:
    """Where `lab`'s record of `device` (a folder name, see devices.gpu_slug) lives."""
    if device == REFERENCE and os.environ.get(RESULTS_DIR_ENV):
        return Path(os.environ[RESULTS_DIR_ENV]) / f"{lab}.json"
    return results_root() / device / f"{lab}.json"


def other_record(name: str, device: str = REFERENCE) -> dict | None:
    """A bench's results file (e.g. "throughput.json") beside the labs' records of `device`, or None when it is
    absent or unreadable: a view quoting another record says so instead of failing."""
    try:
        return json.loads((results_path("lab00", device).parent / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


#: The file that keeps the former results files of `device` whose experiments decided something (an A/B, a
#: dropped design), each member with its own content and provenance; index.yaml says what each one is.
ARCHIVE = "archive.json"


def archive_members(device: str = REFERENCE) -> dict[str, dict]:
    """Every member of `device`'s archive.json by its former file name ({} when there is no archive): a view
    quoting an archived A/B reads its numbers and provenance from there, never from text."""
    return (other_record(ARCHIVE, device) or {}).get("files") or {}


def check_provenance(data: Any, lab: str | None = None) -> dict:
    """Return `data['provenance']` if every field of PROVENANCE_FIELDS is a non-empty string, else raise
    ProvenanceError naming what is missing (and the lab, if `data['lab']` disagrees with `lab`)."""
    if not isinstance(data, dict):
        raise ProvenanceError(f"recorded results must be a JSON object, got {type(data).__name__}")
    if lab is not None and data.get("lab") != lab:
        raise ProvenanceError(f"recorded results are for lab {data.get('lab')!r}, expected {lab!r}")
    prov = data.get("provenance")
    if not isinstance(prov, dict):
        raise ProvenanceError(f"recorded results have no 'provenance' object "
                              f"(needed: {', '.join(PROVENANCE_FIELDS)})")
    missing = [k for k in PROVENANCE_FIELDS if not (isinstance(prov.get(k), str) and prov[k].strip())]
    if missing:
        raise ProvenanceError(f"recorded results lack provenance field(s) {', '.join(missing)}; "
                              f"re-record them with "
                              f"`python -m minivllm_labs.record {data.get('lab', '<lab>')}`")
    return prov


def load_recorded(lab: str, path: str | Path | None = None) -> dict:
    """Load assets/results/h200/<lab>.json (or `path`) and check its provenance.

    Raises RecordedResultsMissing (a FileNotFoundError) when there is no file, ProvenanceError when it is
    incomplete. Messages use repository-relative paths so that a notebook printing them stays stable."""
    p = Path(path) if path is not None else results_path(lab)
    shown = p.relative_to(REPO_ROOT) if p.is_absolute() and p.is_relative_to(REPO_ROOT) else p
    if not p.exists():
        raise RecordedResultsMissing(
            f"No recorded GPU results for {lab} in this checkout ({shown}). Make them on a CUDA machine with "
            f"`python -m minivllm_labs.record {lab}`; until then the lab shows what runs here.")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ProvenanceError(f"{shown} is not valid JSON: {e}") from None
    check_provenance(data, lab)
    return data


def describe_provenance(data: dict) -> str:
    """One stable line: where and how the numbers were measured."""
    p = data["provenance"]
    extra = f", model {p['model']}" if p.get("model") else ""
    return (f"Recorded on {p['gpu']} with torch {p['torch']}, commit {p['commit'][:12]}, "
            f"{p['date'][:10]}{extra}\n  command: {p['command']}")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def make_provenance(command: str, **extra: Any) -> dict:
    """The provenance of a measurement made now, in this process, by `command`; on a GPU with the device's
    memory and copy bandwidth measured now (`device`), which the labs use instead of any datasheet."""
    device = measure_device()
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
    else:
        gpu = f"none (CPU: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    # MINIVLLM_GIT_COMMIT (the commit the caller sent to a GPU machine) wins over a copied tree's stale .git.
    sent = os.environ.get("MINIVLLM_GIT_COMMIT")
    commit = sent or _git("rev-parse", "HEAD") or "unknown (not a git checkout)"
    dirty = False if sent else bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "commit": commit,
            "dirty": dirty, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command, "python": platform.python_version(), **({"device": device} if device else {}),
            **extra}


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
