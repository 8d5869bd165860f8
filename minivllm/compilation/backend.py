"""torch.compile integration: levels 0-3, the piecewise split at attention, and piecewise CUDA graphs.

  level 0  no compile (PIECEWISE graphs still trace the forward once, with pieces left uncompiled)
  level 1  stock torch.compile of the forward: Dynamo re-traces when shapes change (counted)
  level 2  trace once with a dynamic batch dimension, fullgraph; run-time recompiles are counted
  level 3  level 2, then the FX graph is split at every `minivllm::unified_attention` node; each piece
           is compiled by Inductor and, with PIECEWISE graphs on, captured per token count

This is what vLLM does: trace the WHOLE forward once, then split at attention (not "per layer" or
"selected ops"; those scopes are offered as compile_scope="layer"/"ops" so the lab can compare them).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Callable

import torch
import torch.fx as fx
from torch._dynamo.utils import compilation_time_metrics, counters

from minivllm.attention.metadata import AttentionMetadata, set_forward_context
from minivllm.compilation import graph_cache
from minivllm.compilation.cache import cache_key
from minivllm.layers.custom_op import CustomOpSelection, attach_custom_ops

logger = logging.getLogger("minivllm")

ATTENTION_OPS = ("minivllm.unified_attention",)


def _is_attention(node: fx.Node) -> bool:
    return node.op == "call_function" and any(a in str(node.target) for a in ATTENTION_OPS)


class _CallableModule(torch.nn.Module):
    """Lets a compiled artifact (or a graph runner) stand where the split graph expects a submodule."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def weak_ref(x):
    """A tensor viewing x's memory without owning it (CUDA graph trees do the same).

    Each captured piece keeps its inputs and outputs only through such views, so once a capture is done its
    memory returns to the shared pool and the next (smaller) capture reuses it: all sizes share one pool
    instead of each keeping its own activations alive. Safe because only one size replays at a time.
    """
    if not isinstance(x, torch.Tensor):
        return x
    st = x.untyped_storage()
    storage = torch._C._construct_storage_from_data_pointer(st.data_ptr(), x.device, st.nbytes())
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(storage, x.storage_offset(), x.shape, x.stride())


class PiecewiseGraphRunner:
    """One piece of the split forward: compiled (or not), replayed from a CUDA graph per token count.

    Inputs of a piece are weights and persistent buffers (fixed addresses) or outputs of the previous piece,
    including the attention output buffer, which the previous piece allocates (so it sits in the pool at a
    fixed address too). A replay therefore needs no copies; an input at a new address is a bug and raises.
    """

    def __init__(self, fn: Callable, index: int, state: "PiecewiseState") -> None:
        self.fn, self.index, self.state = fn, index, state
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, list[int], object]] = {}

    def __call__(self, *args):
        n = self.state.num_tokens
        if n is None or torch.cuda.is_current_stream_capturing():
            return self.fn(*args)
        entry = self.graphs.get(n)
        if entry is None:
            if not self.state.capturing:
                return self.fn(*args)
            self.fn(*args)  # warm-up
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.state.pool):
                out = self.fn(*args)
            ptrs = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
            weak = tuple(weak_ref(o) for o in out) if isinstance(out, (tuple, list)) else weak_ref(out)
            self.graphs[n] = (graph, ptrs, weak)
            return out
        graph, ptrs, out = entry
        for i, (a, p) in enumerate(zip(args, ptrs)):
            if p is not None and a.data_ptr() != p:
                raise RuntimeError(f"piecewise graph {self.index} (size {n}): input {i} moved since capture")
        graph.replay()
        return out


class PiecewiseState:
    def __init__(self) -> None:
        self.num_tokens: int | None = None  # padded token count of the current step (None: no graphs)
        self.capturing = False
        self.pool = None
        self.runners: list[PiecewiseGraphRunner] = []


