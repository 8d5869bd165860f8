"""Lab 05 (the fallback ladder): graders, the fault injector (planted and restored), the flowchart and
tables on GPU-shaped data, claims against their files, and the recorder's code path on the CPU."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab05  # noqa: E402
from minivllm_labs.catalog import SEEDS, resolve_key  # noqa: E402
from minivllm_labs.common import REPO_ROOT  # noqa: E402
from tests.labs.lab_quiz_checks import check_grader, check_odd_input  # noqa: E402


def _fault(kind, layer, error, ladder, **extra):
    return {"kind": kind, "config": {}, "error": error, "raw_error": error, "diagnosis":
            {"layer": layer, "reason": "x", "suggestion": "y"}, "ladder": ladder,
            "tokens_match_eager_after_fallback": True, "handbook_heuristic": lab05.handbook_heuristic(error),
            "ladder_culprit": lab05._culprit(ladder), **extra}


FAIL = lambda step, layer: {"step": step, "ok": False, "layer": layer, "error": "e"}  # noqa: E731
OK = lambda step: {"step": step, "ok": True}  # noqa: E731
# What `python -m minivllm_labs.record lab05` writes on a GPU (shape only; messages as the faults produce them).
GPU = {
    "lab": "lab05", "provenance": {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "abc", "date": "2026-12-01",
                                   "command": "python -m minivllm_labs.record lab05"},
    "faults": {
        "graph": _fault("host_sync", "graph", "torch.AcceleratorError: CUDA error: operation not permitted when "
                        "stream is capturing", [FAIL("as configured", "graph"), OK("CUDA graphs off")]),
        "compile": _fault("untraceable", "compile", "torch._dynamo.exc.Unsupported: Data-dependent branching",
                          [FAIL("as configured", "compile"), FAIL("CUDA graphs off", "compile"),
                           FAIL("torch.compile off", "compile"), OK("both off")]),
        "numerics": _fault("mistraced", "numerics", None, [FAIL("as configured", "numerics"),
                                                           FAIL("CUDA graphs off", "numerics"),
                                                           FAIL("torch.compile off", "numerics"), OK("both off")],
                           silent=True, identical_probes=0, verify_error="NumericsError: verify: 4 of 4"),
    },
    "locate": {"dtype": "float32", "batch": 2, "first_bad_layer": 1, "planted_in": 1, "layers": [
        {"layer": 0, "max_abs_diff": 0.0, "submodules": {"input_layernorm": 0.0, "mlp": 0.0}},
        {"layer": 1, "max_abs_diff": 3.2, "submodules": {"input_layernorm": 0.0, "mlp": 0.0}}]},
    "debug": {"new_tokens": 16, "eager": {"calls_at_startup": 1, "calls_while_generating": 16, "forward_steps": 16},
              "FULL graphs": {"calls_at_startup": 9, "calls_while_generating": 1, "forward_steps": 16}},
    "recompiles": {"stock torch.compile (level 1)": 2, "symbolic batch (level 2)": 0},
    "oom": {"eager": {"kv_cache_gib": 120.3}, "graphs": {"kv_cache_gib": 120.0}, "level 3 + graphs": {},
            "total_gib": 139.8, "eager_frees_mib": 307.2, "freed_fraction_of_kv": 0.0025,
            "freed_fraction_of_gpu": 0.0021},
}
GPU["heuristics"] = lab05.heuristics(GPU["faults"])


@pytest.mark.parametrize("q", lab05.LAB_INFO.questions)
def test_graders(q):
    check_grader(q, GPU)
    check_odd_input(q, None)


def test_right_answers_are_spread():
    from minivllm_labs import lab04

    letters = {q.correct for q in lab04.LAB_INFO.questions + lab05.LAB_INFO.questions}
    assert letters == {0, 1, 2, 3}


def test_q3_evidence_quotes_the_driver():
    assert "operation not permitted when stream is capturing" in lab05.Q3.evidence(GPU)
    assert "needs a CUDA GPU" in lab05.Q3.evidence({"faults": {"graph": None}})


def test_handbook_heuristic_reads_messages_as_written():
    assert lab05.handbook_heuristic("cudaGraphExecUpdate failed") == "graph"
    assert lab05.handbook_heuristic("torch._dynamo.exc.Unsupported: x") == "compile"
    assert lab05.handbook_heuristic("operation not permitted when stream is capturing") == "none"
    assert lab05.handbook_heuristic(None) == "numerics"


def test_inject_plants_one_layer_and_restores():
    from minivllm.models.llama import DecoderLayer

    original = DecoderLayer.forward
    with pytest.raises(RuntimeError, match="boom"), lab05.inject("count"):
        assert DecoderLayer.forward is not original
        raise RuntimeError("boom")
    assert DecoderLayer.forward is original
    with pytest.raises(ValueError, match="kind must be one of"), lab05.inject("nope"):
        pass


def test_ladder_path_and_drawing():
    assert lab05.ladder_path(GPU["faults"]["graph"]) == ["A", "B", "C", "F", "H"]
    assert lab05.ladder_path(GPU["faults"]["compile"]) == ["A", "B", "D", "F", "G"]
    assert lab05.ladder_path(GPU["faults"]["numerics"]) == ["A", "B", "E", "F", "H"]
    svg = lab05.ladder_svg(GPU["faults"]["compile"], "t")
    assert svg.startswith("<svg") and svg.count("#fde68a") == 5 and "<script" not in svg
    assert "not tried" in lab05.ladder_svg(GPU["faults"]["graph"])
    # in the notebook an <img>: JupyterLab strips inline <svg> from a notebook it does not trust yet
    img = lab05.ladder_html(GPU["faults"]["compile"], "t")
    assert img.startswith('<img class="mv-ladder"') and "data:image/svg+xml;base64," in img and "<svg" not in img
    assert "path A → B → D → F → G" in img


def test_tables_render_gpu_shaped_data():
    assert "operation not permitted" in lab05.fault_summary(GPU["faults"]["graph"], "capture")
    assert "needs a CUDA GPU" in lab05.fault_summary(None, "capture")
    assert "verify=True" in lab05.fault_summary(GPU["faults"]["numerics"], "numerics")
    assert "graph" in lab05.heuristics_table(GPU) and "first layer that differs: 1" in lab05.locate_table(GPU)
    rows = {r["scenario"].split()[0]: r["verdict"] for r in lab05.scenario_rows(GPU)}
    assert rows == {"debugging": "right", "new": "right", "OOM": "right", "cold": "partly", "sparse": "wrong",
                    "unregistered": "partly"}
    assert "unverifiable here" in lab05.scenario_table(None)


def test_claims_point_at_real_numbers():
    for c in lab05.LAB_INFO.claims:
        assert c.seed in SEEDS and c.lab == "lab05"
        if c.evidence_file == lab05.RESULTS:
            assert c.figure is None
            value = resolve_key(GPU, c.evidence_key)
            if c.rule:
                assert c.rule(value) == c.verdict, c.cid
        else:
            value = resolve_key(json.loads((REPO_ROOT / c.evidence_file).read_text()), c.evidence_key)
            assert value == pytest.approx(c.figure, rel=1e-3), c.cid


@pytest.mark.slow
def test_run_all_quick_on_cpu():
    from minivllm_labs.common import lab_model

    res = lab05.run_all(lab_model(), quick=True)
    cpu_only = {"faults.graph.handbook_heuristic", "debug.FULL graphs.calls_while_generating", "oom.eager_frees_mib",
                "oom.freed_fraction_of_gpu"}
    for c in lab05.LAB_INFO.claims:
        if c.evidence_file == lab05.RESULTS and c.evidence_key not in cpu_only:
            value = resolve_key(res, c.evidence_key)
            if c.rule:
                assert c.rule(value) == c.verdict, c.cid
    comp, num = res["faults"]["compile"], res["faults"]["numerics"]
    assert comp["diagnosis"]["layer"] == "compile" and "Data-dependent" in comp["error"]
    # a branch on a tensor's value fails a capture too: diagnose() sends the ladder straight to "both off"
    assert [r["step"] for r in comp["ladder"]] == ["as configured", "both off"] and comp["ladder"][-1]["ok"]
    assert comp["tokens_match_eager_after_fallback"]
    assert num["error"] is None and num["silent"] and num["diagnosis"]["layer"] == "numerics"
    assert num["ladder"][-1]["ok"] and num["tokens_match_eager_after_fallback"]
    assert res["locate"]["first_bad_layer"] == lab05.FAULT_LAYER
    assert res["debug"]["eager"]["calls_while_generating"] == res["debug"]["new_tokens"]
    assert res["faults"]["graph"] is None and res["oom"] is None
