"""Lab 04 (startup and the compile cache): graders, figures and tables on GPU-shaped data, claims against
their files, and the recorder's code path on the CPU (`run_all(quick=True)`)."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab04  # noqa: E402
from minivllm_labs.catalog import SEEDS, resolve_key  # noqa: E402
from minivllm_labs.common import REPO_ROOT  # noqa: E402
from minivllm_labs.recorded import load_recorded  # noqa: E402
from tests.labs.lab_quiz_checks import check_grader, check_odd_input  # noqa: E402

PH = {p: 0.5 for p in lab04.PHASES}


def _mode(total, mode="NONE", level=0, tpot=2.0):
    compiled = level > 0  # mode 0 runs no Dynamo and no backend, as vLLM's mode 0 applies no torch.compile
    phases = {**PH, **({} if compiled else {"Dynamo": 0.0, "AOT + Inductor": 0.0, "compile (other)": 0.001})}
    return {"phases_s": phases, "total_s": total, "compile_s": 1.0 if compiled else 0.001, "compile_level": level,
            "cache_warm": None, "dynamo_skipped": False, "unique_graphs": int(compiled), "cudagraph_mode": mode,
            "capture_sizes": 3, "kv_cache_tokens": 4096, "tpot_ms": tpot}


# What `python -m minivllm_labs.record lab04` writes on a GPU (shape only; the numbers are made up).
GPU = {
    "lab": "lab04", "provenance": {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "abc", "date": "2026-12-01",
                                   "command": "python -m minivllm_labs.record lab04"},
    "level": 3,
    "phases": {"eager": _mode(1.0, tpot=20.0), "graphs": _mode(4.0, "FULL_DECODE_ONLY"),
               "level 3 + graphs": _mode(38.0, "FULL_AND_PIECEWISE", 3)},
    "cache": {"level": 3, "cold": _mode(38.0, level=3), "warm": {**_mode(8.7, level=3), "dynamo_skipped": True,
                                                                 "cache_warm": True},
              "new_process": True, "warm_import_s": 7.3, "warm_process_s": 22.0,
              "entry": {"files": ["graph.json", "graph.pt", "minivllm_manifest.json", "piece_*.bin x3"],
                        "subdirs": {"inductor": 40, "triton": 12}}, "warm_over_cold": 0.23,
              "compile_warm_over_cold": 0.14},
    "faults": {"level": 3, "corrupted_file": "piece_x.bin", "rows": [
        {"start": "after corrupting one file", "entry": "k1", "same_entry": True, "cache_warm": False,
         "compile_s": 20.0, "warnings": ["Compile cache <entry> is corrupted (1 file(s) changed): rebuilding it"]},
        {"start": "max_model_len halved (in the key)", "entry": "k2", "same_entry": False, "cache_warm": False,
         "compile_s": 20.0, "warnings": []}]},
    "level0": {"cudagraph_mode": "FULL_DECODE_ONLY", "capture_sizes": 51, "compile_level": 0, "mode_alias_level": 0},
    "warmup": {"shapes": [[1, 5], [2, 9]], "level": 3,
               "level3": {"recompiles_after_each": [0, 0], "recompiles_at_runtime": 0, "request_ms": [5.0, 6.0],
                          "graphs_traced_at_startup": 0},
               "level1": {"recompiles_after_each": [1, 2], "recompiles_at_runtime": 2, "request_ms": [500.0, 9.0],
                          "graphs_traced_at_startup": 1}},
    "recipes": {"eager_startup_s": 1.0, "compiled_startup_s": 38.0, "eager_tpot_ms": 20.0, "graphs_tpot_ms": 1.0,
                "eager_tpot_over_graphs": 20.0},
}


@pytest.mark.parametrize("q", lab04.LAB_INFO.questions)
def test_graders(q):
    check_grader(q, GPU)
    check_odd_input(q, None)


def test_evidence_cites_the_numbers():
    text = lab04.Q4.evidence(GPU)
    assert "0.23x" in text and "recompiled 0 times" in text and "2 times" in text
    assert "FULL_DECODE_ONLY" in lab04.Q_LEVEL0.evidence(GPU) and "graphs traced 0" in lab04.Q_LEVEL0.evidence(GPU)


def test_figures_and_tables_render_gpu_shaped_data():
    fig = lab04.plot_phases(GPU)
    assert len(fig.data) == 3 and list(fig.data[0].x) == list(lab04.PHASES)
    assert len(lab04.plot_cold_warm(GPU).data) == 2
    assert "1-5 分钟" in lab04.phases_table(GPU) and "TPOT" in lab04.phases_table(GPU)
    assert "Dynamo skipped: True" in lab04.cache_table(GPU) and "new process" in lab04.cache_table(GPU)
    assert "corrupted" in lab04.faults_table(GPU)
    assert "level 1: recompiles" in lab04.warmup_table(GPU)


def test_claims_point_at_real_numbers():
    info = lab04.LAB_INFO
    assert info.lab == "lab04" and (REPO_ROOT / info.notebook.replace(".ipynb", ".ipynb")).name
    for c in info.claims:
        assert c.seed in SEEDS and c.lab == "lab04"
        assert c.evidence_file == lab04.RESULTS, c.cid  # one figure per fact: this lab's record
        value = resolve_key(load_recorded("lab04"), c.evidence_key)
        assert value == c.figure, c.cid  # the verdict was written against this number
        if c.rule:
            assert c.rule(value) == c.verdict, c.cid


def test_level0_statement_matches_the_record():
    """The prose, the claim and question lab04.q_level0 say that mode 0 compiles nothing (no Dynamo, no graph
    traced) and keeps the full decode graphs; the record must show both, and the views must say so."""
    rec = load_recorded("lab04")
    g, l0 = rec["phases"]["graphs"], rec["level0"]
    assert lab04.MODES["graphs"] == {"compilation_config": {"mode": 0}} and g["compile_level"] == 0
    assert g["phases_s"]["Dynamo"] == 0 and g["phases_s"]["AOT + Inductor"] == 0 and g["unique_graphs"] == 0
    assert g["compile_s"] < 0.01 * rec["cache"]["cold"]["compile_s"]  # "empty": the first run only
    assert l0["cudagraph_mode"] == "FULL_DECODE_ONLY" and l0["capture_sizes"] > 0
    assert lab04.level0_compiled_nothing(rec) and "nothing compiled" in lab04.level0_text(rec)
    assert f"{l0['capture_sizes']} sizes" in lab04.level0_text(rec)
    src = (REPO_ROOT / "labs/src/04_startup_and_cache.py").read_text(encoding="utf-8")
    assert "Its compile phase is empty" in src and "编译阶段是空的" in src
    assert f"at {l0['capture_sizes']} sizes" in next(c.summary for c in lab04.CLAIMS if c.cid == "lab04.capture")


def test_level0_statement_changes_with_a_mode_0_that_compiles():
    """A record whose mode 0 ran Dynamo (FULL_AND_PIECEWISE, one graph traced) is not called empty."""
    old = json.loads(json.dumps(GPU))
    old["phases"]["graphs"] = _mode(11.0, "FULL_AND_PIECEWISE", level=0)
    old["phases"]["graphs"].update(unique_graphs=1, compile_s=3.5)
    old["phases"]["graphs"]["phases_s"]["Dynamo"] = 2.07
    assert not lab04.level0_compiled_nothing(old)
    assert "this mode 0 compiled" in lab04.level0_text(old) and "nothing compiled" not in lab04.level0_text(old)
    assert "nothing compiled" in lab04.level0_text(GPU)


def _record_numbers(rec: dict) -> set[str]:
    """Every number of the record as the data file may round it (1 or 2 decimals, ms also as s)."""
    out: set[str] = set()

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            for v in (x, x / 1000):
                out.update({f"{v:.1f}", f"{v:.2f}"})

    walk(rec)
    return out


def test_numbers_in_the_data_file_are_the_records():
    """Every decimal figure the questions and claims show (s, ms, x, 倍) is a number of lab04.json: typed ones must
    match it, and the {rec} roles (minivllm_labs/figures.py) are read from it, so a re-recording that changes one
    changes the text or fails here."""
    from minivllm_labs.figures import ROLE, render

    rec = load_recorded("lab04")
    raw = (REPO_ROOT / "labs/minivllm_labs/data/lab04.yaml").read_text(encoding="utf-8")
    quoted = set(re.findall(r"(?<![\w.])(\d+\.\d+) ?(?:s\b|ms\b|x\b|倍)", ROLE.sub(" ", raw)))
    assert not quoted - _record_numbers(rec), sorted(quoted - _record_numbers(rec))
    text = render(raw)
    w = rec["warmup"]["level3"]["request_ms"]
    assert f"{w[0] / 1000:.1f} s, against about {round(sorted(w[1:])[len(w[1:]) // 2])} ms" in text


def test_corrupt_flips_bytes(tmp_path):
    (tmp_path / "small").write_bytes(b"a" * 10)
    (tmp_path / "big.bin").write_bytes(b"b" * 1000)
    assert lab04.corrupt(tmp_path) == "big.bin"
    assert (tmp_path / "big.bin").read_bytes() != b"b" * 1000 and (tmp_path / "small").read_bytes() == b"a" * 10


@pytest.mark.slow
def test_run_all_quick_on_cpu():
    from minivllm_labs.common import lab_model

    res = lab04.run_all(lab_model(), quick=True)
    for c in lab04.CLAIMS:  # every key the claims cite exists in what the recorder writes
        if c.evidence_file == lab04.RESULTS:
            resolve_key(res, c.evidence_key)
    cache, faults = res["cache"], res["faults"]["rows"]
    assert cache["cold"]["cache_warm"] is False and cache["warm"]["cache_warm"] is True
    assert faults[0]["cache_warm"] is False and any("corrupted" in w for w in faults[0]["warnings"])
    assert faults[1]["cache_warm"] is True  # rebuilt, then warm again
    assert faults[2]["same_entry"] and faults[2]["cache_warm"]  # seed is not in the key
    assert not faults[3]["same_entry"] and faults[3]["cache_warm"] is False  # max_model_len is
    assert res["warmup"]["level3"]["recompiles_at_runtime"] == 0
    assert res["level0"]["mode_alias_level"] == 0
    lab04.phases_table(res), lab04.cache_table(res), lab04.faults_table(res), lab04.warmup_table(res)
