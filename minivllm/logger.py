"""vLLM-style log lines: `INFO 11-29 23:40:01 [startup.py:42] message`."""

from __future__ import annotations

import logging
import os
import sys

_FORMAT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"


def init_logger() -> logging.Logger:
    logger = logging.getLogger("minivllm")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(os.environ.get("MINIVLLM_LOGGING_LEVEL", "INFO"))
        logger.propagate = False
    return logger


def progress_bars_enabled() -> bool:
    """The engine's own progress bars (weight shards, graph capture) are INFO-level reports: an engine told to
    log warnings only (the labs' quiet notebooks) draws none. `generate(use_tqdm=...)` stays the caller's."""
    return logging.getLogger("minivllm").isEnabledFor(logging.INFO)
