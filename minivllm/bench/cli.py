"""Wires the benchmarks into `minivllm bench ...`, each imported only when it runs: latency and throughput from
this package, startup, kernels, profile and invariance from scripts/maint/ (bench/common.py, maint_script)."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
from pathlib import Path

from minivllm.bench.common import maint_script
from minivllm.engine_args import EngineArgs


def _run(module: str):
    def run(a: argparse.Namespace) -> int:
        importlib.import_module(f"minivllm.bench.{module}").main(a)  # main() returns the result dict
        return 0

    return run


def check_json_path(path: str | None) -> None:
    """Fail before a benchmark runs, not after, when its --json file could not be written: create it (and its
    folders, as write_json will) and remove it again if it was not there."""
    if not path:
        return
    p = Path(path)
    existed = p.exists()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "a"):
            pass
    except OSError as e:
        if isinstance(e, IsADirectoryError) or p.is_dir():
            why = "it is a directory; give a file name"
        elif e.errno in (errno.EEXIST, errno.ENOTDIR):
            parent = next((d for d in p.parents if d.exists()), None)
            why = f"{parent} is a file, not a directory"
        else:
            why = e.strerror or type(e).__name__
        raise ValueError(f"--json {path}: cannot write the result there: {why}") from None
    if not existed:
        os.unlink(p)


def _bench(sub, name: str, help: str, func) -> argparse.ArgumentParser:
    """`minivllm bench <name>`: the engine's flags (EngineArgs), --json, and the bench's own flags after."""
    p = sub.add_parser(name, help=help)
    EngineArgs.add_cli_args(p)
    p.add_argument("--json", default=None)
    p.set_defaults(func=_checked(func))
    return p


def _checked(func):
    def run(a: argparse.Namespace) -> int:
        check_json_path(a.json)
        return func(a)

    return run


def add_parsers(sub) -> None:
    lat = _bench(sub, "latency", "TTFT and TPOT per batch size, eager vs graph modes (+ transformers)",
                 _run("latency"))
    lat.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256")
    lat.add_argument("--input-len", type=int, default=128)
    lat.add_argument("--output-len", type=int, default=256)
    lat.add_argument("--modes", default="eager,FULL,PIECEWISE,FULL_AND_PIECEWISE")
    lat.add_argument("--compare", default="", help="comma list: hf (eager), hf-compile (static cache + compile)")
    lat.add_argument("--hf-batch-sizes", default="1,8,64", help="batch sizes the --compare baselines run at")
    lat.add_argument("--logprobs", type=int, default=None, metavar="K",
                     help="also measure every batch with logprobs=K, right after it without (the cost of logprobs)")
    lat.add_argument("--spec-tokens", default=None, metavar="K,K,...",
                     help="with --speculative-config: the num_speculative_tokens to measure per mode, 0 = off "
                          "(default: 0 and the config's)")
    lat.add_argument("--prompt-kind", default="random", choices=["random", "repeat"],
                     help="random token ids, or a random run of 16 tokens repeated (where n-gram lookup works)")

    thr = _bench(sub, "throughput", "nano-vllm's offline workload: output tokens per second", _run("throughput"))
    thr.add_argument("--num-requests", type=int, default=256)
    thr.add_argument("--input-len-range", default="100,1024")
    thr.add_argument("--output-len-range", default="100,1024")
    thr.add_argument("--temperature", type=float, default=0.6)
    thr.add_argument("--compare", default="", help="comma list: hf (transformers continuous batching + static "
                     "batched generate), sync (this engine with async scheduling off)")
    thr.add_argument("--hf-time-cap", type=float, default=120.0)
    thr.add_argument("--check-correctness", action="store_true", help="greedy batched vs one-by-one, 16 requests")
    thr.add_argument("--logprobs", type=int, default=None, metavar="K",
                     help="run the workload again on the same engine, every request with logprobs=K")

    _bench(sub, "startup", "cold and warm engine starts, phase by phase",
           lambda a: (maint_script("startup_bench").main(a), 0)[1])

    pr = _bench(sub, "profile", "one decode step's GPU time per kernel category vs its floors",
                lambda a: (maint_script("gpu_profile").main(a), 0)[1])
    pr.add_argument("--batch-sizes", default="1,64")
    pr.add_argument("--context", type=int, default=256, help="prompt tokens per request before decoding")
    pr.add_argument("--steps", type=int, default=8, help="decode steps profiled (4x as many are timed)")
    pr.add_argument("--modes", default="eager,FULL", help="as in bench latency, e.g. eager,FULL,FULL@L2")

    inv = _bench(sub, "invariance", "batched vs alone: tokens, logprobs, and batch_invariant's cost",
                 lambda a: (maint_script("invariance_bench").main(a), 0)[1])
    inv.add_argument("--modes", default="default,batch_invariant")
    inv.add_argument("--batch", type=int, default=64, help="the batch logprobs and TPOT are compared at")
    inv.add_argument("--input-len", type=int, default=128)
    inv.add_argument("--output-len", type=int, default=128)

    k = sub.add_parser("kernels", help="Triton attention kernels: bandwidth and TFLOP/s vs torch (CUDA only)")
    k.add_argument("--json", default=None)
    k.add_argument("--gemv", action="store_true", help="only the Triton GEMV vs cuBLAS on the decode matmuls")
    k.set_defaults(func=_checked(lambda a: (getattr(maint_script("kernel_bench"), "run_gemv_bench" if a.gemv
                                                    else "run_kernel_bench")(a.json), 0)[1]))


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse `minivllm bench ...` arguments without running anything, e.g. parse_args(["latency", "--modes",
    "eager"]); tests and notebooks pass the result to a bench's main()."""
    parser = argparse.ArgumentParser(prog="minivllm bench")
    add_parsers(parser.add_subparsers(dest="bench", required=True))
    return parser.parse_args(argv)
