"""compile_model: what each compilation mode (vLLM's CompilationMode) does to the forward.

  mode 0  NONE: the plain forward; nothing is traced, Dynamo never runs
  mode 1  STOCK_TORCH_COMPILE: torch.compile(fullgraph=True) of the forward, guards kept, so a new shape
          may re-trace (counted); an op Dynamo cannot trace is a startup error, as in vLLM
  mode 2  DYNAMO_TRACE_ONCE: one trace with a dynamic token dimension, compiled whole; after it the
          engine calls the compiled graph directly, so no guard is checked and nothing re-traces
  mode 3  VLLM_COMPILE: mode 2's trace split at every attention op, each piece compiled by Inductor
          (compilation/backend.py); with PIECEWISE graphs on, each piece is captured per token count

vLLM traces the WHOLE forward once and splits at attention. The labs' variants (the handbook's other
compile scopes, graph breaks, unregistered attention) come in through one seam, compilation/variants.py.
The result is a CompiledForward: the worker keeps it and never looks inside the compiler.
"""

from __future__ import annotations

import logging
import time
import types
import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from minivllm.compilation import graph_cache, report, variants
from minivllm.compilation.backend import SplitBackend
from minivllm.compilation.cache import CompileCache, cache_key, scoped_cache_env
from minivllm.compilation.cuda_graph import CUDAGraphWrapper, released
from minivllm.compilation.passes import pass_manager
from minivllm.config import EngineConfig
from minivllm.interrupt import caused_by_interrupt
from minivllm.layers.custom_op import CustomOpSelection, attach_custom_ops
from minivllm.models.config import ModelConfig

logger = logging.getLogger("minivllm")
Forward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# vLLM's Inductor defaults (CompilationConfig.inductor_compile_config, torch < 2.12; kept on every torch,
# since 2.13 still emits them): no runtime asserts in the generated code. With them, every call of a piece
# checks the size, stride and alignment of its inputs and of each custom op's outputs, ~12 checks a piece and
# 29 pieces a forward: host time that every step without CUDA graphs pays (scripts/maint/host_time.py).
# inductor_compile_config turns them back on.
INDUCTOR_DEFAULTS = {"size_asserts": False, "alignment_asserts": False, "scalar_asserts": False}


@dataclass
class CompiledForward:
    """What compile_model hands the worker."""

    forward: Forward  # the forward every step runs (a FULL graph may record it too: EngineConfig.full_graphs_capture)
    piecewise_wrappers: list[CUDAGraphWrapper] = field(default_factory=list)  # mode 3: one per piece
    split_backend: SplitBackend | None = None
    info: dict = field(default_factory=dict)  # for the startup report
    code: types.CodeType | None = None  # the code object Dynamo keeps this engine's compiled code under
    trace_once: TraceOnceBackend | None = None

    def release(self) -> None:
        """Drop the compiled code and graphs. Dynamo keeps every backend it was given (and its cache entries,
        whose guards hold the model) for the life of the process: the backends give up what they hold, and
        the entries of this engine's code object are dropped."""
        for w in self.piecewise_wrappers:
            w.release()
        if self.split_backend is not None:
            self.split_backend.release()
        if self.trace_once is not None:
            self.trace_once.release()
        if self.code is not None:
            forget_code(self.code)
        self.forward, self.piecewise_wrappers, self.split_backend, self.code, self.trace_once = \
            released, [], None, None, None


