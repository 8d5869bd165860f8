"""Settings are resolved once (EngineConfig.resolve) into frozen configs: later code reads them, nothing
writes them. The fallback ladder resolves a new config per rung instead of editing the live one.

Read from the source (ast), so a new assignment anywhere in minivllm/ fails here before it runs: an assignment
or augmented assignment to an attribute of a name or attribute called like a config (`cfg.x = ...`,
`self.config.cache.x = ...`), a `setattr(config, ...)`, or an `object.__setattr__` inside a *Config class.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import torch

from minivllm import config as config_module

ROOT = Path(__file__).resolve().parents[2] / "minivllm"
#: How code names a config object: config, cfg, comp, model_config, the sub-configs, c.compilation ...
CONFIG_NAME = re.compile(r"(^|\.)(config|cfg|comp|compilation|\w+_config|cache|scheduler)$")


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def config_writes(source: str, filename: str = "<src>") -> list[str]:
    """`file:line: code` of each write to a config field in `source`."""
    found = []
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in (e for tgt in targets for e in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])):
            if isinstance(t, ast.Attribute) and CONFIG_NAME.search(_text(t.value)) \
                    and not _text(t.value).startswith("torch."):  # torch's own switches are not engine configs
                found.append(f"{filename}:{node.lineno}: {_text(node)[:100]}")
        if isinstance(node, ast.Call) and _text(node.func) == "setattr" and node.args \
                and CONFIG_NAME.search(_text(node.args[0])):
            found.append(f"{filename}:{node.lineno}: {_text(node)[:100]}")
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
            found += [f"{filename}:{n.lineno}: {_text(n)[:100]}" for n in ast.walk(node)
                      if isinstance(n, ast.Call) and _text(n.func) == "object.__setattr__"]
    return found


def test_the_checker_finds_each_kind_of_write():
    src = ("cfg.max_model_len = 4\nself.config.cache.num_blocks = n\ncomp.mode += 1\nsetattr(comp, 'mode', 0)\n"
           "class CacheConfig:\n    def __post_init__(self):\n        object.__setattr__(self, 'x', 1)\n"
           "self.config = config\ntorch._dynamo.config.recompile_limit = 64\nx.y = 1\n")
    assert sorted(int(w.split(":")[1]) for w in config_writes(src)) == [1, 2, 3, 4, 7]


def test_nothing_in_the_engine_writes_a_config():
    writes = [w for p in sorted(ROOT.rglob("*.py"))
              for w in config_writes(p.read_text(), p.relative_to(ROOT.parent).as_posix())]
    assert not writes, "config fields assigned after construction:\n" + "\n".join(writes)


@pytest.mark.parametrize("cls", [config_module.EngineConfig, config_module.CompilationConfig,
                                 config_module.CacheConfig, config_module.SchedulerConfig])
def test_every_config_is_frozen(cls):
    assert cls.__dataclass_params__.frozen
    if cls is config_module.EngineConfig:
        cfg = cls.resolve(model="m")
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.max_model_len = 1


#: Where the engine's cudagraph_mode may be read: where it is asked for and resolved, and where a run reports it.
#: Everything that captures or dispatches graphs reads the resolved decisions instead (capture sizes per kind,
#: full_graphs_by_tokens), and each step's pick travels as the forward context's cudagraph_runtime_mode.
MODE_READERS = {"engine_args.py", "config.py", "engine/fallback.py", "worker/worker.py", "bench/latency.py",
                "bench/throughput.py", "demo.py"}


def _names_cudagraph_mode(source: str) -> bool:
    """Whether code (not a string or comment) names cudagraph_mode: an attribute, a keyword or a parameter."""
    return any(isinstance(n, ast.Attribute) and n.attr == "cudagraph_mode"
               or isinstance(n, ast.keyword) and n.arg == "cudagraph_mode"
               or isinstance(n, (ast.arg, ast.AnnAssign)) and "cudagraph_mode" in (
                   n.arg if isinstance(n, ast.arg) else _text(n.target)).split(".")
               for n in ast.walk(ast.parse(source)))


def test_cudagraph_mode_takes_effect_in_the_config_only():
    readers = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if _names_cudagraph_mode(p.read_text("utf-8"))}
    assert readers <= MODE_READERS, sorted(readers - MODE_READERS)
    assert {"config.py", "engine_args.py"} <= readers  # the check sees the code that does name it
    for mode in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "PIECEWISE"):  # resolved as on a GPU
        cfg = config_module.EngineConfig.resolve(model="m", device=torch.device("cuda"),
                                                 compilation=config_module.CompilationConfig(cudagraph_mode=mode))
        assert cfg.cudagraph_mode == mode and cfg.full_graphs_by_tokens is (mode == "FULL")
        assert bool(cfg.full_capture_sizes) is (mode != "PIECEWISE")
