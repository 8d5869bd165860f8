"""Lab 01: its graders, evidence lines, tables, figures, claims and measurements (the machinery is in
tests/labs/test_labs.py). GPU-shaped results are made up here, so everything runs on a CPU."""

from __future__ import annotations

import copy
import json

import pytest
import torch

pytest.importorskip("nbformat", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab01  # noqa: E402
from minivllm_labs.build import SRC_DIR  # noqa: E402
from minivllm_labs.catalog import resolve_key  # noqa: E402
from minivllm_labs.common import REPO_ROOT  # noqa: E402
from minivllm_labs.quiz import grade  # noqa: E402
from minivllm_labs.recorded import load_recorded  # noqa: E402

# What `python -m minivllm_labs.record lab01` writes on a GPU (shape only; the numbers are made up).
GPU_RESULTS = {
    "lab": "lab01",
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.13.0+cu130", "commit": "0123456789abcdef0123",
                   "date": "2026-11-30T10:00:00+00:00", "command": "python -m minivllm_labs.record lab01",
                   "model": "random weights: Qwen3ForCausalLM, 28 layers, hidden 1024, bfloat16"},
    "launch_overhead": {"device": "cuda", "n_ops": 1000, "eager_us_per_op": 9.1, "graph_us_per_op": 1.2,
                        "graph_replay_us": 1200.0, "graph_launch_us": 20.0, "triton_us_per_op": 30.0},
    "census": {"device": "cuda", "num_layers": 28, "ops_per_step": 900, "ops_per_layer": 30.0,
               "kernels_per_step": 480, "copies_per_step": 9, "kernels_per_layer": 16.0},
    "bound": {"batch": [1, 5, 8, 256], "enqueue_ms": [8.0, 8.1, 8.2, 8.4], "gpu_ms": [1.5, 1.6, 1.7, 9.0],
              "eager_ms": [8.3, 8.4, 8.5, 9.6], "graph_ms": [1.6, 1.7, 1.8, 9.1],
              "graph_launch_ms": [0.02, 0.02, 0.02, 0.02], "capture_s": [0.4, 0.4, 0.4, 0.5],
              "capture_mib": [4.0, 4.0, 6.0, 60.0], "context": 128, "device": "cuda",
              "saved_ms": [6.7, 6.7, 6.7, 0.5], "exposed_cpu_ms": [6.5, 6.5, 6.5, 0.0]},
    "tpot": {"batch": [1, 8], "new_tokens": 64, "eager_ms": [10.0, 10.5], "graphs_ms": [2.5, 2.9],
             "capture": {"sizes": [1, 2, 4, 8, 16], "seconds": 1.2, "mib": 30.0}},
}
CPU_RESULTS = {"launch_overhead": {"device": "cpu", "n_ops": 1000, "eager_us_per_op": 2.4},
               "census": {"device": "cpu", "num_layers": 2, "ops_per_step": 244, "ops_per_layer": 76.5},
               "tpot": {"batch": [1, 8], "new_tokens": 64, "eager_ms": [7.5, 24.1]}}
QUESTIONS = [lab01.Q1, lab01.Q4]


# ---- questions ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", QUESTIONS)
def test_right_answer_in_every_form(q):
    L = "ABCD"[q.correct]
    for answer in (L, L.lower(), f" {L} ", chr(0xFF21 + q.correct), f"{L}.", f"{L.lower()})", f"选{L}",
                   q.options[q.correct].text, q.labels()[q.correct], q.options[q.correct].text_zh):
        ok, text = grade(q, answer, GPU_RESULTS)
        assert ok and text.startswith("Correct."), answer
        assert f"Model answer: {q.model_answer}" in text


@pytest.mark.parametrize("q", QUESTIONS)
def test_every_wrong_answer_is_refused_with_its_reason(q):
    for i, o in enumerate(q.options):
        if i != q.correct:
            ok, text = grade(q, "ABCD"[i], GPU_RESULTS)
            assert not ok and text.startswith(f"Not quite ({'ABCD'[i]}). {o.why}")


