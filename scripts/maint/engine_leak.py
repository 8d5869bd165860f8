"""Six engines built and dropped with `del` in one process: does each one leave memory behind (issue 41)?

Before each engine (after the previous one's `del llm; gc.collect(); torch.cuda.empty_cache()`), the device's
free memory, what live tensors hold (torch.cuda.memory_allocated) and how many CUDA tensors the garbage
collector sees; after its startup, the KV cache's size in tokens. The engines: default, eager, mode 3, FULL,
PIECEWISE, default. The check (issue 41): the sixth engine's KV tokens within 1% of the first's, and the free
memory before it within 0.2 GiB of the free memory before the first. The first engine also pays what a process
pays once (cuBLAS workspaces, kernel images loaded into the CUDA context), so the drift from the second engine
to the sixth is printed beside it: that part is what engines leave behind. Under CUDA_MODULE_LOADING=EAGER the
kernel images of the libraries loaded so far enter the context when it is created; what the first engine loads
later (Triton's and Inductor's kernels) still grows it. --warm-libraries first runs, with no engine, the library
calls every engine makes (cuBLAS matmuls, the sampler's ops) and 32 trivial Triton kernels, each phase followed
by the same memory figures: what of the first engine's one-time growth is those libraries' kernel images, and
what one more loaded Triton module costs.

    python scripts/maint/engine_leak.py --model /tmp/ckpt/qwen3-0.6b --json engine_leak.json
    python scripts/maint/engine_leak.py --device cpu --max-model-len 64   # the same walk on a CPU (no memory figures)
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys

import torch

from minivllm.bench.common import provenance, write_json

GiB = 1 << 30
ENGINES = [("default", {}), ("eager", {"enforce_eager": True}), ("mode 3", {"compilation_config": {"mode": 3}}),
           ("FULL", {"cudagraph_mode": "FULL"}), ("PIECEWISE", {"cudagraph_mode": "PIECEWISE"}), ("default", {})]


def memory_now(cuda: bool) -> dict:
    """What the process holds now, after a collection and the allocator's cache handed back.

    Live CUDA tensors are counted apart from fake ones: a cold torch.compile leaves FakeTensors of CUDA device
    (shapes only, no memory) in its ShapeEnv, which torch keeps in a class-level lru_cache
    (ShapeEnv._inner_evaluate_expr, keyed by the ShapeEnv); they outlive the engine but hold no device memory."""
    from torch._subclasses.fake_tensor import FakeTensor

    gc.collect()
    if not cuda:
        return {"free_gib": None, "allocated_gib": None, "cuda_tensors": None, "fake_cuda_tensors": None,
                "outside_allocator_gib": None, "stack_bytes_per_thread": None, "triton_modules_loaded": None}
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    objects = gc.get_objects()
    live = [o for o in objects if isinstance(o, torch.Tensor) and o.is_cuda]
    fake = sum(isinstance(o, FakeTensor) for o in live)
    # Triton kernels whose module is loaded into the context: what the first engine's growth is set against
    triton_loaded = sum(1 for o in objects
                        if type(o).__name__ == "CompiledKernel" and getattr(o, "module", None) is not None)
    free, total = torch.cuda.mem_get_info()
    return {"free_gib": round(free / GiB, 3),
            "allocated_gib": round(torch.cuda.memory_allocated() / GiB, 3), "cuda_tensors": len(live) - fake,
            "fake_cuda_tensors": fake,
            # the device memory in use that torch's allocator does not hold: the CUDA context, the kernel images
            # loaded into it, and its local-memory reservation
            "outside_allocator_gib": round((total - free - torch.cuda.memory_reserved()) / GiB, 3),
            "stack_bytes_per_thread": stack_limit(), "triton_modules_loaded": triton_loaded}


def stack_limit() -> int | None:
    """The context's per-thread stack (CU_LIMIT_STACK_SIZE). The driver reserves local memory for it on every
    thread the GPU can hold at once, and grows it, never shrinking, when a kernel needing more is loaded."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    size = ctypes.c_size_t()
    return size.value if cuda.cuCtxGetLimit(ctypes.byref(size), 0) == 0 else None


TRITON_PROBE_MODULES = 32
try:
    import triton
    import triton.language as tl

    @triton.jit
    def _add_k(x_ptr, K: tl.constexpr):
        """A kernel per K (a constexpr): each K is compiled and loaded as a module of its own."""
        offs = tl.arange(0, 64)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + K)
except ImportError:  # no Triton: the probe phase is a CUDA-only one anyway
    _add_k = None


def load_triton_modules(device: torch.device, n: int) -> None:
    """Compile and launch n trivial Triton kernels, one module each: what one more loaded kernel costs."""
    for k in range(1, n + 1):
        x = torch.zeros(64, device=device)
        _add_k[(1,)](x, K=k)
        assert x[0].item() == k, (k, x[0].item())


