"""Labs: quiz graders, recorded-result provenance, widget callbacks, figures, notebook hygiene.

The notebooks themselves run under `pytest --nbval`; this file checks what nbval cannot: that graders and
callbacks are right, that a recorded file without provenance is refused, that the GPU-shaped recorded data
renders (no GPU needed), that notebooks match their sources, and that every nbval-skip is allow-listed.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch

nbformat = pytest.importorskip("nbformat", reason="needs the labs extras: pip install -e .[labs]")

from minivllm.labs import lab01  # noqa: E402
from minivllm.labs.build import LABS_DIR, SRC_DIR, cells_match, parse_source, sources  # noqa: E402
from minivllm.labs.common import REPO_ROOT, detect_device, gpu_only, round_floats  # noqa: E402
from minivllm.labs.quiz import feedback_html, grade, parse_choice  # noqa: E402
from minivllm.labs.recorded import (PROVENANCE_FIELDS, ProvenanceError,  # noqa: E402
                                    RecordedResultsMissing, check_provenance, load_recorded, make_provenance)

ALLOWLIST = REPO_ROOT / "tests" / "nbval_skip_allowlist.txt"
NOTEBOOKS = sorted(LABS_DIR.glob("*.ipynb"))

# What `python -m minivllm.labs.record lab01` writes on a GPU (shape only; the numbers are made up).
GPU_RESULTS = {
    "lab": "lab01",
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.13.0+cu130", "commit": "0123456789abcdef0123",
                   "date": "2026-11-30T10:00:00+00:00", "command": "python -m minivllm.labs.record lab01",
                   "model": "random weights: Qwen3ForCausalLM, 28 layers, hidden 1024, bfloat16"},
    "launch_overhead": {"device": "cuda", "n_ops": 1000, "eager_us_per_op": 9.1, "graph_us_per_op": 1.2,
                        "graph_replay_us": 1200.0, "graph_launch_us": 20.0},
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


# ---- quiz graders ------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [lab01.Q1, lab01.Q4])
def test_grader_accepts_the_right_answer_in_every_form(q):
    for answer in ("B", "b", " B ", 1, q.options[1][0], q.labels()[1]):
        ok, text = grade(q, answer, GPU_RESULTS)
        assert ok and text.startswith("Correct."), answer
        assert f"Model answer: {q.model_answer}" in text


@pytest.mark.parametrize("q", [lab01.Q1, lab01.Q4])
def test_grader_explains_every_wrong_answer(q):
    for i, (_, why, *_zh) in enumerate(q.options):
        if i == q.correct:
            continue
        ok, text = grade(q, "ABCD"[i], GPU_RESULTS)
        assert not ok and text.startswith(f"Not quite ({'ABCD'[i]}).") and why in text
        assert q.model_answer in text  # the model answer is shown after a wrong answer too


@pytest.mark.parametrize("answer", [None, "", "Z", "E", 7, -1, True, "maybe"])
def test_grader_never_raises_on_bad_input(answer):
    ok, text = grade(lab01.Q1, answer, GPU_RESULTS)
    assert not ok and text.startswith("No answer graded")


def test_parse_choice_rejects_out_of_range():
    with pytest.raises(ValueError, match="A-D"):
        parse_choice(lab01.Q1, 4)


def test_q1_model_answer_is_tied_to_the_measured_numbers():
    _, text = grade(lab01.Q1, "B", GPU_RESULTS)
    assert "Measured on NVIDIA H200" in text
    assert "9.1 us eager, 1.2 us inside a graph" in text
    # batch 1 (CPU-bound) and the largest batch (GPU-bound), with the exposed CPU time and the saving
    assert ("batch 1: CPU enqueue 8.0 ms vs GPU 1.5 ms -> exposed CPU 6.5 ms; eager 8.3 ms, graph 1.6 ms: "
            "saved 6.7 ms") in text
    assert "batch 256:" in text and "exposed CPU 0.0 ms" in text and "saved 0.5 ms" in text
    assert "10.0 ms eager, 2.5 ms with graphs" in text


def test_q4_model_answer_is_tied_to_the_measured_numbers():
    _, text = grade(lab01.Q4, "B", GPU_RESULTS)
    assert "capturing the batch-1 graph took 0.4 s" in text
    assert "padding 5 -> 8 costs 0.1 ms" in text
    assert "captured sizes [1, 2, 4, 8, 16] at startup in 1.2 s, 30.0 MiB" in text  # a record without the pool
    res = copy.deepcopy(GPU_RESULTS)
    res["tpot"]["capture"]["pool_mib"] = 4.0  # newer records: the allocator's pool next to the free-memory drop
    text = lab01.q4_evidence(res)
    assert "a graph pool of 4.0 MiB shared by all sizes; free device memory fell by 30.0 MiB" in text


def test_evidence_on_a_cpu_and_without_results():
    assert "Measured here" in lab01.q1_evidence(CPU_RESULTS)
    assert "2.4 us eagerly" in lab01.q1_evidence(CPU_RESULTS)
    assert "cannot be captured on this device" in lab01.q4_evidence(CPU_RESULTS)
    for ev in (lab01.q1_evidence, lab01.q4_evidence):
        assert ev(None).startswith("No measurements available")


def test_feedback_html_is_escaped_and_colored():
    res = {"launch_overhead": {"device": "<cpu>", "n_ops": 1, "eager_us_per_op": 1.0}}
    html = feedback_html(lab01.Q1, "B", res)
    assert html.startswith("<pre") and "#137333" in html and "&lt;cpu&gt;" in html
    assert "#b3261e" in feedback_html(lab01.Q1, "A")


# ---- widget callbacks ----------------------------------------------------------------------------------
def test_quiz_widget_check_button_grades_the_selection():
    pytest.importorskip("ipywidgets")
    from minivllm.labs.quiz import quiz_widget

    box = quiz_widget(lab01.Q1, GPU_RESULTS)
    _, choice, button, out = box.children
    button.click()
    assert "No answer graded" in out.value
    choice.value = choice.options[1]
    button.click()
    assert "Correct." in out.value and "NVIDIA H200" in out.value
    choice.value = choice.options[0]
    button.click()
    assert "Not quite (A)." in out.value


def test_tpot_toggle_update_remembers_each_mode():
    calls = []

    def measure(mode):
        calls.append(mode)
        return {"eager": 10.12345, "graphs": 2.5}[mode]

    state = {}
    assert lab01.tpot_toggle_update(state, "eager", measure) == [10.123, None]
    assert lab01.tpot_toggle_update(state, "graphs", measure) == [10.123, 2.5]
    assert lab01.tpot_toggle_update(state, "eager", measure) == [10.123, 2.5]  # measured again, live
    assert calls == ["eager", "graphs", "eager"]


def test_tpot_toggle_widget_calls_the_measurement():
    pytest.importorskip("ipywidgets")
    calls = []
    box = lab01.tpot_toggle({}, measure=lambda mode: calls.append(mode) or 1.0)
    toggle = box.children[0]
    toggle.value = "graphs"
    toggle.value = "eager"
    assert calls == ["graphs", "eager"]


# ---- recorded results and provenance ---------------------------------------------------------------------
def test_check_provenance_accepts_complete_results():
    assert check_provenance(GPU_RESULTS, "lab01")["gpu"] == "NVIDIA H200"


@pytest.mark.parametrize("field", PROVENANCE_FIELDS)
@pytest.mark.parametrize("bad", ["missing", "", "   ", None, 3])
def test_check_provenance_names_a_missing_field(field, bad):
    data = copy.deepcopy(GPU_RESULTS)
    if bad == "missing":
        del data["provenance"][field]
    else:
        data["provenance"][field] = bad
    with pytest.raises(ProvenanceError, match=rf"lack provenance field\(s\) {field}"):
        check_provenance(data, "lab01")


def test_check_provenance_rejects_other_shapes():
    with pytest.raises(ProvenanceError, match="no 'provenance'"):
        check_provenance({"lab": "lab01"}, "lab01")
    with pytest.raises(ProvenanceError, match="expected 'lab01'"):
        check_provenance({**GPU_RESULTS, "lab": "lab02"}, "lab01")
    with pytest.raises(ProvenanceError, match="JSON object"):
        check_provenance([1, 2], "lab01")


def test_load_recorded(tmp_path):
    p = tmp_path / "lab01.json"
    with pytest.raises(RecordedResultsMissing, match=r"python -m minivllm.labs.record lab01"):
        load_recorded("lab01", p)
    with pytest.raises(FileNotFoundError):  # RecordedResultsMissing is a FileNotFoundError
        load_recorded("lab01", p)
    p.write_text("{not json")
    with pytest.raises(ProvenanceError, match="not valid JSON"):
        load_recorded("lab01", p)
    p.write_text(json.dumps({**GPU_RESULTS, "provenance": {"gpu": "H200"}}))
    with pytest.raises(ProvenanceError, match="torch, commit, date, command"):
        load_recorded("lab01", p)
    p.write_text(json.dumps(GPU_RESULTS))
    assert load_recorded("lab01", p) == GPU_RESULTS


def test_missing_message_is_stable():
    """The notebook prints this message when no file is recorded: no absolute path may appear in it."""
    with pytest.raises(RecordedResultsMissing) as e:
        load_recorded("lab-that-does-not-exist")
    assert "(assets/results/h200/lab-that-does-not-exist.json)" in str(e.value)
    assert str(REPO_ROOT) not in str(e.value)


def test_recorded_lab01_file_if_present_is_complete():
    p = REPO_ROOT / "assets" / "results" / "h200" / "lab01.json"
    if not p.exists():
        pytest.skip("no recorded lab01 results in this checkout")
    data = load_recorded("lab01")
    assert "NVIDIA" in data["provenance"]["gpu"]
    for key in ("launch_overhead", "census", "bound", "tpot"):
        assert key in data
    assert "graph_ms" in data["bound"] and "graphs_ms" in data["tpot"]


def test_make_provenance_is_complete():
    prov = make_provenance("python -m minivllm.labs.record lab01 --out x.json", model="m")
    check_provenance({"lab": "lab01", "provenance": prov}, "lab01")
    assert prov["torch"] == torch.__version__ and prov["model"] == "m"


# ---- recorded data renders (the cells of section 2, with GPU-shaped data) ------------------------------
def test_recorded_tables_and_figures_render():
    go = pytest.importorskip("plotly.graph_objects")
    for fig in (lab01.plot_launch(GPU_RESULTS), lab01.plot_bound(GPU_RESULTS), lab01.plot_tpot(GPU_RESULTS)):
        assert type(fig) is go.Figure
    assert [t.name for t in lab01.plot_bound(GPU_RESULTS).data] == [
        "CPU: enqueue eager step", "GPU: run its kernels", "eager step (wall)", "graph replay (wall)"]
    assert len(lab01.plot_tpot(GPU_RESULTS).layout.updatemenus[0].buttons) == 3  # all / eager / graphs
    table = lab01.census_table(GPU_RESULTS)
    assert "16.0 per layer, 480 per step (+ 9 copies)" in table and "about 1280 GPU kernels" in table
    rows = lab01.bound_table(GPU_RESULTS).splitlines()
    assert rows[0].split() == ["batch", "enqueue", "gpu", "eager", "graph", "saved", "exposed_cpu"]
    assert rows[1].split() == ["1", "8.0", "1.5", "8.3", "1.6", "6.7", "6.5"]
    assert "ops dispatched" in lab01.census_table(CPU_RESULTS)
    assert len(lab01.plot_tpot(CPU_RESULTS).data) == 1


@pytest.mark.slow
def test_lab01_recorded_section_renders_a_recorded_file(tmp_path, monkeypatch):
    """Setup + section 2 of the notebook, in a kernel, with a stand-in recorded file (no GPU needed)."""
    pytest.importorskip("nbclient")
    from minivllm.labs.build import build_notebook, execute

    (tmp_path / "lab01.json").write_text(json.dumps(GPU_RESULTS))
    monkeypatch.setenv("MINIVLLM_LAB_RESULTS_DIR", str(tmp_path))
    nb = build_notebook(SRC_DIR / "01_why_cuda_graphs.py")
    nb.cells = nb.cells[:next(i for i, c in enumerate(nb.cells)
                              if "nbval-ignore-output" in c.metadata.get("tags", []))]
    execute(nb, timeout=120)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.text for o in outs if o.output_type == "stream")
    assert "Recorded on NVIDIA H200 with torch 2.13.0+cu130, commit 0123456789ab, 2026-11-30" in text
    assert "480 per step (+ 9 copies)" in text and "        256          8.4          9.0" in text
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outs) == 3


def test_figure_helper():
    pytest.importorskip("plotly")
    from minivllm.labs.plots import figure

    fig = figure([1, 2], {"a": [1.234567, None], "b": [3.0, 4.0]}, toggle=True, log_x=True)
    assert list(fig.data[0].y) == [1.235, None] and fig.layout.xaxis.type == "log"
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["all", "a", "b"]
    assert list(fig.layout.updatemenus[0].buttons[2].args[0]["visible"]) == [False, True]
    with pytest.raises(ValueError, match="kind"):
        figure([1], {"a": [1]}, kind="pie")


def test_round_floats():
    assert round_floats({"a": [0.000123456, 123456.7, 1, None, "x"], "b": 0.0}) == \
        {"a": [0.0001235, 123500.0, 1, None, "x"], "b": 0.0}


def test_device_helpers(capsys):
    dev = detect_device()
    assert dev.kind == ("cuda" if torch.cuda.is_available() else "cpu")
    assert str(dev) == str(detect_device())  # stable
    assert gpu_only("X") is torch.cuda.is_available()
    if not torch.cuda.is_available():
        assert "X needs a CUDA GPU" in capsys.readouterr().out


# ---- measurements run on this device (the run-it-here code path) ----------------------------------------
def test_launch_overhead_runs_here():
    res = lab01.launch_overhead(n_ops=50, reps=2)
    assert res["eager_us_per_op"] > 0 and ("graph_us_per_op" in res) == torch.cuda.is_available()


@pytest.mark.slow
def test_record_cli_on_this_device(tmp_path):
    from minivllm.labs import record

    out = tmp_path / "lab01.json"
    assert record.main(["lab01", "--out", str(out), "--quick"]) == 0
    data = load_recorded("lab01", out)
    assert data["provenance"]["command"] == f"python -m minivllm.labs.record lab01 --out {out} --quick"
    assert data["census"]["ops_per_step"] > data["census"]["num_layers"] > 0
    assert data["bound"]["batch"] == [1, 2, 4, 8] and len(data["bound"]["eager_ms"]) == 4
    assert len(data["tpot"]["eager_ms"]) == 2
    assert lab01.q1_evidence(data).startswith("Measured on ")


def test_record_refuses_to_write_cpu_numbers_as_gpu_results():
    if torch.cuda.is_available():
        pytest.skip("on a GPU the default output is the right one")
    from minivllm.labs import record

    with pytest.raises(SystemExit):
        record.main(["lab01"])


# ---- notebooks: sources, skips, checked outputs ----------------------------------------------------------
def test_parse_source():
    src = ('# header comment\n# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n'
           '# %% tags=["nbval-skip"] id="gpu-cell"\nif gpu():\n    pass\n')
    cells = parse_source(src, "99")
    assert [c.cell_type for c in cells] == ["markdown", "code", "code"]
    assert cells[0].source == "# Title\n\ntext" and cells[1].source == "x = 1"
    assert [c.id for c in cells] == ["99-00", "99-01", "gpu-cell"]
    assert cells[2].metadata["tags"] == ["nbval-skip"]
    with pytest.raises(ValueError, match="needs an explicit id"):
        parse_source('# %% tags=["nbval-skip"]\nx = 1\n', "99")
    with pytest.raises(ValueError, match="duplicate cell ids"):
        parse_source('# %% id="a"\nx = 1\n# %% id="a"\ny = 2\n', "99")


def test_every_source_has_an_up_to_date_notebook():
    assert sources(), f"no lab sources in {SRC_DIR}"
    for src in sources():
        assert cells_match(src, LABS_DIR / f"{src.stem}.ipynb") == [], \
            "notebook out of date: run `python -m minivllm.labs.build`"


def _skipped_cells():
    """(notebook path relative to the repo, cell id, first line) of every cell nbval would skip."""
    for nb_path in NOTEBOOKS:
        nb = nbformat.read(nb_path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            tagged = "nbval-skip" in cell.metadata.get("tags", [])
            marked = any(line.strip().lstrip("#").strip() == "NBVAL_SKIP" for line in cell.source.splitlines()
                         if line.strip().startswith("#"))
            if tagged or marked:
                first = cell.source.splitlines()[0].strip() if cell.source else ""
                yield str(nb_path.relative_to(REPO_ROOT)), cell.get("id", ""), first


def _allowlist() -> set[str]:
    entries = set()
    for line in ALLOWLIST.read_text().splitlines():
        line = "" if line.startswith("#") else re.split(r"\s+#\s", line)[0].strip()
        if line:
            entries.add(line)
    return entries


def test_every_nbval_skip_is_allowlisted():
    allowed = _allowlist()
    unlisted = [f"{nb}::{cid}" for nb, cid, first in _skipped_cells()
                if f"{nb}::{cid}" not in allowed and f"{nb}::{first}" not in allowed]
    assert not unlisted, f"cells skipped by nbval but not in {ALLOWLIST.name}: {unlisted}"


def test_allowlist_has_no_stale_entries():
    present = {f"{nb}::{key}" for nb, cid, first in _skipped_cells() for key in (cid, first)}
    stale = sorted(_allowlist() - present)
    assert not stale, f"{ALLOWLIST.name} lists cells that are not skipped (or no longer exist): {stale}"


def test_sanitize_file_masks_what_varies():
    nbval = pytest.importorskip("nbval.plugin")
    patterns = nbval.get_sanitize_patterns((REPO_ROOT / "tests" / "nbval_sanitize.cfg").read_text())
    text = (f"took 1.23 ms and 4 s at 0x7fabc123 in /tmp/tmpab_1/x.json {REPO_ROOT}/labs/a.ipynb "
            "2026-11-29T23:30:01+00:00 INFO 11-29 23:30:01 50%|#####     | 1/2 [00:01<00:01, 1.2it/s]\n"
            "id 2b016984ebe54f319a8f1ce5eac285bf 12.5 tok/s")
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    assert text == ("took DURATION and DURATION at 0xADDRESS in TMPPATH REPO/labs/a.ipynb DATETIME "
                    "INFO LOGTIME PROGRESS\nid UUID RATE")


# Timings with decimals, progress bars, addresses, temp paths, times of day.
_UNSTABLE = re.compile(r"\d+\.\d+ ?(ms|us|µs|s)\b|it/s|\b0x[0-9a-f]{6,}|/tmp/|\d\d:\d\d:\d\d")


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_checked_cells_are_stable(nb_path):
    """Cells nbval compares hold no timings, progress bars, addresses, temp paths, stderr or widgets, and
    every code cell was executed (outputs and counts are kept in git)."""
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"{cell.id} was not executed"
        tags = cell.metadata.get("tags", [])
        if "nbval-ignore-output" in tags or "nbval-skip" in tags:
            continue
        assert "clear_output" not in cell.source, cell.id
        for out in cell.outputs:
            assert out.output_type in ("stream", "execute_result", "display_data"), (cell.id, out.output_type)
            if out.output_type == "stream":
                assert out.name == "stdout", f"{cell.id} writes to stderr"
                text = out.text
            else:
                assert "application/vnd.jupyter.widget-view+json" not in out.data, f"{cell.id} shows a widget"
                text = json.dumps(out.data)
            recorded_numbers = "Recorded on" in text or "Measured on" in text  # numbers from the JSON file
            assert recorded_numbers or not _UNSTABLE.search(text), (cell.id, _UNSTABLE.search(text))
