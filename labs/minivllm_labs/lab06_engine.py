"""The engines and requests Lab 06 measures with (shared by lab06.py and lab06_graphs.py)."""

from __future__ import annotations

import gc

import torch

from minivllm_labs.common import max_positions, quiet_engine_logs


def _cuda() -> bool:
    return torch.cuda.is_available()


def _sync() -> None:
    if _cuda():
        torch.cuda.synchronize()


def make_llm(model: str, *, graphs: bool = False, max_model_len: int = 256, **kw):
    """An engine for these measurements. graphs=True means CUDA graphs on a GPU (eager on a CPU, where there
    are none); every other keyword goes to `LLM` unchanged."""
    from minivllm import LLM

    quiet_engine_logs()
    kw.setdefault("enforce_eager", not (graphs and _cuda()))
    max_len = min(max_model_len, max_positions(model))
    if not _cuda():  # the startup profile run is one forward of max_num_batched_tokens: 8192 costs seconds on a CPU
        kw.setdefault("max_num_batched_tokens", max(256, max_len))
    return LLM(model=model, max_model_len=max_len, **kw)


def free(llm) -> None:
    """Release an engine's memory before the next one sizes its KV cache from what is free."""
    llm.shutdown()
    gc.collect()
    if _cuda():
        torch.cuda.empty_cache()


def _ids(n: int, salt: int, vocab: int) -> list[int]:
    return [3 + (7 * salt + 13 * j + salt * j) % (vocab - 3) for j in range(n)]


def _greedy(max_tokens: int):
    from minivllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
