"""`LLM`: the offline-inference entry point, shaped like vLLM's so what learners practise transfers.

    llm = LLM(model="assets/models/minivllm-tiny")
    outs = llm.generate(["Q: 12+30= A:"], SamplingParams(temperature=0, max_tokens=8))
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, Iterator
from typing import Sequence as Seq

from tqdm.auto import tqdm

from minivllm.engine.fallback import start_engine
from minivllm.engine.llm_engine import LLMEngine
from minivllm.engine_args import EngineArgs, llm_kwargs
from minivllm.inputs import encode_prompt, token_ids_from
from minivllm.loader import NoTokenizer
from minivllm.logger import init_logger
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams
from minivllm.spec_decode.metrics import SpecDecodingStats
from minivllm.worker.model_runner import ModelRunner
from minivllm.worker.startup import StartupReport

logger = logging.getLogger("minivllm")

PromptType = str | dict


class LLM:
    """`LLM(model, **kwargs)`: the keyword arguments are EngineArgs' fields, with its defaults
    (minivllm/engine_args.py; `inspect.signature(LLM)` lists them)."""

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        init_logger()
        t_start = time.perf_counter()
        self.report = StartupReport()
        # The caller's torch RNG state is left alone (it is theirs): the sampler draws from its own generator
        # seeded with `seed` (layers/sampler.py), a request with a seed from its own generator.
        engine = start_engine(llm_kwargs(model, kwargs), self.report)
        self.config, self.tokenizer, self.worker = engine.config, engine.tokenizer, engine.worker
        self.fallback_report: list[dict] = engine.fallback_report  # the ladder's rungs (engine/fallback.py)
        self.engine_vocab = engine.model_config.vocab_size
        # `del llm` (or rebinding the name in a notebook cell) frees the device memory at once.
        self._finalizer = weakref.finalize(self, self.worker.release)
        self._finalizer.atexit = False  # at interpreter exit the driver frees everything anyway
        self._lock = threading.Lock()  # one generate at a time (see generate)
        self._owner: int | None = None
        self.engine: LLMEngine | None = engine
        self.report.phases["total"] = time.perf_counter() - t_start
        logger.info("Engine ready in %.2f s", self.report.phases["total"])

    @property
    def model_runner(self) -> ModelRunner | None:
        return self.worker.model_runner

    def compile_report(self) -> dict:
        """Graphs traced, graph breaks and run-time recompiles of torch.compile (see compilation/)."""
        from minivllm.compilation.report import live_compile_report

        runner = self.model_runner
        return live_compile_report(self.report.compile, runner.compiled.split_backend if runner is not None else None)

    # ---- lifecycle -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Free the device memory of this engine now (KV cache, graphs, compiled code, weights). Safe to call
        twice; `generate` afterwards raises. `del llm` and the end of a `with LLM(...)` block do the same."""
        with self._exclusive("shutdown"):
            self.engine = None
            self._finalizer()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    @contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        """Hold this LLM for one call. Another thread waits its turn (its tokens stay correct); a call from
        inside this LLM's own step (a callback, the forward) would corrupt the step in flight: refused."""
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError(f"LLM.{what}() called while this LLM is in use by a generate() on the same "
                               f"thread (from inside a step: a callback or the forward); this LLM is in use")
        with self._lock:
            try:  # set inside the try: an interrupt right after it must not leave the LLM owned forever
                self._owner = me
                yield
            finally:
                self._owner = None

    def get_tokenizer(self):
        """transformers' tokenizer of the checkpoint (chat templates and all; loaded on first use). The engine
        itself may run a lighter one over the same tokenizer.json (loader.FastTokenizer)."""
        from minivllm.loader import FastTokenizer, load_hf_tokenizer

        if isinstance(self.tokenizer, FastTokenizer):
            self.tokenizer = load_hf_tokenizer(self.tokenizer.path)
            if self.engine is not None:
                self.engine.tokenizer = self.tokenizer
        return self.tokenizer

    def spec_decoding_stats(self, reset: bool = False) -> SpecDecodingStats | None:
        """Speculative decoding's counters since the engine started, as vLLM counts them (drafts, draft
        tokens, accepted tokens, accepted per position; acceptance_rate, mean_acceptance_length). None when
        speculation is off; reset=True returns them and starts counting from zero."""
        with self._exclusive("spec_decoding_stats"):
            if self.engine is None:
                raise RuntimeError("this LLM was shut down")
            return self.engine.spec_decoding_stats(reset)

    def get_metrics(self) -> dict[str, float | list[int]]:
        """The engine's counters under vLLM's metric names (speculative decoding's, when it is on)."""
        stats = self.spec_decoding_stats()
        return {} if stats is None else stats.as_metrics()

    def startup_report(self) -> StartupReport:
        return self.report

    def _normalize(self, prompts, sampling_params,
                   engine: LLMEngine) -> tuple[list[tuple[str | None, list[int]]], list[SamplingParams]]:
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"prompts must be a str, a {{'prompt_token_ids': [...]}} dict, or a list of them, "
                            f"got {type(prompts).__name__}")
        items = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                if not p:
                    raise ValueError(f"prompts[{i}] is an empty string; a prompt must have at least 1 token")
                items.append((p, encode_prompt(self.tokenizer, p, f"prompts[{i}]")))
            elif isinstance(p, dict) and "prompt_token_ids" in p:
                ids = p["prompt_token_ids"]
                if not isinstance(ids, (list, tuple)):
                    raise TypeError(f"prompts[{i}]['prompt_token_ids'] must be a list of ints")
                items.append((p.get("prompt"), token_ids_from(ids, f"prompts[{i}]")))
            else:
                raise TypeError(f"prompts[{i}] must be a str or a dict with 'prompt_token_ids', "
                                f"got {type(p).__name__}")
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params] * len(items)
        elif isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != len(items):
                raise ValueError(f"sampling_params has {len(sampling_params)} entries but there are {len(items)} "
                                 f"prompts; give one SamplingParams or exactly one per prompt")
            params = list(sampling_params)
        else:
            raise TypeError(f"sampling_params must be a SamplingParams or a list of them, "
                            f"got {type(sampling_params).__name__}")
        for i, ((_, ids), sp) in enumerate(zip(items, params)):
            engine.validate(ids, sp, f"prompts[{i}]")  # all checked before any is queued
            if sp.stop and isinstance(self.tokenizer, NoTokenizer):
                raise ValueError(f"sampling_params for prompts[{i}]: stop={list(sp.stop)!r} needs a tokenizer, "
                                 f"and this engine has none ({self.tokenizer.reason}): stop strings are matched "
                                 f"on the detokenized text; use stop_token_ids=[...] instead")
        return items, params

    def generate(self, prompts: PromptType | Seq[PromptType], sampling_params: SamplingParams | list | None = None,
                 use_tqdm: bool = True) -> list[RequestOutput]:
        """Run prompts to completion. Thread-safe: calls from several threads run one after the other."""
        with self._exclusive("generate"):
            engine = self.engine
            if engine is None:
                raise RuntimeError("this LLM was shut down (shutdown(), or the end of its `with` block); "
                                   "build a new LLM(...) to generate")
            items, params = self._normalize(prompts, sampling_params, engine)
            return _run_to_completion(engine, items, params, use_tqdm)