class SplitBackend:
    """A Dynamo backend: split the traced graph at attention ops, compile pieces, wrap them for graphs."""

    def __init__(self, compile_pieces: bool, inductor: bool, state: PiecewiseState, use_graphs: bool,
                 compile_sizes: list[int] | None = None, inductor_config: dict | None = None,
                 graph_cache_dir: Path | None = None, model: torch.nn.Module | None = None) -> None:
        self.compile_pieces, self.inductor, self.state, self.use_graphs = compile_pieces, inductor, state, use_graphs
        # where to keep the traced graph and the compiled pieces, so a warm start skips Dynamo (graph_cache)
        self.graph_cache_dir, self.model = graph_cache_dir, model
        self.piece_info: dict[str, dict] = {}  # split submodule name -> artifact keys (for graph_cache)
        self.artifacts: dict[str, object] = {}  # artifact key -> compiled piece
        # Inductor config patches (compilation_config.inductor_compile_config), e.g. {"max_autotune": True}
        self.inductor_options = {"config_patches": dict(inductor_config)} if inductor_config else {}
        self.compile_sizes = sorted(set(compile_sizes or []))
        self.num_pieces = 0
        self.num_attention_splits = 0
        self.num_compiled_pieces = 0  # distinct pieces Inductor compiled (identical layers share one)
        self.num_static_compiles = 0  # extra compiles for compile_sizes

    def __call__(self, gm: fx.GraphModule, example_inputs: list) -> Callable:
        split_gm, pieces = self._split(gm)
        specs = self._cacheable_inputs(gm, example_inputs) if self.graph_cache_dir is not None else None
        # serialized before the pieces are swapped for compiled code: its Python code calls each piece with
        # the arguments in the order the compiled piece expects (re-splitting a reloaded graph would not)
        saved = graph_cache.serialize(split_gm) if specs is not None else None
        if self.compile_pieces and self.inductor:
            self.num_compiled_pieces = self._compile_pieces(gm, split_gm, pieces)
        if saved is not None:
            self._save_graph(saved, specs)
        self._wrap_for_graphs(split_gm, pieces)
        return split_gm

    def load_forward(self, directory: Path, model: torch.nn.Module) -> Callable:
        """A warm start without Dynamo: the saved split graph with the saved compiled pieces put in."""
        split_gm, meta, load_artifact = graph_cache.load(directory)
        pieces = self._pieces(split_gm)
        loaded: dict[str, Callable] = {}

        def artifact(key: str) -> Callable:
            if key not in loaded:
                loaded[key] = load_artifact(key)
            return loaded[key]

        for node in pieces:
            info = meta["pieces"].get(node.target)
            if info is None:  # saved at a level that does not compile pieces
                continue
            fn = artifact(info["key"])
            if info["static"]:
                fn = _SizeDispatch(fn, {int(n): artifact(k) for n, k in info["static"].items()}, info["size_arg"])
            if info["single_output"]:  # a loaded artifact returns a list even where the piece returned a tensor
                fn = _first_output(fn)
            setattr(split_gm, node.target, _CallableModule(fn))
        self.num_compiled_pieces = len({info["key"] for info in meta["pieces"].values()})
        self.num_static_compiles = len({k for info in meta["pieces"].values() for k in info["static"].values()})
        self._wrap_for_graphs(split_gm, pieces)
        return graph_cache.forward_from_graph(split_gm, meta["inputs"], model)

    def _split(self, gm: fx.GraphModule) -> tuple[fx.GraphModule, list[fx.Node]]:
        part = {"id": 0}

        def split(node: fx.Node) -> int:
            if _is_attention(node):
                part["id"] += 1
                pid = part["id"]
                part["id"] += 1
                return pid
            return part["id"]

        split_gm = torch.fx.passes.split_module.split_module(gm, None, split, keep_original_order=True)
        return split_gm, self._pieces(split_gm)

    def _pieces(self, split_gm: fx.GraphModule) -> list[fx.Node]:
        """The split graph's calls of pieces (the submodules between attention calls)."""
        attn_names = set()
        for node in split_gm.graph.nodes:
            if node.op == "call_module":
                sub = getattr(split_gm, node.target)
                if any(_is_attention(n) for n in sub.graph.nodes):
                    attn_names.add(node.target)
        self.num_attention_splits = len(attn_names)
        pieces = [n for n in split_gm.graph.nodes if n.op == "call_module" and n.target not in attn_names]
        self.num_pieces = len(pieces)
        return pieces

    def _wrap_for_graphs(self, split_gm: fx.GraphModule, pieces: list[fx.Node]) -> None:
        if self.use_graphs:
            for i, node in enumerate(pieces):
                runner = PiecewiseGraphRunner(getattr(split_gm, node.target), i, self.state)
                self.state.runners.append(runner)
                setattr(split_gm, node.target, _CallableModule(runner))

    def _cacheable_inputs(self, gm: fx.GraphModule, example_inputs: list) -> list[list] | None:
        """graph_cache's description of the graph's inputs, or None where the graph cannot be cached (not a
        single output, or an input that is not a parameter, argument or size)."""
        output = next(n for n in gm.graph.nodes if n.op == "output")
        if not (isinstance(output.args[0], (tuple, list)) and len(output.args[0]) == 1):
            return None
        return graph_cache.describe_inputs(gm, example_inputs, self.model, ("input_ids", "positions"))

    def _save_graph(self, split_gm_bytes: bytes, specs: list[list]) -> None:
        """Keep the traced graph (and the pieces compiled from it) for the next start; never fail the compile."""
        try:
            graph_cache.save(self.graph_cache_dir, split_gm_bytes, specs, self.piece_info, self.artifacts)
        except Exception as e:  # noqa: BLE001 - the next start then traces with Dynamo again
            logger.warning("Could not save the traced graph for the next start (%s: %s)", type(e).__name__, e)


    def _compile_pieces(self, gm: fx.GraphModule, split_gm: fx.GraphModule, pieces: list[fx.Node]) -> int:
        """Compile each piece with Inductor once for every token count: its inputs' symbolic shapes come
        from the example values Dynamo recorded on the original graph's nodes (same names after the split).

        The pieces between two attention calls are the same code for every layer (the weights are inputs),
        so each distinct piece is compiled (or loaded from the cache) once and shared: a 28-layer model
        has 29 pieces but 3 distinct ones. Returns how many were compiled. With compile_sizes, each distinct
        piece is also compiled for each of those exact token counts (static shapes: Inductor may pick other
        kernels), and a call with that many tokens runs that version."""
        examples = {n.name: n.meta.get("example_value") for n in gm.graph.nodes}
        compiled_by_key: dict[str, Callable] = {}
        for node in pieces:
            sub = getattr(split_gm, node.target)
            for ph in (n for n in sub.graph.nodes if n.op == "placeholder"):
                ph.meta["example_value"] = examples[ph.name]
            args = [ph.meta["example_value"] for ph in sub.graph.nodes if ph.op == "placeholder"]
            key = piece_structure_key(sub, args)[:16]
            if key not in compiled_by_key:
                general = torch._inductor.standalone_compile(sub, args, dynamic_shapes="from_graph",
                                                             options=self.inductor_options)
                self.artifacts[key] = general
                compiled_by_key[key] = self._with_static_sizes(sub, args, general, key)
            fn = compiled_by_key[key]
            output = next(n for n in sub.graph.nodes if n.op == "output").args[0]
            self.piece_info[node.target] = {
                "key": key, "size_arg": getattr(fn, "size_arg", None),
                "single_output": not isinstance(output, (tuple, list)),
                "static": {n: f"{key}_n{n}" for n in getattr(fn, "static", {})}}
            setattr(split_gm, node.target, _CallableModule(fn))
        return len(compiled_by_key)

    def _with_static_sizes(self, sub: fx.GraphModule, args: list, general: Callable, key: str) -> Callable:
        size_arg = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim()
                         and isinstance(a.shape[0], torch.SymInt)), None)
        if not self.compile_sizes or size_arg is None:
            return general
        static = {}
        for n in self.compile_sizes:
            concrete = [_concrete(a, n) for a in args]
            static[n] = torch._inductor.standalone_compile(sub, concrete, dynamic_shapes="from_example_inputs",
                                                           options=self.inductor_options)
            self.artifacts[f"{key}_n{n}"] = static[n]
            del concrete
            self.num_static_compiles += 1
        return _SizeDispatch(general, static, size_arg)


