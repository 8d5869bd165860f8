"""GPU timers shared by `bench kernels` and scripts/maint/decode_kernel_probe.py: a call's median GPU time,
launched from Python and replayed from a CUDA graph.

Why one file: the bisect probe compares trees by timing each tree's kernel with the same code, and that code
must be what `bench kernels` uses, or a difference could be the timer's. It imports only torch and triton
(never the engine), so the probe can load this checkout's copy while it imports another tree's minivllm.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def gpu_ms(fn: Callable[[], object]) -> float:
    """The median GPU time of fn (triton's do_bench: L2 flushed before each call, 25 ms warm-up, 200 ms)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def graph_replay_ms(fn: Callable[[], object]) -> float:
    """The median GPU time of fn replayed from a CUDA graph, L2 flushed before each replay. fn runs once on a
    side stream first (the warm-up a capture needs: lazy init, autotuning) and is then captured once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return gpu_ms(graph.replay)
