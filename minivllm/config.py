"""Engine configuration as validated dataclasses.

Why dataclasses: every knob a learner can turn lives in one place, with its default, its allowed range and
the error message that names it. vLLM splits its configuration the same way (model / cache / scheduler /
compilation), so the names here transfer.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from minivllm.compilation.passes.pass_config import PassConfig

logger = logging.getLogger("minivllm")

class CUDAGraphMode(str, enum.Enum):
    """Which CUDA graphs the engine captures: vLLM's five modes, with vLLM's meanings
    (vllm/config/compilation.py; docs/design/cuda_graphs.md).

    NONE: no graphs. PIECEWISE: the pieces between attention ops, keyed by token count (attention runs
    eagerly between them), so prefill, mixed and decode batches all replay; needs the split trace (mode 3).
    FULL: one graph of the whole forward per token count, for every batch: prefill, mixed and decode alike,
    padded up to the nearest capture size; attention is the unified Triton kernel
    (kernels/triton_unified_attention.py), whose launch depends on the token count only.
    FULL_DECODE_ONLY: one full graph of the forward per batch size for pure-decode batches, nothing for the
    rest. Every full graph leaves the LM head outside, as in vLLM (it runs on the sampled rows only), and
    needs attention_backend 'triton' (else the mode is downgraded). FULL_AND_PIECEWISE:
    FULL_DECODE_ONLY's graphs for pure decode, PIECEWISE for the rest (vLLM's default). A mode that cannot
    run is downgraded, with one log line, as vLLM does (EngineConfig.resolve). A str enum, so
    `mode == "FULL"` and JSON dumps keep working.

    FULL and PIECEWISE are also the two runtime modes a step runs in (what the dispatcher picks and a
    CUDAGraphWrapper captures)."""

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"

    @property
    def has_full(self) -> bool:
        """Full graphs are captured: of any batch by token count (FULL) or of pure decode by batch size."""
        return self in (CUDAGraphMode.FULL, CUDAGraphMode.FULL_DECODE_ONLY, CUDAGraphMode.FULL_AND_PIECEWISE)

    @property
    def has_piecewise(self) -> bool:
        return self in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL_AND_PIECEWISE)

    def __str__(self) -> str:
        return self.value


class CompilationMode(enum.IntEnum):
    """vLLM's compilation modes (`compilation_config={"mode": N}`, `-O0`..`-O3`; vllm/config/compilation.py).
    What each does to the forward: compilation/levels.py. Only VLLM_COMPILE splits the trace at attention,
    which PIECEWISE graphs need."""

    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


CUDAGRAPH_MODES = tuple(m.value for m in CUDAGraphMode)
ATTENTION_BACKENDS = ("auto", "triton", "torch", "unregistered")
DTYPES = {"auto": None, "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
          "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16,
          "fp16": torch.float16, "half": torch.float16}


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def is_int(value: Any) -> bool:
    """An int that is not a bool (`True` is an int in Python; `max_num_seqs=True` must not mean 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_bool(value: Any, name: str) -> None:
    """Bools only: a string such as "no" is truthy, so accepting it would silently mean True."""
    _check(isinstance(value, bool), f"{name} must be True or False, got {value!r}")


def check_seed(value: Any, name: str) -> None:
    """Seeds go into torch.Generator.manual_seed, which takes a 64-bit integer."""
    _check(is_int(value) and -(1 << 63) <= value < 1 << 63,
           f"{name} must be an int in [-2**63, 2**63 - 1] (a 64-bit integer), got {value!r}")


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' means CUDA when present, else CPU. Only 'auto', 'cpu', 'cuda' and 'cuda:N' are engine devices;
    anything else ('gpu', 'tpu', 'mps', ...) is refused here, before torch's own device-string error."""
    if isinstance(device, torch.device):
        return device
    allowed = "'auto', 'cpu', 'cuda' or 'cuda:N' (N a GPU index)"
    _check(isinstance(device, str), f"device must be {allowed}, got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, sep, index = device.partition(":")
    _check(device == "cpu" or (kind == "cuda" and (not sep or index.isdigit())),
           f"device must be {allowed}, got {device!r}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was asked for but CUDA is not available; use device='cpu' or 'auto'")
    return dev


def resolve_dtype(dtype: str | torch.dtype, config_dtype: torch.dtype | None, device: torch.device) -> torch.dtype:
    """'auto': on CUDA the checkpoint's fp16/bf16, and bf16 for an fp32 checkpoint (vLLM's `_resolve_auto_dtype`
    in vllm/config/model.py downcasts fp32 models too: ask for dtype='float32' to keep fp32); fp32 on a CPU
    (CPU half math is slow)."""
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    else:
        _check(isinstance(dtype, str) and dtype in DTYPES,
               f"dtype must be one of {sorted(DTYPES)} or a torch.dtype, got {dtype!r}")
        resolved = DTYPES[dtype]
    if resolved is None:
        if device.type == "cpu":
            resolved = torch.float32
        else:
            resolved = config_dtype if config_dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
    _check(resolved in (torch.float32, torch.float16, torch.bfloat16),
           f"dtype must be float32, float16 or bfloat16, got {resolved}")
    return resolved


@dataclass(frozen=True)
class CacheConfig:
    """Paged KV cache: blocks of `block_size` tokens, sized from memory or given directly."""

    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    enable_prefix_caching: bool = True

    def __post_init__(self) -> None:
        _check(is_int(self.block_size) and self.block_size in (8, 16, 32, 64, 128),
               f"block_size must be one of 8, 16, 32, 64, 128, got {self.block_size!r}")
        _check(not isinstance(self.gpu_memory_utilization, bool)
               and isinstance(self.gpu_memory_utilization, (int, float)) and 0 < self.gpu_memory_utilization <= 1,
               f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")
        if self.kv_cache_memory_bytes is not None:
            _check(is_int(self.kv_cache_memory_bytes) and self.kv_cache_memory_bytes > 0,
                   f"kv_cache_memory_bytes must be a positive int, got {self.kv_cache_memory_bytes!r}")
        if self.num_gpu_blocks_override is not None:
            _check(is_int(self.num_gpu_blocks_override) and self.num_gpu_blocks_override >= 2,
                   f"num_gpu_blocks_override must be an int >= 2, got {self.num_gpu_blocks_override!r}")
        check_bool(self.enable_prefix_caching, "enable_prefix_caching")


@dataclass(frozen=True)
class SchedulerConfig:
    """Continuous batching limits: how many sequences and how many tokens one step may carry."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_chunked_prefill: bool = True
    # Launch step n+1 before reading step n's tokens (CPU work overlaps GPU work). None: on for CUDA.
    async_scheduling: bool | None = None

    def __post_init__(self) -> None:
        _check(is_int(self.max_num_seqs) and 1 <= self.max_num_seqs <= 4096,
               f"max_num_seqs must be an int in [1, 4096], got {self.max_num_seqs!r}")
        _check(is_int(self.max_num_batched_tokens) and self.max_num_batched_tokens >= 1,
               f"max_num_batched_tokens must be an int >= 1, got {self.max_num_batched_tokens!r}")
        _check(self.async_scheduling in (None, True, False),
               f"async_scheduling must be None, True or False, got {self.async_scheduling!r}")
        check_bool(self.enable_chunked_prefill, "enable_chunked_prefill")


@dataclass(frozen=True)
class CompilationConfig:
    """torch.compile and CUDA graph settings as ASKED, in vLLM's vocabulary (what runs: EngineConfig).

    mode (CompilationMode): 0 NONE, 1 STOCK_TORCH_COMPILE, 2 DYNAMO_TRACE_ONCE, 3 VLLM_COMPILE. None, the
    default, is this engine's fastest measured configuration: mode 3 with the hand-written Triton kernels as
    the pieces' ops (custom_ops ["all"]) on CUDA, mode 0 on a CPU (README, "Where minivllm differs from
    vLLM"). `level` is the name vLLM used before 0.11: accepted, with a deprecation warning.
    compile_scope and allow_graph_breaks: the labs' variants of mode 1 (compilation/variants.py).
    """

    mode: int | None = None
    backend: str = "inductor"
    custom_ops: list[str] | str | None = None  # None: hand-written kernels, except Inductor's when mode >= 1 is asked
    compile_sizes: list[int] = field(default_factory=list)  # mode 3: extra static-shape compiles per piece
    inductor_compile_config: dict = field(default_factory=dict)  # Inductor config patches, e.g. max_autotune
    pass_config: PassConfig = field(default_factory=PassConfig)  # the engine's FX passes (compilation/passes)
    compile_scope: str = "model"  # "model" | "layer" | "ops": the handbook's three scopes (labs only)
    allow_graph_breaks: bool = False  # mode 1 without fullgraph (labs only; vLLM has no such option)
    cache_dir: str | None = None
    cudagraph_mode: str | None = None  # None -> FULL_AND_PIECEWISE when graphs are on, NONE when eager
    cudagraph_capture_sizes: list[int] | None = None
    max_cudagraph_capture_size: int | None = None

    @property
    def level(self) -> int | None:
        """The old name of `mode`."""
        return self.mode

    def __post_init__(self) -> None:
        if self.mode is not None:
            _check(is_int(self.mode) and self.mode in (0, 1, 2, 3),
                   f"compilation_config.mode must be 0 (NONE), 1 (STOCK_TORCH_COMPILE), 2 (DYNAMO_TRACE_ONCE) "
                   f"or 3 (VLLM_COMPILE), got {self.mode!r}")
        _check(self.backend in ("inductor", "eager", "aot_eager"),
               f"compilation_config.backend must be 'inductor', 'eager' or 'aot_eager', got {self.backend!r}")
        _check(self.compile_scope in ("model", "layer", "ops"),
               f"compilation_config.compile_scope must be 'model', 'layer' or 'ops', got {self.compile_scope!r}")
        check_bool(self.allow_graph_breaks, "compilation_config.allow_graph_breaks")
        _check(not self.allow_graph_breaks or self.mode == 1,
               f"compilation_config.allow_graph_breaks needs mode 1 (stock torch.compile): modes 2 and 3 trace "
               f"the forward once as one graph; got mode {self.mode}")
        _check(self.compile_scope == "model" or self.mode == 1,
               f"compilation_config.compile_scope={self.compile_scope!r} needs mode 1 (stock torch.compile of "
               f"each layer or op); got mode {self.mode}")
        _check(isinstance(self.compile_sizes, (list, tuple)) and all(is_int(n) and n >= 1 for n in self.compile_sizes),
               f"compilation_config.compile_sizes must be a list of positive ints, got {self.compile_sizes!r}")
        _check(not self.compile_sizes or (self.mode in (None, 3) and self.backend == "inductor"),
               f"compilation_config.compile_sizes needs mode 3 with the inductor backend (each piece of the "
               f"split graph is compiled once more for each of these token counts, as vLLM does); got mode "
               f"{self.mode}, backend {self.backend!r}")
        _check(isinstance(self.inductor_compile_config, dict)
               and all(isinstance(k, str) for k in self.inductor_compile_config),
               f"compilation_config.inductor_compile_config must be a dict of Inductor config names to values "
               f"(e.g. {{\"max_autotune\": true}}), got {self.inductor_compile_config!r}")
        _check(not self.inductor_compile_config or (self.mode != 0 and self.backend == "inductor"),
               f"compilation_config.inductor_compile_config needs Inductor to compile: mode >= 1 with the "
               f"inductor backend; got mode {self.mode}, backend {self.backend!r}")
        _check(isinstance(self.pass_config, PassConfig),
               f"compilation_config.pass_config must be a PassConfig (CompilationConfig.from_any reads a dict "
               f"such as {{\"fuse_norm_quant\": true}}), got {self.pass_config!r}")
        _check(not self.pass_config.enabled() or (self.mode != 0 and self.backend == "inductor"),
               f"compilation_config.pass_config {self.pass_config.enabled()} needs Inductor to compile (the passes "
               f"run inside it on each compiled graph): mode >= 1 with the inductor backend; got mode {self.mode}, "
               f"backend {self.backend!r}")
        if self.cudagraph_mode is not None:
            _check(isinstance(self.cudagraph_mode, str) and self.cudagraph_mode in CUDAGRAPH_MODES,
                   f"cudagraph_mode must be one of {CUDAGRAPH_MODES}, got {self.cudagraph_mode!r}")
        if self.cudagraph_capture_sizes is not None:
            _check(isinstance(self.cudagraph_capture_sizes, (list, tuple))
                   and all(is_int(s) and s >= 1 for s in self.cudagraph_capture_sizes),
                   f"cudagraph_capture_sizes must be a list of positive ints, got {self.cudagraph_capture_sizes!r}")
        if self.max_cudagraph_capture_size is not None:
            _check(is_int(self.max_cudagraph_capture_size) and self.max_cudagraph_capture_size >= 1,
                   f"max_cudagraph_capture_size must be an int >= 1, got {self.max_cudagraph_capture_size!r}")

    def resolved_custom_ops(self) -> list[str]:
        """As vLLM: where a compile mode is asked for, Inductor generates (and fuses) the small ops; else, and
        in the default configuration (measured fastest on the H200), the hand-written kernels run."""
        if self.custom_ops is not None:
            return [self.custom_ops] if isinstance(self.custom_ops, str) else list(self.custom_ops)
        return ["none"] if self.mode is not None and self.mode >= 1 and self.backend == "inductor" else ["all"]

    @classmethod
    def from_any(cls, value: Any, **overrides: Any) -> "CompilationConfig":
        """Accept a CompilationConfig, a dict, a JSON string (the CLI form) or None; `overrides` (EngineArgs'
        own graph fields) replace keys that are not None."""
        if value is None:
            value = {}
        elif isinstance(value, cls):
            value = {f.name: getattr(value, f.name) for f in fields(cls)}
        elif isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"compilation_config is not valid JSON: {e}") from None
        if not isinstance(value, dict):
            raise TypeError(f"compilation_config must be a dict, JSON string or CompilationConfig, got {type(value)}")
        if "level" in value:  # vLLM renamed level -> mode in its 0.11 line
            _check("mode" not in value, "compilation_config has both 'mode' and its deprecated alias 'level'; "
                                        "give 'mode' only")
            warnings.warn("compilation_config 'level' is deprecated (vLLM renamed it 'mode'); use "
                          f"{{\"mode\": {value['level']!r}}}", DeprecationWarning, stacklevel=5)
            value = {**{k: v for k, v in value.items() if k != "level"}, "mode": value["level"]}
        known = set(cls.__dataclass_fields__)
        unknown = set(value) - known
        _check(not unknown, f"compilation_config has unknown keys {sorted(unknown)}; known: {sorted(known)}")
        if "pass_config" in value:  # a dict with vLLM's field names (and its deprecated ones, with a warning)
            value = {**value, "pass_config": PassConfig.from_any(value["pass_config"])}
        return cls(**{**value, **{k: v for k, v in overrides.items() if v is not None}})

    def resolved_cache_dir(self) -> Path:
        root = self.cache_dir or os.environ.get("MINIVLLM_CACHE_DIR") or "~/.cache/minivllm"
        return Path(root).expanduser()


SPECULATIVE_METHODS = ("ngram",)
MAX_SPECULATIVE_TOKENS = 8


@dataclass(frozen=True)
class SpeculativeConfig:
    """Speculative decoding with vLLM's n-gram method (prompt lookup; vllm/config/speculative.py): the longest
    suffix of a sequence, between prompt_lookup_min and prompt_lookup_max tokens, that occurred earlier in it
    proposes the (up to) num_speculative_tokens tokens that followed it; one step of 1 + k query tokens per
    request verifies them (spec_decode/). Defaults as vLLM's: neither bound given, both are 5; one given, the
    other takes its value. Draft models, EAGLE and MTP are not built (book/differs_from_vllm.md)."""

    num_speculative_tokens: int
    method: str = "ngram"
    prompt_lookup_max: int = 5
    prompt_lookup_min: int = 5

    def __post_init__(self) -> None:
        _check(self.method in SPECULATIVE_METHODS,
               f"speculative_config.method must be one of {list(SPECULATIVE_METHODS)} (EAGLE, MTP and draft models "
               f"are not built here), got {self.method!r}")
        _check(is_int(self.num_speculative_tokens) and 1 <= self.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS,
               f"speculative_config.num_speculative_tokens must be an int in [1, {MAX_SPECULATIVE_TOKENS}], "
               f"got {self.num_speculative_tokens!r}")
        for name in ("prompt_lookup_min", "prompt_lookup_max"):
            value = getattr(self, name)
            _check(is_int(value) and value >= 1, f"speculative_config.{name} must be an int >= 1, got {value!r}")
        _check(self.prompt_lookup_min <= self.prompt_lookup_max,
               f"speculative_config.prompt_lookup_min ({self.prompt_lookup_min}) must be <= prompt_lookup_max "
               f"({self.prompt_lookup_max})")

    @classmethod
    def from_any(cls, value: Any) -> "SpeculativeConfig | None":
        """A SpeculativeConfig, a dict, a JSON string (the CLI's --speculative-config) or None (off)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"speculative_config is not valid JSON: {e}") from None
        _check(isinstance(value, dict), f"speculative_config must be a dict, a JSON string or a SpeculativeConfig, "
                                        f"got {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        _check(not unknown, f"speculative_config has unknown fields {unknown}; known: {sorted(known)}")
        _check("num_speculative_tokens" in value,
               "speculative_config.num_speculative_tokens is required (vLLM has no default for the ngram method)")
        value = dict(value)
        if value.get("method", "ngram") == "[ngram]":  # vLLM's older spelling
            value["method"] = "ngram"
        lo, hi = value.get("prompt_lookup_min"), value.get("prompt_lookup_max")
        for name, v in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):  # before one takes the other's
            _check(v is None or (is_int(v) and v >= 1), f"speculative_config.{name} must be an int >= 1, got {v!r}")
        if lo is None and hi is None:
            lo = hi = 5
        value["prompt_lookup_min"] = hi if lo is None else lo
        value["prompt_lookup_max"] = lo if hi is None else hi
        return cls(**value)


def default_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default: 1, 2, 4, then every 8 up to 256, then every 16, capped at max_size."""
    sizes = [1, 2, 4] + list(range(8, 257, 8)) + list(range(272, 1025, 16))
    return [s for s in sizes if s <= max_size]


@dataclass(frozen=True)
class EngineConfig:
    """Every decision the engine runs with, made once by `EngineConfig.resolve` (vLLM's create_engine_config)
    and frozen: later code reads it, nothing writes it. The fallback ladder resolves a new one per rung."""

    model: str
    dtype: torch.dtype
    device: torch.device
    max_model_len: int  # lowered to what a CPU's fixed-size KV cache holds, before anything is sized from it
    seed: int
    enforce_eager: bool
    attention_backend: str  # what runs: "triton", "torch" or "unregistered" ("auto" resolved)
    skip_tokenizer_init: bool  # vLLM's flag: token ids in, token ids out, no text
    fallback: str | None  # "auto": walk the fallback ladder on a startup failure (engine/fallback.py)
    verify: bool  # greedy probes through this engine vs an eager one at startup
    batch_invariant: bool  # every reduction's order independent of the batch (layers/custom_op.py)
    quantization: str | None  # "fp8": weights quantized at load (minivllm/quantization)
    async_scheduling: bool
    cache: CacheConfig
    scheduler: SchedulerConfig
    compilation: CompilationConfig  # as asked; what runs is below
    compile_mode: CompilationMode
    cudagraph_mode: CUDAGraphMode  # after vLLM's downgrades
    cudagraph_downgrade: str | None  # why the asked-for graph mode is not the one that runs (logged once)
    custom_ops: tuple[str, ...]
    cudagraph_capture_sizes: tuple[int, ...]  # vLLM's rule, before the per-kind floors and caps below
    full_capture_sizes: tuple[int, ...]  # token counts of FULL graphs (pure decode: = batch sizes)
    # FULL graphs of any batch, keyed by token count (cudagraph_mode FULL, the unified kernel); else FULL graphs
    # are of pure-decode batches, keyed by batch size. The capture pass and the dispatcher read this, not the mode.
    full_graphs_by_tokens: bool
    piecewise_capture_sizes: tuple[int, ...]  # token counts of PIECEWISE graphs
    full_graphs_capture: str  # "plain" or "compiled": the forward a FULL graph records
    min_num_tokens: int  # the padding floor of a traced forward (2: Dynamo's 0/1 specialization)
    max_num_tokens: int  # rows of the persistent buffers: the largest step
    speculative: SpeculativeConfig | None = None  # None: no speculative decoding
    # Query tokens per request of a pure decode step: 1, or 1 + num_speculative_tokens (vLLM's name). The
    # decode FULL graphs are captured per batch size for this many tokens per request.
    uniform_decode_query_len: int = 1

    @classmethod
    def resolve(cls, model: str, *, dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu", max_model_len: int = 2048,
                seed: int = 0, enforce_eager: bool = False, attention_backend: str = "auto",
                skip_tokenizer_init: bool = False, fallback: str | None = None, verify: bool = False,
                batch_invariant: bool = False, quantization: str | None = None, cache: CacheConfig | None = None,
                scheduler: SchedulerConfig | None = None,
                compilation: CompilationConfig | None = None,
                speculative: SpeculativeConfig | None = None) -> "EngineConfig":
        """Check the settings against each other and make every decision: the one resolution step."""
        device = resolve_device(device)
        cache, scheduler = cache or CacheConfig(), scheduler or SchedulerConfig()
        c = compilation or CompilationConfig()
        _check(attention_backend in ATTENTION_BACKENDS,
               f"attention_backend must be one of {ATTENTION_BACKENDS}, got {attention_backend!r}")
        check_seed(seed, "seed")
        for name, value in (("enforce_eager", enforce_eager), ("skip_tokenizer_init", skip_tokenizer_init),
                            ("verify", verify), ("batch_invariant", batch_invariant)):
            check_bool(value, name)
        _check(not batch_invariant or device.type != "cuda" or attention_backend in ("auto", "triton"),
               f"batch_invariant=True on a GPU needs attention_backend 'triton' (or 'auto'): its kernels and the "
               f"Triton norms are what fix each reduction's order; got {attention_backend!r}")
        _check(fallback in (None, "auto"), f"fallback must be None or 'auto', got {fallback!r}")
        from minivllm.quantization import check_quantization

        check_quantization(quantization, device, batch_invariant)
        # Triton compiles its kernels for a GPU; without one the first generate fails deep in the driver
        # ("0 active drivers") and leaves Triton's state broken for every later engine in the process.
        # TRITON_INTERPRET=1 (the CPU tests) runs the kernels in Triton's interpreter instead.
        _check(attention_backend != "triton" or device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1",
               f"attention_backend='triton' needs a CUDA GPU, and this engine runs on {device.type!r}"
               f"{'' if torch.cuda.is_available() else ' (no CUDA on this machine)'}; use attention_backend="
               f"'auto' or 'torch' (or set TRITON_INTERPRET=1 to run Triton's interpreter on the CPU, slowly)")
        backend = attention_backend if attention_backend != "auto" else "triton" if device.type == "cuda" else "torch"
        if enforce_eager:
            mode = CompilationMode.NONE
        elif c.mode is not None:
            mode = CompilationMode(c.mode)
        else:
            mode = CompilationMode.VLLM_COMPILE if device.type == "cuda" else CompilationMode.NONE
        graph_mode, downgrade = _resolve_cudagraph_mode(c, mode, backend, device, enforce_eager)
        sizes = _capture_sizes(c, scheduler)
        # The default configuration's FULL graphs record the plain forward: its ops are the hand-written
        # kernels, so Inductor has nothing to fuse in them, and the plain forward replays a size-1 graph at
        # batch 1 (README, "Where minivllm differs from vLLM"). An asked-for mode records the compiled one.
        full_records = "plain" if (c.mode is None and c.custom_ops is None) or mode is CompilationMode.NONE \
            else "compiled"
        # Dynamo specializes a dynamic dimension of size 1 (the "0/1 specialization"): a 1-token batch would
        # retrace, and on torch 2.11-2.13 Inductor then fails on that graph. So a traced forward never sees
        # 1 token: such batches are padded to 2.
        floor = 2 if mode >= CompilationMode.DYNAMO_TRACE_ONCE else 1
        full_floor = 1 if full_records == "plain" else floor
        max_tokens = max(scheduler.max_num_batched_tokens, scheduler.max_num_seqs, 2)
        async_on = scheduler.async_scheduling if scheduler.async_scheduling is not None \
            else device.type == "cuda"  # on a CPU nothing runs concurrently: nothing to overlap
        q_len = 1
        if speculative is not None:
            _check(isinstance(speculative, SpeculativeConfig),
                   f"speculative must be a SpeculativeConfig (SpeculativeConfig.from_any reads a dict), "
                   f"got {speculative!r}")
            _check(not batch_invariant,
                   "speculative_config with batch_invariant=True: how many drafts of a request the step's token "
                   "budget verifies depends on the other requests, so its rows would depend on the batch")
            # vLLM 0.11 does not run speculative decoding under async scheduling either: the next step's drafts
            # are proposed from the tokens this step accepts, which the CPU must read first.
            _check(scheduler.async_scheduling is not True,
                   "async_scheduling=True with speculative_config: the n-gram drafts of the next step come from "
                   "the tokens this step accepts, so the CPU must read them first (vLLM 0.11 refuses it too); "
                   "leave async_scheduling unset")
            if async_on:
                logger.info("speculative decoding: async scheduling off (the next drafts need this step's tokens)")
            async_on = False
            q_len = 1 + speculative.num_speculative_tokens
        full: list[int] = []
        if graph_mode is CUDAGraphMode.FULL:  # graphs of any batch, by token count
            full = sorted({max(s, full_floor) for s in sizes if s <= max_tokens})
        elif graph_mode.has_full:  # graphs of pure decode, by batch size (q_len tokens per request)
            full = sorted({max(s, full_floor) for s in sizes if s * q_len <= max_tokens}
                          & set(range(1, max(scheduler.max_num_seqs, 2) + 1)))
        piecewise = sorted({max(s, floor) for s in sizes if s <= max_tokens}) if graph_mode.has_piecewise else []
        return cls(model=model, dtype=dtype, device=device, max_model_len=max_model_len, seed=seed,
                   enforce_eager=enforce_eager, attention_backend=backend, skip_tokenizer_init=skip_tokenizer_init,
                   fallback=fallback, verify=verify, batch_invariant=batch_invariant, quantization=quantization,
                   async_scheduling=async_on,
                   cache=cache, scheduler=scheduler, compilation=c, compile_mode=mode, cudagraph_mode=graph_mode,
                   cudagraph_downgrade=downgrade, custom_ops=tuple(c.resolved_custom_ops()),
                   cudagraph_capture_sizes=tuple(sizes), full_capture_sizes=tuple(full),
                   full_graphs_by_tokens=graph_mode is CUDAGraphMode.FULL,
                   piecewise_capture_sizes=tuple(piecewise), full_graphs_capture=full_records,
                   min_num_tokens=floor, max_num_tokens=max_tokens, speculative=speculative,
                   uniform_decode_query_len=q_len)


def _resolve_cudagraph_mode(c: CompilationConfig, mode: CompilationMode, backend: str, device: torch.device,
                            enforce_eager: bool) -> tuple[CUDAGraphMode, str | None]:
    """The graph mode that runs, after vLLM's downgrades, and the one line that says why it differs."""
    asked = CUDAGraphMode(c.cudagraph_mode or CUDAGraphMode.FULL_AND_PIECEWISE)
    if enforce_eager or device.type != "cuda":
        return CUDAGraphMode.NONE, None
    split = mode is CompilationMode.VLLM_COMPILE
    graph_mode, why = asked, []
    if graph_mode.has_full and backend != "triton":
        # Full graphs need the Triton kernels: the PyTorch reference syncs with the host. vLLM turns a backend
        # without full-graph support to PIECEWISE (docs/design/cuda_graphs.md).
        graph_mode = CUDAGraphMode.NONE if graph_mode is CUDAGraphMode.FULL_DECODE_ONLY else CUDAGraphMode.PIECEWISE
        why.append(f"attention_backend {backend!r} has no kernel a CUDA graph can hold (the Triton kernels run "
                   f"with 'triton')")
    if graph_mode.has_piecewise and not split:
        # PIECEWISE graphs need the forward split at attention, which only mode 3 traces. As vLLM
        # (VllmConfig._normalize_piecewise_cudagraph_mode, CUDAGraphMode.without_piecewise), FULL_AND_PIECEWISE keeps
        # its decode half, whose graphs need no trace, and PIECEWISE becomes NONE
        keep = graph_mode is CUDAGraphMode.FULL_AND_PIECEWISE
        graph_mode = CUDAGraphMode.FULL_DECODE_ONLY if keep else CUDAGraphMode.NONE
        why.append(f"piecewise graphs need compilation mode 3 (VLLM_COMPILE), which splits the traced forward "
                   f"at attention; this engine runs mode {int(mode)} ({mode.name})")
    return graph_mode, (f"cudagraph_mode {asked.value} -> {graph_mode.value}: {'; '.join(why)}"
                        if graph_mode is not asked else None)


def _capture_sizes(c: CompilationConfig, scheduler: SchedulerConfig) -> list[int]:
    """The sizes to capture, by vLLM's rule (VllmConfig._set_cudagraph_sizes): the largest is
    max_cudagraph_capture_size (default min(2 x max_num_seqs, 512)), never above max_num_batched_tokens;
    explicit sizes above max_num_batched_tokens are dropped, and explicit sizes whose largest is not an
    explicit max_cudagraph_capture_size are refused (the two say different things)."""
    max_tokens = scheduler.max_num_batched_tokens
    if c.cudagraph_capture_sizes is None:
        max_size = c.max_cudagraph_capture_size or min(2 * scheduler.max_num_seqs, 512)
        return default_capture_sizes(min(max_size, max_tokens))
    sizes = sorted({s for s in c.cudagraph_capture_sizes if s <= max_tokens})
    _check(bool(sizes), f"cudagraph_capture_sizes {list(c.cudagraph_capture_sizes)} are all above "
                        f"max_num_batched_tokens ({max_tokens}): no batch could replay a graph")
    _check(c.max_cudagraph_capture_size is None or c.max_cudagraph_capture_size == sizes[-1],
           f"max_cudagraph_capture_size ({c.max_cudagraph_capture_size}) must equal the largest of "
           f"cudagraph_capture_sizes ({sizes[-1]}) when both are given, as in vLLM; give one of them")
    return sizes


def kv_bytes_per_block(num_layers: int, num_kv_heads: int, head_dim: int, block_size: int,
                       dtype: torch.dtype) -> int:
    """Bytes of K and V for one block of every layer."""
    return 2 * num_layers * block_size * num_kv_heads * head_dim * torch.empty(0, dtype=dtype).element_size()


def fixed_num_blocks(cache: CacheConfig, device: torch.device, max_model_len: int, per_block: int,
                     max_num_seqs: int) -> int | None:
    """KV blocks that need no memory probe: the override, the byte budget, or a CPU's default (room for 4
    sequences of max_model_len, at least 8192 tokens, at most 2 GiB); None where CUDA's free memory decides.

    Counts from a budget are capped at what max_num_seqs sequences of max_model_len tokens can ever hold
    (x2 for the prefix cache): a tiny model on a big GPU would otherwise get hundreds of millions of blocks,
    and the block manager keeps a Python object per block."""
    if cache.num_gpu_blocks_override is not None:
        return cache.num_gpu_blocks_override
    if cache.kv_cache_memory_bytes is not None:
        blocks = max(cache.kv_cache_memory_bytes // per_block, 1)
    elif device.type == "cuda":
        return None
    else:
        blocks = max(min(-(-max(4 * max_model_len, 8192) // cache.block_size), (2 << 30) // per_block), 1)
    return min(blocks, max_blocks(cache.block_size, max_model_len, max_num_seqs))


def max_blocks(block_size: int, max_model_len: int, max_num_seqs: int) -> int:
    """The most KV blocks the engine could ever use: max_num_seqs sequences of max_model_len, x2 (prefix cache)."""
    return 2 * max_num_seqs * -(-max_model_len // block_size)
