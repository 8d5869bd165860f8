"""Launching a Triton kernel for a few microseconds of host time instead of tens.

Why: `kernel[grid](*args)` goes through Triton's JIT path (JITFunction.run) on every call: it binds every
argument to the kernel's signature, works out its specialization (each pointer's 16-byte alignment, each
integer's value class), hashes that into a cache key, finds the compiled kernel, builds launch metadata for
the launch hooks, and only then calls the driver launcher. On the H200 host (torch 2.11, triton 3.6) that
path took 58-66 us per launch, the launch itself a few. Eager steps launch every kernel this way, and a
PIECEWISE step runs attention eagerly between its CUDA graphs: a launch per layer (kernels/triton_decode.py),
28 layers, ~1.7 ms of Triton's path against a ~1 ms GPU step at batch 1. vLLM does not pay this because its
attention backends launch C++/CUDA kernels.

`launch(kernel, grid, *args, **kwargs)` does what `kernel[grid](*args, **kwargs)` does. The first launch of a
specialization goes through Triton's path (which compiles, or finds the kernel in its cache) and keeps the
compiled kernel; later launches with the same key call its launcher directly. The key is finer than
Triton's own, so it never maps two calls Triton would compile differently to one kernel: each tensor's
dtype and 16-byte alignment, every other argument and every keyword (the constexprs and launch options)
by value, plus the current device. Triton's path is kept where it is
needed: under torch.compile's tracing, under the interpreter (TRITON_INTERPRET=1, the CPU tests), for
autotuned kernels, and while a launch hook is installed (a profiler such as Proton).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import torch

try:
    from triton import knobs as _knobs
    from triton.runtime.jit import JITFunction
except ImportError:  # no Triton (or a Triton without knobs): every launch takes Triton's own path
    _knobs, JITFunction = None, ()

_MAX_ENTRIES = 512  # per kernel: exact integer values may vary (token counts); a full table is emptied
_CACHES: dict[int, tuple[Any, dict[tuple, tuple]]] = {}  # id(kernel) -> (kernel, key -> launch entry)
_TENSORS = frozenset({torch.Tensor, torch.nn.Parameter})  # by exact type: isinstance is slower
# (a tensor of another type, e.g. a subclass, is keyed by identity: correct, only not reused)
# torch.cuda.current_device() is Python around this C call (a lazy-init check each time); it is asked at every
# direct launch and every attention layer, always after a CUDA tensor exists (CUDA is initialized)
_current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
stats = {"direct": 0, "jit": 0}  # launches per path, for the host-time harness and the tests
_recording: list | None = None  # record()'s list: each launch made meanwhile, for a LaunchPlan


def _fast_path_possible(kernel: Any, grid: Any) -> bool:
    # under TRITON_INTERPRET=1, triton.jit makes InterpretedFunctions, not JITFunctions
    return (isinstance(kernel, JITFunction) and isinstance(grid, tuple) and _current_stream is not None
            and not _knobs.runtime.launch_enter_hook.calls and not _knobs.runtime.launch_exit_hook.calls
            and not torch.compiler.is_compiling())


def _key(args: tuple, kwargs: dict) -> tuple:
    """One comprehension, no call per argument: this key is most of a direct launch's host time. Ints (most
    arguments) by value; other non-tensors with their type too (True == 1 and 1.0 == 1 in Python, while
    Triton compiles a bool, an int and a float argument differently); keywords by value."""
    return (_current_device(),
            tuple([(a.dtype, a.data_ptr() % 16 == 0) if type(a) in _TENSORS else a if type(a) is int
                   else (type(a), a) for a in args]),
            tuple(kwargs.items()))


def launch(kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
    """`kernel[grid](*args, **kwargs)`: positional arguments are the kernel's runtime arguments, in order;
    keywords its constexprs and launch options (num_warps, num_stages, launch_pdl)."""
    if _recording is not None:
        _recording.append((kernel, grid, args, kwargs))
    # by id, as a JITFunction's own hash is slow (it hashes its source); the table holds the kernel too, so a
    # new kernel at a freed one's address (a reloaded module) is never handed the old one's compiled code
    owner, cache = _CACHES.get(id(kernel), (None, None))
    if owner is not kernel:
        cache = None
    key = None
    if cache is not None and _fast_path_possible(kernel, grid):
        key = _key(args, kwargs)
        try:
            entry = cache.get(key)
        except TypeError:  # an unhashable argument or keyword value: Triton's path
            entry = key = None
        if entry is not None:
            run, function, packed, tail = entry
            stats["direct"] += 1
            run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
                _current_stream(key[0]), function, packed, None, None, None, *args, *tail)
            return
    stats["jit"] += 1
    compiled = kernel[grid](*args, **kwargs)
    if cache is None and _fast_path_possible(kernel, grid):  # the first launch of this kernel
        _CACHES[id(kernel)] = (kernel, {})
        key = _key(args, kwargs)
    if key is not None:
        try:
            hash(key)
        except TypeError:
            return
        _remember(kernel, key, compiled, len(args), kwargs)


def _remember(kernel: Any, key: tuple, compiled: Any, num_args: int, kwargs: dict) -> None:
    """Keep what a direct launch needs: the compiled kernel's launcher, function handle and packed metadata,
    and the values of the parameters after the positional ones (constexprs: fixed by the key)."""
    function = getattr(compiled, "function", None)
    run = getattr(compiled, "run", None)  # a property: loads the module (and the function handle) once
    function = getattr(compiled, "function", function)
    packed = getattr(compiled, "packed_metadata", None)
    if run is None or function is None or packed is None:
        return
    tail = []
    for p in kernel.params[num_args:]:
        if p.name in kwargs:
            tail.append(kwargs[p.name])
        elif p.default is not inspect.Parameter.empty:
            tail.append(p.default)
        else:
            return  # a missing argument: Triton's path raised already, never reached
    cache = _CACHES[id(kernel)][1]
    if len(cache) >= _MAX_ENTRIES:
        cache.clear()
    cache[key] = (run, function, packed, tuple(tail))


@contextlib.contextmanager
def record() -> Iterator[list]:
    """Collect the launches made inside, as (kernel, grid, args, kwargs), for `LaunchPlan.build`."""
    global _recording
    prev, _recording = _recording, []
    try:
        yield _recording
    finally:
        _recording = prev


class LaunchPlan:
    """Recorded launches, repeated for a call that differs only in the addresses of a few tensors.

    Why: every attention layer of a step launches the same kernels with the same shapes, batch metadata and
    scratch buffers; only q, k, v, out and the layer's caches move. The first layer launches through `launch`
    under `record()`; the plan keeps each launch as the compiled kernel's launcher and its argument list, built
    once with tensors as addresses (the launcher then neither calls data_ptr() nor asks the driver about each
    pointer). `run(ptrs)` writes the new addresses where the recorded call had `swap`'s and launches: no
    binding, key, stride or allocation per layer (vLLM builds its attention metadata once per step, too).
    The recorded tensors (the scratch buffers among them) are kept alive by the plan, so a plan stays valid for
    as long as its metadata tensors do: the engine's (views of worker/input_batch.py's buffers) serve every step
    of a batch shape, and the InputBatch keeps the plans."""

    def __init__(self, launches: list[tuple], keep: list) -> None:
        self.launches, self.keep = launches, keep

    @classmethod
    def build(cls, recorded: list[tuple], swap: tuple[int, ...]) -> LaunchPlan | None:
        """A plan of `recorded`, whose tensors at the addresses in `swap` (each 16-byte aligned) `run` replaces;
        None where a launch has no kept compiled kernel (Triton's path, the interpreter) or nothing ran."""
        launches = []
        for kernel, grid, args, kwargs in recorded:
            entry = None
            owner, cache = _CACHES.get(id(kernel), (None, None))
            if owner is kernel and _fast_path_possible(kernel, grid):
                key = _key(args, kwargs)
                with contextlib.suppress(TypeError):
                    entry = cache.get(key)
            if entry is None:
                return None
            run, function, packed, tail = entry
            argv = [a.data_ptr() if type(a) in _TENSORS else a for a in args] + list(tail)
            head = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
                    _current_stream(key[0]), function)
            # triton 3.6's CudaLauncher: call its C launch directly where it needs no scratch memory
            if (getattr(run, "global_scratch_size", 1) == 0 == getattr(run, "profile_scratch_size", 1)
                    and hasattr(run, "launch_cooperative_grid") and hasattr(run, "launch_pdl")):
                fn, head = run.launch, (*head, run.launch_cooperative_grid, run.launch_pdl, None, None, packed)
            else:
                fn, head = run, (*head, packed)
            swaps = tuple((i, swap.index(p)) for i, p in enumerate(argv[:len(args)])
                          if type(args[i]) in _TENSORS and p in swap)
            launches.append((fn, (*head, None, None, None), argv, swaps))
        if not launches or any(p & 15 for p in swap):
            return None
        keep = [a for r in recorded for a in r[2] if type(a) in _TENSORS and a.data_ptr() not in swap]
        return cls(launches, keep)

    def run(self, ptrs: tuple[int, ...]) -> bool:
        """Launch with ptrs in place of `swap`; False (nothing launched) where one is not 16-byte aligned, as
        the recorded ones were (Triton compiles for the alignment it saw)."""
        for p in ptrs:
            if p & 15:
                return False
        stats["direct"] += len(self.launches)
        for fn, head, argv, swaps in self.launches:
            for i, j in swaps:
                argv[i] = ptrs[j]
            fn(*head, *argv)
        return True


