"""What torch.compile did, counted: traces, graph breaks, run-time recompiles, and the time split between
Dynamo and the backend. Dynamo's counters are process-wide, so an engine keeps a baseline from its own
startup and reports differences from it.
"""

from __future__ import annotations

from torch._dynamo.utils import compilation_time_metrics, counters


def baseline() -> dict:
    """The process-wide counters now (an engine's report counts from here)."""
    return {"unique_graphs": counters["stats"].get("unique_graphs", 0),
            "graph_breaks": sum(counters["graph_break"].values())}


def compile_times() -> dict[str, float]:
    return {k: sum(v) for k, v in compilation_time_metrics.items()}


def split_dynamo_inductor(before: dict[str, float], after: dict[str, float]) -> dict:
    """torch.compile's time, split from Dynamo's own timers: the backend (AOT autograd + Inductor, or at
    level 3 the split plus Inductor per piece, loads from the cache included) and Dynamo (tracing the
    bytecode, building guards). None where this torch does not keep these timers."""
    def delta(name: str) -> float | None:
        return after[name] - before.get(name, 0.0) if name in after else None

    frame, backend = delta("_compile.compile_inner"), delta("OutputGraph.call_user_compiler")
    if frame is None or backend is None:
        return {"dynamo_s": None, "backend_s": None}
    return {"dynamo_s": round(frame - backend, 3), "backend_s": round(backend, 3)}


def live_compile_report(info: dict, backend=None) -> dict:
    """Traces, graph breaks and recompiles since startup, plus the split and cache facts (`backend`: the
    engine's SplitBackend, if its forward was split at attention)."""
    # mode NONE: this engine never runs Dynamo, so no counter is its own
    base = baseline() if info.get("mode", 0) == 0 else info.get("baseline_counters",
                                                                  {"unique_graphs": 0, "graph_breaks": 0})
    return {
        "mode": info.get("mode", 0),
        "level": info.get("mode", 0),  # the old name, read by recorded results
        "graphs_traced_at_startup": info.get("unique_graphs", 0),
        "recompiles_at_runtime": counters["stats"].get("unique_graphs", 0) - base["unique_graphs"],
        "graph_breaks": info.get("graph_breaks_at_startup", 0)
        + sum(counters["graph_break"].values()) - base["graph_breaks"],
        "graph_break_reasons": dict(counters["graph_break"]),
        "pieces": getattr(backend, "num_pieces", None),
        "compiled_pieces": getattr(backend, "num_compiled_pieces", None),
        "static_size_compiles": getattr(backend, "num_static_compiles", None),
        "attention_splits": getattr(backend, "num_attention_splits", None),
        "compile_seconds": info.get("seconds"),
        "cache_dir": info.get("cache_dir"),
        "cache_warm": info.get("cache_warm"),
        "passes": info.get("passes"),  # the post-grad passes with their match counts (compilation/passes)
    }
