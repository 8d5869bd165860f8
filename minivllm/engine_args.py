"""EngineArgs: every engine setting once, with its default; LLM's keyword arguments, the command-line flags
and the config dataclasses are all made from it.

Why one dataclass: a setting written in four places (LLM's signature, the flags, the benchmarks and the
configs) drifts, one default at a time. As in vLLM's vllm/engine/arg_utils.py
(https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/engine/arg_utils.py), a field's default is read from the
config class that owns it (`max_num_seqs = SchedulerConfig.max_num_seqs`), `add_cli_args` turns the fields into
flags, and `create_engine_config` validates them against the checkpoint into an EngineConfig.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from minivllm import DEFAULT_MODEL
from minivllm.config import (
    ATTENTION_BACKENDS,
    CUDAGRAPH_MODES,
    DTYPES,
    CacheConfig,
    CompilationConfig,
    EngineConfig,
    SchedulerConfig,
    SpeculativeConfig,
    fixed_num_blocks,
    kv_bytes_per_block,
    resolve_device,
    resolve_dtype,
)
from minivllm.loader import check_model_dir, load_model_config
from minivllm.models.config import ModelConfig
from minivllm.models.footprint import check_fits

logger = logging.getLogger("minivllm")


def int_list(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. 1,2,4,8; got {s!r}") from None


def _env_flag(name: str) -> bool:
    """An environment switch read as vLLM reads it (vllm/envs.py: `bool(int(os.getenv(name, "0")))`)."""
    if not os.environ.get(name, "0").lstrip("-").isdigit():
        raise ValueError(f"{name} must be an integer (0 off, 1 on), got {os.environ[name]!r}")
    return bool(int(os.environ.get(name, "0")))


#: EngineConfig's own defaults (the keyword arguments of its resolution step)
ENGINE = {name: p.default for name, p in inspect.signature(EngineConfig.resolve).parameters.items()}


def _arg(default: Any, help: str, type: Any = None, choices: Any = None) -> Any:
    """A field with what its flag needs: the parser type when the default does not say it, and the choices."""
    return field(default=default, metadata={"help": help, "type": type, "choices": choices})


@dataclass
class EngineArgs:
    model: str | None = _arg(None, "local HF checkpoint directory (default: the embedded model)", str)
    dtype: str | torch.dtype = _arg("auto", "auto: on CUDA the checkpoint's fp16/bf16, bf16 for an fp32 checkpoint "
                                    "(as vLLM); float32 on a CPU", choices=list(DTYPES))
    device: str = _arg("auto", "auto (CUDA when present), cpu, cuda or cuda:N")
    max_model_len: int | None = _arg(None, "longest sequence (default: the model's max_position_embeddings)", int)
    max_num_seqs: int = _arg(SchedulerConfig.max_num_seqs, "sequences per step")
    max_num_batched_tokens: int | None = _arg(None, f"tokens per step (default: "
                                              f"{SchedulerConfig.max_num_batched_tokens}, at least max_model_len "
                                              f"without chunked prefill)", int)
    block_size: int = _arg(CacheConfig.block_size, "tokens per KV-cache block")
    gpu_memory_utilization: float = _arg(CacheConfig.gpu_memory_utilization, "share of the GPU this engine may use")
    kv_cache_memory_bytes: int | None = _arg(CacheConfig.kv_cache_memory_bytes, "KV-cache size in bytes", int)
    num_gpu_blocks_override: int | None = _arg(CacheConfig.num_gpu_blocks_override, "KV-cache size in blocks", int)
    enable_prefix_caching: bool = _arg(CacheConfig.enable_prefix_caching, "reuse the KV blocks of shared prefixes")
    enable_chunked_prefill: bool = _arg(SchedulerConfig.enable_chunked_prefill, "split long prompts over steps")
    async_scheduling: bool | None = _arg(SchedulerConfig.async_scheduling, "launch step n+1 before reading step "
                                         "n's tokens (default: on with CUDA)", bool)
    seed: int = _arg(ENGINE["seed"], "the sampler's seed")
    enforce_eager: bool = _arg(ENGINE["enforce_eager"], "no torch.compile, no CUDA graphs")
    attention_backend: str = _arg(ENGINE["attention_backend"], "attention kernels", choices=ATTENTION_BACKENDS)
    compilation_config: Any = _arg(None, 'a dict, a CompilationConfig, or JSON on the command line: \'{"mode": 3}\'',
                                   str)
    cudagraph_mode: str | None = _arg(CompilationConfig.cudagraph_mode, "CUDA graph mode (default: "
                                      "FULL_AND_PIECEWISE with graphs on)", str, CUDAGRAPH_MODES)
    cudagraph_capture_sizes: list[int] | None = _arg(CompilationConfig.cudagraph_capture_sizes,
                                                     "batch sizes to capture, e.g. 1,2,4,8", int_list)
    max_cudagraph_capture_size: int | None = _arg(CompilationConfig.max_cudagraph_capture_size,
                                                  "largest captured size (default: min(2 x max_num_seqs, 512))", int)
    skip_tokenizer_init: bool = _arg(ENGINE["skip_tokenizer_init"], "no tokenizer: token ids in, token ids out")
    fallback: str | None = _arg(ENGINE["fallback"], "auto: on a startup failure, diagnose it and turn off the "
                                "layer at fault (engine/fallback.py)", str, ("auto",))
    verify: bool = _arg(ENGINE["verify"], "compare greedy probes with an eager engine at startup")
    quantization: str | None = _arg(ENGINE["quantization"], "quantize the weights at load: fp8 (E4M3, one "
                                    "scale per output channel; activations per token)", str, ("fp8",))
    batch_invariant: bool = _arg(ENGINE["batch_invariant"], "results independent of the batch (as vLLM's "
                                 "VLLM_BATCH_INVARIANT=1, which also turns it on)")
    speculative_config: Any = _arg(None, 'speculative decoding, vLLM\'s n-gram method: a dict, or JSON on the '
                                   'command line: \'{"method": "ngram", "num_speculative_tokens": 4}\'', str)

    # ---- the command line ------------------------------------------------------------------------
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        """One flag per field, `--max-num-seqs` for max_num_seqs; bools also take `--no-...`."""
        for f in fields(EngineArgs):
            meta, flag = f.metadata, "--" + f.name.replace("_", "-")
            if isinstance(f.default, bool) or meta["type"] is bool:
                parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=meta["help"])
            else:
                parser.add_argument(flag, type=meta["type"] or type(f.default), default=f.default,
                                    choices=meta["choices"], help=meta["help"])
        return parser

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> "EngineArgs":
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def kwargs(self) -> dict[str, Any]:
        """The `LLM(...)` keyword arguments these args stand for."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # ---- the configs ---------------------------------------------------------------------------------
    def create_engine_config(self) -> tuple[EngineConfig, ModelConfig]:
        """Validate against the checkpoint and resolve every decision once: the frozen EngineConfig the
        engine runs with, and the model's config."""
        path = check_model_dir(DEFAULT_MODEL if self.model is None else self.model)  # "" is an error
        model_config = load_model_config(path)
        dev = resolve_device(self.device)
        dtype = resolve_dtype(self.dtype, model_config.torch_dtype, dev)
        max_len = self.max_model_len
        if max_len is not None and (not isinstance(max_len, int) or max_len < 2):
            raise ValueError(f"max_model_len must be an int >= 2, got {max_len!r}")
        if max_len is not None and max_len > model_config.max_position_embeddings:
            raise ValueError(f"max_model_len={max_len} exceeds the model's max_position_embeddings "
                             f"({model_config.max_position_embeddings})")
        check_fits(model_config, max_len or model_config.max_position_embeddings, dtype, dev, self.max_num_seqs,
                   self.block_size, "max_model_len" if max_len is not None else "max_position_embeddings",
                   str(path / "config.json"))
        cache = CacheConfig(self.block_size, self.gpu_memory_utilization, self.kv_cache_memory_bytes,
                            self.num_gpu_blocks_override, self.enable_prefix_caching)
        max_len = max_len or _fit_cpu_kv_cache(model_config, cache, dev, dtype, self.max_num_seqs)
        max_tokens = self.max_num_batched_tokens
        if max_tokens is None:
            max_tokens = SchedulerConfig.max_num_batched_tokens
            max_tokens = max_tokens if self.enable_chunked_prefill else max(max_len, max_tokens)
        config = EngineConfig.resolve(
            str(path), dtype=dtype, device=dev, max_model_len=max_len, seed=self.seed,
            enforce_eager=self.enforce_eager, attention_backend=self.attention_backend,
            skip_tokenizer_init=self.skip_tokenizer_init, fallback=self.fallback, verify=self.verify,
            batch_invariant=self.batch_invariant or _env_flag("VLLM_BATCH_INVARIANT"),
            quantization=self.quantization, cache=cache,
            scheduler=SchedulerConfig(self.max_num_seqs, max_tokens, self.enable_chunked_prefill,
                                      self.async_scheduling),
            compilation=CompilationConfig.from_any(self.compilation_config, cudagraph_mode=self.cudagraph_mode,
                                                   cudagraph_capture_sizes=self.cudagraph_capture_sizes,
                                                   max_cudagraph_capture_size=self.max_cudagraph_capture_size),
            speculative=SpeculativeConfig.from_any(self.speculative_config))
        if not self.enable_chunked_prefill and max_tokens < max_len:
            raise ValueError(f"max_num_batched_tokens ({max_tokens}) must be >= max_model_len ({max_len}) when "
                             f"enable_chunked_prefill=False, or a long prompt could never run")
        return config, model_config

    def with_off(self, compile_off: bool, graphs_off: bool) -> "EngineArgs":
        """These arguments with torch.compile and/or CUDA graphs turned off (a rung of the fallback ladder):
        the options only a compile mode has are dropped with it."""
        comp = CompilationConfig.from_any(self.compilation_config, cudagraph_mode=self.cudagraph_mode,
                                          cudagraph_capture_sizes=self.cudagraph_capture_sizes,
                                          max_cudagraph_capture_size=self.max_cudagraph_capture_size)
        changes: dict[str, Any] = {}
        if compile_off:
            changes.update(mode=0, compile_sizes=[], inductor_compile_config={}, compile_scope="model",
                           allow_graph_breaks=False)
        if graphs_off:
            changes["cudagraph_mode"] = "NONE"
        return replace(self, compilation_config=replace(comp, **changes), cudagraph_mode=None,
                       cudagraph_capture_sizes=None, max_cudagraph_capture_size=None)


