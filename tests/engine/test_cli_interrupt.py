"""`minivllm generate` / `bench` under Ctrl-C: exit status 130 and one line, `minivllm: interrupted`, last,
without a traceback, wherever the signal lands (importing torch, starting the engine, generating); and a
`--json` path that cannot be written is refused before any work runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from minivllm.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _interrupt_when(args: list[str], marker: str, tmp_path: Path, importtime: bool = False) -> tuple[int, str]:
    """Run `python -m minivllm.cli ARGS`, send SIGINT once `marker` appears on its stderr; (status, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "MINIVLLM_CACHE_DIR": str(tmp_path)}
    env.pop("MINIVLLM_DEBUG", None)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "minivllm.cli", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            proc.send_signal(signal.SIGINT)
            break
    else:
        proc.kill()
        pytest.fail(f"{marker!r} never appeared: {''.join(seen)[-2000:]}")
    _, rest = proc.communicate(timeout=120)
    lines = [ln for ln in ("".join(seen) + rest).replace("\r", "\n").splitlines()
             if ln.strip() and not ln.startswith("import time:")]
    return proc.returncode, "\n".join(lines)


def _assert_one_line(status: int, err: str) -> None:
    assert status == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.splitlines()[-1] == "minivllm: interrupted" and err.count("minivllm: interrupted") == 1, err[-3000:]


def test_sigint_while_importing_torch(tmp_path):
    # -X importtime reports each module as its import ends: torch.nn's line comes while torch is still loading
    status, err = _interrupt_when(["generate", "--prompt", "hi"], "torch.nn", tmp_path, importtime=True)
    _assert_one_line(status, err)


def test_sigint_while_generating(tmp_path):
    args = ["generate", "--max-model-len", "512", "--max-tokens", "500", "--ignore-eos"]
    status, err = _interrupt_when(args + ["--prompt", "Q: 1+2= A:"] * 8, "Engine ready", tmp_path)
    _assert_one_line(status, err)


def test_sigint_while_a_bench_starts_its_engine(tmp_path):
    out = tmp_path / "lat.json"
    args = ["bench", "latency", "--batch-sizes", "1", "--modes", "eager", "--input-len", "4", "--output-len", "300",
            "--json", str(out)]
    status, err = _interrupt_when(args, "Initializing minivllm engine", tmp_path)
    _assert_one_line(status, err)
    assert not out.exists()


@pytest.mark.parametrize("case", ["parent_is_a_file", "a_directory", "read_only_dir"])
def test_unwritable_json_is_refused_before_the_bench_runs(tmp_path, monkeypatch, capsys, case):
    import minivllm.bench.latency as latency

    ran = []
    monkeypatch.setattr(latency, "main", lambda a: ran.append(a))
    (tmp_path / "file").write_text("")
    if case == "parent_is_a_file":
        path, why = tmp_path / "file" / "out.json", f"{tmp_path / 'file'} is a file, not a directory"
    elif case == "a_directory":
        path, why = tmp_path, "it is a directory"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        path, why = ro / "out.json", "Permission denied"
    assert main(["bench", "latency", "--modes", "eager", "--batch-sizes", "1", "--json", str(path)]) == 2
    err = capsys.readouterr().err
    assert not ran, "the benchmark ran before the output path was checked"
    assert err.startswith(f"minivllm: error: --json {path}: cannot write") and why in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_writable_json_path_is_left_as_it_was(tmp_path, monkeypatch):
    """The check creates nothing the benchmark would not (folders aside): no empty result file on a failure."""
    import minivllm.bench.latency as latency

    monkeypatch.setattr(latency, "main", lambda a: None)
    path = tmp_path / "new" / "out.json"
    assert main(["bench", "latency", "--modes", "eager", "--batch-sizes", "1", "--json", str(path)]) == 0
    assert not path.exists()
