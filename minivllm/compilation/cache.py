"""The compile cache: one directory per (compilation config, model code, model config, torch version).

Inductor already caches compiled FX graphs; we give it a directory of our own under MINIVLLM_CACHE_DIR
(default ~/.cache/minivllm; vLLM's equivalent is $VLLM_CACHE_ROOT/torch_compile_cache; the
VLLM_TORCH_COMPILE_CACHE_DIR variable named in some write-ups does not exist), keyed by a hash so that a
change of any input starts a fresh entry. A manifest of file checksums, written after a successful compile,
lets a later start detect a corrupted or truncated entry and rebuild it instead of crashing or silently
reusing it.

Nothing here is global to the process for longer than one compile: Inductor and Triton read their cache
directories from TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR (there is no config option for it), so the
variables are set while this engine compiles, and the environment is put back exactly as it was
afterwards (scoped_cache_env). The entry lock is held per engine: another thread of the same process waits for it
like another process does.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import torch

try:
    import fcntl
except ImportError:  # Windows: no entry locks (the engine targets Linux)
    fcntl = None

logger = logging.getLogger("minivllm")
MANIFEST = "minivllm_manifest.json"
CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextmanager
def scoped_cache_env():
    """os.environ exactly as it was on exit: CompileCache.open sets CACHE_ENV for this compile, and torch
    sets variables of its own while it compiles (TORCHINDUCTOR_CACHE_DIR when unset, and one it reads only
    while loading each compiled CPU library, _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in saved]:
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def code_hash() -> str:
    """Hash of every source file of the package: editing the model code invalidates the cache."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if p.relative_to(root).parts[0] in ("bench", "tools"):  # not part of the compiled forward
            continue
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cache_key(config, model_config) -> str:
    c = config.compilation
    parts = {
        "compilation": {k: v for k, v in asdict(c).items() if k not in ("cache_dir",)},
        "model": asdict(model_config) | {"torch_dtype": str(model_config.torch_dtype)},
        "dtype": str(config.dtype), "device": config.device.type, "backend": config.attention_backend,
        "max_model_len": config.max_model_len, "block_size": config.cache.block_size,
        "batch_invariant": config.batch_invariant, "quantization": config.quantization,
        "torch": torch.__version__, "code": code_hash(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _checksums(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != MANIFEST and not p.name.endswith(".lock"):
            out[p.relative_to(d).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


_HOLDERS: dict[str, "weakref.ref[CompileCache]"] = {}  # entry lock path -> the object of this process holding it
_HOLDERS_LOCK = threading.Lock()  # threads of this process check and take over _HOLDERS entries one at a time
_WARNED_ROOTS: set[str] = set()


def _private_dir() -> Path:
    """A temporary directory for a start that cannot use the shared cache; removed when the process ends."""
    d = Path(tempfile.mkdtemp(prefix="minivllm-compile-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


class CompileCache:
    """One cache entry. `open()` takes the entry's lock and holds it until `seal()`: an entry with no
    manifest yet is either left over from a crash or being written by another process right now, and only
    the lock tells the two apart. So two engines starting at once do not wipe each other's compile: the
    second waits for the first to seal the entry, then starts warm from it."""

    LOCK_TIMEOUT_S = 600.0  # then compile into a private directory instead of waiting longer

    def __init__(self, root: Path, key: str) -> None:
        self.root = root
        self.dir = root / "torch_compile_cache" / key
        self.warm = False
        self._lock_file = None  # the open lock file while this object holds the entry's lock
        self._owner: threading.Thread | None = None  # the thread that took the lock

    def open(self) -> None:
        """Lock the entry, verify it (rebuild it if corrupted) and point Inductor/Triton at it."""
        if not self._lock():
            self.dir = _private_dir()
        manifest = self.dir / MANIFEST
        if manifest.is_file():
            problem = None
            try:
                data = json.loads(manifest.read_text())
                expected = data.get("files") if isinstance(data, dict) else None
                if not isinstance(expected, dict) or not all(isinstance(v, str) for v in expected.values()):
                    problem = f"the manifest is not {{\"files\": {{name: sha256}}}} but {str(data)[:60]}"
                else:
                    actual = _checksums(self.dir)
                    bad = [f for f, s in expected.items() if actual.get(f) != s]
                    if bad:
                        problem = f"{len(bad)} file(s) changed or missing, e.g. {bad[0]}"
            except (ValueError, OSError) as e:
                problem = f"unreadable manifest ({e})"
            if problem:
                logger.warning("Compile cache %s is corrupted (%s): rebuilding it", self.dir, problem)
                self.clear()
            else:
                self.warm = True
        elif self.dir.exists() and any(self.dir.iterdir()):
            logger.warning("Compile cache %s has no manifest (an interrupted compile?): rebuilding it", self.dir)
            self.clear()
        self.dir.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(self.dir / "inductor")
        os.environ["TRITON_CACHE_DIR"] = str(self.dir / "triton")
        logger.info("Using cache directory: %s for torch.compile", self.dir)

    def seal(self) -> None:
        """Record checksums after a successful compile (atomically: a reader sees the old manifest or the new
        one, never half of one); from now on this entry counts as warm, and other processes may use it."""
        try:
            tmp = self.dir / f"{MANIFEST}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"files": _checksums(self.dir)}, indent=0))
            os.replace(tmp, self.dir / MANIFEST)
        finally:
            self._unlock()

    def clear(self) -> None:
        """Delete the entry's files; only called while this object holds the entry's lock."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.warm = False

    def __del__(self) -> None:  # an engine that failed before seal() must not block the next start
        self._unlock()

    # ---- the entry lock --------------------------------------------------------------------------
    def _lock(self) -> bool:
        """Take the entry's lock (waiting while another process holds it). False: use a private directory
        (the cache root is not a writable directory, or the lock stayed taken past LOCK_TIMEOUT_S)."""
        if self._lock_file is not None or fcntl is None:
            return True
        path = self.root / "torch_compile_cache.locks" / f"{self.dir.name}.lock"  # beside the entries, not among them
        try:
            self.dir.parent.mkdir(parents=True, exist_ok=True)
            path.parent.mkdir(exist_ok=True)
            lock_file = open(path, "a+")
        except OSError as e:
            if str(self.root) not in _WARNED_ROOTS:
                _WARNED_ROOTS.add(str(self.root))
                logger.warning("The compile cache directory %s (compilation_config.cache_dir or MINIVLLM_CACHE_DIR)"
                               " is not a writable directory (%s): compiling without a persistent cache, so "
                               "every start compiles again", self.root, e)
            return False
        with _HOLDERS_LOCK:
            holder = _HOLDERS.get(str(path))
            previous = holder() if holder is not None else None
            if previous is not None and previous._lock_file is not None and previous._abandoned():
                lock_file.close()  # an earlier engine of this thread (or of a finished one) that never sealed,
                # because it failed: take its lock over (waiting for it would wait for ourselves)
                self._lock_file, previous._lock_file = previous._lock_file, None
                self._owner = threading.current_thread()
                _HOLDERS[str(path)] = weakref.ref(self)
                return True
        # Else wait on the file lock: it also keeps out another live thread of this process, because two
        # open() of one file are two flock holders even in one process.
        deadline = time.monotonic() + self.LOCK_TIMEOUT_S
        waited = False
        while True:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock_file.close()
                    logger.warning("Compile cache %s is still being written by another process after %.0f s: "
                                   "compiling into a private directory instead", self.dir, self.LOCK_TIMEOUT_S)
                    return False
                if not waited:
                    logger.info("Compile cache %s is being written by another process: waiting for it", self.dir)
                    waited = True
                time.sleep(0.2)
        with _HOLDERS_LOCK:
            self._lock_file, self._owner = lock_file, threading.current_thread()
            _HOLDERS[str(path)] = weakref.ref(self)
        return True

    def _abandoned(self) -> bool:
        """True when no compile can still be writing under this object's lock: it was taken by the calling
        thread (which is here, not compiling) or by a thread that has ended."""
        owner = self._owner
        return owner is None or owner is threading.current_thread() or not owner.is_alive()

    def _unlock(self) -> None:
        lock_file, self._lock_file = getattr(self, "_lock_file", None), None
        if lock_file is not None:
            lock_file.close()  # closing the only descriptor of the file releases its flock
