"""The compile cache: one directory per (compilation config, model code, model config, torch version).

Inductor already caches compiled FX graphs; we give it a directory of our own under MINIVLLM_CACHE_DIR
(default ~/.cache/minivllm; vLLM's equivalent is $VLLM_CACHE_ROOT/torch_compile_cache; the
VLLM_TORCH_COMPILE_CACHE_DIR variable named in some write-ups does not exist), keyed by a hash so that a
change of any input starts a fresh entry. A manifest of file checksums, written after a successful compile,
lets a later start detect a corrupted or truncated entry and rebuild it instead of crashing or silently
reusing it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import torch

logger = logging.getLogger("minivllm")
MANIFEST = "minivllm_manifest.json"


def code_hash() -> str:
    """Hash of every source file of the package: editing the model code invalidates the cache."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if "labs" in p.parts or "bench" in p.parts:
            continue
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cache_key(config, model_config) -> str:
    c = config.compilation
    parts = {
        "compilation": {k: v for k, v in asdict(c).items() if k not in ("cache_dir",)},
        "model": asdict(model_config) | {"torch_dtype": str(model_config.torch_dtype)},
        "dtype": str(config.dtype), "device": config.device.type, "backend": config.resolved_attention_backend,
        "max_model_len": config.max_model_len, "block_size": config.cache.block_size,
        "torch": torch.__version__, "code": code_hash(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _checksums(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != MANIFEST and not p.name.endswith(".lock"):
            out[p.relative_to(d).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class CompileCache:
    def __init__(self, root: Path, key: str) -> None:
        self.dir = root / "torch_compile_cache" / key
        self.warm = False

    def open(self) -> None:
        """Verify an existing entry (rebuild it if corrupted) and point Inductor/Triton at it."""
        manifest = self.dir / MANIFEST
        if manifest.is_file():
            problem = None
            try:
                expected = json.loads(manifest.read_text())["files"]
                actual = _checksums(self.dir)
                bad = [f for f, s in expected.items() if actual.get(f) != s]
                if bad:
                    problem = f"{len(bad)} file(s) changed or missing, e.g. {bad[0]}"
            except (ValueError, KeyError, OSError) as e:
                problem = f"unreadable manifest ({e})"
            if problem:
                logger.warning("Compile cache %s is corrupted (%s): rebuilding it", self.dir, problem)
                self.clear()
            else:
                self.warm = True
        elif self.dir.exists():
            logger.warning("Compile cache %s has no manifest (an interrupted compile?): rebuilding it", self.dir)
            self.clear()
        self.dir.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(self.dir / "inductor")
        os.environ["TRITON_CACHE_DIR"] = str(self.dir / "triton")
        logger.info("Using cache directory: %s for torch.compile", self.dir)

    def seal(self) -> None:
        """Record checksums after a successful compile; from now on this entry counts as warm."""
        (self.dir / MANIFEST).write_text(json.dumps({"files": _checksums(self.dir)}, indent=0))

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.warm = False