def _first_output(fn: Callable) -> Callable:
    return lambda *args: fn(*args)[0]


class _SizeDispatch:
    """A piece compiled for any token count plus static versions for compile_sizes: pick by token count."""

    def __init__(self, general: Callable, static: dict[int, Callable], size_arg: int) -> None:
        self.general, self.static, self.size_arg = general, static, size_arg

    def __call__(self, *args):
        return self.static.get(args[self.size_arg].shape[0], self.general)(*args)


def _concrete(value, n: int):
    """An example input with every symbolic size set to n tokens (the only symbol our forward has is the
    token count; Dynamo may give input_ids and positions one symbol each, both equal to it)."""
    def at_n(x) -> int:
        if isinstance(x, torch.SymInt):
            expr = x.node.expr
            return int(expr.subs({s: n for s in expr.free_symbols}))
        return int(x)

    if isinstance(value, torch.SymInt):
        return at_n(value)
    if not isinstance(value, torch.Tensor):
        return value
    shape, stride = [at_n(d) for d in value.shape], [at_n(d) for d in value.stride()]
    return torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device)


def piece_structure_key(sub: fx.GraphModule, args: list) -> str:
    """A hash of what a piece computes, blind to names: each node's kind, target and arguments (other
    nodes by position), and each input's dtype, shape and strides. Layer 3's and layer 4's pieces differ
    only in placeholder names (their weights), so they get the same key."""
    position: dict[fx.Node, int] = {}
    lines = []
    for i, n in enumerate(sub.graph.nodes):
        position[n] = i
        args_, kwargs = fx.node.map_arg((n.args, n.kwargs), lambda a: f"%{position[a]}")
        target = "" if n.op == "placeholder" else str(n.target)
        lines.append(f"{n.op}|{target}|{args_!r}|{kwargs!r}")
    for a in args:
        lines.append(f"{a.dtype}|{tuple(a.shape)}|{a.stride()}|{a.device}" if isinstance(a, torch.Tensor)
                     else repr(a))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _dummy_metadata(runner, n: int) -> AttentionMetadata:
    """A batch whose attention writes nothing and reads nothing: n decode rows with seq_len 0, or, above
    max_num_seqs, one sequence of n query tokens with seq_len 0 (its output is zeros)."""
    ib = runner.input_batch
    if n > ib.max_num_seqs:
        ib.slot_mapping[:n].fill_(-1)
        ib.seq_lens[:1].zero_()
        ib.query_start_loc[:2].copy_(torch.tensor([0, n], dtype=torch.int32))
        return AttentionMetadata(ib.slot_mapping[:n], ib.query_start_loc[:2], ib.seq_lens[:1], ib.block_tables[:1],
                                 max_query_len=n, max_seq_len=0, decode_only=False,
                                 query_start_loc_cpu=[0, n], seq_lens_cpu=[0])
    ib.slot_mapping[:n].fill_(-1)
    ib.seq_lens[:n].zero_()
    ib.query_start_loc[: n + 1].copy_(torch.arange(n + 1, dtype=torch.int32, device=ib.device))
    return AttentionMetadata(ib.slot_mapping[:n], ib.query_start_loc[: n + 1], ib.seq_lens[:n], ib.block_tables[:n],
                             max_query_len=1, max_seq_len=1, decode_only=True,
                             query_start_loc_cpu=list(range(n + 1)), seq_lens_cpu=[0] * n)


