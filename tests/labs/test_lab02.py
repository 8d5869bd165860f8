"""Lab 02 (inside a CUDA graph): graders, capture-size rule, views on GPU-shaped results, claims, run_all.

The GPU measurements cannot run here; their views and question feedback are checked on a results dict of
the shape run_all writes on CUDA (numbers made up), and run_all(quick=True) runs the CPU path for real.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab02
from minivllm_labs.catalog import VERDICTS, resolve_key
from minivllm_labs.common import REPO_ROOT, lab_model
from tests.labs.lab_quiz_checks import check_answer_positions, check_grader

QUESTIONS = (lab02.Q1, lab02.Q2, lab02.Q3, lab02.Q4, lab02.Q5)
_S = {"median": 1.0, "min": 0.9, "max": 1.1, "n": 7}


def _stats(ttft: float, tpot: float | None, paths: dict | None, prompt: int = 16) -> dict:
    d = {"batch": 1, "prompt_len": prompt, "new_tokens": 32, "ttft_ms": {**_S, "median": ttft},
         "steps_by_path": paths}
    if tpot is not None:
        d["tpot_ms"] = {**_S, "median": tpot}
    return d


def _mode(tpot: float, short: dict | None, long: dict | None) -> dict:
    return {"startup_s": 5.0, "capture": {}, "pieces": 29,
            "decode": {"1": _stats(20.0, tpot, {"full": 31}), "8": _stats(21.0, tpot * 1.2, {"full": 31})},
            "prefill_short": _stats(9.0, None, short, 128), "prefill_long": _stats(30.0, None, long, 1024)}


GPU = {
    "lab": "lab02",
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "0" * 12, "date": "2026-12-01T00:00:00",
                   "command": "python -m minivllm_labs.record lab02"},
    "capture_sizes": lab02.capture_size_table(),
    "rng": {"device": "cuda", "samples": [[1, 2], [3, 4], [5, 6]], "distinct": 3, "replays": 3},
    "padding": {"device": "cuda", "sizes": lab02.PAD_SIZES,
                "replay_ms": {"1": {**_S, "median": 0.9}, "5": {**_S, "median": 1.0}, "8": {**_S, "median": 1.01},
                              "256": {**_S, "median": 3.5}},
                "capture": {"sizes": lab02.PAD_SIZES, "seconds": 3.0, "pool_mib": 60.0},
                "tpot_several": {b: {**_S, "median": 1.1} for b in ("1", "5", "8")},
                "tpot_largest_only": {b: {**_S, "median": 3.7} for b in ("1", "5", "8")}},
    "pool": {"shared": {"total_mib": 60.0, "per_graph_mib": {str(s): 6.0 for s in lab02.POOL_SIZES},
                        "free_drop_mib": 90.0},
             "separate": {"total_mib": 400.0, "per_graph_mib": {str(s): 40.0 for s in lab02.POOL_SIZES},
                          "free_drop_mib": 430.0},
             "sizes": lab02.POOL_SIZES, "num_graphs": 10, "context": 64},
    "modes": {"modes": list(lab02.MODES), "capture_sizes": lab02.MODE_SIZES, "long_prompt": 1024,
              "NONE": _mode(20.0, None, None), "FULL_DECODE_ONLY": _mode(1.2, {"eager": 1}, {"eager": 1}),
              "FULL": _mode(1.5, {"full": 1}, {"eager": 1}),
              "PIECEWISE": _mode(7.0, {"piecewise": 1}, {"eager": 1}),
              "FULL_AND_PIECEWISE": _mode(1.2, {"piecewise": 1}, {"eager": 1})},
    "limits": {"snippet": {"device": "cuda", "replay_matches_eager": True, "max_abs_diff": 0.0},
               "fixed_address": {"device": "cuda", "output_is_for_new_input": False,
                                 "output_is_for_old_input": True, "error_raised": False},
               "branch": {"device": "cuda", "eager_result": [0.0], "replay_result": [2.0],
                          "replay_matches_eager": False, "error_raised": False},
               "alloc": {"device": "cuda", "capture_ok": True, "replay_correct": True, "pool_mib": 20.0},
               "host_sync": {"device": "cuda", "error_raised": True, "error_type": "AcceleratorError",
                             "message": "CUDA error: operation not permitted when stream is capturing",
                             "chain": [{"type": "AcceleratorError",
                                        "message": "CUDA error: operation not permitted when stream is capturing"}]}},
}


# ---- graders (the lab standard's rules, tests/labs/lab_quiz_checks.py) -------------------------------------------
@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q.qid)
def test_graders(q):
    check_grader(q, GPU)


def test_right_answers_spread_and_not_the_longest():
    check_answer_positions(QUESTIONS, 3)


@pytest.mark.parametrize("res", [None, {}, GPU], ids=["none", "empty", "gpu"])
def test_evidence_never_raises(res):
    for q in QUESTIONS:
        assert isinstance(q.evidence(res), str)


def test_feedback_cites_the_measured_numbers():
    assert "3.7" in lab02.Q1.evidence(GPU)  # padded to the size-256 graph
    assert "piecewise 1" in lab02.Q2.evidence(GPU)
    assert "3 distinct" in lab02.Q3.evidence(GPU)
    assert "costs 0.01 ms per replay (1.0%), within the spread" in lab02.Q4.evidence(GPU)  # graph 8 - graph 5
    assert "operation not permitted" in lab02.Q5.evidence(GPU)


# ---- the capture-size rule -------------------------------------------------------------------------------
def test_capture_sizes_follow_vllm():
    d = lab02.capture_sizes_for(256)
    assert d[:6] == [1, 2, 4, 8, 16, 24] and max(d) == 512 and len(d) == 51
    assert lab02.capture_sizes_for(8) == [1, 2, 4, 8, 16]
    assert max(lab02.capture_sizes_for(256, max_cudagraph_capture_size=64)) == 64
    assert lab02.capture_sizes_for(16, cudagraph_capture_sizes=[3, 1]) == [1, 3]


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        lab02.make_llm("unused", "FULLISH")


# ---- views -----------------------------------------------------------------------------------------------
def test_views_render_gpu_results():
    for fig in (lab02.plot_padding(GPU), lab02.plot_pool(GPU), lab02.plot_modes(GPU)):
        assert len(fig.data) >= 2
    assert "size 256" not in lab02.padding_table({})  # a CPU result says what it lacks
    assert "MiB" in lab02.pool_table(GPU) and "piecewise 1" in lab02.modes_table(GPU)
    assert "operation not permitted" in lab02.limits_text(GPU) and "3 distinct" in lab02.rng_text(GPU)
    assert "not recorded yet" in lab02.limits_text(None)


def test_cpu_helpers_skip_without_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CPU-only check")
    for fn in (lab02.capture_replay, lab02.limit_fixed_address, lab02.limit_branch, lab02.alloc_inside_capture,
               lab02.host_sync_inside_capture, lab02.rng_in_graph):
        assert fn() == {"device": "cpu"}


# ---- claims and catalog ----------------------------------------------------------------------------------
def test_claims_cite_keys_that_exist():
    for c in lab02.LAB_INFO.claims:
        assert c.verdict in ("right", "partly", "wrong", "unverifiable") and c.verdict in VERDICTS
        path = REPO_ROOT / c.evidence_file  # the recorded file once it exists, the fixture before
        data = json.loads(path.read_text()) if path.exists() else GPU
        value = resolve_key(data, c.evidence_key)
        if c.figure is not None:
            assert value == c.figure, c.cid


def test_verdicts_table_lists_every_claim():
    text = lab02.verdicts_table(GPU)
    assert all(c.evidence_key in text for c in lab02.LAB_INFO.claims)
    assert "(record)" in lab02.verdicts_table(None)


def test_catalog_lists_lab02():
    from minivllm_labs.catalog import labs

    info = next(i for i in labs() if i.lab == "lab02")
    d = info.as_dict()
    assert {q["source"] for q in d["questions"]} >= {"handbook interview 2", "handbook interview 3"}


# ---- run_all on the CPU ----------------------------------------------------------------------------------
def test_run_all_quick_on_cpu():
    res = lab02.run_all(lab_model(), quick=True)
    json.dumps(res)
    assert resolve_key(res, "capture_sizes.rows.4.num_graphs") == 51
    assert res["modes"]["NONE"]["decode"]["1"]["tpot_ms"]["median"] > 0
    assert isinstance(lab02.modes_table(res), str) and isinstance(lab02.Q2.evidence(res), str)


def test_padding_verdict_compares_with_the_spread():
    import copy

    far = copy.deepcopy(GPU)
    far["padding"]["replay_ms"]["8"] = {**_S, "median": 1.5}
    assert "beyond the spread" in lab02.padding_table(far)
    assert "within the spread" in lab02.padding_table(GPU)


# ---- the two meanings of FULL a record may hold -------------------------------------------------------------------
def _decode_only_record() -> dict:
    """A record of the four modes made when the engine's FULL was decode-only (the H200 one at 135d8b1)."""
    import copy

    old = copy.deepcopy(GPU)
    old["provenance"]["commit"] = "135d8b1"
    m = old["modes"]
    m["modes"] = ["NONE", "FULL", "PIECEWISE", "FULL_AND_PIECEWISE"]
    m["FULL"] = m.pop("FULL_DECODE_ONLY")
    return old


