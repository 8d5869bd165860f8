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
