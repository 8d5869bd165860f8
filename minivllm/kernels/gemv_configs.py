"""Where the Triton GEMV's block sizes come from: a tuned file shipped per GPU model, a file named in
MINIVLLM_GEMV_CONFIGS, or Triton's autotuner over a few candidates a rule picks from the shape and the GPU.

Why: the autotuner times each config alone, after an L2 flush. Inside a CUDA graph with programmatic
dependent launch the ranking differs, and fresh autotunes pick differently among near-tied configs: on the
H200, batch-1 TPOT followed the pick from 0.977 to 1.066 ms over 12 fresh autotunes.
scripts/maint/gemv_tune.py ranks the configs by the decode step's TPOT inside the FULL graph instead and
can save the winners to configs/gemv/<GPU name>.json next to this file, as vLLM ships tuned fused-MoE configs
per device. The engine then uses them for the shapes listed there and autotunes the rest (another model's
shapes, another GPU).

    MINIVLLM_GEMV_CONFIGS unset        this GPU's shipped file, if there is one; what it lacks is autotuned
                                       over the rule's candidates (rule_candidates: 4-7 of the 26 configs)
    MINIVLLM_GEMV_CONFIGS=autotune     every shape searched over all 26 configs (shipped files ignored)
    MINIVLLM_GEMV_CONFIGS=file.json    that file: a `bench latency` JSON (its modes' "gemv_configs"), a
                                       scripts/maint/gemv_tune.py JSON, {"gemv_configs": {...}}, or
                                       {shape: config}

Why a rule: each config the autotuner times is first compiled, so searching all 26 configs for every shape an
unshipped model brings made its first start 3x a shipped one's (H200: a Llama-3.2-1B shape spent 52 s of a
68-70 s first start tuning). Every config the H200 tuning kept is "narrow and deep": 1-4 output columns per
program, a K tile of 1024-2048 (the whole row or half of it), at least one wave of programs over the SMs. The
rule keeps only those (tests/kernels/test_gemv_tune.py checks it keeps every shipped pick); the time spent
tuning is counted (tuning_seconds) and the startup report shows it as its own phase.

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
AUTOTUNE = "autotune"  # the full search, on request
RULE = "rule"  # the default for shapes no file pins
DEEP_K_MIN = 1024  # the narrow-and-deep family's smallest K tile
MIN_WAVES = 1  # programs per SM the rule asks for (fewer leaves SMs idle at batch 1)

_pins: dict[str, dict] | None = None  # resolved once per process (or set by the tuner)
_source = RULE
_tuning = {"seconds": 0.0}  # the autotuner's time in this process (Triton's cache is per process)


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
                _pins, _source = {}, RULE
    return _pins


def source() -> str:
    """Where the pins came from: "rule" (nothing pinned: the rule's candidates are autotuned), "autotune"
    (the full search), "shipped configs/gemv/<GPU>.json" or "MINIVLLM_...=path"."""
    pinned_configs()
    return _source


def set_pins(pins: dict[str, dict] | None, label: str = "scripts/maint/gemv_tune.py") -> None:
    """Replace the pins for this process (the tuner's lever; label "autotune" asks for the full search on
    unpinned shapes); None: re-read the environment next time."""
    global _pins, _source
    _pins, _source = (None, RULE) if pins is None else (dict(pins), label)


def rule_candidates(configs: list, n: int, k: int, sm_count: int) -> list:
    """The configs worth timing for an [N, K] weight on a GPU of sm_count SMs: the narrow-and-deep family
    (a K tile of min(K, 1024) to K, rounded up to a power of two; no pipelined loop) with at least MIN_WAVES
    programs per SM. Small K (tiny models) keeps the K tile equal to K rounded up; if nothing qualifies, the
    configs with the smallest K tile."""
    k_pad = 1 << max(0, (k - 1).bit_length())
    k_min = min(DEEP_K_MIN, k_pad)

    def fits(c, need_waves: bool) -> bool:
        bn, bk = c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        waves = -(-n // bn) / max(1, sm_count)
        return ("LOOP_STAGES" not in c.kwargs and k_min <= bk <= k_pad
                and (waves >= MIN_WAVES or not need_waves))

    chosen = [c for c in configs if fits(c, True)] or [c for c in configs if fits(c, False)]
    if not chosen:
        smallest = min(c.kwargs["BLOCK_K"] for c in configs)
        chosen = [c for c in configs if c.kwargs["BLOCK_K"] == smallest and "LOOP_STAGES" not in c.kwargs]
    return chosen


def _sm_count(named_args: dict) -> int:
    x = named_args.get("x_ptr")
    if isinstance(x, torch.Tensor) and x.device.type == "cuda":
        return torch.cuda.get_device_properties(x.device).multi_processor_count
    return 132  # an H200's SMs; only reached off the GPU (tests)


def use_pinned(configs: list, named_args: dict, **kwargs) -> list:
    """The autotuner's config filter (early_config_prune): this shape's pinned config if there is one, else
    every config under the full search, else the rule's candidates."""
    pins = pinned_configs()
    name = shape_name(named_args.get("N"), named_args.get("K"), kwargs.get("M_PAD"), kwargs.get("SILU_MUL"),
                      kwargs.get("HAS_NORM"))
    want = pins.get(name)
    if want is None:
        if _source == AUTOTUNE:
            return configs
        return rule_candidates(configs, named_args.get("N"), named_args.get("K"), _sm_count(named_args))
    match = [c for c in configs if config_dict(c) == want]
    if not match:
        raise ValueError(f"GEMV configs ({_source}): {name}: {want} is not one of the GEMV's autotune "
                         f"configs")
    return match


def record_tuning(seconds: float) -> None:
    """The autotuner timed one config (its compile included): triton_gemv's bench function reports here."""
    _tuning["seconds"] += seconds


def tuning_seconds() -> float:
    """Seconds this process spent compiling and timing GEMV configs (0 when every shape was pinned or
    cached on disk); the startup report carves them out as their own phase."""
    return _tuning["seconds"]
