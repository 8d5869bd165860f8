"""The compile cache survives what a shared machine does to it: a manifest of the wrong JSON type, two
engines starting at once on the same entry, a cache root that is a file or read-only."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minivllm.compilation.cache import MANIFEST, CompileCache
from minivllm.config import CompilationConfig


def sealed_entry(root: Path, key: str = "k") -> CompileCache:
    c = CompileCache(root, key)
    c.open()
    (c.dir / "inductor").mkdir()
    (c.dir / "inductor" / "code.py").write_text("print('compiled')\n")
    c.seal()
    return c


@pytest.mark.parametrize("manifest", ["null", "[]", '{"files": null}', '{"files": {"x": 3}}', '"files"', "{"])
def test_manifest_of_the_wrong_type_is_rebuilt(tmp_path, manifest, caplog):
    c = sealed_entry(tmp_path)
    (c.dir / MANIFEST).write_text(manifest)
    again = CompileCache(tmp_path, "k")
    with caplog.at_level(logging.WARNING, logger="minivllm"):
        again.open()
    assert "corrupted" in caplog.text and not again.warm
    assert again.dir.is_dir() and not (again.dir / "inductor").exists()
    again.seal()
    warm = CompileCache(tmp_path, "k")
    warm.open()
    assert warm.warm


def test_a_sealed_entry_is_warm(tmp_path):
    sealed_entry(tmp_path)
    c = CompileCache(tmp_path, "k")
    c.open()
    assert c.warm and (c.dir / "inductor" / "code.py").is_file()
    assert json.loads((c.dir / MANIFEST).read_text())["files"]


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from minivllm.compilation.cache import CompileCache
    c = CompileCache(Path(sys.argv[1]), "k")
    c.open()
    (c.dir / "inductor").mkdir(exist_ok=True)
    (c.dir / "inductor" / "first.py").write_text("1")
    print("ready", flush=True)
    time.sleep(2.0)  # still compiling
    (c.dir / "inductor" / "second.py").write_text("2")
    c.seal()
""")


def test_an_entry_another_process_is_writing_is_not_deleted(tmp_path):
    """Before the lock, the second engine saw an entry without a manifest, called it an interrupted
    compile and deleted it under the first engine's feet."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert writer.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        c = CompileCache(tmp_path, "k")
        c.open()  # waits for the writer to seal, then starts warm from its entry
        waited = time.monotonic() - t0
    finally:
        assert writer.wait(timeout=60) == 0
    assert waited > 0.5
    assert c.warm and c.dir == tmp_path / "torch_compile_cache" / "k"
    assert (c.dir / "inductor" / "first.py").read_text() == "1"
    assert (c.dir / "inductor" / "second.py").read_text() == "2"
    c.seal()


def test_an_unsealed_entry_of_this_process_is_taken_over_not_waited_for(tmp_path):
    failed = CompileCache(tmp_path, "k")
    failed.open()  # an engine that failed before seal(), still referenced (e.g. by a notebook traceback)
    (failed.dir / "partial.py").write_text("x")
    nxt = CompileCache(tmp_path, "k")
    nxt.LOCK_TIMEOUT_S = 1.0
    t0 = time.monotonic()
    nxt.open()
    assert time.monotonic() - t0 < 0.5 and nxt.dir == failed.dir
    assert not (nxt.dir / "partial.py").exists()  # left over, not being written: rebuilt
    nxt.seal()


def test_lock_timeout_compiles_privately(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert writer.stdout.readline().strip() == "ready"
        c = CompileCache(tmp_path, "k")
        c.LOCK_TIMEOUT_S = 0.3
        c.open()
        assert c.dir != tmp_path / "torch_compile_cache" / "k" and c.dir.is_dir() and not c.warm
        assert (tmp_path / "torch_compile_cache" / "k" / "inductor" / "first.py").is_file()
    finally:
        assert writer.wait(timeout=60) == 0


def _root_is_unusable(root: Path, caplog) -> None:
    caches = [CompileCache(root, "k"), CompileCache(root, "k2")]
    with caplog.at_level(logging.WARNING, logger="minivllm"):
        for c in caches:
            c.open()
            assert c.dir.is_dir() and not c.warm
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(c.dir / "inductor")
            c.seal()
    warnings = [r for r in caplog.records if "not a writable directory" in r.getMessage()]
    assert len(warnings) == 1 and str(root) in warnings[0].getMessage()


def test_cache_dir_that_is_a_file_runs_without_a_cache(tmp_path, monkeypatch, caplog):
    f = tmp_path / "a-file"
    f.write_text("not a directory")
    monkeypatch.setenv("MINIVLLM_CACHE_DIR", str(f))
    root = CompilationConfig().resolved_cache_dir()
    assert root == f
    _root_is_unusable(root, caplog)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write a read-only directory")
def test_read_only_cache_dir_runs_without_a_cache(tmp_path, caplog):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _root_is_unusable(ro, caplog)
    finally:
        ro.chmod(0o700)
