"""Wires the benchmark modules into `minivllm bench ...` (each imported only when it runs)."""

from __future__ import annotations

import argparse
import importlib

from minivllm.engine_args import EngineArgs


def _run(module: str):
    def run(a: argparse.Namespace) -> int:
        importlib.import_module(f"minivllm.bench.{module}").main(a)  # main() returns the result dict
        return 0

    return run


def add_parsers(sub) -> None:
    lat = sub.add_parser("latency", help="TTFT and TPOT per batch size, eager vs graph modes (+ transformers)")
    EngineArgs.add_cli_args(lat)
    lat.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256")
    lat.add_argument("--input-len", type=int, default=128)
    lat.add_argument("--output-len", type=int, default=256)
    lat.add_argument("--modes", default="eager,FULL,PIECEWISE,FULL_AND_PIECEWISE")
    lat.add_argument("--compare", default="", help="comma list: hf (eager), hf-compile (static cache + compile)")
    lat.add_argument("--hf-batch-sizes", default="1,8,64", help="batch sizes the --compare baselines run at")
    lat.add_argument("--json", default=None)
    lat.set_defaults(func=_run("latency"))

    thr = sub.add_parser("throughput", help="nano-vllm's offline workload: output tokens per second")
    EngineArgs.add_cli_args(thr)
    thr.add_argument("--num-requests", type=int, default=256)
    thr.add_argument("--input-len-range", default="100,1024")
    thr.add_argument("--output-len-range", default="100,1024")
    thr.add_argument("--temperature", type=float, default=0.6)
    thr.add_argument("--compare", default="", help="comma list: hf (transformers continuous batching + static "
                     "batched generate), sync (this engine with async scheduling off)")
    thr.add_argument("--hf-time-cap", type=float, default=120.0)
    thr.add_argument("--check-correctness", action="store_true", help="greedy batched vs one-by-one, 16 requests")
    thr.add_argument("--json", default=None)
    thr.set_defaults(func=_run("throughput"))

    st = sub.add_parser("startup", help="cold and warm engine starts, phase by phase")
    EngineArgs.add_cli_args(st)
    st.add_argument("--json", default=None)
    st.set_defaults(func=_run("startup"))

    pr = sub.add_parser("profile", help="one decode step's GPU time per kernel category vs its floors")
    EngineArgs.add_cli_args(pr)
    pr.add_argument("--batch-sizes", default="1,64")
    pr.add_argument("--context", type=int, default=256, help="prompt tokens per request before decoding")
    pr.add_argument("--steps", type=int, default=8, help="decode steps profiled (4x as many are timed)")
    pr.add_argument("--modes", default="eager,FULL", help="as in bench latency, e.g. eager,FULL,FULL@L2")
    pr.add_argument("--json", default=None)
    pr.set_defaults(func=_run("profile"))

    inv = sub.add_parser("invariance", help="batched vs alone: tokens, logprobs, and batch_invariant's cost")
    EngineArgs.add_cli_args(inv)
    inv.add_argument("--modes", default="default,batch_invariant")
    inv.add_argument("--batch", type=int, default=64, help="the batch logprobs and TPOT are compared at")
    inv.add_argument("--input-len", type=int, default=128)
    inv.add_argument("--output-len", type=int, default=128)
    inv.add_argument("--json", default=None)
    inv.set_defaults(func=_run("invariance"))

    k = sub.add_parser("kernels", help="Triton attention kernels: bandwidth and TFLOP/s vs torch (CUDA only)")
    k.add_argument("--json", default=None)
    k.add_argument("--gemv", action="store_true", help="only the Triton GEMV vs cuBLAS on the decode matmuls")
    k.set_defaults(func=lambda a: (importlib.import_module("minivllm.bench.kernels").run_gemv_bench(a.json)
                                   if a.gemv else importlib.import_module("minivllm.bench.kernels")
                                   .run_kernel_bench(a.json), 0)[1])


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse `minivllm bench ...` arguments without running anything, e.g. parse_args(["latency", "--modes",
    "eager"]); tests and notebooks pass the result to a bench's main()."""
    parser = argparse.ArgumentParser(prog="minivllm bench")
    add_parsers(parser.add_subparsers(dest="bench", required=True))
    return parser.parse_args(argv)
