"""Lab 04 (startup and the compile cache): graders, figures and tables on GPU-shaped data, claims against
their files, and the recorder's code path on the CPU (`run_all(quick=True)`)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab04  # noqa: E402
from minivllm_labs.catalog import SEEDS, resolve_key  # noqa: E402
from minivllm_labs.common import REPO_ROOT  # noqa: E402
from tests.labs.lab_quiz_checks import check_grader, check_odd_input  # noqa: E402

PH = {p: 0.5 for p in lab04.PHASES}


def _mode(total, mode="NONE", level=0, tpot=2.0):
    return {"phases_s": dict(PH), "total_s": total, "compile_s": 1.0, "compile_level": level, "cache_warm": None,
            "dynamo_skipped": False, "unique_graphs": int(level > 0), "cudagraph_mode": mode, "capture_sizes": 3,
            "kv_cache_tokens": 4096, "tpot_ms": tpot}


# What `python -m minivllm_labs.record lab04` writes on a GPU (shape only; the numbers are made up).
GPU = {
    "lab": "lab04", "provenance": {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "abc", "date": "2026-12-01",
                                   "command": "python -m minivllm_labs.record lab04"},
    "level": 3,
    "phases": {"eager": _mode(1.0, tpot=20.0), "graphs": _mode(9.0, "FULL_AND_PIECEWISE"),
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
    "level0": {"cudagraph_mode": "FULL_AND_PIECEWISE", "capture_sizes": 51, "compile_level": 0, "mode_alias_level": 0},
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
    assert "FULL_AND_PIECEWISE" in lab04.Q_LEVEL0.evidence(GPU)


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
        if c.evidence_file == lab04.RESULTS:
            assert c.figure is None  # recorded later on the H200
            value = resolve_key(GPU, c.evidence_key)
            if c.rule:
                assert c.rule(value) == c.verdict
        else:
            value = resolve_key(json.loads((REPO_ROOT / c.evidence_file).read_text()), c.evidence_key)
            assert value == pytest.approx(c.figure, rel=1e-3), c.cid


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
