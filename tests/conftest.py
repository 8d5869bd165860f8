"""Shared test setup.

Triton kernels run under the interpreter when there is no GPU; the variable must be set before triton is
imported, so it is set here, first.
"""

import os
import tempfile
import time

import pytest

try:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover
    pass

# The live quiz records answers in the learner's progress file; tests write to a temporary one, never ~/.minivllm.
os.environ["MINIVLLM_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="minivllm-progress-"), "progress.json")
# Compiled engines built without a cache_dir write their compile cache here, never to ~/.cache/minivllm.
os.environ["MINIVLLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="minivllm-cache-")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A fixture setup of a second or more is written into the JUnit XML (property setup_s), so that
    scripts/test_all.py can say what shared set-up cost (the book build inside the browser test, above all)."""
    t0 = time.perf_counter()
    yield
    took = time.perf_counter() - t0
    if took >= 1.0:
        item.user_properties.append(("setup_s", f"{took:.1f}"))
