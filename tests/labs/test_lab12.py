"""Lab 12: the pass toggle on the piece (match counts and the ops each pass leaves), the views and verdicts on a
synthetic record read back from a temporary file, the recorder's GPU path through scripts/fp8_check.py (with its
engine runs replaced), and the questions' right answers against the model shapes and the records they cite."""

import json
import os

import pytest
from minivllm_labs import lab12
from minivllm_labs import lab12_views as views
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.quiz import grade
from minivllm_labs.recorded import load_recorded

QUANT, ADD_NORM, ACT = ("minivllm.scaled_fp8_quant", "minivllm.fused_add_rms_norm_dynamic_per_token_quant",
                        "minivllm.silu_and_mul_dynamic_per_token_quant")


@pytest.fixture(scope="module")
def piece():
    return lab12.run_passes()


@pytest.fixture(scope="module")
def patterns():
    return lab12.patterns()


def test_each_pass_changes_the_piece_as_the_lab_says(piece):
    st = piece["stages"]
    assert [s["name"] for s in st] == ["before", *lab12.PASSES]
    assert [s["matches"] for s in st] == [None, 0, 2, 1]  # no no-op left; two add+norm, one SiLU-and-mul
    assert [s["ops"].get(QUANT, 0) for s in st] == [4, 4, 2, 1]  # o_proj's input (attention's output) stays
    assert [s["ops"].get(ADD_NORM, 0) for s in st] == [0, 0, 2, 2] and st[-1]["ops"][ACT] == 1
    assert st[0]["ops"]["aten.rsqrt"] == 4 and st[2]["ops"]["aten.rsqrt"] == 2  # layer 1's q/k norms stay
    assert st[0]["ops"]["minivllm.fp8_scaled_mm"] == st[-1]["ops"]["minivllm.fp8_scaled_mm"] == 4  # matmuls stay
    diffs = views.piece_diffs({"piece": piece})
    assert "== fuse_norm_quant: 2 match(es), 58 ops (was 72)" in diffs and "+getitem_25, getitem_26 = minivllm.silu_and_mul" in diffs
    before = views.piece_before({"piece": piece})
    assert before.splitlines()[0] == "getitem, getitem_1 = minivllm.scaled_fp8_quant(attn_out)"
    assert "L0.post_attention_layernorm.weight" in before and "more ops: layer 1's q/k RMSNorm and RoPE" in before


def test_the_toggle_runs_only_the_passes_asked_for():
    """Exercise 1's answer: fuse_act_quant alone makes one match and leaves three quantizations."""
    act = lab12.run_passes({"fuse_act_quant": True})["stages"]
    assert [s["name"] for s in act] == ["before", "fuse_act_quant"] and act[1]["matches"] == 1
    assert act[1]["ops"][QUANT] == 3 and ADD_NORM not in act[1]["ops"]


def test_the_pattern_is_the_norm_then_the_quantization(patterns):
    p = patterns
    assert p["search"][0] == "add = aten.add(x, residual)" and "minivllm.scaled_fp8_quant(mul_1)" in p["search"][-2]
    assert p["replace"][0].endswith("fused_add_rms_norm_dynamic_per_token_quant(x, residual, weight, 1e-06)")


