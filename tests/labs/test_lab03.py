"""Lab 03 (torch.compile in the engine): graders, views on GPU-shaped results, claims, helpers, run_all.

The GPU sweep cannot run here; its views and feedback are checked on a results dict of the shape run_all
writes on CUDA (numbers made up). run_all(quick=True) runs the CPU path (one layer under Dynamo, one engine).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab03
from minivllm_labs.catalog import VERDICTS, resolve_key
from minivllm_labs.common import REPO_ROOT, lab_model
from tests.labs.lab_quiz_checks import check_answer_positions, check_grader

QUESTIONS = (lab03.Q1, lab03.Q2, lab03.Q3, lab03.Q4)


def _row(level: int, graphs: str, tpot: float, **kw) -> dict:
    t = {b: {"median": tpot * f, "min": tpot * f * 0.98, "max": tpot * f * 1.02, "n": 3}
         for b, f in (("1", 1.0), ("8", 1.05), ("64", 1.4))}
    return {"level": level, "graphs": graphs, "custom_ops": ["none"], "compile_s": 20.0 if level else None,
            "tpot_ms": t, "graphs_traced_at_startup": 1 if level else 0, "recompiles_at_runtime": 0,
            "graph_breaks": 0, "pieces": 29 if level == 3 else None, **kw}


VIEW = {"graphs": 1, "graph_breaks": 0, "ops": 51, "break_reasons": {}, "guards": 283,
        "guards_by_source": {"GLOBAL": 75}, "fx_code": "def forward(self, ...):\n    x = a + b",
        "attention_nodes": 1, "fullgraph": {"ok": True}, "attention_backend": "auto"}
GPU = {
    "lab": "lab03",
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "0" * 12, "date": "2026-12-01T00:00:00",
                   "command": "python -m minivllm_labs.record lab03"},
    "hand_written": lab03.hand_written_kernel(),
    "inductor": {"device": "cuda", "language": "triton", "num_kernels": 1, "eager_ops": 7, "max_abs_diff": 0.0,
                 "kernel": "@triton.jit\ndef triton_per_fused_add_mean_mul_pow_rsqrt_0(in_ptr0):\n    pass"},
    "registration": {"auto": {"layer": VIEW, "graphs_traced_at_startup": 1, "recompiles_at_runtime": 0,
                              "graph_breaks": 0},
                     "unregistered": {"layer": {**VIEW, "graphs": 6, "graph_breaks": 5, "attention_backend":
                                                "unregistered", "fullgraph": {"ok": False, "error_type":
                                                                              "Unsupported", "message": "Skip"}},
                                      "graphs_traced_at_startup": 34, "recompiles_at_runtime": 48,
                                      "graph_breaks": 76},
                     "fullgraph_engine": {"ok": False, "error_type": "Unsupported", "message": "Skip calling"}},
    "scopes": {name: {"graphs_traced_at_startup": n, "recompiles_at_runtime": 0, "graph_breaks": 0,
                      "pieces": p, "attention_splits": None, "num_layers": 28, "compiled_pieces": None}
               for name, n, p in (("model", 1, None), ("layer", 28, None), ("ops", 57, None),
                                  ("split (level 3)", 1, 29))},
    "configs": {"eager": _row(0, "NONE", 20.0, kernels_per_step=400), "L2": _row(2, "NONE", 18.0),
                "L3": _row(3, "NONE", 17.0), "graphs": _row(0, "FULL", 1.4), "L2+graphs": _row(2, "FULL", 1.45),
                "L3+graphs": _row(3, "FULL_AND_PIECEWISE", 1.5), "torch-ops eager": _row(0, "NONE", 25.0),
                "torch-ops graphs": _row(0, "FULL", 3.8), "fused L3": {"level": 3, "graphs": "NONE",
                                                                       "error": "RuntimeError: boom"},
                "fused L3+graphs": _row(3, "FULL_AND_PIECEWISE", 1.45)},
    "grid": lab03.GRID,
}


# ---- graders (the lab standard's rules, tests/labs/lab_quiz_checks.py) -------------------------------------------
@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q.qid)
def test_graders(q):
    check_grader(q, GPU)


def test_right_answers_spread_and_not_the_longest():
    check_answer_positions(QUESTIONS, 4)


@pytest.mark.parametrize("res", [None, {}, GPU], ids=["none", "empty", "gpu"])
def test_evidence_never_raises_and_cites_recorded_files(res):
    for q in QUESTIONS:
        assert isinstance(q.evidence(res), str)
    # graph breaks cost only where they are allowed: attention_unregistered.json, present in the repository
    assert "76 breaks" in lab03.Q1.evidence(res)
    # a results dict without the sweep falls back to the H200 record: feedback always quotes a measurement
    assert "mode 3" in lab03.Q2.evidence(res) and "spread" in lab03.Q2.evidence(res)


def test_feedback_cites_this_labs_record():
    assert "6 graphs, 5 breaks" in lab03.Q1.evidence(GPU)
    q2 = lab03.Q2.evidence(GPU)
    assert "torch ops: eager / graphs / compile / both = 25.0 (" in q2 and ") / 3.8 (" in q2 and ") / 1.5 (" in q2
    assert "startup fails with Unsupported" in lab03.Q1.evidence(GPU)


# ---- views ---------------------------------------------------------------------------------------------
def test_views_render_gpu_results():
    assert len(lab03.plot_levels(GPU).data) == 3 and len(lab03.plot_grid(GPU).data) == 2
    table = lab03.configs_table(GPU)
    assert "failed: RuntimeError: boom" in table and "400" in table
    assert "2.533" in lab03.grid_table(GPU)  # torch ops: graphs 3.8 / both 1.5
    assert "76" in lab03.registration_table(GPU) and "startup fails: Unsupported" in lab03.registration_table(GPU)
    assert "29" in lab03.scopes_table(GPU) and "triton" in lab03.kernel_text(GPU)
    for fn in (lab03.configs_table, lab03.grid_table, lab03.registration_table, lab03.scopes_table,
               lab03.kernel_text):
        assert "not recorded yet" in fn(None)


def test_compact_fx_trims_paths_and_keeps_the_attention_op():
    code = ("def forward(self, L_x_ : torch.Tensor, L_self_modules_norm_parameters_weight_ : torch.nn.Parameter):\n"
            "    l_x_ = L_x_\n"
            + "".join(f"    y{i} = l_x_ + {i};  l_x_ = None\n" for i in range(30))
            + "    a = torch.ops.minivllm.unified_attention(y1, y2)\n"
            + "".join(f"    z{i} = a * {i}\n" for i in range(30)))
    out = lab03.compact_fx(code, max_lines=20)
    assert out.startswith("def forward(self, ...):") and "l_x_ = L_x_" not in out and "= None" not in out
    assert "unified_attention" in out and "more lines" in out
    assert lab03.compact_fx("    w = L_self_modules_mlp_modules_down_proj_parameters_weight_", 5).strip() \
        == "w = mlp.down_proj.weight"


def test_kernel_sources_are_found_in_inductor_output():
    code = ("k0 = async_compile.triton('triton_poi_0', '''\nimport triton\n@triton.jit\ndef k(x): pass\n''', "
            "device_str='cuda')\n"
            "k1 = async_compile.cpp_pybinding(['const float*'], r'''\nextern \"C\" void kernel() {}\n''')\n")
    found = lab03._kernel_sources(code)
    assert len(found) == 2 and found[0].startswith("import triton") and "kernel()" in found[1]


def test_hand_written_kernel_is_the_engines():
    src = lab03.hand_written_kernel()
    assert src.startswith("@triton.jit\ndef _rms_norm_kernel(") and "rsqrt" in src
    with pytest.raises(StopIteration):
        lab03.hand_written_kernel("no_such_kernel")


# ---- claims and catalog --------------------------------------------------------------------------------
def test_claims_cite_keys_that_exist():
    for c in lab03.LAB_INFO.claims:
        assert c.verdict in VERDICTS
        if c.evidence_file.endswith("lab03.json"):  # the figures themselves: test_lab03_figures.py, on the record
            resolve_key(GPU, c.evidence_key)
            continue
        value = resolve_key(json.loads((REPO_ROOT / c.evidence_file).read_text()), c.evidence_key)
        if c.figure is not None:
            assert value == c.figure, c.cid
    assert "(record)" in lab03.verdicts_table(None) and "(record)" not in lab03.verdicts_table(GPU)


def test_catalog_lists_lab03():
    from minivllm_labs.catalog import labs

    d = next(i for i in labs() if i.lab == "lab03").as_dict()
    assert {q["source"] for q in d["questions"]} >= {"handbook self-test 2", "handbook interview 1"}


# ---- run_all on the CPU --------------------------------------------------------------------------------
def test_run_all_quick_on_cpu():
    res = lab03.run_all(lab_model(), quick=True)
    json.dumps(res)
    view = res["registration"]["auto"]["layer"]
    assert view["graphs"] == 1 and view["graph_breaks"] == 0 and view["attention_nodes"] >= 1
    assert view["fullgraph"]["ok"] and "def forward" in view["fx_code"]
    assert res["configs"]["eager"]["tpot_ms"]["1"]["median"] > 0
    assert res["configs"]["eager"]["recompiles_at_runtime"] == 0
    assert isinstance(lab03.configs_table(res), str) and isinstance(lab03.Q4.evidence(res), str)


def test_registration_with_the_engine_as_the_gpu_recorder_runs_it():
    """The recorder's engine half (run_all(quick=False) only, so the quick test never reaches it): mode 1
    compiles with fullgraph=True, so registered attention serves and unregistered attention's startup error is
    the measurement, not a crash of the recorder (Dynamo only: seconds on a CPU)."""
    reg = lab03.registration(lab_model())
    assert reg["auto"]["graph_breaks"] == 0 and reg["auto"]["graphs_traced_at_startup"] >= 1
    assert reg["fullgraph_engine"]["ok"] is False and reg["fullgraph_engine"]["error_type"] == "Unsupported"
    assert reg["unregistered"]["layer"]["graph_breaks"] > 0 and "graph_breaks" not in reg["unregistered"]
    assert "startup fails: Unsupported" in lab03.registration_table({"registration": reg})


def test_split_pieces_cut_at_every_attention_op():
    llm = lab03.make_llm(lab_model(), lab03.EngineSetup("eager", custom_ops=("none",)), max_num_seqs=8)
    try:
        split = lab03.split_pieces(llm)
    finally:
        llm.shutdown()
    n = split["num_layers"]
    assert split["traces"] == 1 and split["attention_splits"] == n and len(split["pieces"]) == n + 1
    assert split["distinct_middle"] == 1  # every layer boundary is the same code
    text = lab03.split_text(split)
    assert f"into {n + 1} pieces" in text and "piece 0:" in text
    assert "not recorded yet" in lab03.split_text(None)


def test_compile_facts_are_zero_for_a_mode_0_engine_and_read_from_its_report_otherwise():
    """At mode 0 (asked for, or the default on a CPU) nothing is compiled, so the counters of what the process
    compiled before must not be reported as this engine's; at mode 1 the engine's own report is read (one
    traced graph, no breaks; stock torch.compile recompiles when the 3-token prefill is followed by 1-token
    decodes, Dynamo's 0/1 specialization)."""
    from minivllm import DEFAULT_MODEL, LLM, SamplingParams

    for cc, traced in (({"mode": 1, "backend": "eager"}, 1), ({"mode": 0}, 0), (None, 0)):
        with LLM(DEFAULT_MODEL, device="cpu", max_model_len=64, compilation_config=cc) as llm:
            llm.generate([{"prompt_token_ids": [1, 2, 3]}], SamplingParams(max_tokens=2), use_tqdm=False)
            facts = lab03._compile_facts(llm)
        assert facts["graphs_traced_at_startup"] == traced, (cc, facts)
        assert facts["graph_breaks"] == 0, (cc, facts)
        assert (facts["recompiles_at_runtime"] == 0) == (traced == 0), (cc, facts)
