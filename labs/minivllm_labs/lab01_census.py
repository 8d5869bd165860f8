"""Lab 01, b): the kernel census, how many ops Python dispatches and kernels the GPU runs in one decode step.

Why apart: profiler plumbing (ranges around each decoder layer, walking the event tree) is its own job; the
rest of the lab only needs the counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from minivllm_labs.lab01_timing import _cuda, _sync, quiet_stderr

LAYER_TAG = "lab01.layer"


def _prompts(llm, batch: int, length: int) -> list[dict]:
    vocab = min(llm.engine.model_config.vocab_size, 500)
    return [{"prompt_token_ids": [3 + (7 * i + 13 * j) % (vocab - 3) for j in range(length)]}
            for i in range(batch)]


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


# ---- b) kernel census ------------------------------------------------------------------------------------
@contextmanager
def _layer_ranges(model: torch.nn.Module) -> Iterator[int]:
    """Wrap each decoder layer's forward in a profiler range `lab01.layer<i>` (hooks, removed on exit)."""
    layers, handles, open_ranges = decoder_layers(model), [], {}

    def pre(i):
        def hook(_mod, _args):
            open_ranges[i] = torch.profiler.record_function(f"{LAYER_TAG}{i}")
            open_ranges[i].__enter__()
        return hook

    def post(i):
        def hook(_mod, _args, _out):
            open_ranges.pop(i).__exit__(None, None, None)
        return hook

    for i, layer in enumerate(layers):
        handles += [layer.register_forward_pre_hook(pre(i)), layer.register_forward_hook(post(i))]
    try:
        yield len(layers)
    finally:
        for h in handles:
            h.remove()


def _is_op(e) -> bool:
    return "::" in e.name and not e.name.startswith(LAYER_TAG)


def _is_copy(name: str) -> bool:
    return name.startswith(("Memcpy", "Memset", "memcpy", "memset"))


def _ops_under(e) -> int:
    """Ops dispatched from Python under event `e`: outermost `ns::op` events (an aten::linear that calls
    aten::addmm counts once, because Python paid for one call)."""
    return sum(1 if _is_op(c) else _ops_under(c) for c in e.cpu_children)


def _kernels_under(e) -> int:
    """GPU kernels launched anywhere under `e` (each is attached to the innermost op that launched it)."""
    own = sum(1 for k in e.kernels if not _is_copy(k.name) and not k.name.startswith(LAYER_TAG))
    return own + sum(_kernels_under(c) for c in e.cpu_children)


def kernel_census(llm) -> dict:
    """Profile one decode step of the engine (`engine.step()` with one running request).

    Counts the ops Python dispatches (any device) and, on CUDA, the kernels and copies the GPU runs: per
    step, and per decoder layer (through profiler ranges around each layer)."""
    from torch.profiler import ProfilerActivity, profile

    from minivllm import SamplingParams

    engine = llm.engine
    prompt = _prompts(llm, 1, 16)[0]["prompt_token_ids"]
    engine.add_request(engine.next_request_id(), prompt, SamplingParams(temperature=0, max_tokens=8,
                                                                         ignore_eos=True))
    engine.step()  # prefill
    engine.step()  # one decode step to warm up
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if _cuda() else [])
    with quiet_stderr(), _layer_ranges(llm.model_runner.model) as n_layers, profile(activities=acts) as prof:
        engine.step()
        _sync()
    while engine.has_unfinished_requests():
        engine.step()
    events = prof.events()
    roots = [e for e in events if e.cpu_parent is None and e.device_type.name == "CPU"]
    layer_events = [e for e in events if e.name.startswith(LAYER_TAG) and e.device_type.name == "CPU"]
    ops_step = sum(1 if _is_op(e) else _ops_under(e) for e in roots)
    res = {"device": "cuda" if _cuda() else "cpu", "num_layers": n_layers, "ops_per_step": ops_step,
           "ops_per_layer": _per_layer([_ops_under(e) for e in layer_events], n_layers)}
    if _cuda():
        gpu = [e for e in events if e.device_type.name == "CUDA" and not e.name.startswith(LAYER_TAG)]
        res["kernels_per_step"] = sum(1 for e in gpu if not _is_copy(e.name))
        res["copies_per_step"] = sum(1 for e in gpu if _is_copy(e.name))
        res["kernels_per_layer"] = _per_layer([_kernels_under(e) for e in layer_events], n_layers)
    return res


def _per_layer(counts: list[int], n_layers: int) -> float | None:
    """Mean over layers (all layers run the same code, so counts agree; None if nothing was attributed)."""
    if len(counts) != n_layers or n_layers == 0 or sum(counts) == 0:
        return None
    return round(sum(counts) / n_layers, 2)