def test_views_name_the_meaning_of_full_in_the_record():
    old = _decode_only_record()
    assert "135d8b1" in lab02.modes_record_text(old) and "decode-only" in lab02.modes_record_text(old)
    assert "today's FULL_DECODE_ONLY" in lab02.modes_table(old) and "today's FULL_DECODE_ONLY" in lab02.Q2.evidence(old)
    new = lab02.modes_record_text(GPU)
    assert "any batch" in new and "128-token prefill ran full 1" in new and "decode-only" not in new
    q2 = lab02.Q2.evidence(GPU)
    assert "- FULL_DECODE_ONLY: " in q2 and "- FULL: 128-token prefill ran full 1" in q2


@pytest.mark.parametrize("res", [None, {}, GPU, "old"], ids=["none", "empty", "gpu", "decode-only-full"])
def test_mode_texts_never_raise(res):
    res = _decode_only_record() if res == "old" else res
    from minivllm_labs import lab02_views

    for fn in (lab02.modes_record_text, lab02.piecewise_gap_text, lab02.modes_table, lab02_views.pool_figures_text):
        assert isinstance(fn(res), str)


def test_piecewise_gap_compares_with_the_decode_graphs():
    text = lab02.piecewise_gap_text(GPU)
    assert "PIECEWISE 7.0 ms vs FULL_DECODE_ONLY 1.2 ms TPOT: 5.83x" in text
    assert "vs FULL (recorded as decode-only" in lab02.piecewise_gap_text(_decode_only_record())
