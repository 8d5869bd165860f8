"""kernels/launch.py: a kept compiled kernel is launched directly only for calls Triton would compile the same.

The driver launch needs a GPU, so Triton's JIT path is replaced by a fake that records what it was asked and
returns a fake compiled kernel; the test checks which path each call takes and the exact arguments the
direct launch hands the launcher (runtime arguments, then the constexprs in signature order).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import triton.language as tl
from triton.runtime.jit import JITFunction

from minivllm.kernels import launch as L


def _kernel_src(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr = True):
    pass


@pytest.fixture
def fake(monkeypatch):
    kernel = JITFunction(_kernel_src)  # what @triton.jit makes off the interpreter; never compiled here
    jit_calls, direct_calls = [], []
    compiled = SimpleNamespace(function="fn-handle", packed_metadata="packed",
                               run=lambda *a: direct_calls.append(a))

    def jit_run(*args, grid, warmup, **kwargs):
        jit_calls.append((grid, args, kwargs))
        return compiled

    monkeypatch.setattr(kernel, "run", jit_run)
    monkeypatch.setattr(L, "_current_device", lambda: 0)
    monkeypatch.setattr(L, "_current_stream", lambda device: 1234)
    L.clear()
    yield kernel, jit_calls, direct_calls
    L.clear()


def test_second_launch_of_a_specialization_skips_the_jit_path(fake):
    kernel, jit_calls, direct_calls = fake
    x, y = torch.zeros(64), torch.zeros(64)
    L.launch(kernel, (4,), x, y, 64, 0.5, BLOCK=16, num_warps=4)
    assert len(jit_calls) == 1 and not direct_calls
    L.launch(kernel, (4,), x, y, 64, 0.5, BLOCK=16, num_warps=4)
    assert len(jit_calls) == 1
    assert direct_calls == [(4, 1, 1, 1234, "fn-handle", "packed", None, None, None, x, y, 64, 0.5, 16, True)]


@pytest.mark.parametrize("change", ["int", "alignment", "dtype", "constexpr", "option", "bool", "float"])
def test_a_call_triton_would_specialize_differently_takes_the_jit_path(fake, change):
    kernel, jit_calls, direct_calls = fake
    buf = torch.zeros(80)
    x, y = buf[:64], torch.zeros(64)
    first = [x, y, 1 if change == "bool" else 64, 64 if change == "float" else 0.5]
    L.launch(kernel, (4, 2), *first, BLOCK=16, num_warps=4)
    args, kw = list(first), {"BLOCK": 16, "num_warps": 4}
    if change == "bool":
        args[2] = True  # == 1 in Python, another type for Triton
    elif change == "float":
        args[3] = 64.0  # == 64 in Python: an fp32 argument for Triton where the int was an i32
    elif change == "int":
        args[2] = 65  # another value: Triton specializes on divisibility by 16 (and 1)
    elif change == "alignment":
        args[0] = buf[1:65]  # 4 bytes past a 16-byte boundary
    elif change == "dtype":
        args[1] = torch.zeros(64, dtype=torch.float16)
    elif change == "constexpr":
        kw["BLOCK"] = 32
    else:
        kw["num_warps"] = 8
    L.launch(kernel, (4, 2), *args, **kw)
    assert len(jit_calls) == 2 and not direct_calls


def test_jit_path_kept_under_launch_hooks_and_for_grid_callables(fake):
    from triton import knobs

    kernel, jit_calls, direct_calls = fake
    x = torch.zeros(64)
    L.launch(kernel, (1,), x, x, 64, 0.5, BLOCK=16)
    def hook(metadata):  # what a profiler (Proton) installs
        return None

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        L.launch(kernel, (1,), x, x, 64, 0.5, BLOCK=16)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    L.launch(kernel, lambda meta: (1,), x, x, 64, 0.5, BLOCK=16)
    assert len(jit_calls) == 3 and not direct_calls
    L.launch(kernel, (1,), x, x, 64, 0.5, BLOCK=16)
    assert len(direct_calls) == 1


def test_a_launch_plan_repeats_the_recorded_launches_with_new_addresses(fake):
    """What an attention layer of a decode step does (attention/layer.py): the first layer's launches are
    recorded, the other layers' repeat them with their own tensors' addresses. The plan must hand the
    launcher exactly what `launch` would have (tensors as their addresses), keep what it did not swap (the
    step's metadata, a scratch buffer) alive, and refuse an address Triton would compile differently for."""
    kernel, jit_calls, direct_calls = fake
    x1, meta, scratch = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    L.launch(kernel, (4,), x1, meta, 64, 0.5, BLOCK=16)  # compiled and kept
    with L.record() as recorded:
        L.launch(kernel, (4,), x1, scratch, 64, 0.5, BLOCK=16)
        L.launch(kernel, (2, 3), meta, x1, 64, 0.5, BLOCK=16, EVEN=False)
    plan = L.LaunchPlan.build(recorded, (x1.data_ptr(),))
    assert len(jit_calls) == 2 and plan is not None
    x2 = torch.zeros(64)
    direct_calls.clear()
    assert plan.run((x2.data_ptr(),))
    assert direct_calls == [(4, 1, 1, 1234, "fn-handle", "packed", None, None, None,
                             x2.data_ptr(), scratch.data_ptr(), 64, 0.5, 16, True),
                            (2, 3, 1, 1234, "fn-handle", "packed", None, None, None,
                             meta.data_ptr(), x2.data_ptr(), 64, 0.5, 16, False)]
    assert any(t is scratch for t in plan.keep) and not any(t is x1 for t in plan.keep)
    direct_calls.clear()
    assert not plan.run((torch.zeros(80)[1:65].data_ptr(),)) and not direct_calls  # 4 bytes off alignment

    # one bound plan per layer (a PIECEWISE step's attention): the layer's addresses written in for good,
    # each layer's its own, and the same launches as the plan's
    x3 = torch.zeros(64)
    bound2, bound3 = L.BoundPlan(plan, (x2.data_ptr(),)), L.BoundPlan(plan, (x3.data_ptr(),))
    expected = []
    for xs in (x3, x2):
        assert plan.run((xs.data_ptr(),))
        expected += direct_calls
        direct_calls.clear()
    bound3.run()
    bound2.run()
    assert direct_calls == expected and bound2.keep is plan.keep and not bound2.verified


def test_no_launch_plan_without_a_kept_kernel(fake):
    kernel, _, _ = fake
    x = torch.zeros(64)
    with L.record() as recorded:
        L.launch(kernel, lambda meta: (1,), x, x, 64, 0.5, BLOCK=16)  # a grid callable: Triton's path, never kept
    assert len(recorded) == 1 and L.LaunchPlan.build(recorded, (x.data_ptr(),)) is None
    assert L.LaunchPlan.build([], (x.data_ptr(),)) is None
