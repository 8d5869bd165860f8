"""The pieces of a split forward: what stands where the split graph calls a submodule.

After the split at attention (compilation/backend.py), each piece between two attention calls is replaced
by a callable: the Inductor-compiled code, a dispatch between that code and static-shape versions of it
(compile_sizes), and, with PIECEWISE graphs on, a CUDAGraphWrapper (compilation/cuda_graph.py) around it.
The pieces of different layers are the same code (only the weights differ), so each distinct piece is
compiled once, found by a hash of its structure.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import torch
import torch.fx as fx


class CallableModule(torch.nn.Module):
    """Lets a compiled artifact (or a graph runner) stand where the split graph expects a submodule."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)



def first_output(fn: Callable) -> Callable:
    return lambda *args: fn(*args)[0]


class SizeDispatch:
    """A piece compiled for any token count plus static versions for compile_sizes: pick by token count."""

    def __init__(self, general: Callable, static: dict[int, Callable], size_arg: int) -> None:
        self.general, self.static, self.size_arg = general, static, size_arg

    def __call__(self, *args):
        return self.static.get(args[self.size_arg].shape[0], self.general)(*args)


def concrete(value, n: int):
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
