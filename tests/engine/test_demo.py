"""`make demo`: the engines' INFO lines only with --verbose, the footnote written for the device it ran on."""

from __future__ import annotations

import argparse
import logging

from minivllm import DEFAULT_MODEL, demo


def test_the_footnote_names_the_device():
    cpu = demo.footnote(False, "", 3_000_000)
    gpu = demo.footnote(True, "NVIDIA L4", 3_000_000)
    assert "on a CPU" in cpu and "3.0M-parameter" in cpu
    assert "NVIDIA L4" in gpu and "CPU" not in gpu and "launching kernels" in gpu


def test_the_embedded_models_size_is_read_from_its_files():
    assert 10_000 < demo._params(DEFAULT_MODEL) < 100_000_000


def test_no_engine_logs_unless_verbose(capfd, monkeypatch):
    monkeypatch.delenv("MINIVLLM_DEMO_VERBOSE", raising=False)
    p = argparse.ArgumentParser()
    demo.add_arguments(p)
    assert demo.main(p.parse_args(["--skip-modes"])) == 0
    out, err = capfd.readouterr()
    assert "right" in out and "INFO" not in out + err
    assert demo.verbose(p.parse_args(["--verbose"]))
    logging.getLogger("minivllm").setLevel(logging.INFO)
