"""The pieces of a split forward: what stands where the split graph calls a submodule.

After the split at attention (compilation/backend.py), each piece between two attention calls is replaced
by a callable: the Inductor-compiled code, a dispatch between that code and static-shape versions of it
(compile_sizes), and, with PIECEWISE graphs on, a CUDAGraphWrapper (compilation/cuda_graph.py) around it.
The pieces of different layers are the same code (only the weights differ), so each distinct piece is
compiled once, found by a hash of its structure.
"""

from __future__ import annotations

import hashlib
import operator
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
    """Make the split graph call its pieces and attention ops as plain Python callables; returns their names.

    Why: the split graph's code calls `self.submod_N(...)` ~57 times a step (29 pieces, 28 attention calls).
    As submodules, each call pays nn.Module.__call__, and each attention call also the GraphModule's call
    wrapper and the torch dispatcher's round trip into the op's Python kernel; a PIECEWISE step has nothing
    else to do between its graph replays, so that is its host time. A piece becomes the callable it wraps
    (compiled code or a CUDAGraphWrapper); an attention submodule that is exactly one call of
    `attention_op` becomes a call of `attention_impl` (the op's kernel) with the same arguments."""
    names = []
    for name, sub in list(split_gm.named_children()):
        if isinstance(sub, CallableModule):
            fn = sub.fn
        elif isinstance(sub, fx.GraphModule):
            fn = _direct_op_call(sub, attention_op, attention_impl) or sub.forward
        else:
            continue
        del split_gm._modules[name]
        setattr(split_gm, name, fn)
        names.append(name)
    return names


def _direct_op_call(sub: fx.GraphModule, op: Callable, impl: Callable) -> Callable | None:
    """sub's one call of `op` as a call of `impl`, or None where sub is anything else."""
    nodes = list(sub.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op not in ("placeholder", "output")]
    output = nodes[-1]
    if (len(calls) != 1 or calls[0].target is not op or calls[0].kwargs or output.op != "output"
            or output.args != ((),)):
        return None
    spec = [(True, placeholders.index(a)) if isinstance(a, fx.Node) else (False, a) for a in calls[0].args]
    if any(isinstance(a, fx.Node) and a not in placeholders for a in calls[0].args):
        return None

    m = sum(is_input for is_input, _ in spec)
    if m >= 2 and all(is_input for is_input, _ in spec[:m]):  # the usual layout: tensors first, then constants
        pick, consts = operator.itemgetter(*[v for _, v in spec[:m]]), tuple(v for _, v in spec[m:])

        def call_inputs_first(*inputs):
            impl(*pick(inputs), *consts)
            return ()

        return call_inputs_first

    def call(*inputs):
        impl(*[inputs[v] if is_input else v for is_input, v in spec])
        return ()

    return call


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
