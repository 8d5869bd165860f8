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
