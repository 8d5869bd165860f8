"""Where the Triton GEMV's block sizes come from: a tuned file shipped per GPU model, a file named in
MINIVLLM_GEMV_CONFIGS, or Triton's autotuner.

Why: the autotuner times each config alone, after an L2 flush. Inside a CUDA graph with programmatic
dependent launch the ranking differs, and fresh autotunes pick differently among near-tied configs: on the
H200, batch-1 TPOT followed the pick from 0.977 to 1.066 ms over 12 fresh autotunes.
scripts/maint/gemv_tune.py ranks the configs by the decode step's TPOT inside the FULL graph instead and
can save the winners to configs/gemv/<GPU name>.json next to this file, as vLLM ships tuned fused-MoE configs
per device. The engine then uses them for the shapes listed there and autotunes the rest (another model's
shapes, another GPU).

    MINIVLLM_GEMV_CONFIGS unset        this GPU's shipped file, if there is one; autotune what it lacks
    MINIVLLM_GEMV_CONFIGS=autotune     autotune every shape (shipped files ignored)
    MINIVLLM_GEMV_CONFIGS=file.json    that file: a `bench latency` JSON (its modes' "gemv_configs"), a
                                       scripts/maint/gemv_tune.py JSON, {"gemv_configs": {...}}, or
                                       {shape: config}

A shape is named by the autotuner's key (N, K, rows padded, fused SiLU-and-mul / norm), not by dtype: the
shipped H200 file was tuned in bf16, and an fp32 run of the same shapes uses it too (valid, maybe slower).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

CONFIG_DIR = Path(__file__).parent / "configs" / "gemv"
ENV = "MINIVLLM_GEMV_CONFIGS"
AUTOTUNE = "autotune"

_pins: dict[str, dict] | None = None  # resolved once per process (or set by the tuner)
_source = AUTOTUNE


def shape_name(n: int, k: int, m_pad: int, silu_mul: bool, norm: bool) -> str:
    """How the picks are named in benchmark JSON ("gemv_configs") and in the config files."""
    return f"N={n} K={k} M_PAD={m_pad}" + (" silu_mul" if silu_mul else "") + (" norm" if norm else "")


def config_dict(cfg) -> dict:
    """A triton.Config as recorded in "gemv_configs" and matched against a config file."""
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def device_config_path(device_name: str) -> Path:
    """configs/gemv/NVIDIA_H200.json for "NVIDIA H200"."""
    return CONFIG_DIR / (re.sub(r"[^A-Za-z0-9_.-]+", "_", device_name.strip()) + ".json")


def read_config_file(path: str | Path) -> dict[str, dict]:
    """{shape name: config} from any of the formats in the module docstring."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{ENV}: {path} is not a JSON object of GEMV configs")
    if "modes" in data:  # a bench latency JSON: every engine's picks
        picks: dict[str, dict] = {}
        for mode in data["modes"].values():
            picks.update(mode.get("gemv_configs", {}))
        return picks
    return dict(data.get("gemv_configs", data))


def pinned_configs() -> dict[str, dict]:
    """The configs to use instead of autotuning, per shape name (empty: autotune everything)."""
    global _pins, _source
    if _pins is None:
        env = os.environ.get(ENV, "")
        if env == AUTOTUNE:
            _pins, _source = {}, AUTOTUNE
        elif env:
            _pins, _source = read_config_file(env), f"{ENV}={env}"
        else:
            shipped = device_config_path(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
            if shipped is not None and shipped.exists():
                _pins = read_config_file(shipped)
                _source = f"shipped {shipped.relative_to(CONFIG_DIR.parents[1])}"
            else:
                _pins, _source = {}, AUTOTUNE
    return _pins


def source() -> str:
    """Where the pins came from: "autotune", "shipped configs/gemv/<GPU>.json" or "MINIVLLM_...=path"."""
    pinned_configs()
    return _source


def set_pins(pins: dict[str, dict] | None, label: str = "scripts/maint/gemv_tune.py") -> None:
    """Replace the pins for this process (the tuner's lever); None: re-read the environment next time."""
    global _pins, _source
    _pins, _source = (None, AUTOTUNE) if pins is None else (dict(pins), label)


def use_pinned(configs: list, named_args: dict, **kwargs) -> list:
    """The autotuner's config filter (early_config_prune): this shape's pinned config, if there is one."""
    pins = pinned_configs()
    if not pins:
        return configs
    name = shape_name(named_args.get("N"), named_args.get("K"), kwargs.get("M_PAD"), kwargs.get("SILU_MUL"),
                      kwargs.get("HAS_NORM"))
    want = pins.get(name)
    if want is None:
        return configs
    match = [c for c in configs if config_dict(c) == want]
    if not match:
        raise ValueError(f"GEMV configs ({_source}): {name}: {want} is not one of the GEMV's autotune "
                         f"configs")
    return match