def compile_model(runner, config) -> dict:
    """Apply compilation_config to runner.forward_fn; return what was done (for the startup report)."""
    c = config.compilation
    attach_custom_ops(runner.model, CustomOpSelection.for_engine(config))
    graphs_on = config.cudagraph_mode in ("PIECEWISE", "FULL_AND_PIECEWISE")
    level = 0 if config.enforce_eager else c.level
    info: dict = {"level": level, "backend": c.backend, "scope": c.compile_scope}
    runner.piecewise = None
    if level == 0 and not graphs_on:
        return info
    model = runner.model
    state = PiecewiseState()
    runner.piecewise = state
    cache = None
    if level > 0 and c.backend == "inductor":
        from minivllm.compilation.cache import CompileCache

        cache = CompileCache(c.resolved_cache_dir(), cache_key(config, runner.model_config))
        cache.open()
    # Dynamo keeps one cache entry per model instance on the same code object (the guards check `self`), so
    # a notebook that builds many engines in one process would hit the default limit of 8 and fail at
    # fullgraph. Run-time recompiles of one engine are still counted and reported (compile_report).
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 512)
    breaks_before = sum(counters["graph_break"].values())
    before = dict(counters["stats"])
    times_before = _compile_times()
    t0 = time.perf_counter()
    split = False
    options = {"options": dict(c.inductor_compile_config)} if c.inductor_compile_config else {}
    if level == 1:
        if c.compile_scope == "layer":
            for layer in model.model.layers:
                layer.forward = torch.compile(layer.forward, backend=c.backend, **options)
            fn = model.forward
        elif c.compile_scope == "ops":
            fn = _compile_ops(model, c.backend, options)
        else:
            fn = torch.compile(model.forward, backend=c.backend, **options)
    else:
        split = level == 3 or graphs_on
        backend = SplitBackend(compile_pieces=level == 3, inductor=c.backend == "inductor", state=state,
                               use_graphs=graphs_on, compile_sizes=c.compile_sizes,
                               inductor_config=c.inductor_compile_config,
                               graph_cache_dir=cache.dir if cache is not None else None,
                               model=model) if split else c.backend
        runner.split_backend = backend if split else None
        fn = None
        if split and cache is not None and cache.warm and graph_cache.exists(cache.dir):
            try:  # warm start: the saved graph and pieces, no Dynamo (graph_cache)
                fn = backend.load_forward(cache.dir, model)
                info["dynamo_skipped"] = True
                logger.info("Loaded the traced graph and %d compiled piece(s) from %s: Dynamo skipped",
                            backend.num_compiled_pieces, cache.dir)
            except Exception as e:  # noqa: BLE001 - trace again; the cache entry is rewritten below
                logger.warning("Could not load the traced graph from %s (%s: %s): tracing with Dynamo", cache.dir,
                               type(e).__name__, e)
                state.runners.clear()
        if fn is None:
            fn = _traced_forward(model, backend, {} if split else options)
    fn = _with_constant_floats(fn)
    runner.forward_fn = fn
    if level >= 2 or split:
        # Dynamo specializes a dynamic dimension of size 1 (the "0/1 specialization"): a 1-token batch would
        # retrace (a run-time recompile), and on torch 2.11-2.13 Inductor then fails on that graph (KeyError
        # in its scheduler). So the traced forward never sees 1 token: such batches are padded to 2.
        runner.min_num_tokens = 2
    if level > 0:  # FULL graphs capture what was compiled (at level 0 they keep the plain forward)
        runner.full_graph_fn, runner.full_graph_min_tokens = fn, runner.min_num_tokens
    # Compile now (startup), not on the first request: one run over a dummy batch.
    n = min(8, runner.input_batch.max_num_seqs)
    ib = runner.input_batch
    try:
        ctx = set_forward_context(_dummy_metadata(runner, n), runner.backend, runner.kv_caches)
        with torch.inference_mode(), ctx:
            fn(ib.input_ids[:n], ib.positions[:n])
    except Exception:
        if cache is not None and cache.warm:
            logger.warning("Compiling from the warm cache failed: clearing %s and compiling from scratch", cache.dir)
            cache.clear()
            cache.open()
            if info.pop("dynamo_skipped", False):  # the loaded graph failed: trace it again
                state.runners.clear()
                fn = runner.forward_fn = _with_constant_floats(_traced_forward(model, backend, {}))
                if level > 0:
                    runner.full_graph_fn = fn
            ctx = set_forward_context(_dummy_metadata(runner, n), runner.backend, runner.kv_caches)
            with torch.inference_mode(), ctx:
                fn(ib.input_ids[:n], ib.positions[:n])
        else:
            raise
    if config.device.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - t0
    if cache is not None:
        if cache.warm:
            logger.info("Directly load the compiled graph(s) from the cache %s, took %.3f s", cache.dir, took)
        cache.seal()
        info["cache_dir"] = str(cache.dir)
        info["cache_warm"] = cache.warm
    info["seconds"] = round(took, 3)
    info.update(_split_dynamo_inductor(times_before, _compile_times()))
    info["unique_graphs"] = counters["stats"].get("unique_graphs", 0) - before.get("unique_graphs", 0)
    info["graph_breaks_at_startup"] = sum(counters["graph_break"].values()) - breaks_before
    info["baseline_counters"] = {"unique_graphs": counters["stats"].get("unique_graphs", 0),
                                 "graph_breaks": sum(counters["graph_break"].values())}
    if info.get("dynamo_s") is not None and level > 0 and not info.get("dynamo_skipped"):
        logger.info("Dynamo bytecode transform time: %.2f s", info["dynamo_s"])
        logger.info("Compiling the graph(s) for dynamic shape (AOT autograd + %s) took %.2f s", c.backend,
                    info["backend_s"])
    if level > 0:
        logger.info("torch.compile took %.2f s in total (level %d)", took, level)
    return info


