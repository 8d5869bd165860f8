"""Which layer broke? Classify a failure as graph, compile or numerics, and say what to try.

The handbook's debugging ladder: turn CUDA graphs off first (enforce_eager or cudagraph_mode NONE), then
torch.compile (level 0), then both; the first step that makes the error go away names the culprit.
`LLM(..., fallback="auto")` walks that ladder by itself and logs each step.
"""

from __future__ import annotations

from dataclasses import dataclass

from minivllm.compilation.cuda_graph import CudaGraphCaptureError


class NumericsError(RuntimeError):
    """An optimized path produced different greedy tokens than eager (found by LLM(verify=True))."""


@dataclass
class Diagnosis:
    layer: str  # "graph" | "compile" | "numerics" | "unknown"
    reason: str
    suggestion: str

    def __str__(self) -> str:
        return f"[{self.layer}] {self.reason} -> {self.suggestion}"


_GRAPH_MARKERS = ("cudagraph", "cuda graph", "capture", "cudaerrorstreamcapture", "graph_pool", "cudaGraph")
_COMPILE_MARKERS = ("dynamo", "inductor", "torch.fx", "fx graph", "backendcompilerfailed", "unsupported",
                    "guard", "recompile", "aot_autograd", "triton compilation", "graph break")


def diagnose(exc: BaseException) -> Diagnosis:
    chain, e = [], exc
    while e is not None and len(chain) < 8:  # look through "raise ... from ..." causes too
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(f"{type(x).__module__}.{type(x).__name__}: {x}" for x in chain).lower()
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if any(isinstance(x, NumericsError) for x in chain):
        return Diagnosis("numerics", reason, "an optimized path changed the output: bisect with compilation_config "
                         "level 0 and cudagraph_mode NONE, then re-enable one at a time; check custom ops")
    graph_error = any(isinstance(x, CudaGraphCaptureError) for x in chain)
    if graph_error or any(m.lower() in text for m in _GRAPH_MARKERS):
        return Diagnosis("graph", reason, "turn CUDA graphs off (enforce_eager=True or cudagraph_mode='NONE'), "
                         "or capture fewer/smaller sizes; look for host syncs (.item()) in the forward")
    if "torch._dynamo" in text or "torch._inductor" in text or any(m in text for m in _COMPILE_MARKERS):
        return Diagnosis("compile", reason, "set compilation_config level 0 (keep graphs), or backend 'eager' to "
                         "separate Dynamo from Inductor; register unknown ops with torch.library")
    return Diagnosis("unknown", reason, "retry with enforce_eager=True; if it still fails the bug is in the "
                     "eager model or the input")
