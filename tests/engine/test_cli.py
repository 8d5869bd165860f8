"""`minivllm ...` errors: one line `minivllm: error: ...`, a non-zero exit, no traceback unless asked for;
the engine flags live in minivllm/engine_args.py, imported by the CLI and the benchmarks alike; and what
`minivllm generate --logprobs` prints."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import minivllm
from minivllm.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_value_error_is_one_line(tmp_path, capsys):
    assert main(["generate", "--prompt", "hi", "--model", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minivllm: error: model=") and "no such local directory" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_any_exception_is_one_line_and_debug_shows_it(monkeypatch, capsys):
    def broken(**kwargs):
        raise RuntimeError("0 active drivers")

    monkeypatch.setattr(minivllm, "LLM", broken)
    assert main(["generate", "--prompt", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("minivllm: error: RuntimeError: 0 active drivers") and "--debug" in err
    with pytest.raises(RuntimeError, match="0 active drivers"):
        main(["--debug", "generate", "--prompt", "hi"])
    monkeypatch.setenv("MINIVLLM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="0 active drivers"):
        main(["generate", "--prompt", "hi"])


def test_no_traceback_from_the_real_command(tmp_path):
    bad = tmp_path / "cfg"
    bad.mkdir()
    (bad / "config.json").write_text("[1, 2]")
    proc = subprocess.run([sys.executable, "-m", "minivllm.cli", "generate", "--prompt", "x", "--model", str(bad)],
                          capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "minivllm: error:" in proc.stderr and "must hold a JSON object" in proc.stderr


def test_bad_flag_values_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "--prompt", "x", "--cudagraph-capture-sizes", "1,two"])
    assert e.value.code == 2 and "expected comma-separated ints" in capsys.readouterr().err


def test_skip_tokenizer_init_flag_reaches_the_engine():
    from minivllm.bench.cli import parse_args
    from minivllm.engine_args import EngineArgs

    assert EngineArgs.from_cli_args(parse_args(["latency", "--skip-tokenizer-init"])).skip_tokenizer_init is True
    assert EngineArgs.from_cli_args(parse_args(["latency"])).skip_tokenizer_init is False


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_bench_does_not_import_the_cli():
    """engine_args.py ends the cli <-> bench loop: cli imports bench, bench never imports cli."""
    for f in sorted((ROOT / "minivllm" / "bench").glob("*.py")):
        assert "minivllm.cli" not in _imports(f), f.name
        assert "from minivllm import cli" not in f.read_text(), f.name
    assert "minivllm.bench" not in " ".join(_imports(ROOT / "minivllm" / "engine_args.py"))


def test_generate_prints_logprobs(capsys):
    """--logprobs / --prompt-logprobs: one line per token in text mode, the same numbers in --json."""
    assert main(["generate", "--prompt", "12+7=", "--max-tokens", "3", "--logprobs", "2", "--prompt-logprobs", "1",
                 "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("  output ") for line in lines) == 3 and any(" (rank " in line for line in lines)
    assert sum(line.startswith("  prompt ") for line in lines) >= 4  # every prompt token after the first
    assert main(["generate", "--prompt", "12+7=", "--max-tokens", "3", "--logprobs", "2", "--json",
                 "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["logprobs"]) == 3 and all(len(pos) == 3 for pos in out["logprobs"])  # chosen + top 2
    assert [pos[0][0] for pos in out["logprobs"]] == out["token_ids"]
    assert out["cumulative_logprob"] == pytest.approx(sum(pos[0][2] for pos in out["logprobs"]))
    assert "prompt_logprobs" not in out
