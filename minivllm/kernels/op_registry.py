"""Registering the engine's kernels as torch ops with the least overhead per call (vLLM:
`direct_register_custom_op` in vllm/utils/torch_utils.py).

Why not `torch.library.custom_op`: its Python wrapper checks, for every call, the arguments against the
schema, the aliasing of the outputs and the autograd state, before it reaches the kernel. Measured on the
H200 (scripts/maint/host_profile.py, PIECEWISE, Qwen3-0.6B shape, batch 1): that wrapper took about
300 us of host time per attention call, 28 calls a step, while the kernels it launched took 4 us. A
PIECEWISE graph runs the attention op eagerly between its pieces, and eager mode runs every op this way,
so that overhead was most of their step time. Defining the schema and the kernel directly on a
`torch.library.Library` gives the compiler the same opaque node (schema, fake implementation, mutated
arguments) and calls the Python kernel straight from the dispatcher.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable

import torch

_LIB = torch.library.Library("minivllm", "FRAGMENT")  # kept alive for the life of the process


class DirectOp:
    """A kernel registered as `torch.ops.minivllm.<name>`; calling this object calls the op."""

    def __init__(self, name: str, fn: Callable, mutates_args: Iterable[str]) -> None:
        schema = torch.library.infer_schema(fn, mutates_args=tuple(mutates_args))
        _LIB.define(name + schema)
        # CompositeExplicitAutograd: one kernel for every device (the body picks Triton or PyTorch itself)
        _LIB.impl(name, fn, "CompositeExplicitAutograd")
        self.name, self.fn = name, fn
        self.op = getattr(torch.ops.minivllm, name).default
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)

    def register_fake(self, fake: Callable) -> Callable:
        """The shape-only implementation torch.compile traces with."""
        _LIB._register_fake(self.name, fake)
        return fake


def direct_op(qualname: str, mutates_args: Iterable[str] = ()) -> Callable[[Callable], DirectOp]:
    """Decorator: `@direct_op("minivllm::rms_norm")` registers the function as that op."""
    namespace, name = qualname.split("::")
    if namespace != "minivllm":
        raise ValueError(f"ops are registered in the minivllm namespace, got {qualname!r}")
    return lambda fn: DirectOp(name, fn, mutates_args)
