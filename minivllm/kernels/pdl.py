"""Programmatic dependent launch (PDL), custom_ops "pdl": the GPU may start a kernel's programs while the
previous kernel in the stream is still finishing.

Why: a batch-1 decode step of Qwen3-0.6B is ~300 small kernels in one CUDA graph, and the H200 profile
(`minivllm bench profile`) shows ~0.8 us of idle GPU between two of them: the next grid is launched only
when the previous one has fully drained. With PDL (Hopper and later) the next grid is launched as soon as
every program of the previous one has signalled (griddepcontrol.launch_dependents) or exited, and its
programs block in griddepcontrol.wait until the previous kernel has completed and its writes are visible.
So the launch and ramp-up overlap the previous kernel's tail. It is safe only if a kernel reads nothing the
previous kernel writes, and writes nothing, before that wait, which is why every Triton kernel here calls
`wait_for_previous_kernel` first. The one exception is the decode kernel's seq_lens and block table
(custom op "decode_prefetch"): the step's host copies write them before its first kernel runs.
Kernels of other libraries (cuBLAS, PyTorch) are launched normally and end a PDL chain.

Whether to use PDL is the caller's choice (an argument of every launcher, passed down by the layers from
their engine's custom-op selection); this module only turns that choice into launch options.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def wait_for_previous_kernel(USE_PDL: tl.constexpr):
    """First statement of a kernel: with PDL, wait for the previous kernel, then let the next one launch."""
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()


def launch_options(device: torch.device, use_pdl: bool) -> dict:
    """Keyword arguments for a Triton launch: USE_PDL for the kernel, launch_pdl for the launcher. PDL is
    used only where asked for and where the GPU has it (CUDA, compute capability 9.0 or later)."""
    if use_pdl and device.type == "cuda" and _hopper_or_later(device.index):
        return {"USE_PDL": True, "launch_pdl": True}
    return {"USE_PDL": False}


@functools.cache
def _hopper_or_later(index: int | None) -> bool:
    """Looked up once per device: an eager step calls launch_options for every launch."""
    return torch.cuda.get_device_capability(index)[0] >= 9
