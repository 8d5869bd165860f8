"""What every benchmark shares: provenance, random prompts, timing, tables, JSON, freeing an engine.

Why provenance: a number without the GPU, the library versions, the commit and the exact command that
produced it cannot be compared with anything later, so every JSON file carries them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from minivllm.engine_args import int_list  # noqa: F401  (the benches' comma lists, parsed as the engine's flags)

REPO = Path(__file__).resolve().parents[2]


# ---- arguments (parse_args, which needs every bench's parser, is in cli.py; int_list is EngineArgs') ---
def str_list(s: str) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def model_dir(args: argparse.Namespace) -> str:
    from minivllm import DEFAULT_MODEL

    return DEFAULT_MODEL if args.model is None else args.model  # "--model ''" is an error, as in LLM


def engine_kwargs(args: argparse.Namespace, **overrides: Any) -> dict:
    """The `LLM(...)` keyword arguments the command line asked for, with a bench's own settings on top."""
    from minivllm.engine_args import EngineArgs

    kw = EngineArgs.from_cli_args(args).kwargs()
    kw["model"] = model_dir(args)
    kw.update(overrides)
    return kw


def maint_script(name: str):
    """scripts/maint/<name>.py, loaded by path. What runs from there is what measures the engine from outside:
    the startup bench (fresh processes), the transformers baselines, and the GPU deep-dive benches (`bench
    kernels`, `bench profile`) beside the sweeps, probes and host profile that share their code."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "maint" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- provenance --------------------------------------------------------------------------------------
def git_info() -> dict:
    def git(*cmd: str) -> str | None:
        try:
            return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    # A copied tree (the GPU machine's) may carry a stale .git: the caller's MINIVLLM_GIT_COMMIT, naming the
    # commit it sent, wins over what git says there.
    if os.environ.get("MINIVLLM_GIT_COMMIT"):
        return {"commit": os.environ["MINIVLLM_GIT_COMMIT"], "dirty": os.environ.get("MINIVLLM_GIT_DIRTY") == "1"}
    status = git("status", "--porcelain")
    commit = git("rev-parse", "HEAD")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def model_shape(path: str) -> dict:
    """The hyper-parameters that decide the speed (random weights in the same shape run as fast)."""
    cfg = json.loads((Path(path) / "config.json").read_text())
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")
    return {"path": str(path), "architecture": (cfg.get("architectures") or ["?"])[0],
            "dtype": cfg.get("dtype") or cfg.get("torch_dtype"), **{k: cfg.get(k) for k in keys}}


def versions() -> dict:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "transformers"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def provenance(args: argparse.Namespace, path: str | None) -> dict:
    """Where a result came from; `path` is the model (None for a probe that runs no model)."""
    cuda = torch.cuda.is_available()
    return {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(sys.argv),
        "args": {k: v for k, v in vars(args).items() if k != "func"},
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "device": "cuda" if cuda else "cpu",
        "cuda": torch.version.cuda,
        "host": platform.node(),
        **versions(),
        "git": git_info(),
        "model": model_shape(path) if path else None,
    }


def jsonable(obj: Any) -> Any:
    """A plain-data copy (unknown objects become strings). Reports can hold live objects, such as a compile
    backend that owns CUDA graphs; keeping those would keep their memory after the engine is freed."""
    return json.loads(json.dumps(obj, default=str))


def try_baseline(name: str, fn: Callable[..., dict], *args: Any, **kwargs: Any) -> dict:
    """fn(*args, **kwargs), a baseline; if it fails, say so and go on: it must not cost the engine numbers
    already measured."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - any failure of a third-party baseline
        print(f"warning: baseline {name} failed: {type(e).__name__}: {e}", file=sys.stderr)
        return {"error": f"{type(e).__name__}: {e}"}


def write_json(path: str | None, result: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"wrote {path}")


# ---- workload and timing -----------------------------------------------------------------------------
def random_prompts(n: int, length: int, high: int, seed: int) -> list[list[int]]:
    """n prompts of `length` token ids drawn uniformly from [0, high). Random: no prefix-cache hits."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, (n, length), generator=g).tolist()


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds). The GPU runs asynchronously: synchronize before and after, or the clock lies."""
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t0


def percentiles(values: Sequence[float]) -> dict:
    import numpy as np

    vals = [v for v in values if v is not None]
    return {f"p{p}": float(np.percentile(vals, p)) if vals else None for p in (50, 90, 99)}


def free_engine(llm) -> None:
    """Give an engine's GPU memory back before the next one starts (each sizes its KV cache from free memory)."""
    llm.shutdown()


# ---- output ------------------------------------------------------------------------------------------
def fmt(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def print_table(title: str, header: list[str], rows: list[list[Any]], spec: str = ".2f") -> str:
    """A plain fixed-width table (copy-pasteable into an issue or a notebook)."""
    cells = [header] + [[fmt(v, spec) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.rjust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells[1:]]
    text = "\n".join(lines)
    print("\n" + text)
    return text
