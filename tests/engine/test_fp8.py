"""quantization="fp8" end to end on the CPU: reachable from LLM(...), EngineArgs and the command line, refused
where it cannot run, and accurate within stated tolerances against the fp32 engine.

Tolerances (logprob gap = |logprob(fp8) - logprob(fp32)| per teacher-forced token, quantization/accuracy.py),
measured on this CPU at the time of writing and set with room to spare. A wrong scale, a transposed weight or
a lost bias moves them by whole nats:
  embedded model, 12 held-out questions with their answers (152 tokens): mean 0.077 and max 1.06 measured
  (bf16: 0.022 and 0.30); allowed mean 0.15, max 2.0. Its 6 demo questions must all still be answered right.
  random llama-gqa4-d32 checkpoint (fp32 weights), 8 random sequences (184 tokens): mean 0.011 and max 0.045
  measured (bf16: 0.0012 and 0.0047); allowed mean 0.03, max 0.15.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import torch

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.compilation.cache import cache_key
from minivllm.engine_args import EngineArgs
from minivllm.quantization.accuracy import compare, logprob_gap, prompt_logprobs
from minivllm.tools import tiny_task
from tests.helpers import random_prompts, tiny_checkpoint

EMBEDDED_MEAN, EMBEDDED_MAX = 0.15, 2.0
RANDOM_MEAN, RANDOM_MAX = 0.03, 0.15


def _fp32_logprobs(model, seqs):
    llm = LLM(model, device="cpu", dtype="float32")
    try:
        return prompt_logprobs(llm, seqs)
    finally:
        llm.shutdown()


def test_embedded_model_answers_and_logprob_gap():
    llm = LLM(device="cpu", quantization="fp8")
    try:
        model = llm.model_runner.model
        fp8 = [m for name, m in model.named_modules() if name.endswith("_proj")]
        assert len(fp8) == 4 * 4 and all(m.weight.dtype == torch.float8_e4m3fn for m in fp8)
        assert all(m.weight_scale.shape == (m.weight.shape[0],) for m in fp8)  # one scale per output channel
        assert model.lm_head.weight.dtype == torch.float32  # the LM head stays unquantized, as in vLLM
        outs = llm.generate(tiny_task.DEMO_PROMPTS, SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)
        completions = [o.outputs[0].text for o in outs]
        assert tiny_task.score(tiny_task.DEMO_PROMPTS, completions) == 1.0, completions
        tok = llm.get_tokenizer()
        seqs = [tok(p + a).input_ids for p, a in tiny_task.make_examples(12, seed=0, split="test")]
        got = prompt_logprobs(llm, seqs)
    finally:
        llm.shutdown()
    gap = logprob_gap(_fp32_logprobs(None, seqs), got)
    assert gap["tokens"] > 100
    assert 0 < gap["mean"] < EMBEDDED_MEAN and gap["max"] < EMBEDDED_MAX, gap


def test_random_checkpoint_logprob_gap(tmp_path):
    path = str(tiny_checkpoint("llama-gqa4-d32", str(tmp_path)))
    seqs = random_prompts(500, [24] * 8)
    gap = compare(path, seqs, {"fp8": {"quantization": "fp8"}}, device="cpu")["fp8"]
    assert 0 < gap["mean"] < RANDOM_MEAN and gap["max"] < RANDOM_MAX, gap


def test_reachable_from_engine_args_and_the_command_line():
    parser = EngineArgs.add_cli_args(argparse.ArgumentParser())
    args = EngineArgs.from_cli_args(parser.parse_args(["--quantization", "fp8", "--device", "cpu"]))
    config, _ = args.create_engine_config()
    assert config.quantization == "fp8"
    assert EngineArgs(device="cpu").create_engine_config()[0].quantization is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--quantization", "int4"])


def test_refused_where_unsupported():
    with pytest.raises(ValueError, match="quantization must be None or one of"):
        EngineArgs(device="cpu", quantization="awq").create_engine_config()
    with pytest.raises(ValueError, match="batch_invariant"):
        EngineArgs(device="cpu", quantization="fp8", batch_invariant=True).create_engine_config()


def test_compile_cache_key_covers_quantization():
    base, model_config = EngineArgs(device="cpu").create_engine_config()
    fp8, _ = EngineArgs(device="cpu", quantization="fp8").create_engine_config()
    assert cache_key(base, model_config) != cache_key(fp8, model_config)


def test_gpu_check_fp8_stage_runs_on_a_cpu(tmp_path):
    """scripts/fp8_check.py (gpu_check.sh's fp8 stage) on the embedded model, tiny lengths: every variant's
    TPOT and byte floor in the JSON, with provenance (seconds, not a measurement: no copy bandwidth here)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fp8_check

    res = fp8_check.main(["--model", DEFAULT_MODEL, "--max-model-len", "64", "--batch-sizes", "1",
                          "--input-len", "6", "--output-len", "3", "--reps", "1", "--variants", "bf16,fp8",
                          "--no-accuracy", "--json", str(tmp_path / "fp8.json")])
    assert (tmp_path / "fp8.json").is_file() and res["provenance"]["model"] is not None
    bf16, fp8 = (res["summary"][v]["1"] for v in ("bf16", "fp8"))
    assert res["summary"]["fp8"]["kernels_per_step_batch1"] == [None]  # profiled on a GPU only
    assert bf16["tpot_ms_median"] > 0 and fp8["tpot_ms_median"] > 0
    assert fp8["weight_mb"] < bf16["weight_mb"]  # FP8 linear weights: fewer bytes for the floor



MODE_PROMPTS = [{"prompt_token_ids": p} for p in random_prompts(500, [5, 12, 1], seed=3)]
MODE_PARAMS = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)


def _fp8_tokens(path: str, **kw):
    llm = LLM(path, device="cpu", max_model_len=64, quantization="fp8", **kw)
    try:
        return [o.outputs[0].token_ids for o in llm.generate(MODE_PROMPTS, MODE_PARAMS, use_tqdm=False)], \
            llm.compile_report()
    finally:
        llm.shutdown()


@pytest.fixture(scope="module")
def llama_eager(tmp_path_factory):
    path = str(tiny_checkpoint("llama-gqa4-d32", str(tmp_path_factory.mktemp("fp8"))))
    return path, _fp8_tokens(path, enforce_eager=True)[0]


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_every_compile_mode_traces_the_fp8_ops(mode, llama_eager):
    """The FP8 ops are opaque torch ops with fake implementations: every mode traces them without a graph
    break and gives the eager FP8 engine's tokens (backend "eager": the trace, not Inductor, is under test
    here; Inductor with the passes: tests/engine/test_passes.py)."""
    path, eager = llama_eager
    got, rep = _fp8_tokens(path, compilation_config={"mode": mode, "backend": "eager"})
    assert got == eager and rep["graph_breaks"] == 0, rep
