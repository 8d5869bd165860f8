"""CUDAGraphWrapper: the one class that captures and replays CUDA graphs (vLLM: compilation/cuda_graph.py).

Two kinds of callable are wrapped, with the same code:
  FULL       the whole forward of a decode step (the LM head runs after it), one graph per batch size;
  PIECEWISE  one piece of the forward split at attention, one graph per token count (attention runs
             eagerly between the pieces, so prefill and mixed batches replay too).

The wrapper does not decide anything: the dispatcher (worker/cudagraph_dispatcher.py) picks the mode and the
padded size of each step and publishes them in the forward context. A wrapper whose mode is the step's mode
replays its graph of that size; in the capture pass (dummy batches, `capturing` set in the context) it
records that graph first. A wrapper of another mode (a PIECEWISE piece inside a FULL step, or any wrapper
in an eager step), or one without a graph of the size outside the capture pass, just calls through: a
captured call only records kernels, so its outputs are never computed and must not reach a real step.

What makes a replay correct: the graph reads and writes the addresses it saw while capturing. Inputs are
weights, persistent buffers (worker/input_batch.py) or outputs of the previous piece, which live in the
shared pool at fixed addresses, so a replay needs no copies; an input at a new address is a bug and raises.
The addresses are checked on a graph's first replay, which catches an input made anew for every call, and,
as vLLM does, on every replay only with debug logging on: a PIECEWISE step replays 29 graphs, and their
~110 address reads (scripts/piecewise_host.py) were host time that a batch-1 decode step cannot hide.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import torch

from minivllm.attention.metadata import get_forward_context
from minivllm.config import CUDAGraphMode

logger = logging.getLogger("minivllm")


class CudaGraphCaptureError(RuntimeError):
    """A capture failed; names the mode and size and says what to try instead."""


def weak_ref(x: Any) -> Any:
    """A tensor viewing x's memory without owning it (CUDA graph trees do the same).

    A captured graph keeps its outputs only through such views, so once a capture is done its activations
    return to the shared pool and the next (smaller) capture reuses them: all sizes share one pool instead
    of each keeping its own alive. Safe because only one size replays at a time.
    """
    if not isinstance(x, torch.Tensor):
        return x
    st = x.untyped_storage()
    storage = torch._C._construct_storage_from_data_pointer(st.data_ptr(), x.device, st.nbytes())
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(storage, x.storage_offset(), x.shape, x.stride())


@dataclass
class CapturedGraph:
    graph: torch.cuda.CUDAGraph
    input_ptrs: list[int | None]  # None: not checked (not a tensor, or a parameter, which never moves)
    output: Any  # weak views (weak_ref) of what the captured call returned
    verified: bool = False  # the input addresses were checked at a replay (once, unless debugging)

    def __post_init__(self) -> None:
        # what a replay checks: a piece has ~10 inputs, most of them weights; each check is a data_ptr() call
        self.checked = tuple((i, p) for i, p in enumerate(self.input_ptrs) if p is not None)


class CUDAGraphWrapper:
    """Wrap `runnable` so that, in steps of `mode`, it runs as a CUDA graph of the step's padded size."""

    def __init__(self, runnable: Callable, mode: CUDAGraphMode, name: str) -> None:
        if mode not in (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE):
            raise ValueError(f"a CUDAGraphWrapper is FULL or PIECEWISE, got {mode}")
        self.runnable, self.mode, self.name = runnable, mode, name
        self.pool = None  # the engine's graph pool handle, set before capture (one pool for every graph)
        self.graphs: dict[int, CapturedGraph] = {}
        # vLLM's is_debugging_mode: check the input addresses at every replay, not only at the first
        self.check_every_replay = logger.isEnabledFor(logging.DEBUG)

    def __call__(self, *args):
        ctx = get_forward_context()
        if ctx.cudagraph_runtime_mode is not self.mode:
            return self.runnable(*args)
        n = ctx.num_padded_tokens
        entry = self.graphs.get(n)
        if entry is None:
            return self._capture(n, args) if ctx.capturing else self.runnable(*args)
        if not entry.verified:
            for i, p in entry.checked:
                if args[i].data_ptr() != p:
                    raise RuntimeError(f"CUDA graph {self.name} (size {n}): input {i} moved since capture")
            entry.verified = not self.check_every_replay
        entry.graph.replay()
        return entry.output

    def _capture(self, n: int, args: tuple) -> Any:
        self.runnable(*args)  # warm-up: lazy initialisation (Triton autotuning, cuBLAS handles) outside the graph
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = self.runnable(*args)
        ptrs = [a.data_ptr() if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter) else None
                for a in args]
        weak = tuple(weak_ref(o) for o in out) if isinstance(out, (tuple, list)) else weak_ref(out)
        self.graphs[n] = CapturedGraph(graph, ptrs, weak)
        return out

    def clear(self) -> None:
        """Free every graph (a failed capture pass, or the engine's release)."""
        self.graphs.clear()

    def release(self) -> None:
        """Free every graph and drop the wrapped callable. Dynamo may keep a compiled graph (and so this
        wrapper, one of its pieces) alive after the engine is gone; nothing of the engine stays with it."""
        self.clear()
        self.runnable = released
        self.pool = None


def released(*args):
    """What stands in for a released engine's compiled code: calling it is a bug, said plainly."""
    raise RuntimeError("this engine was shut down: its compiled forward and CUDA graphs were released")