@scoped_cache_env()  # the cache's environment variables are set only while this compiles
def compile_model(model: nn.Module, model_config: ModelConfig, config: EngineConfig,
                  warm_up: Callable[[Forward], None]) -> CompiledForward:
    """Apply compilation_config to the model's forward and compile it now (startup, not the first request):
    `warm_up(fn)` runs fn once over a dummy batch."""
    c = config.compilation
    ops = CustomOpSelection.for_engine(config)
    attach_custom_ops(model, ops)
    variants.prepare_model(model, config)
    if ops.batch_invariant:
        logger.info("Batch-invariant mode on: matmuls in one kernel for every batch size, attention splits "
                    "by context length; custom ops %s", ",".join(sorted(ops.enabled)) or "none")
    level = int(config.compile_mode)
    info: dict = {"mode": level, "level": level, "backend": c.backend, "scope": c.compile_scope,
                  "full_graphs_capture": f"{config.full_graphs_capture} forward"}
    if level == 0:  # vLLM's mode NONE: no Dynamo at all
        return CompiledForward(model.forward, info=info)
    cache = None
    if c.backend == "inductor":
        cache = CompileCache(c.resolved_cache_dir(), cache_key(config, model_config))
        cache.open()
    # Dynamo keeps one cache entry per model instance on the same code object (the guards check `self`), so
    # a notebook that builds many engines in one process would hit the default limit of 8 and fail at
    # fullgraph. Run-time recompiles of one engine are still counted and reported (compile_report).
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 512)
    base, times_before, t0 = report.baseline(), report.compile_times(), time.perf_counter()
    passes = pass_manager.for_config(c.pass_config) if c.backend == "inductor" else None
    # the passes reach Inductor as its post-grad hook, a config patch like inductor_compile_config's
    inductor_config = {**(INDUCTOR_DEFAULTS if c.backend == "inductor" else {}), **c.inductor_compile_config,
                       **({"post_grad_custom_post_pass": passes} if passes else {})}
    options = {"options": inductor_config} if inductor_config else {}
    split = level == 3
    backend = None
    trace_once: TraceOnceBackend | None = None
    forward = own_forward(model)
    fn = variants.compile_forward(model, forward, config, options)  # the labs' mode-1 variants, else None
    if fn is None and level == 1:
        fn = torch.compile(forward, backend=c.backend, fullgraph=True, **options)
    elif fn is None:
        backend = SplitBackend(inductor=c.backend == "inductor",
                               compile_sizes=c.compile_sizes, inductor_config=inductor_config,
                               graph_cache_dir=cache.dir if cache is not None else None,
                               model=model) if split else None
        fn = _load_saved_forward(backend, cache, model, info) if backend is not None else None
        if fn is None:
            trace_once = TraceOnceBackend(backend or c.backend, options if not split else {}, model)
            fn = _traced_forward(forward, trace_once)
    loaded = fn if info.get("dynamo_skipped") else None  # a saved graph: nothing for Dynamo to trace
    fn = _with_constant_floats(fn)
    try:
        warm_up(fn)
    except Exception as e:
        if cache is None or not cache.warm or caused_by_interrupt(e):  # Ctrl-C is no reason to compile again
            raise
        logger.warning("Compiling from the warm cache failed: clearing %s and compiling from scratch", cache.dir)
        cache.clear()
        cache.open()
        if info.pop("dynamo_skipped", False):  # the loaded graph failed: trace it again
            backend.wrappers.clear()
            fn = _with_constant_floats(_traced_forward(forward, backend))
        warm_up(fn)
    if loaded is not None and info.get("dynamo_skipped"):
        fn = loaded  # called every step: without the config patch around it (it only matters to a trace)
    if trace_once is not None and trace_once.direct is not None:
        fn = trace_once.direct  # traced once: from now on the graph is called without Dynamo's guards
        info["guards_dropped"] = True
    if config.device.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - t0
    if cache is not None:
        if cache.warm:
            logger.info("Directly load the compiled graph(s) from the cache %s, took %.3f s", cache.dir, took)
        cache.seal()
        info["cache_dir"], info["cache_warm"] = str(cache.dir), cache.warm
    _log_and_count(info, level, c.backend, took, base, times_before)
    if passes is not None:
        info["passes"] = passes.report()
        logger.info("Post-grad passes on %d graph(s): %s", passes.graphs,
                    ", ".join(f"{p['name']} {p['matches']} match(es)" for p in info["passes"]["passes"]))
    return CompiledForward(fn, list(backend.wrappers) if backend else [], backend, info, forward.__code__, trace_once)


def own_forward(model: nn.Module) -> Forward:
    """model.forward with a code object of its own. Dynamo caches compiled code per code object, and its
    guards may accept another model of the same class: without this, an engine compiled with graph breaks
    would hand its code to the next engine, which asked for fullgraph (seen in the tests). It also lets the
    engine's release drop exactly its own cache entries (forget_code)."""
    func = type(model).forward
    fresh = types.FunctionType(func.__code__.replace(), func.__globals__, func.__name__, func.__defaults__,
                               func.__closure__)
    return types.MethodType(fresh, model)


