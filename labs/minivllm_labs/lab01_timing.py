"""Lab 01, a): timing helpers (medians with their range, a quiet stderr) and what one launch costs.

Why apart: every Lab 01 measurement times things the same way (each repeat from an idle device, median and
[min, max] kept), and the launch-cost measurement needs nothing but torch (and, on CUDA, one Triton kernel).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from minivllm_labs.common import round_floats


def _cuda() -> bool:
    return torch.cuda.is_available()


def _sync() -> None:
    if _cuda():
        torch.cuda.synchronize()


def _times_s(fn: Callable[[], object], reps: int, sync_after: bool = True) -> list[float]:
    """Seconds of `fn()` over `reps` runs, each started from an idle device.

    sync_after=False times only the host side (how long the CPU takes to enqueue the work)."""
    times = []
    for _ in range(reps):
        _sync()
        t0 = time.perf_counter()
        fn()
        if sync_after:
            _sync()
        times.append(time.perf_counter() - t0)
    _sync()
    return times


def _median_s(fn: Callable[[], object], reps: int, sync_after: bool = True) -> float:
    return statistics.median(_times_s(fn, reps, sync_after))


def _stat(times: list[float], scale: float) -> tuple[float, list[float]]:
    """(median, [min, max]) of `times`, scaled (1e3: ms, 1e6: us)."""
    return statistics.median(times) * scale, [min(times) * scale, max(times) * scale]


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send the process's C-level stderr (fd 2) to /dev/null for a moment: the profiler's library prints
    "USDT: ... profiler_start" lines there, which a notebook would show in a red box. The profiler's Python
    warning about clearing events per cycle (torch 2.11 on CUDA; this lab profiles one cycle) goes too."""
    import sys
    import warnings

    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


# ---- a) launch overhead ------------------------------------------------------------------------------
def launch_overhead(n_ops: int = 1000, reps: int = 20) -> dict:
    """Cost per tiny op (`x.add_(1)` on one element): eager; and on CUDA, inside one graph replay.

    The op does almost no work, so eager time per op is the launch path (Python, dispatcher, driver). In a
    graph the CPU submits all N kernels with one call; what is left per op is the GPU's cost per kernel."""
    dev = "cuda" if _cuda() else "cpu"
    x = torch.zeros(1, device=dev)

    def ops() -> None:
        for _ in range(n_ops):
            x.add_(1.0)

    ops()
    med, rng = _stat(_times_s(ops, reps), 1e6 / n_ops)
    res = {"device": dev, "n_ops": n_ops, "reps": reps, "eager_us_per_op": med, "eager_us_range": rng}
    if dev == "cuda":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops()
        graph.replay()
        replay = _median_s(graph.replay, reps)
        res.update(graph_us_per_op=replay / n_ops * 1e6, graph_replay_us=replay * 1e6,
                   graph_launch_us=_median_s(graph.replay, reps, sync_after=False) * 1e6)
        del graph
        res.update(triton_launch(n_ops, reps))
    return round_floats(res)


def triton_launch(n_ops: int = 1000, reps: int = 20) -> dict:
    """Cost per call of one of the engine's Triton kernels (RMSNorm of one 1024-wide row), as the engine calls
    it: the Python wrapper (shape and stride maths, the grid) plus Triton's launcher. CUDA only.

    Next to `eager_us_per_op` this explains why an engine step costs far more per op than a tiny ATen op:
    most of the engine's ops are Triton kernels launched from Python."""
    from minivllm.kernels.triton_norm import rms_norm

    x = torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)

    def calls() -> None:
        for _ in range(n_ops):
            rms_norm(x, w, 1e-6)

    calls()  # compile the kernel first
    med, rng = _stat(_times_s(calls, reps), 1e6 / n_ops)
    return {"triton_us_per_op": med, "triton_us_range": rng, "triton_kernel": "minivllm rms_norm (1 x 1024)"}
