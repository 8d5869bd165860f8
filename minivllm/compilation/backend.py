"""The level-3 backend: split the traced forward at every attention op and compile the pieces in between.

This is what vLLM does: trace the WHOLE forward once (Dynamo, fullgraph), then split the FX graph at every
`minivllm::unified_attention` node. Each piece is compiled by Inductor (compilation/piecewise.py) and, with
a CUDAGraphWrapper (compilation/cuda_graph.py) around it; attention stays eager
between them, so one set of graphs serves prefill, decode and mixed batches. The split graph then calls its
pieces and attention ops as plain callables (piecewise.call_directly): a PIECEWISE step is host time between
replays, and module calls and the dispatcher's round trip were most of it. The traced graph and compiled
pieces are saved so a warm start skips Dynamo (compilation/graph_cache.py).

Dynamo keeps every backend it was given for the life of the process, so this object holds the model only
weakly and gives its graph wrappers up on release(): a dropped engine leaves nothing big behind here.
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import Callable

import torch
import torch.fx as fx

from minivllm.compilation import graph_cache
from minivllm.compilation.cuda_graph import CUDAGraphWrapper, released as _released
from minivllm.compilation.piecewise import (
    CallableModule,
    SizeDispatch,
    call_directly,
    concrete,
    first_output,
    piece_structure_key,
)
from minivllm.config import CUDAGraphMode

logger = logging.getLogger("minivllm")

ATTENTION_OPS = ("minivllm.unified_attention",)


def _is_attention(node: fx.Node) -> bool:
    return node.op == "call_function" and any(a in str(node.target) for a in ATTENTION_OPS)


class SplitBackend:
    """A Dynamo backend: split the traced graph at attention ops, compile pieces, wrap them for graphs."""

    def __init__(self, inductor: bool, compile_sizes: list[int] | None = None, inductor_config: dict | None = None,
                 graph_cache_dir: Path | None = None, model: torch.nn.Module | None = None) -> None:
        self.inductor = inductor
        # one PIECEWISE graph wrapper per piece; it calls through in every step that is not a PIECEWISE replay
        self.wrappers: list[CUDAGraphWrapper] = []
        self._split_gms: list[weakref.ref] = []  # the split graphs handed out (Dynamo keeps them after release)
        # where to keep the traced graph and the compiled pieces, so a warm start skips Dynamo (graph_cache)
        self.graph_cache_dir = graph_cache_dir
        self._model = weakref.ref(model) if model is not None else None
        self.piece_info: dict[str, dict] = {}  # split submodule name -> artifact keys (for graph_cache)
        self.artifacts: dict[str, object] = {}  # artifact key -> compiled piece
        # Inductor config patches (compilation_config.inductor_compile_config), e.g. {"max_autotune": True}
        self.inductor_options = {"config_patches": dict(inductor_config)} if inductor_config else {}
        self.compile_sizes = sorted(set(compile_sizes or []))
        self.num_pieces = 0
        self.num_attention_splits = 0
        self.num_compiled_pieces = 0  # distinct pieces Inductor compiled (identical layers share one)
        self.num_static_compiles = 0  # extra compiles for compile_sizes

    def release(self) -> None:
        """Free the graphs and compiled pieces this backend handed out (the engine is shutting down)."""
        for w in self.wrappers:
            w.release()
        for ref in self._split_gms:
            split_gm = ref()
            for name, _ in list(split_gm.named_children()) if split_gm is not None else []:
                setattr(split_gm, name, CallableModule(_released))
            for name in getattr(split_gm, "direct_calls", []):  # the pieces call_directly made plain callables
                setattr(split_gm, name, _released)
        self._split_gms.clear()
        self.wrappers.clear()
        self.artifacts.clear()
        self.piece_info.clear()
        self._model = None

    def __call__(self, gm: fx.GraphModule, example_inputs: list) -> Callable:
        split_gm, pieces = self._split(gm)
        specs = self._cacheable_inputs(gm, example_inputs) if self.graph_cache_dir is not None else None
        # serialized before the pieces are swapped for compiled code: its Python code calls each piece with
        # the arguments in the order the compiled piece expects (re-splitting a reloaded graph would not)
        saved = graph_cache.serialize(split_gm) if specs is not None else None
        if self.inductor:
            self.num_compiled_pieces = self._compile_pieces(gm, split_gm, pieces)
        if saved is not None:
            self._save_graph(saved, specs)
        self.artifacts.clear()  # saved: the compiled pieces live on in split_gm only
        self._wrap_for_graphs(split_gm, pieces)
        self._split_gms.append(weakref.ref(split_gm))
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
            info = meta["pieces"][node.target]
            fn = artifact(info["key"])
            if info["static"]:
                fn = SizeDispatch(fn, {int(n): artifact(k) for n, k in info["static"].items()}, info["size_arg"])
            if info["single_output"]:  # a loaded artifact returns a list even where the piece returned a tensor
                fn = first_output(fn)
            setattr(split_gm, node.target, CallableModule(fn))
        self.num_compiled_pieces = len({info["key"] for info in meta["pieces"].values()})
        self.num_static_compiles = len({k for info in meta["pieces"].values() for k in info["static"].values()})
        self._wrap_for_graphs(split_gm, pieces)
        self._split_gms.append(weakref.ref(split_gm))
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
        for i, node in enumerate(pieces):
            piece = getattr(split_gm, node.target)
            # the compiled code itself, not the module around it: a step without graphs calls it 29 times
            runnable = piece.fn if isinstance(piece, CallableModule) else piece
            wrapper = CUDAGraphWrapper(runnable, CUDAGraphMode.PIECEWISE, f"piece {i}")
            self.wrappers.append(wrapper)
            setattr(split_gm, node.target, CallableModule(wrapper))
        from minivllm.attention.layer import unified_attention, unified_attention_impl

        split_gm.direct_calls = call_directly(split_gm, unified_attention.op, unified_attention_impl)

    def _cacheable_inputs(self, gm: fx.GraphModule, example_inputs: list) -> list[list] | None:
        """graph_cache's description of the graph's inputs, or None where the graph cannot be cached (not a
        single output, or an input that is not a parameter, argument or size)."""
        output = next(n for n in gm.graph.nodes if n.op == "output")
        if not (isinstance(output.args[0], (tuple, list)) and len(output.args[0]) == 1):
            return None
        model = self._model() if self._model is not None else None
        return graph_cache.describe_inputs(gm, example_inputs, model)

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
            setattr(split_gm, node.target, CallableModule(fn))
        return len(compiled_by_key)

    def _with_static_sizes(self, sub: fx.GraphModule, args: list, general: Callable, key: str) -> Callable:
        size_arg = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim()
                         and isinstance(a.shape[0], torch.SymInt)), None)
        if not self.compile_sizes or size_arg is None:
            return general
        static = {}
        for n in self.compile_sizes:
            concrete_args = [concrete(a, n) for a in args]
            static[n] = torch._inductor.standalone_compile(sub, concrete_args, dynamic_shapes="from_example_inputs",
                                                           options=self.inductor_options)
            self.artifacts[f"{key}_n{n}"] = static[n]
            del concrete_args
            self.num_static_compiles += 1
        return SizeDispatch(general, static, size_arg)
