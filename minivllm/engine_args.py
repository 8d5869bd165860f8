"""The engine's command-line flags, shared by `minivllm generate` and every `minivllm bench ...`.

Why a module of its own: the flags and their mapping to `LLM(...)` keyword arguments are needed by the
CLI and by the benchmarks; kept in cli.py they made cli import bench and bench import cli. vLLM keeps
the same thing in vllm/engine/arg_utils.py (EngineArgs).
"""

from __future__ import annotations

import argparse

from minivllm.config import ATTENTION_BACKENDS, CUDAGRAPH_MODES


def _int_list(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. 1,2,4,8; got {s!r}") from None


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="local HF checkpoint directory (default: the embedded model)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--enforce-eager", action="store_true", help="no torch.compile, no CUDA graphs")
    p.add_argument("--attention-backend", default="auto", choices=list(ATTENTION_BACKENDS))
    p.add_argument("--compilation-config", default=None, help='JSON, e.g. \'{"mode": 3}\'')
    p.add_argument("--cudagraph-mode", default=None, choices=list(CUDAGRAPH_MODES))
    p.add_argument("--cudagraph-capture-sizes", type=_int_list, default=None,
                   help="comma-separated batch sizes, e.g. 1,2,4,8")
    p.add_argument("--max-cudagraph-capture-size", type=int, default=None)
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None,
                   help="launch step n+1 before reading step n's tokens (default: on with CUDA)")
    p.add_argument("--skip-tokenizer-init", action="store_true",
                   help="load no tokenizer: token ids in, token ids out, empty text (as vLLM)")
    p.add_argument("--seed", type=int, default=0)


def engine_kwargs(a: argparse.Namespace) -> dict:
    """The `LLM(...)` keyword arguments of parsed engine flags."""
    return dict(model=a.model, dtype=a.dtype, device=a.device, max_model_len=a.max_model_len,
                max_num_seqs=a.max_num_seqs, max_num_batched_tokens=a.max_num_batched_tokens,
                block_size=a.block_size, gpu_memory_utilization=a.gpu_memory_utilization,
                enforce_eager=a.enforce_eager, attention_backend=a.attention_backend,
                compilation_config=a.compilation_config, cudagraph_mode=a.cudagraph_mode,
                cudagraph_capture_sizes=a.cudagraph_capture_sizes,
                max_cudagraph_capture_size=a.max_cudagraph_capture_size,
                enable_prefix_caching=not a.no_prefix_caching, async_scheduling=a.async_scheduling,
                skip_tokenizer_init=a.skip_tokenizer_init, seed=a.seed)
