"""Lab 11: the views on a record shaped like the H200's (made-up values, written to a temporary results dir, as
the notebook will read it once recorded) and with no record at all; every key the questions, the bank's sd1/sd2
and the claim cite exists in that shape; the recorder's CPU path (provenance, the embedded model's acceptance,
greedy equality), the graphs a speculative engine reports, and the n-gram drafts the exercise asks for."""

from __future__ import annotations

import json

import pytest
from minivllm_labs import lab08, lab11, lab11_views
from minivllm_labs.common import lab_model, quiet_engine_logs
from minivllm_labs.lab_info import resolve_key
from minivllm_labs.quiz import grade
from minivllm_labs.recorded import RESULTS_DIR_ENV, load_recorded


def _acc(drafts, draft_tokens, accepted, k):
    return {"num_drafts": drafts, "num_draft_tokens": draft_tokens, "num_accepted_tokens": accepted,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "mean_acceptance_length": 1 + accepted / drafts if drafts else 1.0,
            "accepted_per_pos": [accepted // k] * k if k else [], "requests": 32, "generated": 256}


def _tpot(batch, ms, spread, mal=1.0):
    return {"batch": batch, "tpot_ms": ms, "tpot_ms_range": [ms - spread, ms + spread], "acceptance_rate": None,
            "mean_acceptance_length": mal}


def _graphs(q, pool):
    return {"mode": "FULL_AND_PIECEWISE", "uniform_decode_query_len": q, "full_sizes": [1, 2, 4, 8, 16, 32, 64],
            "piecewise_sizes": [2, 4, 8, 16, 32, 64], "num_graphs": 13, "capture_s": 1.5, "pool_mib": pool,
            "free_drop_mib": pool + 40}


def _model(sets, tpots, sampled=False):
    """k0, k2, k4 rows: `sets` {name: (drafts, draft tokens, accepted) at k = 4}, `tpots` {batch: (k0, k2, k4) ms}."""
    out = {}
    for k in (0, 2, 4):
        row = {"available": True,
               "acceptance": {n: _acc(*(v if k else (0, 0, 0)), k) for n, v in sets.items()},
               "tpot": {f"b{b}": _tpot(b, ms[k // 2], 0.01, 1.0 + k / 4) for b, ms in tpots.items()},
               "graphs": _graphs(1 + k, 100.0 + 10 * k)}
        if k:
            row["greedy_equal"] = {"identical": 31, "requests": 32}
        if k == 4 and sampled:
            row["sampled"] = {"requests": 512, "new_tokens": 6, "temperature": 1.5, "tv_plain_vs_plain": 0.05,
                              "tv_spec_vs_plain": 0.04, "accepted": 900}
        out[f"k{k}"] = row
    return {"k": out}


#: A record shaped like what `python -m minivllm_labs.record lab11` writes on the H200 (values made up): batch 1
#: faster with speculation beyond the spread, batch 64 slower, the embedded model's batch 64 within noise.
GPU_LIKE = {
    "lab": "lab11", "device": "cuda", "k_values": [0, 2, 4], "lookup": dict(lab11.LOOKUP), "batches": [1, 64],
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.11", "commit": "0" * 40, "date": "2026-12-03T19:00:00+00:00",
                   "command": "python -m minivllm_labs.record lab11"},
    "models": {"qwen3-06b": _model({"repeat": (400, 1500, 1200), "novel": (50, 180, 20)},
                                   {1: (1.0, 0.8, 0.6), 64: (1.5, 1.8, 2.2)}),
               "embedded": _model({"tasks": (20, 70, 10), "repeated_question": (60, 220, 150)},
                                  {1: (0.5, 0.45, 0.4), 64: (0.6, 0.6, 0.605)}, sampled=True)},
    "seconds": 120.0,
}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """GPU_LIKE as assets/results/h200/lab11.json of a temporary results dir: what the notebook loads."""
    (tmp_path / "lab11.json").write_text(json.dumps(GPU_LIKE))
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))
    return load_recorded("lab11")


def test_views_read_a_recorded_result(recorded):
    v = lab11_views
    for text in (v.acceptance_table(recorded), v.tpot_table(recorded), v.graphs_table(recorded),
                 v.equality_text(recorded), v.tpot_summary(recorded)):
        assert "not recorded" not in text and "GPU only" not in text, text
    assert "a question repeated" in v.acceptance_table(recorded) and "68%" in v.acceptance_table(recorded)
    summary = v.tpot_summary(recorded).splitlines()
    assert "qwen3-06b, batch 1: k=4 0.600 ms vs k=0 1.000 ms: faster (1.67x)" in summary[0]
    assert "qwen3-06b, batch 64" in summary[1] and ": slower (0.68x)" in summary[1] and "更慢" in summary[1]
    assert summary[3].startswith("embedded, batch 64: k=4 0.605 ms vs k=0 0.600 ms: within noise · ")
    assert summary[3].endswith("在噪声范围内")
    graphs = v.graphs_table(recorded).splitlines()
    assert any(g.split()[1:4] == ["4", "FULL_AND_PIECEWISE", "5"] and "140.0" in g for g in graphs), graphs
    assert "qwen3-06b: the graph pool with k=4 is 140.0 MiB against 100.0 MiB without speculation (+40.0 MiB)" in graphs
    assert "31/32" in v.equality_text(recorded) and "0.040" in v.equality_text(recorded)
    fig = v.plot_acceptance(recorded)
    ys = {t.name: list(t.y) for t in fig.data}
    assert ys["embedded, a question repeated"][0] == 1.0 and ys["qwen3-06b, repeated pattern"][2] == pytest.approx(4.0)


def test_views_without_a_record_or_with_parts_missing():
    v = lab11_views
    for res in (None, {}, {"models": {}}):
        for f in (v.acceptance_table, v.tpot_table, v.graphs_table, v.equality_text, v.tpot_summary):
            assert "not recorded yet" in f(res)
    cpu = {"models": {"embedded": {"k": {"k0": {"available": True, "acceptance": {}, "tpot": {}},
                                         "k2": {"available": False, "why": "TypeError: no speculative_config"}}}}}
    assert "GPU only" in v.graphs_table(cpu)
    assert "not available in this engine build: TypeError" in v.acceptance_table(cpu)
    for q in v.QUESTIONS.values():
        for res in (None, {}, cpu):
            assert isinstance(q.evidence(res), str)


def _cites():
    """(question id, key) of every cite of lab11.json: the lab's questions and the bank's sd1, sd2."""
    qs = [*lab11_views.QUESTIONS.values(), *(q for q in lab08.QUESTIONS if q.qid in ("lab08.sd1", "lab08.sd2"))]
    return [(q.qid, key) for q in qs for path, key, _ in q.cites if path.endswith("/lab11.json")]


def test_every_cited_key_exists_in_a_recorded_shaped_result():
    cites = _cites()
    assert {qid for qid, _ in cites} == {"lab11.q1", "lab11.q2", "lab11.q3", "lab11.q4", "lab08.sd1", "lab08.sd2"}
    for qid, key in cites:
        assert resolve_key(GPU_LIKE, key) is not None, (qid, key)
    (claim,) = lab11_views.CLAIMS
    assert resolve_key(GPU_LIKE, claim.evidence_key) == 1 + max(lab11.K_VALUES)
    assert claim.figure == 5  # the recorded value (test_lab07 checks it against lab11.json)


def test_right_answers_grade_right_against_the_record(recorded):
    for q in lab11_views.QUESTIONS.values():
        ok, feedback = grade(q, "ABCD"[q.correct], recorded)
        assert ok and "lab11.json" in feedback, q.qid
        for wrong in set("ABCD") - {"ABCD"[q.correct]}:
            ok, feedback = grade(q, wrong, recorded, lang="zh")
            assert not ok and "误解" in feedback, (q.qid, wrong)


def test_draft_for_copies_what_followed_the_suffix():
    assert lab11.draft_for([1, 2, 3, 4, 2, 3], k=4, min_n=2, max_n=3) == [4, 2, 3]  # vLLM's docstring example
    assert lab11.draft_for([1, 2, 3, 4, 1, 2, 3], k=2) == [4, 1]
    assert lab11.draft_for([1, 2, 3, 4, 5], k=4) == []


@pytest.mark.slow
def test_the_recorder_on_the_cpu(tmp_path, monkeypatch):
    """`record lab11 --quick` on the CPU: provenance, the embedded model only, speculation never changes greedy
    tokens in fp32, lookup accepts more on the repeated questions than on the tasks asked once, and every cite
    of the embedded model resolves in what it wrote; the notebook's views read it back."""
    from minivllm_labs.record import record_one

    quiet_engine_logs()
    out = record_one("lab11", tmp_path / "lab11.json", None, True, ["lab11", "--quick"])
    rec = json.loads(out.read_text())
    assert rec["provenance"]["command"].endswith("lab11 --quick") and list(rec["models"]) == ["embedded"]
    ks = rec["models"]["embedded"]["k"]
    assert all(ks[f"k{k}"]["available"] for k in lab11.K_VALUES), ks
    assert ks["k0"]["acceptance"]["tasks"]["num_drafts"] == 0
    for k in (2, 4):
        eq = ks[f"k{k}"]["greedy_equal"]
        assert eq["identical"] == eq["requests"] > 0, (k, eq)
        acc = ks[f"k{k}"]["acceptance"]
        assert acc["repeated_question"]["mean_acceptance_length"] > acc["tasks"]["mean_acceptance_length"], acc
    assert ks["k4"]["sampled"]["accepted"] > 0  # rejection sampling ran on accepted drafts
    for qid, key in _cites():
        if key.startswith("models.embedded"):
            assert resolve_key(rec, key) is not None, (qid, key)
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))
    assert "not recorded" not in lab11_views.acceptance_table(load_recorded("lab11"))


def test_a_speculative_engine_reports_its_decode_query_length():
    quiet_engine_logs()
    llm = lab11.engine(lab_model(), 4)
    try:
        g = lab11.graphs(llm)
    finally:
        lab11.free(llm)
    assert g["uniform_decode_query_len"] == 5 and g["mode"] == "NONE" and g["full_sizes"] == []
