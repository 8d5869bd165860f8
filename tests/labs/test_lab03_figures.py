"""Lab 03's prose numbers come from its record: the stacking verdict (interview question 1) and the kernels
per step against TPOT (the kernel count does not set the time)."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab03_views as views
from minivllm_labs.recorded import load_recorded


@pytest.fixture(scope="module")
def rec() -> dict:
    return load_recorded("lab03")


def test_stacking_text_reads_both_builds_and_judges_the_spread(rec):
    text = views.stacking_text(rec)
    for build, corners in rec["grid"].items():
        g = rec["configs"][corners["graphs"]]["tpot_ms"]["1"]["median"]
        both = rec["configs"][corners["both"]]["tpot_ms"]["1"]["median"]
        assert f"{build}, batch 1: graphs alone / graphs + mode 3 = {round(g / both, 2)}x" in text
    # what the verdict paragraph says: compile helps PyTorch's ops and hurts the hand-fused build at batch 1
    torch_ops = rec["configs"]["torch-ops graphs"]["tpot_ms"]["1"]["median"] / rec["configs"]["L3+graphs"][
        "tpot_ms"]["1"]["median"]
    fused = rec["configs"]["graphs"]["tpot_ms"]["1"]
    fused_both = rec["configs"]["fused L3+graphs"]["tpot_ms"]["1"]
    assert torch_ops > 2 and fused["max"] < fused_both["min"]
    assert views.stacking_text(None) == views.NOT_RECORDED


def test_kernel_count_does_not_order_the_engines_without_graphs(rec):
    text = views.kernels_vs_time_text(rec)
    cfg = rec["configs"]
    eager, l2 = cfg["eager"], cfg["L2"]
    # the claim the prose makes: mode 2 launches more kernels than the hand-written eager engine, and is faster
    assert l2["kernels_per_step"] > eager["kernels_per_step"]
    assert l2["tpot_ms"]["1"]["max"] < eager["tpot_ms"]["1"]["min"]
    assert cfg["torch-ops eager"]["kernels_per_step"] > l2["kernels_per_step"]
    assert f"{eager['kernels_per_step']} kernels" in text and "us per kernel" in text
    assert views.kernels_vs_time_text({}) == views.NOT_RECORDED
