"""What every lab needs first: where the repository is, which device runs the cells, which model to load.

Why these live in the package and not in the notebooks: a notebook cell that prints the GPU's memory, the
core count or a temporary path changes from machine to machine, and nbval would flag it. The helpers here
keep that detail in return values and print only what is stable (the kind of device and its name).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import platform
import shutil
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from minivllm import DEFAULT_MODEL

#: The repository checkout (labs/, assets/ and minivllm/ sit side by side in it).
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Device:
    """The device the lab runs on. `str()` gives the stable one-line summary a setup cell prints."""

    kind: str  # "cuda" | "cpu"
    name: str  # GPU name, or the CPU architecture
    torch: str
    cuda: str | None = None  # CUDA version torch was built with (None on a CPU-only build)
    capability: str | None = None  # "sm_90" on an H100/H200
    cpu_threads: int = 1

    def __str__(self) -> str:
        if self.kind == "cuda":
            return f"device: cuda ({self.name}, {self.capability})"
        return ("device: cpu (no CUDA GPU: run-it-here cells use a tiny CPU configuration, "
                "GPU-only cells skip)")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_device() -> Device:
    """CUDA when torch sees a GPU, else the CPU; never raises."""
    common = dict(torch=torch.__version__, cuda=torch.version.cuda, cpu_threads=torch.get_num_threads())
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return Device("cuda", torch.cuda.get_device_name(), capability=f"sm_{major}{minor}", **common)
    return Device("cpu", platform.machine() or "cpu", **common)


def gpu_only(what: str = "This cell") -> bool:
    """The one guard of GPU-only cells: True on CUDA; on a CPU it says why the cell does nothing.

    Use as `if gpu_only("The live toggle"): ...`. Such cells are also tagged `nbval-skip` (and listed in
    tests/nbval_skip_allowlist.txt), because their output on a GPU cannot match a CPU run's."""
    if torch.cuda.is_available():
        return True
    print(f"{what} needs a CUDA GPU; skipped on this CPU. "
          f"The recorded H200 results above show what it measures.")
    return False


@lru_cache(maxsize=None)
def lab_model(shape: str | None = None) -> str:
    """A model directory for the labs.

    shape=None: the embedded model (assets/models/minivllm-tiny) when it exists, else a random tiny
    checkpoint (same code paths, seconds to make). shape="qwen3-0.6b" etc.: a random-weight checkpoint of a
    real model's shape, in bfloat16, for GPU measurements where the size matters (speed depends on shapes,
    not on weight values). Made once per process, in a temporary directory removed at exit."""
    if shape is None and (Path(DEFAULT_MODEL) / "config.json").exists():
        return DEFAULT_MODEL
    from transformers.utils import logging as hf_logging

    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    shape = shape or "tiny"
    out = Path(tempfile.mkdtemp(prefix=f"minivllm-lab-{shape}-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    hf_logging.disable_progress_bar()  # no progress bar in notebook outputs
    make_random_checkpoint(shape, out, dtype="float32" if shape.startswith("tiny") else "bfloat16")
    return str(out)


def describe_model(path: str) -> str:
    """A stable description of a model directory (no temporary path): name or 'random weights', shape (its layer
    count included: Lab 03's first exercise counts traces per layer)."""
    cfg = json.loads((Path(path) / "config.json").read_text())
    if Path(path).resolve() == Path(DEFAULT_MODEL).resolve():
        name = "minivllm-tiny (embedded)"
    else:
        name = "random weights" if Path(path).name.startswith("minivllm-lab-") else Path(path).name
    arch = (cfg.get("architectures") or ["?"])[0]
    return (f"{name}: {arch}, {cfg.get('num_hidden_layers')} layers, hidden {cfg.get('hidden_size')}, "
            f"{cfg.get('torch_dtype') or cfg.get('dtype')}")


def max_positions(path: str) -> int:
    """The model's max_position_embeddings (to keep max_model_len legal for any lab model)."""
    return int(json.loads((Path(path) / "config.json").read_text()).get("max_position_embeddings", 2048))


def round_floats(obj: Any, digits: int = 4) -> Any:
    """Round every float in a nested structure to `digits` significant digits.

    Why: recorded JSON and checked outputs must not carry 17-digit noise; 4 digits is more than a timing is
    worth."""
    if isinstance(obj, float):
        if not math.isfinite(obj) or obj == 0:
            return obj
        return round(obj, digits - 1 - int(math.floor(math.log10(abs(obj)))))
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    return obj


def spread_verdict(before: tuple[float, float], after: tuple[float, float]) -> str:
    """A time as [min, max] over repeats, before and after a change: "faster" or "slower" only where the two
    ranges do not overlap, else "within" (the labs' rule: a difference counts only beyond the spread)."""
    if after[1] < before[0]:
        return "faster"
    return "slower" if after[0] > before[1] else "within"


def quiet_engine_logs() -> None:
    """Send the engine's INFO lines (timestamps, timings) away from notebook outputs: warnings only."""
    import logging

    from minivllm.logger import init_logger

    init_logger()
    logging.getLogger("minivllm").setLevel(os.environ.get("MINIVLLM_LAB_LOGGING_LEVEL", "WARNING"))
