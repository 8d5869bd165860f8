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


def call_directly(split_gm: fx.GraphModule, attention_op: Callable, attention_impl: Callable) -> list[str]:
    """Make the split graph call its pieces as plain Python callables and its attention ops' kernel in its
    own code; returns the names of the pieces (the attributes that now hold callables).

    Why: the split graph's code calls `self.submod_N(...)` ~57 times a step (29 pieces, 28 attention calls).
    As submodules, each call pays nn.Module.__call__, and each attention call also the GraphModule's call
    wrapper and the torch dispatcher's round trip into the op's Python kernel; a PIECEWISE step has nothing
    else to do between its graph replays, so that is its host time. A piece becomes the callable it wraps
    (compiled code or a CUDAGraphWrapper). An attention submodule that is exactly one call of `attention_op`
    is replaced in the split graph by a call of `attention_impl` (the op's kernel) with the submodule's
    arguments and constants, so the generated code calls the kernel itself, as the traced model did."""
    names, inlined = [], False
    calls = {n.target: n for n in split_gm.graph.nodes if n.op == "call_module"}
    for name, sub in list(split_gm.named_children()):
        if isinstance(sub, CallableModule):
            fn = sub.fn
        elif isinstance(sub, fx.GraphModule):
            args = _op_call_args(sub, attention_op, calls[name])
            if args is not None:
                node = calls[name]
                with split_gm.graph.inserting_before(node):
                    split_gm.graph.call_function(attention_impl, args)
                split_gm.graph.erase_node(node)
                del split_gm._modules[name]
                inlined = True
                continue
            fn = sub.forward
        else:
            continue
        del split_gm._modules[name]
        setattr(split_gm, name, fn)
        names.append(name)
    if inlined:
        split_gm.recompile()
    return names


def _op_call_args(sub: fx.GraphModule, op: Callable, call: fx.Node) -> tuple | None:
    """The arguments of sub's one call of `op`, in terms of the split graph's `call` of sub (its inputs
    and the call's constants); None where sub is anything else or the split graph uses its result."""
    nodes = list(sub.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    ops = [n for n in nodes if n.op not in ("placeholder", "output")]
    output = nodes[-1]
    if (len(ops) != 1 or ops[0].target is not op or ops[0].kwargs or output.op != "output"
            or output.args != ((),) or call.users or call.kwargs):
        return None
    if any(isinstance(a, fx.Node) and a not in placeholders for a in ops[0].args):
        return None
    return tuple(call.args[placeholders.index(a)] if isinstance(a, fx.Node) else a for a in ops[0].args)


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