def _run_to_completion(engine: LLMEngine, items: list, params: list[SamplingParams],
                       use_tqdm: bool) -> list[RequestOutput]:
    """Queue the requests and step until all finish. Any exception, KeyboardInterrupt included (a notebook's
    stop button, wherever it lands), leaves the engine as if this call never happened: LLMEngine.abort_all
    drops its requests, frees their blocks and rewinds the sampler's random state (vLLM's LLM aborts the
    requests it added when adding fails)."""
    rng = engine.sampler_state()
    bar = None
    try:
        now = time.perf_counter()
        seqs = [engine.add_request(engine.next_request_id(), ids, sp, text, now)
                for (text, ids), sp in zip(items, params)]
        bar = tqdm(total=len(seqs), desc="Processed prompts", disable=not use_tqdm, dynamic_ncols=True)
        n_out = 0
        while engine.has_unfinished_requests():
            for seq in engine.step():
                n_out += seq.num_output_tokens
                bar.update(1)
                bar.set_postfix_str(f"output {n_out / max(bar.format_dict['elapsed'], 1e-9):.1f} toks/s")
        outs = [engine.make_output(s) for s in seqs]
        bar.close()
    except BaseException:
        # The engine is this call's alone (LLM._exclusive) and idle when it starts, so everything it holds
        # now came from this call, including a request queued or admitted halfway when the interrupt landed.
        engine.abort_all(rng)
        if bar is not None:
            bar.close()
        raise
    return outs


def _signature() -> inspect.Signature:
    """LLM's signature as EngineArgs' fields say it, so help(LLM) and IDEs show every argument and default."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for f in fields(EngineArgs):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if f.name == "model" else inspect.Parameter.KEYWORD_ONLY
        params.append(inspect.Parameter(f.name, kind, default=f.default, annotation=f.type))
    return inspect.Signature(params, return_annotation=None)


LLM.__init__.__signature__ = _signature()