def library_phases(device: torch.device, vocab: int = 151936, hidden: int = 1024) -> list[dict]:
    """The library calls an engine makes, with no engine: after each phase, what the process holds."""
    import torch.nn.functional as F

    def cublas() -> None:
        for dtype in (torch.bfloat16, torch.float32):
            w = torch.randn(3 * hidden, hidden, device=device, dtype=dtype)
            for rows in (1, 2, 64, 512):
                F.linear(torch.randn(rows, hidden, device=device, dtype=dtype), w)

    def sampler() -> None:
        logits = torch.randn(64, vocab, device=device)
        probs = logits.softmax(-1)
        logits.argmax(-1), logits.topk(5, -1), logits.log_softmax(-1).sort(-1, descending=True)
        probs.div(torch.empty_like(probs).exponential_()).argmax(-1), torch.multinomial(probs, 1)
        probs.cumsum(-1)

    phases = [("context", lambda: torch.zeros(1, device=device)), ("cublas matmuls", cublas),
              ("sampler ops", sampler)]
    if device.type == "cuda":
        phases.append((f"{TRITON_PROBE_MODULES} triton modules",
                       lambda: load_triton_modules(device, TRITON_PROBE_MODULES)))
    rows = []
    for name, run in phases:
        run()
        rows.append({"phase": name, **memory_now(device.type == "cuda")})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="checkpoint directory (default: the embedded model)")
    p.add_argument("--device", default="auto")
    # long enough that free memory, not max_blocks (max_num_seqs x max_model_len x 2), sizes the KV cache: at 512
    # the cap decides and the KV check cannot see a leak
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--json", default=None)
    p.add_argument("--warm-libraries", action="store_true",
                   help="run the engines' library calls (cuBLAS, sampler ops) before the first engine")
    args = p.parse_args(argv)
    from minivllm import DEFAULT_MODEL, LLM, SamplingParams

    model = args.model or DEFAULT_MODEL
    cuda = args.device != "cpu" and torch.cuda.is_available()
    phases = library_phases(torch.device("cuda" if cuda else "cpu")) if args.warm_libraries else None
    rows = []
    for name, kwargs in ENGINES:
        before = memory_now(cuda)
        llm = LLM(model, device=args.device, max_model_len=args.max_model_len, **kwargs)
        out = llm.generate([{"prompt_token_ids": [1, 2, 3, 4]}],
                           SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False)
        rows.append({"engine": name, **{f"before_{k}": v for k, v in before.items()},
                     "kv_cache_tokens": llm.report.kv_cache_tokens, "compilation_mode": int(llm.config.compile_mode),
                     "cudagraph_mode": llm.config.cudagraph_mode.value,
                     "tokens": len(out[0].outputs[0].token_ids)})
        print(rows[-1], flush=True)
        del llm, out
    after = memory_now(cuda)
    first, last = rows[0], rows[-1]
    kv_drift = (first["kv_cache_tokens"] - last["kv_cache_tokens"]) / first["kv_cache_tokens"]
    free_drift = None if not cuda else round(first["before_free_gib"] - last["before_free_gib"], 3)
    free_drift_after_first = None if not cuda else round(rows[1]["before_free_gib"] - last["before_free_gib"], 3)
    verdict = {"cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING", "LAZY"),
               "kv_tokens_drift": round(kv_drift, 5), "kv_within_1pct": abs(kv_drift) <= 0.01,
               "free_gib_drift": free_drift, "free_gib_drift_from_the_second": free_drift_after_first,
               "free_within_0.2_gib": None if free_drift is None else free_drift <= 0.2}
    if cuda:  # what the process paid once: the context's growth outside the allocator, and its local memory
        props = torch.cuda.get_device_properties(0)
        sms, threads = props.multi_processor_count, props.max_threads_per_multi_processor
        grew = [r["before_outside_allocator_gib"] for r in rows] + [after["outside_allocator_gib"]]
        stacks = [r["before_stack_bytes_per_thread"] for r in rows] + [after["stack_bytes_per_thread"]]
        verdict["outside_allocator_gib_before_each_and_after"] = grew
        verdict["stack_bytes_per_thread_before_each_and_after"] = stacks
        if None not in stacks[:2]:
            verdict["local_memory_growth_gib_first_engine"] = round((stacks[1] - stacks[0]) * threads * sms / GiB, 3)
        verdict["triton_modules_loaded_by_the_first_engine"] = \
            rows[1]["before_triton_modules_loaded"] - rows[0]["before_triton_modules_loaded"]
    if phases and cuda:  # the last phase is the Triton probe (CUDA only)
        verdict["outside_allocator_gib_after_library_phases"] = phases[-1]["outside_allocator_gib"]
        grew_probe = phases[-1]["outside_allocator_gib"] - phases[-2]["outside_allocator_gib"]
        verdict["outside_allocator_mib_per_triton_module"] = round(grew_probe * 1024 / TRITON_PROBE_MODULES, 2)
    print(verdict)
    write_json(args.json, {"provenance": provenance(args, model), "library_phases": phases, "engines": rows,
                           "after_all": after, "verdict": verdict})
    return 0 if verdict["kv_within_1pct"] and verdict["free_within_0.2_gib"] is not False else 1


if __name__ == "__main__":
    sys.exit(main())