def _fit_cpu_kv_cache(model_config: ModelConfig, cache: CacheConfig, device: torch.device, dtype: torch.dtype,
                      max_num_seqs: int) -> int:
    """max_model_len when none is given: the model's max_position_embeddings, lowered (with a log line) to what
    a KV cache of fixed size holds on a CPU, so nothing is sized from a length the cache cannot hold."""
    max_len = model_config.max_position_embeddings
    if device.type == "cuda":
        return max_len  # sized from free memory at startup: too small is an error there, never a lowering
    m = model_config
    per_block = kv_bytes_per_block(m.num_hidden_layers, m.num_key_value_heads, m.head_dim, cache.block_size, dtype)
    blocks = fixed_num_blocks(cache, device, max_len, per_block, max_num_seqs)
    if blocks * cache.block_size < max_len:
        logger.info("max_model_len lowered to %d to fit the KV cache", blocks * cache.block_size)
        return blocks * cache.block_size
    return max_len


def llm_kwargs(model: str | None, kwargs: dict[str, Any]) -> EngineArgs:
    """EngineArgs of `LLM(model, **kwargs)`; an unknown keyword is named, with the known ones."""
    known = {f.name for f in fields(EngineArgs)}
    for name in kwargs:
        if name not in known:
            raise TypeError(f"LLM() got an unexpected keyword argument {name!r}; the engine arguments are "
                            f"EngineArgs' fields (minivllm/engine_args.py): {sorted(known)}")
    return EngineArgs(model=model, **kwargs)