@pytest.mark.parametrize("q", QUESTIONS)
@pytest.mark.parametrize("answer", ["", "ß", "ﬁ", "ŉ", "1", 1, None])
def test_odd_input_never_raises(q, answer):
    ok, text = grade(q, answer, GPU_RESULTS)
    assert not ok and text.startswith("No answer graded")


def test_questions_are_balanced_and_bilingual():
    assert len({q.correct for q in QUESTIONS}) == len(QUESTIONS)  # not the same letter every time
    for q in QUESTIONS:
        lengths = [len(o.text) for o in q.options]
        assert lengths[q.correct] < max(lengths), f"{q.qid}: the right answer is the longest option"
        assert q.prompt_zh and q.model_answer_zh and all(o.text_zh and o.why_zh for o in q.options)
        assert q.qid.startswith("lab01.") and q.source.startswith("handbook self-test")
        assert "handbook's model answer" not in grade(q, "A", GPU_RESULTS)[1]


def test_grader_without_results_uses_the_recorded_file():
    if not (REPO_ROOT / "assets" / "results" / "h200" / "lab01.json").exists():
        pytest.skip("no recorded lab01 results in this checkout")
    _, text = grade(lab01.Q1, "C")
    assert "Measured on NVIDIA" in text and "No measurements available" not in text


def test_evidence_is_tied_to_the_measured_numbers():
    text = lab01.q1_evidence(GPU_RESULTS)
    assert "9.1 us eager, 1.2 us inside a graph" in text
    assert ("batch 1: CPU enqueue 8.0 ms vs GPU 1.5 ms -> exposed CPU 6.5 ms; eager 8.3 ms, graph 1.6 ms: "
            "saved 6.7 ms") in text
    assert "CPU-bound eager at batch 1, 5, 8" in text  # batch 256 is GPU-bound in this made-up record
    text = lab01.q4_evidence(GPU_RESULTS)
    assert "capturing the batch-1 graph took 400 ms" in text and "padding 5 -> 8 costs 0.1 ms" in text
    res = copy.deepcopy(GPU_RESULTS)
    res["bound"]["gpu_ms_range"] = [[1.4, 1.6], [1.5, 1.8], [1.6, 1.9], [8.9, 9.1]]
    assert "within noise (the ranges over repeats overlap)" in lab01.q4_evidence(res)
    res["bound"]["gpu_ms_range"][2] = [1.85, 1.9]
    assert "above noise" in lab01.q4_evidence(res)
    res["bound"]["gpu_ms"][2] = 1.5  # batch 8 faster than batch 5, no ranges: noise
    del res["bound"]["gpu_ms_range"]
    assert "within noise: no ranges" in lab01.padding_cost(res)


def test_evidence_on_a_cpu_and_without_results():
    assert "Measured here" in lab01.q1_evidence(CPU_RESULTS) and "2.4 us eagerly" in lab01.q1_evidence(CPU_RESULTS)
    assert "cannot be captured on this device" in lab01.q4_evidence(CPU_RESULTS)
    for ev in (lab01.q1_evidence, lab01.q4_evidence):
        assert ev(None).startswith("No measurements available")


# ---- tables, figures, verdicts --------------------------------------------------------------------------------
def test_tables_and_figures_render():
    go = pytest.importorskip("plotly.graph_objects")
    for fig in (lab01.plot_launch(GPU_RESULTS), lab01.plot_bound(GPU_RESULTS), lab01.plot_tpot(GPU_RESULTS)):
        assert type(fig) is go.Figure
    assert list(lab01.plot_launch(GPU_RESULTS).data[0].x) == ["eager ATen op", "in a CUDA graph",
                                                              "engine Triton<br>kernel, eager"]
    assert [t.name for t in lab01.plot_bound(GPU_RESULTS).data] == [
        "CPU: enqueue eager step", "GPU: run its kernels", "eager step (wall)", "graph replay (wall)"]
    assert len(lab01.plot_tpot(GPU_RESULTS).layout.updatemenus[0].buttons) == 3  # all / eager / graphs
    table = lab01.census_table(GPU_RESULTS)
    assert "480 per step (16.0 per layer, + 9 copies)" in table and "80 x 16.0 + 32 = 1312 kernels" in table
    assert "kernels" not in lab01.census_table(CPU_RESULTS).split("\n")[1]  # a CPU run counts ops, not kernels
    assert "900 ops = 9 us per op" in lab01.per_op_gap(GPU_RESULTS)
    rows = lab01.bound_table(GPU_RESULTS).splitlines()
    assert rows[0].split() == ["batch", "enqueue", "gpu", "eager", "graph", "saved", "exposed_cpu"]
    assert rows[1].split() == ["1", "8.0", "1.5", "8.3", "1.6", "6.7", "6.5"]
    assert len(lab01.plot_tpot(CPU_RESULTS).data) == 1