def forget_code(code: types.CodeType) -> None:
    """Drop Dynamo's compiled entries for one code object: their guards and compiled functions hold the
    model (its parameters, the graph module) for as long as the code object lives."""
    torch._C._dynamo.eval_frame.reset_code(code)


class TraceOnceBackend:
    """Dynamo backend of modes 2 and 3: compile the one trace with `inner`, and keep what a direct call
    needs (vLLM drops the guards of these modes: its wrapper calls the compiled code without Dynamo).

    `direct` is the model's forward as a call of the compiled graph, its inputs gathered from the model's
    parameters and the call's arguments (graph_cache.describe_inputs); None where an input is anything
    else, and then every call goes through Dynamo's guards (logged)."""

    def __init__(self, inner, options: dict, model: nn.Module) -> None:
        self.inner, self.options, self._model = inner, options, weakref.ref(model)
        self.direct: Forward | None = None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        if callable(self.inner):
            compiled = self.inner(gm, example_inputs)
        elif self.inner == "inductor":
            from torch._inductor.compile_fx import compile_fx

            compiled = compile_fx(gm, example_inputs, config_patches=self.options.get("options") or None)
        else:
            compiled = torch._dynamo.lookup_backend(self.inner)(gm, example_inputs)
        model = self._model()
        specs = graph_cache.describe_inputs(gm, example_inputs, model) \
            if model is not None and self.direct is None else None
        if specs is not None:
            self.direct = graph_cache.forward_from_graph(compiled, specs, model)
        return compiled

    def release(self) -> None:
        """Give up the compiled graph and the direct call (which holds the model's parameters)."""
        self.inner, self.direct, self._model = None, None, lambda: None


def _load_saved_forward(backend: SplitBackend, cache: CompileCache | None, model: nn.Module,
                        info: dict) -> Forward | None:
    """Warm start: the saved split graph and compiled pieces, no Dynamo (graph_cache); None to trace."""
    if cache is None or not cache.warm or not graph_cache.exists(cache.dir):
        return None
    try:
        fn = backend.load_forward(cache.dir, model)
    except Exception as e:  # noqa: BLE001 - trace again; the cache entry is rewritten
        logger.warning("Could not load the traced graph from %s (%s: %s): tracing with Dynamo", cache.dir,
                       type(e).__name__, e)
        backend.wrappers.clear()
        return None
    info["dynamo_skipped"] = True
    logger.info("Loaded the traced graph and %d compiled piece(s) from %s: Dynamo skipped",
                backend.num_compiled_pieces, cache.dir)
    return fn


def _log_and_count(info: dict, level: int, backend: str, took: float, base: dict, times_before: dict) -> None:
    info["seconds"] = round(took, 3)
    info.update(report.split_dynamo_inductor(times_before, report.compile_times()))
    now = report.baseline()
    info["unique_graphs"] = now["unique_graphs"] - base["unique_graphs"]
    info["graph_breaks_at_startup"] = now["graph_breaks"] - base["graph_breaks"]
    info["baseline_counters"] = now
    if info.get("dynamo_s") is not None and not info.get("dynamo_skipped"):
        logger.info("Dynamo bytecode transform time: %.2f s", info["dynamo_s"])
        logger.info("Compiling the graph(s) for dynamic shape (AOT autograd + %s) took %.2f s", backend,
                    info["backend_s"])
    logger.info("torch.compile took %.2f s in total (mode %d)", took, level)


def _traced_forward(forward: Forward, backend) -> Forward:
    """torch.compile of the forward: traced once, the token dimension dynamic, no graph breaks allowed."""
    compiled = torch.compile(forward, backend=backend, fullgraph=True)

    def fn(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        torch._dynamo.mark_dynamic(input_ids, 0)
        torch._dynamo.mark_dynamic(positions, 0)
        with torch.fx.experimental._config.patch(backed_size_oblivious=True):
            return compiled(input_ids, positions)

    return fn


def _with_constant_floats(fn: Forward) -> Forward:
    """Trace with module floats (RMSNorm eps, attention scale) as constants, for this engine's calls only.

    Dynamo remembers values per code object: once a model of another family (another eps) was compiled in
    the process, it would turn them into 0-d CPU tensor inputs, a new tensor each call, which a CUDA graph
    cannot read (PIECEWISE replay raises "input moved since capture")."""

    def wrapped(*args):
        with torch._dynamo.config.patch(specialize_float=True):
            return fn(*args)

    return wrapped
