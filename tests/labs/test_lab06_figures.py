"""Lab 06: the chunked-prefill steps as recorded, with the graph mode they ran under."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab06_views as views
from minivllm_labs.recorded import load_recorded


def test_chunked_steps_name_the_mode_and_every_prefill_step():
    rec = load_recorded("lab06")
    text = views.chunked_steps_text(rec).splitlines()
    assert len(text) == len(rec["chunked"])
    for line, r in zip(text, rec["chunked"]):
        assert ("cudagraph_mode" in r and r["cudagraph_mode"] in line) or "FULL_DECODE_ONLY" in line
        assert f"{max(r['step_tokens'])} tok" in line
    # the prose: with full decode graphs only, an eager step costs about the same at any token count
    unchunked = next(r for r in rec["chunked"] if not r["chunked"])
    big = [ms for t, ms in zip(unchunked["step_tokens"], unchunked["step_ms"]) if t >= 16]
    assert max(big) < 1.5 * min(big)


def test_chunked_steps_with_a_stored_mode_and_without_a_record():
    r = {"chunked": True, "budget": 256, "cudagraph_mode": "FULL_AND_PIECEWISE", "step_tokens": [3, 256],
         "step_ms": [2.0, 5.0]}
    assert "graphs FULL_AND_PIECEWISE: 256 tok 5.0 ms" in views.chunked_steps_text({"chunked": [r]})
    assert "not recorded" in views.chunked_steps_text(None)


def test_budget_steps_explain_the_small_budget():
    rec = load_recorded("lab06")
    rows = {(r["max_num_batched_tokens"], r["max_num_seqs"]): r for r in rec["workload"]["rows"] if r["chunked"]}
    text = views.budget_steps_text(rec)
    small, big = rows[(512, 256)], rows[(8192, 256)]
    prompt = small["mean_batch_tokens"] * small["steps"] - small["output_tokens"]
    least_small, least_big = -(-int(prompt) // 512), -(-int(prompt) // 8192)
    assert f"at least {least_small} steps with prefill" in text
    # the prose: the extra prefill steps, at the tens of ms an eager step costs (section g), are the wall-time gap
    eager_ms = min(ms for r in rec["chunked"] for t, ms in zip(r["step_tokens"], r["step_ms"]) if t >= 16)
    gap_s = small["wall_s"] - big["wall_s"]
    assert 0.5 * gap_s < (least_small - least_big) * eager_ms / 1e3 < 2 * gap_s