def test_verdict_table_and_claims_match_the_recorded_file():
    html = lab01.verdict_table(GPU_RESULTS)
    assert html.count("<tr>") == len(lab01.CLAIMS) + 1 and 'class="lang-zh"' in html
    p = REPO_ROOT / "assets" / "results" / "h200" / "lab01.json"
    if not p.exists():
        pytest.skip("no recorded lab01 results in this checkout")
    rec = load_recorded("lab01")
    for c in lab01.CLAIMS:
        assert c.evidence_file == "assets/results/h200/lab01.json" and c.seed == "handbook"
        assert resolve_key(rec, c.evidence_key) == c.figure, c.cid  # the verdict was written against this number
    assert lab01.LAB_INFO.questions == (lab01.Q1, lab01.Q4) and lab01.LAB_INFO.claims == lab01.CLAIMS


def test_recorded_file_if_present_renders_with_optional_new_fields():
    p = REPO_ROOT / "assets" / "results" / "h200" / "lab01.json"
    if not p.exists():
        pytest.skip("no recorded lab01 results in this checkout")
    rec = load_recorded("lab01")
    for key in ("launch_overhead", "census", "bound", "tpot"):
        assert key in rec
    for view in (lab01.launch_table, lab01.census_table, lab01.bound_table, lab01.bound_verdict, lab01.tpot_table,
                 lab01.snippet_text, lab01.per_op_gap, lab01.q1_evidence, lab01.q4_evidence):
        assert view(rec)


# ---- widget callbacks -----------------------------------------------------------------------------------------
def test_tpot_toggle_update_remembers_each_mode():
    calls, state = [], {}

    def measure(mode):
        calls.append(mode)
        return {"eager": 10.12345, "graphs": 2.5}[mode]

    assert lab01.tpot_toggle_update(state, "eager", measure) == [10.123, None]
    assert lab01.tpot_toggle_update(state, "graphs", measure) == [10.123, 2.5]
    assert lab01.tpot_toggle_update(state, "eager", measure) == [10.123, 2.5]  # measured again, live
    assert calls == ["eager", "graphs", "eager"]


def test_tpot_toggle_offers_only_the_engines_built():
    pytest.importorskip("ipywidgets")
    calls = []
    toggle = lab01.tpot_toggle({"eager": object()}, "tiny", measure=lambda m: calls.append(m) or 1.0).children[0]
    assert list(toggle.options) == ["eager"]  # no "graphs" button to raise KeyError on a CPU
    toggle.value = "eager"
    assert calls == ["eager"]
    with pytest.raises(ValueError, match="no 'eager' or 'graphs'"):
        lab01.tpot_toggle({}, "tiny")


# ---- measurements run on this device --------------------------------------------------------------------------
def test_launch_overhead_runs_here_with_a_range():
    res = lab01.launch_overhead(n_ops=50, reps=3)
    lo, hi = res["eager_us_range"]
    assert lo <= res["eager_us_per_op"] <= hi and ("graph_us_per_op" in res) == torch.cuda.is_available()
    assert ("triton_us_per_op" in res) == torch.cuda.is_available()


def test_snippet_demo_only_on_cuda():
    assert (lab01.capture_replay_demo(reps=2) is None) == (not torch.cuda.is_available())


