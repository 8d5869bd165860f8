"""Host time of one PIECEWISE decode step, measured on a CPU: what runs between and around the piece graphs.

Why: at batch 1 a PIECEWISE step on the H200 is host-bound (29 piece replays and 28 eager attention calls
around a ~1 ms GPU step), and none of that host time needs a GPU to be measured, only the graph replays and
the driver launches do. So this script builds the engine itself on the CPU (mode 3: the Dynamo trace split
at attention, the real CUDAGraphWrapper around each piece, the split graph calling pieces and attention
directly) for the Qwen3-0.6B layer structure (28 layers, 16 heads, 8 KV heads, head_dim 128; narrow hidden
sizes, which host time does not depend on), runs one decode step of `--batch` requests through the
scheduler, and times what execute_model does for it up to the hidden states (the batch's `prepare` and the
forward), with only what needs the device replaced:
  - a CUDA graph: `replay()` does nothing (the piece's outputs stay those of its capture);
  - a Triton launch: Triton's own JIT path runs as far as it can without a GPU (the argument binder, the
    specialization, the cache key and lookup, the global-value check, the launch metadata), then the
    driver call is skipped. A kernel kept by kernels/launch.py skips the JIT path, as on the GPU.
The attention op takes the Triton branch it takes on CUDA (the device check is patched). What is left is
the host time of everything the engine's Python does per step, less the driver calls (cudaGraphLaunch and
cuLaunchKernel, a few us each on the GPU machine). scripts/maint/host_time.py times one forward per
execution path instead, with the CPU's PyTorch attention: it cannot see the attention op's Triton path.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 python scripts/piecewise_host.py --batch 1 --steps 200 --json /tmp/host.json

Prints and writes: wall and CPU (process) us per step, each the fastest of 5 blocks of steps (a shared
CPU makes wall time noisy; CPU time counts only this process), of which the batch's prepare (timed alone)
and the forward (the rest: what PIECEWISE adds to FULL lives here), Python function calls per step (cProfile),
piece replays, attention calls, Triton launches per step by path (JIT path vs direct), and the top
functions by own time. It patches Triton, torch.cuda and the attention op for the whole process: run it
as a script, never import it into a process that runs anything else.
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

COUNTS = {"replays": 0, "jit_launches": 0, "direct_launches": 0}


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
    assert "not q.is_cuda" in src, "the device check of unified_attention_impl moved: update this script"
    src = src.replace("not q.is_cuda", "False")
    exec(compile(src, layer.__file__, "exec"), layer.__dict__)  # noqa: S102 - our own source, patched
    from minivllm.kernels import launch  # its direct launches, on "device 0, stream 0"

    launch._current_device = lambda: 0
    launch._current_stream = lambda device: 0


def build(args: argparse.Namespace):
    """The engine (mode 3, PIECEWISE graphs, on the CPU) with `--batch` requests decoding after a
    `--context`-token prompt: returns the runner, its decode step's scheduled batch and the dispatcher's pick."""
    from minivllm import LLM
    from minivllm.sampling_params import SamplingParams
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    tmp = Path(tempfile.mkdtemp())
    path = make_random_checkpoint("qwen3-0.6b", tmp / "ckpt", dtype="float32", seed=0, hidden_size=256,
                                  intermediate_size=512, vocab_size=1024, num_hidden_layers=args.layers)
    # backend "eager": the pieces stay FX code, which is never run here (each replay does nothing) and traces
    # in seconds where Inductor takes minutes on a CPU
    llm = LLM(model=str(path), device="cpu", dtype="float32", max_model_len=args.context + 64,
              max_num_seqs=max(args.batch, 2), max_num_batched_tokens=max(args.batch * args.context, 2048),
              num_gpu_blocks_override=args.batch * ((args.context + 64) // 16 + 1),  # every request fits
              async_scheduling=False, compilation_config={"mode": 3, "backend": "eager", "cache_dir": str(tmp / "cc"),
                                                          "cudagraph_mode": "PIECEWISE"})
    engine, runner = llm.engine, llm.model_runner
    for _ in range(args.batch):
        engine.add_request(engine.next_request_id(), list(range(3, args.context + 3)),
                           SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    engine.step()  # the prompts' prefill (the CPU's PyTorch attention: it fills nothing that is timed)
    decode = {}
    real = runner.execute_model

    def hooked(sched, prev=None):
        decode["sched"] = sched
        return real(sched, prev)

    runner.execute_model = hooked
    engine.step()
    del runner.execute_model
    sched = decode["sched"]
    assert sched.is_uniform_decode and len(sched.scheduled) == args.batch
    pick = runner.cudagraph_dispatcher.dispatch(sched.num_tokens, args.batch, True)
    runner.backend = "triton"  # the attention op's GPU branch (patch_for_cpu)
    return llm, runner, sched, pick


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--layers", type=int, default=28, help="Qwen3-0.6B has 28 (a test uses fewer)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    patch_for_cpu()
    from minivllm.attention.metadata import set_forward_context
    from minivllm.config import CUDAGraphMode

    llm, runner, sched, pick = build(args)
    ib, PIECEWISE = runner.input_batch, CUDAGraphMode.PIECEWISE

    def step() -> None:  # what execute_model does up to the hidden states, under a PIECEWISE pick
        batch = ib.prepare(sched, pick.num_padded_tokens, pick.num_padded_seqs)
        runner.run_forward(batch, PIECEWISE)

    with torch.inference_mode():
        batch = ib.prepare(sched, pick.num_padded_tokens, pick.num_padded_seqs)
        n = batch.num_padded_tokens  # the dispatcher pads a 1-token step to 2
        with set_forward_context(batch.attn_metadata, runner.backend, runner.kv_caches, PIECEWISE, n,
                                 capturing=True):  # capture each piece's (stand-in) graph of this size
            runner.compiled.forward(ib.input_ids[:n], ib.positions[:n])
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
        prepare_blocks = []  # the batch's prepare alone: the rest of a step is the forward's host time
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                ib.prepare(sched, pick.num_padded_tokens, pick.num_padded_seqs)
            prepare_blocks.append((time.perf_counter() - t0) / args.steps * 1e6)
        prepare_us = min(prepare_blocks)
        counts = {k: v / (5 * args.steps) for k, v in COUNTS.items()}
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
    pieces = runner.compiled.split_backend.num_pieces
    llm.shutdown()
    stats = pstats.Stats(prof)
    calls = stats.total_calls / args.steps
    rows = sorted(((f"{Path(f).name}:{line}:{fn_}", nc / args.steps, tt / args.steps * 1e6)
                   for (f, line, fn_), (cc, nc, tt, ct, _) in stats.stats.items()), key=lambda r: -r[2])
    # attention calls are counted by the profile, not by a wrapper that would add its own host time
    counts["attention_calls"] = sum(nc for (_f, _l, fn_), (_cc, nc, *_r) in stats.stats.items()
                                    if fn_ == "unified_attention_impl") / args.steps
    # attention's launch plans are built once per batch shape, not once per step (worker/input_batch.py)
    counts["plan_builds"] = sum(nc for (f, _l, fn_), (_cc, nc, *_r) in stats.stats.items()
                                if fn_ == "build" and Path(f).name == "launch.py") / args.steps
    from minivllm.kernels.launch import BoundPlan

    bound_run = BoundPlan.run.__code__
    # a PIECEWISE step's layers run their bound plans (attention/layer.py): the launches and nothing else
    counts["bound_plan_runs"] = sum(nc for (f, _l, fn_), (_cc, nc, *_r) in stats.stats.items()
                                    if (f, _l) == (bound_run.co_filename, bound_run.co_firstlineno)) / args.steps
    by_calls = sorted(rows, key=lambda r: -r[1])
    cum = sorted(((f"{Path(f).name}:{line}:{fn_}", nc / args.steps, ct / args.steps * 1e6)
                  for (f, line, fn_), (cc, nc, tt, ct, _) in stats.stats.items()), key=lambda r: -r[2])
    result = {"batch": args.batch, "context": args.context, "steps": args.steps, "layers": args.layers, "padded_tokens": n,
              "pieces": pieces, "wall_us_per_step": round(wall_us, 1), "cpu_us_per_step": round(cpu_us, 1),
              "prepare_us_per_step": round(prepare_us, 1), "forward_us_per_step": round(wall_us - prepare_us, 1),
              "python_calls_per_step": round(calls, 1), **{f"{k}_per_step": v for k, v in counts.items()},
              "wall_us_blocks": [round(b, 1) for b in blocks],
              "top_own_us": [{"function": r[0], "calls": r[1], "own_us": round(r[2], 2)} for r in rows[:20]],
              "top_calls": [{"function": r[0], "calls": r[1]} for r in by_calls[:25]],
              "top_cum_us": [{"function": r[0], "calls": r[1], "cum_us": round(r[2], 2)} for r in cum[:25]],
              "torch": torch.__version__, "triton": triton.__version__}
    print(f"batch {args.batch}, context {args.context}, {args.layers} layers, {pieces} pieces: "
          f"{wall_us:.0f} us/step wall, {cpu_us:.0f} us/step CPU time (driver calls excluded), "
          f"{calls:.0f} Python calls/step; of the wall time {prepare_us:.0f} us prepare, "
          f"{wall_us - prepare_us:.0f} us forward")
    print("per step: " + ", ".join(f"{k} {v:g}" for k, v in counts.items()))
    print("under cProfile, own time per step:")
    for r in rows[:20]:
        print(f"  {r[2]:8.1f} us  {r[1]:6.1f} calls  {r[0]}")
    print("under cProfile, Python calls per step:")
    for r in by_calls[:25]:
        print(f"  {r[1]:6.1f} calls  {r[0]}")
    print("under cProfile, time with callees per step:")
    for r in cum[:25]:
        print(f"  {r[2]:8.1f} us  {r[1]:6.1f} calls  {r[0]}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
