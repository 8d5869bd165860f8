"""Host time of one PIECEWISE decode step, measured on a CPU: what runs between and around the piece graphs.

Why: a PIECEWISE step on the H200 took 10 ms at batch 1 where FULL took 0.95 ms, with nearly the same GPU
work, so ~9 ms were host time: the split graph's Python, each piece's graph wrapper, and each layer's eager
attention call (its Python, and Triton's launch path). None of that needs a GPU to be measured, only the
graph replays and the driver launches do. So this script builds the engine's real split forward (mode 3's
Dynamo trace split at attention, the real CUDAGraphWrapper around each piece) for the Qwen3-0.6B layer
structure (28 layers, 16 heads, 8 KV heads, head_dim 128; narrow hidden sizes, which host time does not
depend on) and replaces only what needs the device:
  - a CUDA graph: `replay()` does nothing (the piece's outputs stay those of its capture);
  - a Triton launch: Triton's own JIT path runs as far as it can without a GPU (the argument binder, the
    specialization, the cache key and lookup, the global-value check, the launch metadata), then the
    driver call is skipped. A kernel kept by kernels/launch.py skips the JIT path, as on the GPU.
The attention op takes the Triton branch it takes on CUDA (the device check is patched). What is left is
the host time of everything the engine's Python does per step, less the driver calls (cudaGraphLaunch and
cuLaunchKernel, a few us each on the GPU machine).

    PYTHONPATH=$PWD python scripts/piecewise_host.py --batch 1 --steps 200 --json /tmp/host.json

Prints and writes: wall and CPU (process) us per step, each the fastest of 5 blocks of steps (a shared
CPU makes wall time noisy; CPU time counts only this process), Python function calls per step (cProfile),
piece replays, attention calls, Triton launches per step by path (JIT path vs direct), and the top
functions by own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import inspect
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

if os.environ.get("TRITON_INTERPRET"):
    sys.exit("run without TRITON_INTERPRET: this script measures Triton's compiled-kernel launch path")

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.compiler.compiler import LazyDict
from triton.runtime import jit as triton_jit

COUNTS = {"replays": 0, "jit_launches": 0, "direct_launches": 0, "attention_calls": 0}


class FakeGraph:
    """torch.cuda.CUDAGraph without a device: capture records nothing, replay does nothing."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def replay(self) -> None:
        COUNTS["replays"] += 1


class FakeCompiledKernel:
    """What Triton's JIT path returns: a launcher (`run`) and the handles a direct launch needs."""

    function, packed_metadata, name = "function-handle", "packed-metadata", "fake"

    def run(self, *args) -> None:
        COUNTS["direct_launches"] += 1

    def launch_metadata(self, grid, stream, *args):
        return LazyDict({"name": self.name, "function": self.function, "stream": stream})


