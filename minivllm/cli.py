"""The `minivllm` command: generate text, run the demo, run benchmarks."""

from __future__ import annotations

import argparse
import json
import sys


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="local HF checkpoint directory (default: the embedded model)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--enforce-eager", action="store_true", help="no torch.compile, no CUDA graphs")
    p.add_argument("--attention-backend", default="auto", choices=["auto", "triton", "torch", "unregistered"])
    p.add_argument("--compilation-config", default=None, help='JSON, e.g. \'{"level": 3}\'')
    p.add_argument("--cudagraph-mode", default=None, choices=["NONE", "PIECEWISE", "FULL", "FULL_AND_PIECEWISE"])
    p.add_argument("--cudagraph-capture-sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="comma-separated batch sizes, e.g. 1,2,4,8")
    p.add_argument("--max-cudagraph-capture-size", type=int, default=None)
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None,
                   help="launch step n+1 before reading step n's tokens (default: on with CUDA)")
    p.add_argument("--seed", type=int, default=0)


def engine_kwargs(a: argparse.Namespace) -> dict:
    return dict(model=a.model, dtype=a.dtype, device=a.device, max_model_len=a.max_model_len,
                max_num_seqs=a.max_num_seqs, max_num_batched_tokens=a.max_num_batched_tokens,
                block_size=a.block_size, gpu_memory_utilization=a.gpu_memory_utilization,
                enforce_eager=a.enforce_eager, attention_backend=a.attention_backend,
                compilation_config=a.compilation_config, cudagraph_mode=a.cudagraph_mode,
                cudagraph_capture_sizes=a.cudagraph_capture_sizes,
                max_cudagraph_capture_size=a.max_cudagraph_capture_size,
                enable_prefix_caching=not a.no_prefix_caching, async_scheduling=a.async_scheduling, seed=a.seed)


def cmd_generate(a: argparse.Namespace) -> int:
    from minivllm import LLM, SamplingParams

    llm = LLM(**engine_kwargs(a))
    params = SamplingParams(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k, max_tokens=a.max_tokens,
                            seed=a.sample_seed, ignore_eos=a.ignore_eos)
    outs = llm.generate(a.prompt, params, use_tqdm=False)
    for o in outs:
        print(json.dumps({"prompt": o.prompt, "text": o.outputs[0].text, "token_ids": o.outputs[0].token_ids,
                          "finish_reason": o.outputs[0].finish_reason,
                          "ttft_s": o.metrics.ttft, "tpot_s": o.metrics.tpot}, ensure_ascii=False)
              if a.json else f"{o.prompt!r} -> {o.outputs[0].text!r}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minivllm", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate text for one or more prompts")
    _engine_args(g)
    g.add_argument("--prompt", action="append", required=True, help="may be given several times")
    g.add_argument("--max-tokens", type=int, default=32)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=-1)
    g.add_argument("--sample-seed", type=int, default=None)
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--json", action="store_true", help="one JSON object per prompt")
    g.set_defaults(func=cmd_generate)

    d = sub.add_parser("demo", help="the embedded model: answers checked, then eager/compiled/graph speeds")
    d.add_argument("--skip-modes", action="store_true", help="only the generation part")
    d.set_defaults(func=lambda a: __import__("minivllm.demo", fromlist=["main"]).main(a))

    b = sub.add_parser("bench", help="benchmarks (print a table, write JSON)")
    bsub = b.add_subparsers(dest="bench", required=True)
    from minivllm.bench import cli as bench_cli

    bench_cli.add_parsers(bsub, _engine_args)

    a = parser.parse_args(argv)
    try:
        return a.func(a) or 0
    except (ValueError, TypeError) as e:
        print(f"minivllm: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
