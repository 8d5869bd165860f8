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


def test_chunked_steps_with_a_stored_mode_and_without_a_record():
    r = {"chunked": True, "budget": 256, "cudagraph_mode": "FULL_AND_PIECEWISE", "step_tokens": [3, 256],
         "step_ms": [2.0, 5.0]}
    assert "graphs FULL_AND_PIECEWISE: 256 tok 5.0 ms" in views.chunked_steps_text({"chunked": [r]})
    assert "not recorded" in views.chunked_steps_text(None)


def _run(chunked: bool, runs: list[float]) -> dict:
    return {"chunked": chunked, "budget": 256 if chunked else 2048, "long_len": 1536,
            "cudagraph_mode": "FULL_AND_PIECEWISE", "max_ms_with_decodes": sorted(runs)[len(runs) // 2],
            "max_tokens_with_decodes": 256,
            "max_ms_runs": runs}


@pytest.mark.parametrize("chunked_runs, unchunked_runs, word_en, word_zh", [
    ([4.0, 4.2, 4.1], [9.0, 9.5, 9.1], "shortened", "缩短"),
    ([9.0, 9.5, 9.1], [4.0, 4.2, 4.1], "longer", "变长"),
    ([4.0, 9.2, 5.0], [4.5, 9.0, 6.0], "within the spread", "没有让"),
    ([4.0], [9.0], "too few runs", "不足以判定"),
])
def test_chunked_verdict_follows_the_runs_and_their_spread(chunked_runs, unchunked_runs, word_en, word_zh):
    rec = {"chunked": [_run(True, chunked_runs), _run(False, unchunked_runs)]}
    en, zh = views.chunked_verdict(rec, "en"), views.chunked_verdict(rec, "zh")
    n = len(chunked_runs)
    assert word_en in en and f"{n} run{'s' if n > 1 else ''} each" in en and "FULL_AND_PIECEWISE" in en
    assert word_zh in zh and f"各跑 {n} 次" in zh
    assert "not recorded" in views.chunked_verdict(None)
    assert ("median of 3 runs" if n > 1 else "(one run)") in views.chunked_table(rec)


def test_budget_steps_explain_the_small_budget():
    rec = load_recorded("lab06")
    rows = {(r["max_num_batched_tokens"], r["max_num_seqs"]): r for r in rec["workload"]["rows"] if r["chunked"]}
    text = views.budget_steps_text(rec)
    small, big = rows[(512, 256)], rows[(8192, 256)]
    prompt = small["mean_batch_tokens"] * small["steps"] - small["output_tokens"]
    least_small, least_big = -(-int(prompt) // 512), -(-int(prompt) // 8192)
    assert f"at least {least_small} steps with prefill" in text
    # the prose: the same tokens in more steps; what an extra step costs is its fixed part (the weights read once,
    # the host's launch), so less than either run's mean step, which also carries the tokens
    extra, gap_s = small["steps"] - big["steps"], small["wall_s"] - big["wall_s"]
    assert extra > 0 and gap_s > 0
    per_step_ms = 1000 * gap_s / extra
    assert f"{extra} more steps" in text and f"{per_step_ms:.2f} ms per extra step" in text
    assert per_step_ms < min(1000 * r["wall_s"] / r["steps"] for r in (small, big))
    # and against the middle budget too: the quotient is not one fixed cost per step (the prose says so)
    mid = rows[(2048, 256)]
    extra_mid = small["steps"] - mid["steps"]
    assert f"budget 512 vs 2048: {extra_mid} more steps" in text
    assert f"{1000 * (small['wall_s'] - mid['wall_s']) / extra_mid:.2f} ms per extra step" in text
