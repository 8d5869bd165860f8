"""The transformers baselines the benchmarks compare against, on the same checkpoint and the same prompts.

Why three of them: `generate` with its default dynamic cache is what most people run first (hf); a static
cache plus torch.compile is transformers' own answer to per-token Python overhead (hf-compile); and
continuous batching (`init_continuous_batching`, paged attention) is its answer to throughput. Beating only
the first would prove little. `bench latency` and `bench throughput` load this file by path for --compare
(minivllm/bench/cli.py, maint_script): it is the yardstick, not the engine.
"""

from __future__ import annotations

import time

import torch
from tqdm.auto import tqdm

from minivllm.bench.common import sync, timed


def load(path: str, dtype: torch.dtype, device: torch.device):
    from transformers import AutoModelForCausalLM

    # as the engine's loader: safetensors only (no pickle), no code from the checkpoint, nothing downloaded
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa", use_safetensors=True,
                                                 trust_remote_code=False, local_files_only=True)
    return model.to(device).eval()


def _static_compile_kwargs(model) -> dict:
    """transformers 5's documented recipe: a fixed-size ("static") cache makes `generate` torch.compile the
    decode step by itself (on CUDA; prefill stays eager). Calling torch.compile(model) ourselves is what
    the docs say to avoid. fullgraph + reduce-overhead (CUDA graphs) is the fastest setting."""
    from transformers import CompileConfig

    cap = 256  # one graph per batch size and cache length: raise Dynamo's recompile limit
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), cap))
    return dict(cache_implementation="static",
                compile_config=CompileConfig(fullgraph=True, mode="reduce-overhead"))


@torch.no_grad()  # what generate itself uses (inference tensors can trip the static cache)
def generate_latency(model, prompts: list[list[int]], new_tokens: int, static_compile: bool) -> dict:
    """TTFT = time of a 1-token generate; TPOT = (time(N tokens) - time(1 token)) / (N - 1).

    All prompts have the same length, so there is no padding. min_new_tokens = max_new_tokens keeps EOS from
    ending a sequence early. One warm-up of each length first (for hf-compile: the compile and the graphs)."""
    ids = torch.tensor(prompts, device=model.device)
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, pad_token_id=0)
    if static_compile:
        kw.update(_static_compile_kwargs(model))

    def gen(n: int):
        return model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)

    for n in (new_tokens, 1):
        gen(n)
    out, t_n = timed(lambda: gen(new_tokens))
    assert out.shape[1] == ids.shape[1] + new_tokens
    _, t_1 = timed(lambda: gen(1))
    tpot = (t_n - t_1) / (new_tokens - 1) if new_tokens > 1 else None
    return {"ttft_s": t_1, "tpot_s": tpot, "output_tok_s": len(prompts) * new_tokens / t_n, "wall_s": t_n,
            "compiled": static_compile and model.device.type == "cuda"}


@torch.no_grad()  # what generate itself uses (inference tensors can trip the static cache)
def static_batch(model, prompts: list[list[int]], new_tokens: int, temperature: float) -> dict:
    """Static-cache (compiled on CUDA) batched generate: prompts left-padded to one length, all decode the
    same number of tokens. The classic "just batch it" baseline: no continuous batching, padding wasted."""
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    kw = dict(attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0,
              do_sample=temperature > 0, **_static_compile_kwargs(model))
    if temperature > 0:
        kw["temperature"] = temperature
    model.generate(ids, **kw)  # warm-up: compile and capture at these shapes
    _, wall = timed(lambda: model.generate(ids, **kw))
    return {"batch": len(prompts), "prompt_len_padded": width, "new_tokens": new_tokens, "wall_s": wall,
            "output_tok_s": len(prompts) * new_tokens / wall, "compiled": model.device.type == "cuda"}


def continuous_batching(model, prompts: list[list[int]], max_tokens: list[int], temperature: float,
                        time_cap: float) -> dict:
    """transformers' continuous batching (ContinuousBatchingManager, paged attention) on the same requests.

    It may be much slower than the engine, so it runs under a time cap: results are collected until all
    requests finish or the cap is reached, then the manager is hard-stopped, which hands back the
    unfinished requests with the tokens they had so far. tok/s counts every token produced, finished or not.
    (Not under inference_mode: the manager's thread updates tensors that warm-up would then have created as
    inference tensors, which fails.)"""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching.utils import WorkloadHints

    gen_cfg = GenerationConfig(max_new_tokens=max(max_tokens), do_sample=temperature > 0, eos_token_id=-1,
                               pad_token_id=0, **({"temperature": temperature} if temperature > 0 else {}))
    hints = WorkloadHints(max(map(len, prompts)), max(max_tokens), len(prompts))
    # On CUDA the KV cache is sized from free memory; on CPU that path allocates far too much, so be explicit.
    cb_cfg = None if model.device.type == "cuda" else ContinuousBatchingConfig(
        block_size=16, num_blocks=(sum(map(len, prompts)) + sum(max_tokens)) // 16 + 2 * len(prompts),
        max_batch_tokens=512)
    manager = model.init_continuous_batching(generation_config=gen_cfg, continuous_batching_config=cb_cfg,
                                             workload_hints=hints)
    attn = model.config._attn_implementation  # switched to a paged one; stop() switches it back
    t0 = time.perf_counter()
    manager.warmup()  # captures its CUDA graphs: startup, not part of the timed run
    warmup_s = time.perf_counter() - t0
    manager.start()
    sync()
    t0 = time.perf_counter()
    for p, n in zip(prompts, max_tokens):
        manager.add_request(p, max_new_tokens=n, eos_token_id=-1)  # eos -1: ignore EOS, like ignore_eos
    done = {}
    with tqdm(total=len(prompts), desc="transformers continuous batching") as bar:
        while len(done) < len(prompts) and time.perf_counter() - t0 < time_cap:
            r = manager.get_result(timeout=0.1)
            if r is not None and r.is_finished():
                done[r.request_id] = r
                bar.update(1)
            elif r is None and not manager.is_running():
                break
    wall = time.perf_counter() - t0  # (a hard stop lets the step in flight finish: at most one more step)
    capped = len(done) < len(prompts)
    manager.stop(block=True, timeout=60, hard_stop=capped)
    partial = []  # the unfinished requests, handed back with the tokens they had
    while (r := manager.get_result(timeout=0.1)) is not None:
        partial.append(r)
    manager.destroy()
    tokens = sum(len(r.generated_tokens) for r in [*done.values(), *partial])
    return {"finished_requests": sum(r.error is None for r in done.values()), "num_requests": len(prompts),
            "capped": capped, "time_cap_s": time_cap, "wall_s": wall, "output_tokens": tokens,
            "output_tok_s": tokens / wall, "warmup_s": warmup_s, "attn_implementation": attn,
            "errors": sorted({r.error for r in done.values() if r.error is not None})[:3]}