class BoundPlan:
    """A LaunchPlan with one call's addresses written in, for calls whose tensors never move (an attention
    layer between PIECEWISE graphs, whose inputs are graph outputs): `run` is the launches and nothing else.
    `ptrs` are the addresses written in; the caller checks them once (`verified`), as a graph's inputs are."""

    def __init__(self, plan: LaunchPlan, ptrs: tuple[int, ...]) -> None:
        self.launches = []
        for fn, head, argv, swaps in plan.launches:
            argv = list(argv)
            for i, j in swaps:
                argv[i] = ptrs[j]
            self.launches.append((fn, head, argv))
        self.keep, self.ptrs, self.verified = plan.keep, ptrs, False

    def run(self) -> None:
        stats["direct"] += len(self.launches)
        for fn, head, argv in self.launches:
            fn(*head, *argv)


def current_stream() -> int | None:
    """The current CUDA stream's handle, where a direct launch goes (None without CUDA)."""
    return _current_stream(_current_device()) if _current_stream is not None else None


def clear() -> None:
    """Forget every kept kernel (tests; a process that re-tunes kernels)."""
    _CACHES.clear()


def next_power_of_2(n: int) -> int:
    """triton.next_power_of_2 for host code: Triton's is a constexpr function, 6-11 us per call on a CPU."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def cdiv(a: int, b: int) -> int:
    """triton.cdiv for host code (see next_power_of_2)."""
    return -(-a // b)
