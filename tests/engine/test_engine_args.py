"""One source for engine arguments: every EngineArgs field is an `LLM(...)` keyword argument and a command-line
flag with the same default, the defaults are the config classes' own, and the flags reach the configs."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import fields

import pytest

from minivllm.config import CacheConfig, CompilationConfig, EngineConfig, SchedulerConfig
from minivllm.engine_args import EngineArgs, llm_kwargs
from minivllm.llm import LLM

FIELDS = {f.name: f.default for f in fields(EngineArgs)}


def _parser() -> argparse.ArgumentParser:
    return EngineArgs.add_cli_args(argparse.ArgumentParser())


def test_every_field_is_an_llm_keyword_with_the_same_default():
    params = dict(inspect.signature(LLM).parameters)
    assert set(params) == set(FIELDS)
    assert {name: p.default for name, p in params.items()} == FIELDS


def test_every_field_is_a_flag_with_the_same_default():
    parser = _parser()
    flags = {a.dest: a for a in parser._actions if a.dest != "help"}
    assert set(flags) == set(FIELDS)
    for name, action in flags.items():
        assert action.option_strings[0] == "--" + name.replace("_", "-")
        assert action.default == FIELDS[name], name
    assert EngineArgs.from_cli_args(parser.parse_args([])) == EngineArgs()


@pytest.mark.parametrize("name, owner", [
    ("block_size", CacheConfig), ("gpu_memory_utilization", CacheConfig), ("kv_cache_memory_bytes", CacheConfig),
    ("num_gpu_blocks_override", CacheConfig), ("enable_prefix_caching", CacheConfig),
    ("max_num_seqs", SchedulerConfig), ("enable_chunked_prefill", SchedulerConfig),
    ("async_scheduling", SchedulerConfig), ("seed", EngineConfig), ("enforce_eager", EngineConfig),
    ("attention_backend", EngineConfig), ("skip_tokenizer_init", EngineConfig), ("fallback", EngineConfig),
    ("verify", EngineConfig), ("cudagraph_mode", CompilationConfig),
    ("cudagraph_capture_sizes", CompilationConfig), ("max_cudagraph_capture_size", CompilationConfig)])
def test_defaults_are_the_config_classes_own(name, owner):
    if owner is EngineConfig:  # frozen and resolved: its defaults are those of its resolution step
        assert FIELDS[name] == inspect.signature(EngineConfig.resolve).parameters[name].default
    else:
        assert FIELDS[name] == getattr(owner, name)


def test_flags_reach_the_configs():
    args = _parser().parse_args(["--max-num-seqs", "8", "--block-size", "32", "--no-enable-prefix-caching",
                                 "--cudagraph-capture-sizes", "1,2,4", "--max-model-len", "64", "--device", "cpu",
                                 "--compilation-config", '{"mode": 0}', "--seed", "7", "--num-gpu-blocks-override",
                                 "40", "--no-async-scheduling", "--fallback", "auto", "--verify"])
    cfg, model_cfg = EngineArgs.from_cli_args(args).create_engine_config()
    assert (cfg.scheduler.max_num_seqs, cfg.cache.block_size, cfg.cache.enable_prefix_caching) == (8, 32, False)
    assert cfg.compilation.cudagraph_capture_sizes == [1, 2, 4] and cfg.compilation.mode == 0
    assert (cfg.max_model_len, cfg.seed, cfg.cache.num_gpu_blocks_override) == (64, 7, 40)
    assert cfg.scheduler.async_scheduling is False and cfg.fallback == "auto" and cfg.verify is True
    assert cfg.scheduler.max_num_batched_tokens == SchedulerConfig.max_num_batched_tokens
    assert model_cfg.vocab_size > 0


def test_without_chunked_prefill_a_step_holds_the_longest_prompt():
    cfg, _ = EngineArgs(max_model_len=64, device="cpu", enable_chunked_prefill=False).create_engine_config()
    assert cfg.scheduler.max_num_batched_tokens == max(64, SchedulerConfig.max_num_batched_tokens)


def test_an_unknown_keyword_is_named():
    with pytest.raises(TypeError, match="'max_num_seq'.*EngineArgs"):
        llm_kwargs(None, {"max_num_seq": 4})
    with pytest.raises(ValueError, match="fallback must be None or 'auto'"):
        EngineArgs(max_model_len=64, device="cpu", fallback="yes").create_engine_config()