def _traced_forward(model, backend, options: dict) -> Callable:
    """torch.compile of the forward: traced once, the token dimension dynamic, no graph breaks allowed."""
    compiled = torch.compile(model.forward, backend=backend, fullgraph=True, **options)

    def fn(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        torch._dynamo.mark_dynamic(input_ids, 0)
        torch._dynamo.mark_dynamic(positions, 0)
        with torch.fx.experimental._config.patch(backed_size_oblivious=True):
            return compiled(input_ids, positions)

    return fn


def _compile_times() -> dict[str, float]:
    return {k: sum(v) for k, v in compilation_time_metrics.items()}


def _split_dynamo_inductor(before: dict[str, float], after: dict[str, float]) -> dict:
    """torch.compile's time, split from Dynamo's own timers: the backend (AOT autograd + Inductor, or at
    level 3 the split plus Inductor per piece, loads from the cache included) and Dynamo (tracing the
    bytecode, building guards). None where this torch does not keep these timers."""
    def delta(name: str) -> float | None:
        return after[name] - before.get(name, 0.0) if name in after else None

    frame, backend = delta("_compile.compile_inner"), delta("OutputGraph.call_user_compiler")
    if frame is None or backend is None:
        return {"dynamo_s": None, "backend_s": None}
    return {"dynamo_s": round(frame - backend, 3), "backend_s": round(backend, 3)}


def _with_constant_floats(fn: Callable) -> Callable:
    """Trace with module floats (RMSNorm eps, attention scale) as constants, for this engine's calls only.

    Dynamo remembers values per code object: once a model of another family (another eps) was compiled in
    the process, it would turn them into 0-d CPU tensor inputs, a new tensor each call, which a CUDA graph
    cannot read (PIECEWISE replay raises "input moved since capture")."""

    def wrapped(*args):
        with torch._dynamo.config.patch(specialize_float=True):
            return fn(*args)

    return wrapped


def _compile_ops(model, backend: str, options: dict) -> Callable:
    """compile_scope="ops": only the small elementwise layers (norms, activation) are compiled."""
    from minivllm.layers.custom_op import CustomOp

    for m in model.modules():
        if isinstance(m, CustomOp):
            m.forward_native = torch.compile(m.forward_native, backend=backend, **options)
    return model.forward


def capture_piecewise(runner, dispatcher):
    """Capture every piece of the split forward for each capture size (largest first, shared pool)."""
    from minivllm.worker.cuda_graph import CudaGraphCaptureError, capture_all_sizes, reset_rng_after_failed_capture

    state = getattr(runner, "piecewise", None)
    if state is None or not state.runners:
        return None
    ib = runner.input_batch
    sizes = sorted({max(s, runner.min_num_tokens) for s in dispatcher.sizes if s <= ib.max_num_tokens})
    dispatcher.pool = dispatcher.pool or torch.cuda.graph_pool_handle()
    state.pool = dispatcher.pool

    def capture_one(n: int) -> None:  # each piece runner captures itself on this forward
        ib.input_ids[:n].zero_()
        ib.positions[:n].zero_()
        state.num_tokens = n
        try:
            ctx = set_forward_context(_dummy_metadata(runner, n), runner.backend, runner.kv_caches)
            with torch.inference_mode(), ctx:
                runner.forward_fn(ib.input_ids[:n], ib.positions[:n])
        except Exception as e:
            for r in state.runners:
                r.graphs.clear()
            reset_rng_after_failed_capture()
            raise CudaGraphCaptureError(
                f"CUDA graph capture failed (mode PIECEWISE, {n} tokens): {type(e).__name__}: {e}. Try "
                f"enforce_eager=True, cudagraph_mode='FULL' or smaller cudagraph_capture_sizes.") from e

    state.capturing = True
    try:
        stats = capture_all_sizes("PIECEWISE", sizes, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)",
                                  capture_one, dispatcher.pool)
    finally:
        state.capturing = False
        state.num_tokens = None
    dispatcher.piecewise_sizes = sorted(sizes)
    dispatcher.stats["PIECEWISE"] = stats
    return stats


def live_compile_report(runner, info: dict) -> dict:
    """Traces, graph breaks and recompiles since startup, plus the split and cache facts."""
    base = info.get("baseline_counters", {"unique_graphs": 0, "graph_breaks": 0})
    backend = getattr(runner, "split_backend", None)
    return {
        "level": info.get("level", 0),
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
    }
