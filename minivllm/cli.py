"""The `minivllm` command: generate text, run the demo, run benchmarks.

Errors are printed as one line, `minivllm: error: ...`, with a non-zero exit status: a traceback tells a
workshop user nothing they can act on. `--debug` (or MINIVLLM_DEBUG=1) lets the exception through with its
traceback, for the one debugging the engine. Ctrl-C, wherever it lands (imports and startup included),
prints `minivllm: interrupted` and exits with 130, as a shell expects of a command stopped by SIGINT; this
module imports only the standard library, so the handler is in place before anything slow runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading


def cmd_generate(a: argparse.Namespace) -> int:
    from minivllm import LLM, SamplingParams
    from minivllm.engine_args import EngineArgs

    llm = LLM(**EngineArgs.from_cli_args(a).kwargs())
    params = SamplingParams(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k, max_tokens=a.max_tokens,
                            seed=a.sample_seed, ignore_eos=a.ignore_eos, logprobs=a.logprobs,
                            prompt_logprobs=a.prompt_logprobs)
    outs = llm.generate(a.prompt, params, use_tqdm=False)
    for o in outs:
        c = o.outputs[0]
        lps = {"logprobs": _rows(c.token_ids, c.logprobs, a.logprobs), "cumulative_logprob": c.cumulative_logprob,
               "prompt_logprobs": _rows(o.prompt_token_ids, o.prompt_logprobs, a.prompt_logprobs)}
        print(json.dumps({"prompt": o.prompt, "text": c.text, "token_ids": c.token_ids,
                          "finish_reason": c.finish_reason, "ttft_s": o.metrics.ttft, "tpot_s": o.metrics.tpot,
                          **{k: v for k, v in lps.items() if v is not None}}, ensure_ascii=False)
              if a.json else f"{o.prompt!r} -> {c.text!r}")
        for label, name in (("prompt", "prompt_logprobs"), ("output", "logprobs")) if not a.json else ():
            for tok, *top in lps[name] or []:  # one line per token: the chosen one, then the top k
                print(f"  {label} {tok[1]!r:>12} {tok[2]:9.4f} (rank {tok[3]:>6})"
                      + "".join(f"{', top: ' if i == 0 else ', '}{t[1]!r} {t[2]:.4f}" for i, t in enumerate(top)))
    spec = llm.spec_decoding_stats()
    if spec is not None:  # as vLLM's spec-decode log line: on stderr, so --json's stdout stays JSON lines
        print(f"speculative decoding: {spec.num_drafts} drafts, {spec.num_draft_tokens} draft tokens, "
              f"{spec.num_accepted_tokens} accepted; acceptance rate {spec.acceptance_rate:.1%}, mean acceptance "
              f"length {spec.mean_acceptance_length:.2f}", file=sys.stderr)
    return 0


def _rows(token_ids, positions, k):
    """Per position [chosen, top 1, ..., top k], each [token id, text, logprob, rank] (None: not asked)."""
    if positions is None:
        return None
    return [[[t, d[t].decoded_token, d[t].logprob, d[t].rank]] + [[i, lp.decoded_token, lp.logprob, lp.rank]
            for i, lp in sorted(d.items(), key=lambda x: x[1].rank)[:k]]
            for t, d in zip(token_ids, positions) if d is not None]


def build_parser() -> argparse.ArgumentParser:
    from minivllm.bench import cli as bench_cli
    from minivllm.engine_args import EngineArgs

    parser = argparse.ArgumentParser(prog="minivllm", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (also: MINIVLLM_DEBUG=1)")
    sub = parser.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate text for one or more prompts")
    EngineArgs.add_cli_args(g)
    g.add_argument("--prompt", action="append", required=True, help="may be given several times")
    g.add_argument("--max-tokens", type=int, default=32)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=-1)
    g.add_argument("--sample-seed", type=int, default=None)
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--logprobs", type=int, default=None, metavar="K",
                   help="print each generated token's raw logprob, rank and the top K alternatives (K <= 20)")
    g.add_argument("--prompt-logprobs", type=int, default=None, metavar="K", help="the same for the prompt tokens")
    g.add_argument("--json", action="store_true", help="one JSON object per prompt")
    g.set_defaults(func=cmd_generate)

    d = sub.add_parser("demo", help="the embedded model: answers checked, then eager/compiled/graph speeds")
    __import__("minivllm.demo", fromlist=["add_arguments"]).add_arguments(d)
    d.set_defaults(func=lambda a: __import__("minivllm.demo", fromlist=["main"]).main(a))

    b = sub.add_parser("bench", help="benchmarks (print a table, write JSON)")
    bench_cli.add_parsers(b.add_subparsers(dest="bench", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    interrupted: list[int] = []

    def on_sigint(signum, frame):
        interrupted.append(signum)  # remembered: a library may turn the KeyboardInterrupt into its own error
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() \
        else None
    debug = os.environ.get("MINIVLLM_DEBUG", "") not in ("", "0")
    try:
        a = build_parser().parse_args(argv)  # imports torch: seconds in which Ctrl-C is likely
        debug = debug or a.debug
        status = 0 if interrupted else a.func(a) or 0  # interrupted already: an import swallowed it
        if interrupted:
            raise KeyboardInterrupt
        return status
    except KeyboardInterrupt as e:
        return _report_interrupt(e)
    except Exception as e:  # noqa: BLE001 - every error reaches the user as one line (unless debugging)
        if interrupted and not debug:
            return _report_interrupt(e)
        if debug:
            raise
        kind = "" if isinstance(e, (ValueError, TypeError)) else f"{type(e).__name__}: "
        print(f"minivllm: error: {kind}{e or type(e).__name__} (run with --debug or MINIVLLM_DEBUG=1 for the "
              f"traceback)", file=sys.stderr)
        return 2 if isinstance(e, (ValueError, TypeError)) else 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _report_interrupt(e: BaseException) -> int:
    """One line, last: the interrupted frames are released first (a progress bar prints as it closes)."""
    import traceback

    traceback.clear_frames(e.__traceback__)
    print("minivllm: interrupted", file=sys.stderr)
    return 130


if __name__ == "__main__":
    sys.exit(main())
