"""Which layer broke? Classify a failure as graph, compile or numerics, and say what to turn off first.

The handbook's rule (§4.6): turn off the layer the error comes from. A capture error turns CUDA graphs off
(cudagraph_mode NONE) and keeps torch.compile; a Dynamo or Inductor error turns torch.compile off
(compilation_config mode 0) and keeps the graphs a mode-0 engine can hold; a wrong result turns both off,
then re-enables one at a time. A compile error that comes from reading a tensor's value on the host
(data-dependent control flow, `.item()`) fails a graph capture too, so there both go off at once.
`LLM(..., fallback="auto")` walks these rungs in that order (engine/fallback.py) and logs each one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minivllm.compilation.cuda_graph import CudaGraphCaptureError


class NumericsError(RuntimeError):
    """An optimized path produced different greedy tokens than eager (found by LLM(verify=True))."""


#: The rungs of the fallback ladder, each one in vLLM's vocabulary: (what is off, the configuration).
RUNGS = {
    "as configured": "the configuration asked for",
    "CUDA graphs off": "cudagraph_mode NONE, compilation_config mode kept",
    "torch.compile off": "compilation_config mode 0 (NONE), CUDA graphs kept (cudagraph_mode FULL_DECODE_ONLY at "
                         "most: PIECEWISE needs mode 3)",
    "both off": "compilation_config mode 0 and cudagraph_mode NONE (enforce_eager=True)",
}
_ORDER = {  # the rungs to try after a failure of each kind, first to last
    "graph": ("CUDA graphs off", "both off"),
    "compile": ("torch.compile off", "both off"),
    "host_read": ("both off",),
    "numerics": ("CUDA graphs off", "torch.compile off", "both off"),
    "unknown": ("CUDA graphs off", "torch.compile off", "both off"),
}
_HINTS = {
    "graph": "or capture fewer/smaller cudagraph_capture_sizes; look for host syncs (.item()) in the forward",
    "compile": "or backend 'eager' to separate Dynamo from Inductor; register unknown ops with torch.library",
    "host_read": "the forward reads a tensor's value on the host, which no CUDA graph can capture either; "
                 "express the branch on the device (torch.where, torch.cond)",
    "numerics": "then re-enable one at a time to find the path that changed the output; check custom ops",
    "unknown": "if eager fails too, the bug is in the model or the input",
}


@dataclass
class Diagnosis:
    layer: str  # "graph" | "compile" | "numerics" | "unknown"
    reason: str
    suggestion: str
    rungs: tuple[str, ...] = field(default=())  # the fallback rungs to try, first to last

    def __str__(self) -> str:
        return f"[{self.layer}] {self.reason} -> {self.suggestion}"


_GRAPH_MARKERS = ("cudagraph", "cuda graph", "capture", "cudaerrorstreamcapture", "graph_pool", "cudaGraph")
_COMPILE_MARKERS = ("dynamo", "inductor", "torch.fx", "fx graph", "backendcompilerfailed", "unsupported",
                    "guard", "recompile", "aot_autograd", "triton compilation", "graph break")
_HOST_READ_MARKERS = ("data-dependent", "data dependent", ".item()", "_local_scalar_dense", "tensor.tolist")


def diagnose(exc: BaseException, failed: tuple[str, ...] | list[str] = ()) -> Diagnosis:
    """Classify `exc` (and its causes). `failed`: rungs already tried without success (a fallback record),
    never recommended again."""
    chain, e = [], exc
    while e is not None and len(chain) < 8:  # look through "raise ... from ..." causes too
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(f"{type(x).__module__}.{type(x).__name__}: {x}" for x in chain).lower()
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if any(isinstance(x, NumericsError) for x in chain):
        kind = "numerics"
    elif any(isinstance(x, CudaGraphCaptureError) for x in chain) or any(m.lower() in text for m in _GRAPH_MARKERS):
        kind = "graph"
    elif "torch._dynamo" in text or "torch._inductor" in text or any(m in text for m in _COMPILE_MARKERS):
        kind = "host_read" if any(m in text for m in _HOST_READ_MARKERS) else "compile"
    else:
        kind = "unknown"
    rungs = tuple(r for r in _ORDER[kind] if r not in failed) or ("both off",)
    suggestion = f"{RUNGS[rungs[0]]}; {_HINTS[kind]}"
    return Diagnosis("compile" if kind == "host_read" else kind, reason, suggestion, rungs)
