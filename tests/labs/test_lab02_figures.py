"""Lab 02's reconciling views: every graph-pool figure with what it measured, and why padding costs no time.

They read the recorded H200 files (lab02.json, latency.json, compile_vs_graphs.json, kernels.json), so the
prose around them states no number a re-recording could contradict.
"""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab02_views as views
from minivllm_labs.recorded import load_recorded


@pytest.fixture(scope="module")
def rec() -> dict:
    return load_recorded("lab02")


def test_padding_bound_compares_the_weight_read_with_the_replays(rec):
    text = views.padding_bound_text(rec, copy_gbps=4000.0)
    weight_ms = views.QWEN3_06B_PARAMS * 2 / 4000e9 * 1e3
    assert f"{weight_ms:.2f} ms" in text
    slowest = max(rec["padding"]["replay_ms"][k]["median"] for k in ("1", "5", "8"))
    assert slowest > 2 * weight_ms  # the claim the text makes: replays are several times the weight read
    assert "latency-bound" in text and "not memory-bound" in text


def test_padding_bound_reads_the_recorded_bandwidth_and_copes_without_it(rec):
    assert "copy_GBps" in views.padding_bound_text(rec)
    assert views.padding_bound_text(None) == views.NOT_RECORDED
    assert views.padding_bound_text({"padding": {"device": "cpu"}}) == views.NEEDS_GPU


def test_qwen3_parameter_count_matches_its_shape():
    layers, hidden, heads, kv, head, mlp, vocab = 28, 1024, 16, 8, 128, 3072, 151936
    per_layer = (hidden * heads * head * 2 + hidden * kv * head * 2 + 2 * head + 3 * hidden * mlp + 2 * hidden)
    assert views.QWEN3_06B_PARAMS == layers * per_layer + vocab * hidden + hidden  # tied LM head


def test_pool_figures_name_every_pool_the_lab_shows(rec):
    text = views.pool_figures_text(rec)
    for figure in (rec["limits"]["alloc"]["pool_mib"], rec["pool"]["shared"]["total_mib"],
                   rec["pool"]["separate"]["total_mib"], rec["padding"]["capture"]["pool_mib"]):
        assert f"{figure} MiB" in text
    assert "latency.json" in text and "superseded" in text
    assert views.pool_figures_text(None) == views.NOT_RECORDED