def jit_run_without_driver(self, *args, grid, warmup, **kwargs):
    """JITFunction.run (triton 3.6) up to the driver call: bind, specialize, key, look up, check globals,
    build launch metadata, then the launcher (which here only counts). The compile is skipped."""
    COUNTS["jit_launches"] += 1
    kwargs["debug"] = kwargs.get("debug", self.debug) or triton.knobs.runtime.debug
    kwargs["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    device, stream = 0, 0
    for hook in self.pre_run_hooks:
        hook(*args, **kwargs)
    caches = self.__dict__.setdefault("_host_bench_caches", {})
    if device not in caches:
        backend = make_backend(GPUTarget("cuda", 90, 32))
        binder = triton_jit.create_function_from_signature(self.signature, self.params, backend)
        caches[device] = ({}, {}, backend, binder)
    kernel_cache, kernel_key_cache, backend, binder = caches[device]
    bound_args, specialization, options = binder(*args, **kwargs)
    key = triton_jit.compute_cache_key(kernel_key_cache, specialization, options)
    kernel = kernel_cache.get(key)
    if kernel is None:
        kernel = kernel_cache[key] = FakeCompiledKernel()
    not_present = object()
    for (name, _), (val, globals_dict) in self.used_global_vals.items():
        if globals_dict.get(name, not_present) != val:
            raise RuntimeError(f"global {name} changed")
    if not warmup:
        g = grid(bound_args) if callable(grid) else grid
        launch_metadata = kernel.launch_metadata(g, stream, *bound_args.values())
        kernel.run(g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1, stream, kernel.function,
                   kernel.packed_metadata, launch_metadata, triton.knobs.runtime.launch_enter_hook,
                   triton.knobs.runtime.launch_exit_hook, *bound_args.values())
        COUNTS["direct_launches"] -= 1  # the launcher call of the JIT path is counted as a JIT launch
    return kernel


def patch_for_cpu() -> None:
    from minivllm.attention import layer
    from minivllm.compilation import cuda_graph

    triton_jit.JITFunction.run = jit_run_without_driver
    torch.cuda.CUDAGraph = FakeGraph
    torch.cuda.graph = lambda graph, pool=None: contextlib.nullcontext()
    cuda_graph.weak_ref = lambda x: x
    # the attention op's Triton branch, as on CUDA (its source with the device check removed)
    src = inspect.getsource(layer.unified_attention_impl)
    src = src.replace("not q.is_cuda", "False").replace('q.device.type != "cuda"', "False")  # (older trees)
    assert "False" in src, "the device check of unified_attention_impl moved: update this script"
    exec(compile(src, layer.__file__, "exec"), layer.__dict__)  # noqa: S102 - our own source, patched
    try:  # the direct launches of kernels/launch.py (absent in older trees)
        from minivllm.kernels import launch

        launch._current_device = lambda: 0
        launch._current_stream = lambda device: 0
    except ImportError:
        pass
    original = layer.unified_attention_impl

    def counted(*args, **kwargs):
        COUNTS["attention_calls"] += 1
        return original(*args, **kwargs)

    layer.unified_attention_impl = counted


def build(batch: int, context: int):
    from minivllm.attention.metadata import set_forward_context
    from minivllm.compilation import levels
    from minivllm.compilation.backend import SplitBackend
    from minivllm.config import CUDAGraphMode
    from minivllm.loader import load_model, load_model_config
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint
    from minivllm.worker.input_batch import InputBatch

    path = make_random_checkpoint("qwen3-0.6b", Path(tempfile.mkdtemp()) / "ckpt", dtype="float32", seed=0,
                                  hidden_size=256, intermediate_size=512, vocab_size=1024)
    cfg = load_model_config(path)
    cpu = torch.device("cpu")
    model = load_model(path, cfg, cpu, torch.float32, 4096)
    block_size, max_blocks = 16, (context + 64) // 16 + 1
    ib = InputBatch(max(batch, 8) * 4, max(batch, 8), max_blocks, block_size, cpu)
    num_blocks = batch * max_blocks + 1
    kv = torch.zeros(cfg.num_hidden_layers, 2, num_blocks, block_size, cfg.num_key_value_heads, cfg.head_dim,
                     dtype=torch.bfloat16)  # only its addresses matter here; bf16 halves it at batch 64
    kv_caches = [(kv[i, 0], kv[i, 1]) for i in range(cfg.num_hidden_layers)]
    backend = SplitBackend(compile_pieces=False, inductor=False, use_graphs=True, model=model)
    trace = levels.TraceOnceBackend(backend, {}, model)
    fn = levels._with_constant_floats(levels._traced_forward(model, trace))
    with torch.inference_mode():
        n = min(8, ib.max_num_seqs)
        with set_forward_context(ib.dummy_decode(n), "torch", kv_caches):
            fn(ib.input_ids[:n], ib.positions[:n])
    fn = trace.direct or fn
    padded = max(2, batch)  # the traced forward never sees 1 token (levels.compile_model)
    with torch.inference_mode(), set_forward_context(ib.dummy_decode(padded), "triton", kv_caches,
                                                     CUDAGraphMode.PIECEWISE, padded, capturing=True):
        fn(ib.input_ids[:padded], ib.positions[:padded])
    return model, ib, kv_caches, fn, backend, padded, max_blocks


def decode_batch(batch: int, context: int, max_blocks: int):
    from minivllm.engine.sched_output import ScheduledSeq, SchedulerOutput
    from minivllm.engine.sequence import Sequence
    from minivllm.sampling_params import SamplingParams

    out = SchedulerOutput()
    for i in range(batch):
        seq = Sequence(str(i), list(range(1, context + 2)), SamplingParams())
        seq.num_computed_tokens = context
        seq.block_table = [i * max_blocks + b for b in range((context + 16) // 16)]
        out.scheduled.append(ScheduledSeq(seq, 1))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    patch_for_cpu()
    from minivllm.attention.metadata import set_forward_context
    from minivllm.config import CUDAGraphMode

    _model, ib, kv_caches, fn, backend, padded, max_blocks = build(args.batch, args.context)
    sched = decode_batch(args.batch, args.context, max_blocks)

    def step() -> None:
        batch = ib.prepare(sched, padded)
        with set_forward_context(batch.attn_metadata, "triton", kv_caches, CUDAGraphMode.PIECEWISE, padded):
            fn(ib.input_ids[:padded], ib.positions[:padded])

    with torch.inference_mode():
        for _ in range(20):  # warm: Triton keys cached, kernels/launch.py's table filled
            step()
        for k in COUNTS:
            COUNTS[k] = 0
        blocks, cpu_blocks = [], []  # the fastest of 5 blocks: the least disturbed by other processes
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step()
            blocks.append((time.perf_counter() - t0) / args.steps * 1e6)
            cpu_blocks.append((time.process_time() - c0) / args.steps * 1e6)  # this process's CPU time only
        wall_us, cpu_us = min(blocks), min(cpu_blocks)
        counts = {k: v / (5 * args.steps) for k, v in COUNTS.items()}
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
    stats = pstats.Stats(prof)
    calls = stats.total_calls / args.steps
    rows = sorted(((f"{Path(f).name}:{line}:{fn_}", nc / args.steps, tt / args.steps * 1e6)
                   for (f, line, fn_), (cc, nc, tt, ct, _) in stats.stats.items()), key=lambda r: -r[2])
    cum = sorted(((f"{Path(f).name}:{line}:{fn_}", nc / args.steps, ct / args.steps * 1e6)
                  for (f, line, fn_), (cc, nc, tt, ct, _) in stats.stats.items()), key=lambda r: -r[2])
    result = {"batch": args.batch, "context": args.context, "steps": args.steps, "layers": len(kv_caches),
              "pieces": backend.num_pieces, "wall_us_per_step": round(wall_us, 1), "cpu_us_per_step": round(cpu_us, 1),
              "python_calls_per_step": round(calls, 1), **{f"{k}_per_step": v for k, v in counts.items()},
              "wall_us_blocks": [round(b, 1) for b in blocks],
              "top_own_us": [{"function": r[0], "calls": r[1], "own_us": round(r[2], 2)} for r in rows[:20]],
              "top_cum_us": [{"function": r[0], "calls": r[1], "cum_us": round(r[2], 2)} for r in cum[:25]],
              "torch": torch.__version__, "triton": triton.__version__}
    print(f"batch {args.batch}, context {args.context}, {len(kv_caches)} layers, {backend.num_pieces} pieces: "
          f"{wall_us:.0f} us/step wall, {cpu_us:.0f} us/step CPU time (driver calls excluded), "
          f"{calls:.0f} Python calls/step")
    print("per step: " + ", ".join(f"{k} {v:g}" for k, v in counts.items()))
    print("under cProfile, own time per step:")
    for r in rows[:20]:
        print(f"  {r[2]:8.1f} us  {r[1]:6.1f} calls  {r[0]}")
    print("under cProfile, time with callees per step:")
    for r in cum[:25]:
        print(f"  {r[2]:8.1f} us  {r[1]:6.1f} calls  {r[0]}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
