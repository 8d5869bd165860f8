"""Skip Dynamo on a warm start: keep the traced FX graph and the compiled pieces, and call them directly.

Why: Inductor's cache makes a warm start skip code generation, but torch.compile still runs Dynamo on every
start to rediscover the same graph (6.4 of a 21.4 s warm start for Qwen3-0.6B on the H200), and each piece
still goes through AOT autograd to find its cache entry. Here the cold start saves, into the compile cache
entry (whose key already covers the compilation config, the model config, the model code and the torch
version), three things:

  graph.pt          the FX graph Dynamo traced, split at attention (torch.save of the GraphModule: its
                    Python code, which calls each piece with its arguments in the compiled piece's order)
  graph.json        what each graph input is: a parameter or buffer of the model (by name), one of the
                    forward's arguments, or the size of one of their dimensions (the token count)
  piece_<key>.bin   each distinct compiled piece (Inductor's CompiledArtifact.save)

A warm start loads them, puts the loaded pieces into the split graph, and calls it with
the inputs listed in graph.json: no bytecode tracing, no guards, no AOT autograd. It replaces Dynamo's
guards with the cache key: valid because the key pins everything the graph was specialised on. (vLLM
gets the same from torch's AOT precompile, `VLLM_USE_AOT_COMPILE`, which needs torch >= 2.10.) The files
hold code, like Inductor's own cache; they are checked against the entry's manifest before use.
"""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Callable

import torch
import torch.fx as fx

logger = logging.getLogger("minivllm")

GRAPH, META, VERSION = "graph.pt", "graph.json", 1
_SIZE = re.compile(r"^L\['(\w+)'\]\.size\(\)\[(\d+)\]$")
_ARG = re.compile(r"^L\['(\w+)'\]$")
ARG_NAMES = ("input_ids", "positions")  # the forward's arguments, in order


def _source_name(node: fx.Node) -> str | None:
    arg = node.meta.get("grapharg")
    if arg is None:
        return None
    name = arg.source.name
    return name if isinstance(name, str) else name()


def describe_inputs(gm: fx.GraphModule, example_inputs: list, model: torch.nn.Module) -> list[list] | None:
    """For each graph input: ["param", name], ["arg", i] or ["size", i, dim]; None if one is anything else
    (then the graph is not cached and every start runs Dynamo)."""
    by_id = {id(t): n for n, t in model.named_parameters(remove_duplicate=False)}
    by_id.update({id(t): n for n, t in model.named_buffers(remove_duplicate=False)})
    specs = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    for node, value in zip(placeholders, example_inputs):
        source = _source_name(node) or ""
        size, arg = _SIZE.match(source), _ARG.match(source)
        if isinstance(value, torch.Tensor) and id(value) in by_id:
            specs.append(["param", by_id[id(value)]])
        elif arg and arg.group(1) in ARG_NAMES:
            specs.append(["arg", ARG_NAMES.index(arg.group(1))])
        elif size and size.group(1) in ARG_NAMES:
            specs.append(["size", ARG_NAMES.index(size.group(1)), int(size.group(2))])
        else:
            logger.info("Not caching the traced graph: input %s (%s) is not a parameter, argument or size",
                        node.name, source or type(value).__name__)
            return None
    return specs


def serialize(split_gm: fx.GraphModule) -> bytes | None:
    """The split graph as bytes, or None (logged) if it cannot be pickled: then nothing is cached."""
    buf = io.BytesIO()
    try:
        torch.save(split_gm, buf)
    except Exception as e:  # noqa: BLE001 - e.g. a target that does not pickle; the next start traces again
        logger.warning("Not caching the traced graph: it does not serialize (%s: %s)", type(e).__name__, e)
        return None
    return buf.getvalue()


def save(directory: Path, split_gm_bytes: bytes, specs: list[list], pieces: dict[str, dict],
         artifacts: dict[str, object]) -> None:
    """pieces: split submodule name -> {"key": artifact key, "size_arg": int | None, "static": {n: key}};
    artifacts: key -> CompiledArtifact."""
    for key, artifact in artifacts.items():
        artifact.save(path=str(directory / f"piece_{key}.bin"), format="binary")
    (directory / GRAPH).write_bytes(split_gm_bytes)
    meta = {"version": VERSION, "torch": torch.__version__, "inputs": specs, "pieces": pieces}
    (directory / META).write_text(json.dumps(meta, indent=1))


def exists(directory: Path) -> bool:
    return (directory / GRAPH).is_file() and (directory / META).is_file()


def load(directory: Path) -> tuple[fx.GraphModule, dict, Callable[[str], Callable]]:
    """(graph, metadata, load_artifact(key)). The graph is unpickled with its code: trusted like Inductor's
    cache (the entry passed its manifest check)."""
    meta = json.loads((directory / META).read_text())
    if meta.get("version") != VERSION or meta.get("torch") != torch.__version__:
        raise ValueError(f"graph cache {directory} was written by another version")
    gm = torch.load(directory / GRAPH, weights_only=False)

    def load_artifact(key: str):
        return torch._inductor.CompiledArtifact.load(path=str(directory / f"piece_{key}.bin"), format="binary")

    return gm, meta, load_artifact


def forward_from_graph(graph_fn: Callable, specs: list[list], model: torch.nn.Module) -> Callable:
    """The model's forward(*args) as a direct call of the (split) graph, inputs gathered as specs say."""
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update(model.named_buffers(remove_duplicate=False))
    # the parameters' places are filled once; a call fills in only its arguments and the token count
    template = [tensors[s[1]] if s[0] == "param" else None for s in specs]
    per_call = [(i, s[1], s[2] if s[0] == "size" else None) for i, s in enumerate(specs) if s[0] != "param"]

    # a graph module's code itself: its __call__ (nn.Module's, and fx's error wrapper) is host time every step
    module = graph_fn if isinstance(graph_fn, fx.GraphModule) else None

    def forward(*args):
        inputs = template.copy()
        for i, arg, dim in per_call:
            inputs[i] = args[arg] if dim is None else args[arg].shape[dim]
        out = module.forward(*inputs) if module is not None else graph_fn(*inputs)
        return out[0] if isinstance(out, (tuple, list)) else out

    return forward
