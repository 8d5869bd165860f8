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
import subprocess
from pathlib import Path
from typing import Any

import torch

from minivllm_labs.common import REPO_ROOT
from minivllm_labs.devices import REFERENCE, measure_device, results_root

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
