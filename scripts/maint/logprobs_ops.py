"""What `logprobs=K` adds to a decode step on the GPU, op by op (README, "Logprobs").

The latency bench measures the whole cost (TPOT with and without logprobs on the same engine). This probe
says where it goes: each op of the sampler's logprobs path on [rows, vocab] logits, timed two ways:
- gpu_us: kernel time alone (the host queues `iters` calls while the GPU sleeps, then CUDA events time them);
- host_us: the host's time for ONE call queued behind a sleeping GPU (median of `trials`). An op that
  synchronizes waits out the sleep (host_us near trial_sleep_us, `waits` true); one that only launches returns
  in microseconds. One call at a time, because queuing many calls behind one sleep fills the driver's launch
  queue, and then any op of enough launches looks as if it waited.

    python scripts/maint/logprobs_ops.py --json out.json
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from minivllm.bench.common import print_table, provenance, write_json
from minivllm.layers.sampler import gather_logprobs
from minivllm.worker.model_runner_output import _to_host

SLEEP_CYCLES = int(3e8)  # about 0.15 s of GPU sleep: longer than the host needs to queue `iters` calls
TRIAL_SLEEP_CYCLES = int(2e7)  # about 10 ms: what one call behind it waits if it synchronizes


def gpu_us(fn, iters: int) -> float:
    """Kernel time per call: `iters` calls queued behind a sleep, timed by events around them."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return round(start.elapsed_time(end) / iters * 1e3, 1)


def host_us(fn, trials: int) -> float:
    """The host's time for one call while the GPU is busy (median of `trials`)."""
    times = []
    for _ in range(trials):
        torch.cuda.synchronize()
        torch.cuda._sleep(TRIAL_SLEEP_CYCLES)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return round(sorted(times)[len(times) // 2] * 1e6, 1)


def sleep_us(cycles: int) -> float:
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(cycles)
    e.record()
    torch.cuda.synchronize()
    return round(s.elapsed_time(e) * 1e3, 1)


def timed(fn, iters: int, trials: int, trial_sleep: float) -> dict:
    for _ in range(3):
        fn()
    host = host_us(fn, trials)
    return {"gpu_us": gpu_us(fn, iters), "host_us": host, "waits": host > trial_sleep / 2}


def ops(logits: torch.Tensor, tok: torch.Tensor, k: int) -> dict:
    lp = logits.float().log_softmax(-1)
    chosen = lp.gather(1, tok.view(-1, 1))
    return {
        "argmax (the greedy sampler)": lambda: logits.argmax(-1),
        "gather_logprobs + copies to host": lambda: gather_logprobs(logits, tok, k).apply(_to_host),
        "log_softmax in fp32": lambda: logits.float().log_softmax(-1),
        "rank of the chosen (>=, sum)": lambda: (lp >= chosen).sum(-1),
        f"topk({k}) of the fp32 logprobs": lambda: lp.topk(k, dim=-1),
        f"topk({k}) of the logits, own dtype": lambda: logits.topk(k, dim=-1),
        # pairs and the whole path without its copies
        "log_softmax, then topk (own dtype)": lambda: (logits.float().log_softmax(-1), logits.topk(k, dim=-1)),
        "rank, then topk (own dtype)": lambda: ((lp >= chosen).sum(-1), logits.topk(k, dim=-1)),
        "topk (own dtype), rank, log_softmax": lambda: (logits.topk(k, dim=-1), (lp >= chosen).sum(-1),
                                                        logits.float().log_softmax(-1)),
        "gather_logprobs alone": lambda: gather_logprobs(logits, tok, k),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=151936, help="Qwen3's vocabulary by default")
    ap.add_argument("--rows", default="1,64")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50, help="calls queued behind one sleep for gpu_us")
    ap.add_argument("--trials", type=int, default=9, help="single calls behind a sleep for host_us")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("logprobs_ops: needs a CUDA GPU (it times kernels and host waits)", file=sys.stderr)
        return 2
    trial_sleep = sleep_us(TRIAL_SLEEP_CYCLES)
    result = {"bench": "logprobs ops", "provenance": provenance(args, None), "trial_sleep_us": trial_sleep,
              "rows": []}
    g = torch.Generator(device="cuda").manual_seed(0)
    for rows in map(int, args.rows.split(",")):
        for dtype in (torch.bfloat16, torch.float32):
            logits = (torch.randn(rows, args.vocab, device="cuda", generator=g) * 3).to(dtype)
            tok = logits.argmax(-1)
            for name, fn in ops(logits, tok, args.k).items():
                result["rows"].append({"rows": rows, "dtype": str(dtype).removeprefix("torch."), "op": name,
                                       **timed(fn, args.iters, args.trials, trial_sleep)})
    print_table(f"logprobs ops, {args.vocab} vocabulary (host_us: one call behind {trial_sleep:.0f} us of GPU "
                "sleep; waits: it synchronized)", ["rows", "dtype", "op", "gpu_us", "host_us", "waits"],
                [[r["rows"], r["dtype"], r["op"], r["gpu_us"], r["host_us"], r["waits"]] for r in result["rows"]],
                ".1f")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
