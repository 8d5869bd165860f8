"""eliminate_noops: remove reshapes and views to the shape their input already has, and slices that keep
the whole dimension (vLLM: NoOpEliminationPass).

Why Inductor's own clean-up (remove_noop_ops) leaves some: with a dynamic token count it drops a reshape
only when it can prove the sizes equal without a guard, and a reshape written as (-1, hidden) against an
input of (s0, hidden) is one it keeps. Such nodes cost nothing once fused, but each one stands between two
ops a pattern must see as neighbours (a fusion's search graph has no reshape in it), so vLLM runs this
first. Each candidate is compared by its traced sizes (node.meta["val"]), symbolic ones included.
"""

from __future__ import annotations

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten
SAME_SHAPE_IS_NOOP = (aten.reshape.default, aten.view.default, aten._unsafe_view.default, aten.expand.default)


def _val(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _same_sizes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dim() == b.dim() and all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape))


def _is_noop(node: fx.Node) -> bool:
    out, inp = _val(node), _val(node.args[0]) if node.args else None
    if out is None or inp is None or not _same_sizes(out, inp):
        return False
    if node.target in SAME_SHAPE_IS_NOOP:
        return True
    if node.target is aten.slice.Tensor:  # same length along dim: start 0, step 1 (or an empty dim)
        step = node.args[4] if len(node.args) > 4 else 1
        return step == 1 and all(statically_known_true(x == y) for x, y in zip(out.stride(), inp.stride()))
    return False


class NoOpEliminationPass:
    def __call__(self, graph: fx.Graph) -> int:
        removed = 0
        for node in list(graph.nodes):
            if node.op == "call_function" and _is_noop(node):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
                removed += 1
        return removed