def test_quiet_stderr_restores_fd2(capfd):
    import os

    with lab01.quiet_stderr():
        os.write(2, b"hidden\n")
    os.write(2, b"shown\n")
    assert capfd.readouterr().err == "shown\n"


def test_quiet_stderr_drops_the_profiler_cycle_warning_only():
    """The H200 run of the notebooks showed torch 2.11's per-cycle profiler warning under the census cell."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with lab01.quiet_stderr():
            warnings.warn("Warning: Profiler clears events at the end of each cycle.", UserWarning)
            warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in seen] == ["something else"]


@pytest.mark.slow
def test_record_cli_on_this_device(tmp_path):
    from minivllm_labs import record

    out = tmp_path / "lab01.json"
    assert record.main(["lab01", "--out", str(out), "--quick"]) == 0
    data = load_recorded("lab01", out)
    assert data["provenance"]["command"] == f"python -m minivllm_labs.record lab01 --out {out} --quick"
    assert data["census"]["ops_per_step"] > data["census"]["num_layers"] > 0
    assert data["bound"]["batch"] == [1, 2, 4, 8] and len(data["bound"]["eager_ms_range"]) == 4
    assert len(data["tpot"]["eager_ms"]) == 2 and len(data["tpot"]["eager_ms_range"]) == 2
    assert lab01.q1_evidence(data).startswith("Measured on ")


@pytest.mark.slow
def test_recorded_section_renders_a_recorded_file(tmp_path, monkeypatch):
    """Setup + section 2 of the notebook, in a kernel, with a stand-in recorded file (no GPU needed)."""
    pytest.importorskip("nbclient")
    from minivllm_labs.build import build_notebook, execute

    (tmp_path / "lab01.json").write_text(json.dumps(GPU_RESULTS))
    monkeypatch.setenv("MINIVLLM_LAB_RESULTS_DIR", str(tmp_path))
    nb = build_notebook(SRC_DIR / "01_why_cuda_graphs.py")
    nb.cells = nb.cells[:next(i for i, c in enumerate(nb.cells)
                              if "nbval-ignore-output" in c.metadata.get("tags", []))]
    execute(nb, timeout=120)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.text for o in outs if o.output_type == "stream")
    assert "Recorded on NVIDIA H200 with torch 2.13.0+cu130, commit 0123456789ab, 2026-11-30" in text
    assert "480 per step (16.0 per layer, + 9 copies)" in text and "        256          8.4          9.0" in text
    assert sum("text/html" in o.get("data", {}) and "Plotly.newPlot" in o.data["text/html"] for o in outs) == 3
    assert not [o for o in outs if o.output_type == "stream" and o.name == "stderr"]


def test_decode_batch_with_cached_tokens_on_the_persistent_buffers():
    """Lab 01's decode batch with context: each row owns its blocks, its new token goes to slot `context`."""
    import torch

    from minivllm.worker.input_batch import InputBatch

    ib = InputBatch(max_num_tokens=16, max_num_seqs=4, max_blocks_per_seq=4, block_size=4, num_kv_heads=2,
                    device=torch.device("cpu"))
    ptrs = {k: v.data_ptr() for k, v in ib.buffers().items()}
    m = lab01.decode_batch(ib, 2, context=5, num_kv_blocks=8)  # 5 cached tokens per row, 2 blocks per row
    assert m.block_tables.tolist() == [[0, 1, 0, 0], [2, 3, 0, 0]] and m.seq_lens.tolist() == [6, 6]
    assert m.slot_mapping.tolist() == [5, 13] and ib.positions[:2].tolist() == [5, 5]
    assert {k: v.data_ptr() for k, v in ib.buffers().items()} == ptrs
    assert lab01.decode_batch(ib, 3, context=0, num_kv_blocks=None).slot_mapping.tolist() == [-1] * 3
    with pytest.raises(ValueError, match="does not fit"):
        lab01.decode_batch(ib, 4, context=5, num_kv_blocks=7)
