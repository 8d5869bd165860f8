"""Lab 02, section a): the handbook's capture/replay snippet and its three limits, on a raw torch graph.

Each function is one notebook cell that breaks (or, for the allocation limit, does not): the notebook prints
its source next to its recorded output. The RNG cell is here too: it is a raw graph as well. All of them
return {"device": "cpu"} without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch


def _cuda() -> bool:
    return torch.cuda.is_available()


# ---- a) the handbook's snippet and its three limits, on a raw torch graph --------------------------------
def _toy(dev: str = "cuda"):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64, device=dev)
    return lin, torch.randn(8, 64, device=dev)


@torch.inference_mode()
def capture_replay() -> dict:
    """The handbook's snippet: capture once on a static input, then copy_ new data in and replay."""
    if not _cuda():
        return {"device": "cpu"}
    model, static_input = _toy()
    model(static_input)  # warm-up outside the capture: cuBLAS creates its handle and workspace here
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_output = model(static_input)
    real = torch.randn_like(static_input)
    static_input.copy_(real)  # the input copied into the fixed tensor
    g.replay()
    diff = (static_output - model(real)).abs().max().item()
    return {"device": "cuda", "replay_matches_eager": diff < 1e-5, "max_abs_diff": diff}


@torch.inference_mode()
def limit_fixed_address() -> dict:
    """Limit 1: rebinding the Python name instead of copy_ - the graph still reads the old tensor."""
    if not _cuda():
        return {"device": "cpu"}
    model, static_input = _toy()
    old = static_input.clone()
    model(static_input)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_output = model(static_input)
    captured = static_input  # keep the captured tensor alive, or the allocator could hand its block (the
    # address the graph reads) to the new tensor below, and the replay would see the new data by accident
    static_input = torch.randn_like(old)  # a NEW tensor at a new address; the graph never sees it
    g.replay()
    new_ok = torch.allclose(static_output, model(static_input), atol=1e-5)
    old_ok = torch.allclose(static_output, model(old), atol=1e-5)
    del captured
    return {"device": "cuda", "output_is_for_new_input": new_ok, "output_is_for_old_input": old_ok,
            "error_raised": False}


@torch.inference_mode()
def limit_branch() -> dict:
    """Limit 2: a branch decided on the host (here a CPU flag, like a Python int of the batch metadata)
    is taken once, at capture. Replay runs the captured branch whatever the flag says now: no error."""
    if not _cuda():
        return {"device": "cpu"}
    x = torch.ones(4, device="cuda")
    use_add = torch.tensor([1])  # CPU tensor: reading it is not a device sync

    def step() -> torch.Tensor:
        return x + 1 if use_add.item() == 1 else x - 1

    step()  # warm-up outside the capture (kernels load on first use)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    use_add[0] = 0  # the data now says "subtract"
    g.replay()
    return {"device": "cuda", "eager_result": step().tolist(), "replay_result": out.tolist(),
            "replay_matches_eager": torch.equal(out, step()), "error_raised": False}


@torch.inference_mode()
def alloc_inside_capture() -> dict:
    """Limit 3 as the handbook states it ("no allocation inside a graph"): allocate inside a capture.
    It works: the caching allocator serves it from the graph's private pool, at the same address every
    replay."""
    if not _cuda():
        return {"device": "cpu"}
    x = torch.randn(1024, 1024, device="cuda")
    x * torch.empty(4 << 20, device="cuda").fill_(2.0)[: x.numel()].view_as(x)  # warm-up: load the kernels
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tmp = torch.empty(4 << 20, device="cuda")  # 16 MiB, allocated inside the capture
        tmp.fill_(2.0)
        y = x * tmp[: x.numel()].view_as(x)  # and another new tensor for the result
    x.copy_(torch.randn_like(x))
    g.replay()
    ok = torch.allclose(y, x * 2)
    return {"device": "cuda", "capture_ok": True, "replay_correct": ok,
            "pool_mib": (torch.cuda.memory_reserved() - before) / 2**20}


HOST_SYNC_CODE = """
import json, torch
x = torch.ones(4, device="cuda")
x + 1
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
res = {"device": "cuda", "error_raised": False}
try:
    with torch.cuda.graph(g):
        if (x.sum() > 0).item():   # a host sync: the CPU waits for a GPU value
            y = x * 2
except Exception as e:
    chain, err = [], e
    while err is not None and len(chain) < 3:   # the sync's own error, and what ending the capture said
        msg = str(err).strip().splitlines()
        chain.append({"type": type(err).__name__, "message": msg[0] if msg else ""})
        err = err.__context__
    root = chain[-1]
    res.update(error_raised=True, error_type=root["type"], message=root["message"], chain=chain)
print("RESULT" + json.dumps(res))
"""


def host_sync_inside_capture(timeout_s: int = 180) -> dict:
    """What does fail: `.item()` of a CUDA tensor inside a capture. Run in a child process, because a
    failed capture can leave the CUDA context (and the RNG) unusable for the rest of this one."""
    if not _cuda():
        return {"device": "cpu"}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run([sys.executable, "-c", HOST_SYNC_CODE], capture_output=True, text=True, timeout=timeout_s,
                       env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
    if not lines:
        return {"device": "cuda", "error_raised": True, "error_type": "child process failed",
                "message": (p.stderr.strip().splitlines() or [""])[-1]}
    return json.loads(lines[-1][len("RESULT"):])


@torch.inference_mode()
def rng_in_graph(replays: int = 3) -> dict:
    """The article: "replay reuses the capture's RNG seed, so results never change". A sampling step
    (the exponential-race sampler vLLM uses: argmax(p / q), q ~ Exp(1), `random_sample` in
    https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/sample/ops/topk_topp_sampler.py)
    captured once, replayed 3 times."""
    if not _cuda():
        return {"device": "cpu"}
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(4, 1000, device="cuda"), dim=-1)
    (probs / torch.empty_like(probs).exponential_()).argmax(dim=-1)  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q = torch.empty_like(probs).exponential_()
        sample = (probs / q).argmax(dim=-1)
    samples = []
    for _ in range(replays):
        g.replay()
        samples.append(sample.tolist())
    distinct = len({tuple(s) for s in samples})
    return {"device": "cuda", "samples": samples, "distinct": distinct, "replays": replays}


def graph_limits() -> dict:
    """Every cell of section a), in the order the notebook shows them (the host sync last)."""
    return {"snippet": capture_replay(), "fixed_address": limit_fixed_address(), "branch": limit_branch(),
            "alloc": alloc_inside_capture(), "host_sync": host_sync_inside_capture()}
