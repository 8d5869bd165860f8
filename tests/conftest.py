"""Shared test setup.

Triton kernels run under the interpreter when there is no GPU; the variable must be set before triton is
imported, so it is set here, first.
"""

import os

try:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover
    pass

# The live quiz records answers in the learner's progress file; tests write to a temporary one, never ~/.minivllm.
import tempfile  # noqa: E402

os.environ["MINIVLLM_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="minivllm-progress-"), "progress.json")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