def _cell(tpots, floor, mb):
    return {"tpot_ms_median": sorted(tpots)[len(tpots) // 2], "tpot_ms_all": tpots, "floor_ms": floor,
            "weight_mb": mb}


def synthetic_record(piece, patterns) -> dict:
    """A record shaped as the recorder writes it: FP8 slower than bf16 beyond the spread at batch 1, the passes
    within the spread, the default FP8 step 435 kernels."""
    summary = {
        "bf16": {"1": _cell([0.91, 0.93], 0.289, 1192), "64": _cell([1.75, 1.77], 0.35, 1192),
                 "kernels_per_step_batch1": [239, 239]},
        "fp8": {"1": _cell([1.47, 1.50], 0.182, 752), "64": _cell([2.30, 2.35], 0.24, 752),
                "kernels_per_step_batch1": [435, 435]},
        "fp8@L3": {"1": _cell([1.60, 1.64], 0.182, 752), "64": _cell([2.2, 2.3], 0.24, 752),
                   "kernels_per_step_batch1": [380, 380]},
        "fp8@L3+passes": {"1": _cell([1.58, 1.62], 0.182, 752), "64": _cell([2.21, 2.29], 0.24, 752),
                          "kernels_per_step_batch1": [296, 296]},
    }
    runs = {v: [{"compile_report": {"graphs": 2, "passes": [{"name": "fuse_norm_quant", "matches": 56},
                                                            {"name": "fuse_act_quant", "matches": 28}]}
                 if v.endswith("passes") else None}] for v in summary}
    gap = {"max": 0.5, "mean": 0.05, "tokens": 100}
    return {"lab": "lab12", "provenance": {"gpu": "NVIDIA H200", "torch": "2.11", "cuda": "13.0", "commit": "abc1234",
                                           "dirty": False, "date": "2026-12-03T18:00:00+00:00",
                                           "command": "python -m minivllm_labs.record lab12", "python": "3.12"},
            "piece": piece, "patterns": patterns,
            "fp8": {"copy_gbps": 4100.0, "summary": summary, "runs": runs,
                    "accuracy": {"embedded_demo_answers_fp8": 1.0, "embedded": {"bf16": gap, "fp8": gap},
                                 "checkpoint": {"fp8": gap}}}}


@pytest.fixture(scope="module")
def rec(piece, patterns, tmp_path_factory):
    path = tmp_path_factory.mktemp("lab12") / "lab12.json"
    path.write_text(json.dumps(synthetic_record(piece, patterns)))
    return load_recorded("lab12", path)  # provenance checked as for the real file


def test_the_views_read_a_record(rec):
    table = views.fp8_table(rec)
    assert "FP8 (default)" in table and "[1.470, 1.500]" in table and "435" in table and "4,100 GB/s" in table
    passes = views.passes_table(rec)
    assert "FP8 weights (default engine): bf16 (default) -> FP8 (default)" in passes
    assert "batch  1: 0.930 -> 1.500 ms (1.61x, slower; 2 + 2 rounds)" in passes
    assert "kernels per batch-1 step: 380 -> 296" in passes and "fuse_norm_quant 56" in passes
    at_l3 = views.compare(rec, "fp8@L3", "fp8@L3+passes", 1)
    assert at_l3["verdict"] == "within the spread" and views.compare(rec, "bf16", "fp8", 1)["verdict"] == "slower"
    fig = views.plot_tpot(rec)
    assert {t.name for t in fig.data} >= {"FP8 (default)", "bf16 byte floor", "FP8 byte floor"}
    assert "demo answers right 100%" in views.accuracy_table(rec)
    assert views.plot_ops(rec).data[0].y == (4, 4, 2, 1)


def test_the_verdicts_follow_the_record(rec):
    rows = {r["claim"]: r for r in views.verdict_rows(rec)}
    assert rows["FP8 weights halve the batch-1 byte floor"]["verdict"] == "partly"  # 0.182 / 0.289 = 0.63
    assert rows["FP8 weights make decode faster at batch 1"]["verdict"] == "wrong"
    assert rows["the fusion passes cut FP8 TPOT at batch 1 beyond the spread"]["verdict"] == "wrong"
    assert rows["FP8 weights keep the embedded model's checkable answers"]["verdict"] == "right"
    html = views.verdict_table(rec)
    assert html.count("<tr>") == len(rows) + 1 and "lang-zh" in html


def test_without_a_record_every_view_says_so():
    for fn in (views.piece_before, views.piece_diffs, views.ops_table, views.pattern_view, views.accuracy_table):
        assert fn(None) == views.NOT_RECORDED
    assert "no TPOT" in views.fp8_table(None) and "no TPOT" in views.passes_table({"piece": {}})
    assert views.verdict_rows(None) == [] and "not recorded yet" in views.verdict_table(None)
    assert lab12.graph_part({"piece": {"stages": [1]}}) == {"piece": {"stages": [1]}}  # a record's trace wins


def test_the_recorder_runs_fp8_check_with_graphs_at_the_measured_sizes(monkeypatch):
    """measure_gpu through scripts/fp8_check.py's own main, its engine runs replaced: the variants, rounds and
    capture sizes it asks for, and the summary it returns."""
    module = lab12.fp8_check()
    seen = []

    def tpot(args, name, kwargs, profile, copy_gbps):
        assert os.environ["MINIVLLM_CACHE_DIR"].endswith("/minivllm")  # a fresh cache: the passes run, counted
        seen.append((name, args.reps, args.capture_sizes, args.batch_sizes, args.input_len))
        floor = {"bytes_ms": 0.2, "weight_mb": 10.0}
        return {str(b): {"tpot_ms": 1.0, "floor": floor} for b in args.batch_sizes}

    monkeypatch.setattr(module, "tpot", tpot)
    monkeypatch.setattr(module, "accuracy", lambda args: {"embedded_demo_answers_fp8": 1.0})
    monkeypatch.setattr(lab12, "fp8_check", lambda: module)
    env_before = {k: os.environ.get(k) for k in ("MINIVLLM_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    res = lab12.measure_gpu(lab12.REPO_ROOT / "assets" / "models" / "minivllm-tiny")
    assert sorted({s[0] for s in seen}) == sorted(module.VARIANTS) and len(seen) == lab12.REPS * len(module.VARIANTS)
    assert all(s[1:] == (lab12.REPS, True, list(lab12.BATCHES), 128) for s in seen)
    assert res["summary"]["fp8"]["64"]["tpot_ms_all"] == [1.0] * lab12.REPS and res["accuracy"]
    quick = lab12.measure_gpu(lab12.REPO_ROOT / "assets" / "models" / "minivllm-tiny", quick=True)
    assert set(quick["summary"]) == {"bf16", "fp8"} and "accuracy" not in quick
    # the fresh caches were the recorder's own: the process's settings are as they were
    assert {k: os.environ.get(k) for k in env_before} == env_before


def test_right_answers_hold_for_the_shapes_and_records():
    """q1: the tied embedding is about a quarter of Qwen3-0.6B's bf16 weight bytes, so the FP8 floor lies between
    a half and two thirds of bf16's; q2: 239 + 7 per layer over 28 layers."""
    from minivllm.tools.make_random_checkpoint import make_config

    c = make_config("qwen3-0.6b")
    h, i, layers, d = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.head_dim
    linear = layers * (h * (c.num_attention_heads + 2 * c.num_key_value_heads) * d
                       + c.num_attention_heads * d * h + 2 * h * i + i * h)
    embed = c.vocab_size * h
    ratio = (2 * embed + linear) / (2 * embed + 2 * linear)
    assert 0.5 < ratio < 2 / 3 and c.tie_word_embeddings
    prof = json.loads((REPO_ROOT / "assets/results/h200/profile_prefetch.json").read_text())
    assert prof["runs"][0]["kernels_per_step"] + 7 * layers == views.Q_KERNELS.answer == 435
    for q in views.QUESTIONS.values():
        right = "435" if q is views.Q_KERNELS else "ABCD"[q.correct]
        assert grade(q, right, None)[0], q.qid
    assert not grade(views.Q_KERNELS, "239", None)[0]
    assert grade(views.Q_KERNELS, "435 kernels", None)[0] is False  # a unit it cannot read: a hint, no raise


def test_evidence_names_the_record(rec):
    for q in views.QUESTIONS.values():
        text = q.evidence(rec)
        assert text.startswith("recorded H200 results (lab12.json)"), q.qid
    assert views.ev_floor(None).startswith("this run")
