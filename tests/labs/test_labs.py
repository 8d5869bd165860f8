"""Labs machinery: quiz graders and the static quiz, figures that render anywhere, recorded-result
provenance, the notebook build, notebook hygiene and the nbval allow-list.

The notebooks themselves run under `pytest --nbval`; this file checks what nbval cannot: that graders accept
every way a learner writes an answer and never raise, that the static quiz carries every option's feedback
and grades numbers like Python does, that stored plots draw without a CDN, that a recorded file without
provenance is refused, that notebooks match their sources, and that every nbval-skip is allow-listed.
Lab-specific tests live in tests/labs/test_labNN.py.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess

import pytest
import torch

nbformat = pytest.importorskip("nbformat", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs.build import LABS_DIR, SRC_DIR, cells_match, parse_source, sources  # noqa: E402
from minivllm_labs.common import REPO_ROOT, detect_device, gpu_only, round_floats  # noqa: E402
from minivllm_labs.quiz import (  # noqa: E402
    NumericQuestion,
    Option,
    Question,
    grade,
    option_feedback,
    parse_choice,
    parse_number,
)
from minivllm_labs.quiz_html import NUMERIC_JS, quiz_html  # noqa: E402
from minivllm_labs.quiz_show import STATIC_ENV, feedback_html  # noqa: E402
from minivllm_labs.recorded import (  # noqa: E402
    PROVENANCE_FIELDS,
    ProvenanceError,
    RecordedResultsMissing,
    check_provenance,
    load_recorded,
    make_provenance,
)

ALLOWLIST = REPO_ROOT / "tests" / "nbval_skip_allowlist.txt"
NOTEBOOKS = sorted(LABS_DIR.glob("*.ipynb"))

GPU_RESULTS = {
    "lab": "lab01",
    "provenance": {"gpu": "NVIDIA H200", "torch": "2.13.0+cu130", "commit": "0123456789abcdef0123",
                   "date": "2026-11-30T10:00:00+00:00", "command": "python -m minivllm_labs.record lab01"},
    "value": 3.5,
}

Q = Question(
    qid="lab99.q", prompt="Which one?", prompt_zh="哪一个？",
    options=(Option("Alpha", "alpha is wrong", "甲", "甲不对"), Option("Beta", "beta is wrong", "乙", "乙不对"),
             Option("Gamma <g>", "gamma is right & measured", "丙", "丙对"), Option("Delta", "delta is wrong")),
    correct=2, model_answer="gamma", model_answer_zh="丙", evidence=lambda r: f"measured {(r or {}).get('value')}",
    source="lab")
N = NumericQuestion(qid="lab99.n", prompt="How many ms?", answer=30.0, rel_tol=0.2, unit="ms",
                    model_answer="about 30", model_answer_zh="约 30", evidence=lambda r: "evidence line")


# ---- graders ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", ["C", "c", " C ", "Ｃ", "ｃ", "C.", "c)", "(c)", "选C", "选项 C", "答案：C",
                                    "answer: c", "Gamma <g>", "gamma <g>.", "C. Gamma <g>", "丙"])
def test_grader_accepts_the_right_answer_in_every_form(answer):
    ok, text = grade(Q, answer, GPU_RESULTS)
    assert ok and text.startswith("Correct. gamma is right"), answer
    assert "Model answer: gamma" in text and "measured 3.5" in text


def test_grader_explains_every_wrong_answer_in_both_languages():
    for i, o in enumerate(Q.options):
        if i == Q.correct:
            continue
        ok, text = grade(Q, "ABCD"[i], GPU_RESULTS)
        assert not ok and text.startswith(f"Not quite ({'ABCD'[i]}). {o.why}")
        ok, zh = grade(Q, "abcd"[i], GPU_RESULTS, lang="zh")
        assert not ok and zh.startswith(f"不对（{'ABCD'[i]}）。{o.why_zh or o.why}") and "参考答案：丙" in zh


@pytest.mark.parametrize("answer", [None, "", "   ", "ß", "ﬁ", "ŉ", "İ", "1", 1, 0, -1, 7, "2.", True, False,
                                    2.5, "Z", "E", "maybe", "BC", [], "选", object()])
def test_grader_never_raises_and_hints(answer):
    ok, text = grade(Q, answer, GPU_RESULTS)
    assert not ok and text.startswith("No answer graded: "), (answer, text)


def test_numbers_are_refused_alike_as_int_and_str():
    assert grade(Q, 1, None)[1] == grade(Q, "1", None)[1].replace("'1'", "1")
    assert "options are lettered A-D" in grade(Q, "1", None)[1]
    with pytest.raises(ValueError, match="no option E"):
        parse_choice(Q, "e")


def test_grader_loads_the_recorded_results_when_given_none(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIVLLM_LAB_RESULTS_DIR", str(tmp_path))
    assert "measured None" in grade(Q, "C")[1]  # no file for lab99: no results, said as such by evidence
    (tmp_path / "lab99.json").write_text(json.dumps({**GPU_RESULTS, "lab": "lab99"}))
    assert "measured 3.5" in grade(Q, "C")[1]
    assert "measured None" in grade(Q, "C", None)[1]  # an explicit None stays None


@pytest.mark.parametrize("answer,value", [("30", 30), ("约 28 ms", 28), ("~25", 25), ("１２", 12), ("1,000", 1000),
                                          ("3e1", 30), (" 36 ms ", 36), (24, 24), (35.9, 35.9), ("-1", -1)])
def test_parse_number(answer, value):
    assert parse_number(answer) == value


@pytest.mark.parametrize("answer", ["x", "", "ms", "1.2.3", "nan", "inf", None, True, "٣"])
def test_numeric_grader_never_raises(answer):
    ok, text = grade(N, answer, None)
    assert not ok and text.startswith("No answer graded")


def test_numeric_tolerance():
    assert grade(N, "24", None)[0] and grade(N, "36", None)[0] and not grade(N, "23.9", None)[0]
    assert grade(N, "30", None)[1] == "Correct: 30 is within 20% of 30 ms.\nModel answer: about 30\nevidence line"
    assert grade(N, "50", None, lang="zh")[1].startswith("不对：50；答案是 30 ms（误差 20% 以内算对）。")


def test_feedback_html_is_escaped_and_colored():
    assert "#137333" in feedback_html(Q, "C", None) and "&lt;g&gt;" not in feedback_html(Q, "C", None)
    assert "gamma is right &amp; measured" in feedback_html(Q, "C", None)
    assert "#b3261e" in feedback_html(Q, "A", None)


# ---- the static quiz --------------------------------------------------------------------------------------
def test_static_quiz_carries_every_options_feedback_in_both_languages():
    import html as h

    page = quiz_html(Q, GPU_RESULTS)
    assert page == quiz_html(Q, GPU_RESULTS)  # stable: a stored output must not change between builds
    options = page.split('<details class="mv-quiz-option"')[1:]
    assert len(options) == 4
    for i, o in enumerate(Q.options):
        body = options[i].split("</details>")[0]
        if i == Q.correct:  # the right option carries the whole feedback: verdict, why, model answer, numbers
            for lang in ("en", "zh"):
                assert h.escape(option_feedback(Q, i, GPU_RESULTS, lang)) in body, (i, lang)
        else:  # a wrong one is a hint to retry: its misconception, not the answer
            assert h.escape(o.why) in body and "Try another option" in body and "再选一个" in body, i
            assert "Model answer" not in body and h.escape(Q.model_answer) not in body, i
    answer = page.split('<details class="mv-quiz-answer"')[1]
    assert "Show the answer" in answer and h.escape(option_feedback(Q, Q.correct, GPU_RESULTS)) in answer
    assert 'class="lang-en"' in page and 'class="lang-zh"' in page and "Gamma &lt;g&gt;" in page
    assert "http://" not in page and "https://" not in page and "src=" not in page  # self-contained: no network


def test_static_numeric_quiz_has_a_box_and_the_answer():
    page = quiz_html(N, None)
    assert "<input" in page and "Correct: 30 is within 20% of 30 ms." in page and "evidence line" in page


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the quiz's JavaScript")
def test_numeric_javascript_grades_like_python():
    cases = ["30", "约 28 ms", "~25", "１２", "1,000", "3e1", " 36 ms ", "23.9", "36.01", "x", "", "1.2.3", "-1",
             "12.5ms", "0.5", ".5", "1e400"]
    script = NUMERIC_JS + f"\nconsole.log(JSON.stringify({json.dumps(cases)}.map(function (c) {{" \
        f" return mvGradeNumber(c, {N.answer}, {N.rel_tol}, {json.dumps(N.unit)}); }})));"
    got = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True,
                                    timeout=30).stdout)
    for case, js in zip(cases, got):
        ok, text = grade(N, case, None)
        assert js["ok"] == ok, case
        assert text.split("\n")[0] == js["en"], case
        if js["graded"]:
            assert grade(N, case, None, lang="zh")[1].split("\n")[0] == js["zh"], case


def test_show_quiz_stores_only_html_and_text_live_or_not(monkeypatch):
    """No widget view, even in a live kernel: a saved notebook reopened later must not read "Error displaying
    widget: model not found"; the HTML quiz grades clicks by itself."""
    from minivllm_labs import quiz_show as quiz

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    for static in ("1", ""):
        monkeypatch.setenv(STATIC_ENV, static)
        quiz.show_quiz(Q, GPU_RESULTS)
        assert set(shown[-1]) == {"text/plain", "text/html"} and "VBox" not in shown[-1]["text/plain"]
        assert shown[-1]["text/html"] == quiz_html(Q, GPU_RESULTS)


def test_quiz_widget_check_button_grades_the_selection():
    pytest.importorskip("ipywidgets")
    from minivllm_labs.quiz_show import quiz_widget

    _, choice, button, out = quiz_widget(Q, GPU_RESULTS).children
    button.click()
    assert "No answer graded" in out.value
    choice.value = choice.options[2]
    button.click()
    assert "Correct." in out.value and "measured 3.5" in out.value
    choice.value = choice.options[0]
    button.click()
    assert "Not quite (A)." in out.value
    _, box, button, out = quiz_widget(N, None).children
    box.value = "31 ms"
    button.click()
    assert "Correct: 31" in out.value


# ---- figures ------------------------------------------------------------------------------------------------
def test_show_stores_html_that_draws_offline_and_the_plotly_json(monkeypatch, tmp_path):
    pytest.importorskip("plotly")
    from minivllm_labs import plots

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    monkeypatch.setattr(plots, "_state", {"count": 0})
    fig = plots.figure([1, 2], {"a": [1.0, 2.0]}, title="T")
    plots.show(fig)
    plots.show(fig)
    for k, out in enumerate(shown):
        assert plots.PLOTLY_MIME in out and out["text/plain"] == "<plotly figure: T>"
        page = out["text/html"]
        assert "Plotly.newPlot" in page and "http" not in page and "require(" not in page  # no CDN, no require.js
        assert "<table>" in page  # the data as text, for a viewer that runs no script
        # plotly.js travels once per notebook (the kernel's first figure), gzip + base64, never from _static/
        assert ("data-minivllm-plotlyjs" in page) == (k == 0) and "_static" not in page
        assert (len(page) > 1_000_000) == (k == 0) and len(page) < 2_500_000
        assert "sendDataToCloud" in page  # the modebar's "Share chart" removed
    ids = [re.search(r'id="(mv-plot-[^"]+)"', o["text/html"]).group(1) for o in shown]
    assert ids[0] != ids[1]
    path = plots.install_plotlyjs(tmp_path / "_static")
    assert path.name == "plotly.min.js" and path.stat().st_size > 1_000_000
    with pytest.raises(TypeError):
        plots.show({"data": []})


def test_gpu_copies_drop_the_embedded_plotlyjs_and_keep_the_figure():
    """The executed notebooks kept in assets/results/<gpu>/labs_gpu/ carry no 2 MB plotly.js copy; the figure's
    own drawing code and data stay, and the recorded copies there have none left."""
    pytest.importorskip("plotly")
    import nbformat
    from minivllm_labs import plots
    from minivllm_labs.build import strip_plotlyjs

    spec = {"data": [{"type": "bar", "x": [1], "y": [2]}], "layout": {}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data={"text/html": plots.figure_html(spec, "d1", embed_plotlyjs=True)})])])
    page = strip_plotlyjs(nb).cells[0].outputs[0]["data"]["text/html"]
    assert page == plots.figure_html(spec, "d1") and "Plotly.newPlot" in page
    for path in (REPO_ROOT / "assets" / "results").glob("*/labs_gpu/*.ipynb"):
        assert "data-minivllm-plotlyjs" not in path.read_text(), path


def test_figure_helper():
    pytest.importorskip("plotly")
    from minivllm_labs import plots
    from minivllm_labs.plots import figure, log_ticks

    fig = figure([1, 2], {"a": [1.234567, None], "b": [3.0, 4.0]}, toggle=True, log_x=True)
    assert list(fig.data[0].y) == [1.235, None] and fig.layout.xaxis.type == "log"
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["all", "a", "b"]
    assert list(fig.layout.updatemenus[0].buttons[2].args[0]["visible"]) == [False, True]
    menu = fig.layout.updatemenus[0]  # buttons between the title (top-left) and the plot: never over the title
    assert menu.yanchor == "bottom" and menu.y > 1 and fig.layout.title.yanchor == "top"
    assert fig.layout.margin.t >= 90
    # one colour per series whichever the menu shows; the legend below the plot, kept with one series shown
    assert [t.line.color for t in fig.data] == plots.PALETTE[:2] and fig.layout.showlegend
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.yref == "container"
    fig = figure(["a long category label here"], {"a": [1.0]}, kind="bar", title="T",
                 zh={"title": "标题", "y": "毫秒", "names": {"a": "甲"}})
    assert fig.data[0].x[0] == "a long category<br>label here"
    i18n = fig.layout.meta["mv_i18n"]
    assert i18n["zh"]["layout"]["title.text"] == "标题" and i18n["en"]["layout"]["title.text"] == "T"
    assert i18n["zh"]["names"] == ["甲"]
    with pytest.raises(ValueError, match="kind"):
        figure([1], {"a": [1]}, kind="pie")
    assert log_ticks([20, 50]) == [10.0, 20.0, 50.0, 100.0]
    fig = figure([1, 256], {"ms": [20.0, 50.0]}, log_y=True)
    assert list(fig.layout.yaxis.ticktext) == ["10", "20", "50", "100"]


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
    with pytest.raises(RecordedResultsMissing, match=r"python -m minivllm_labs.record lab01"):
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


def test_make_provenance_is_complete():
    prov = make_provenance("python -m minivllm_labs.record lab01 --out x.json", model="m")
    check_provenance({"lab": "lab01", "provenance": prov}, "lab01")
    assert prov["torch"] == torch.__version__ and prov["model"] == "m"


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


def test_build_check_mode(capsys):
    from minivllm_labs import build

    assert build.main(["--check"]) == 0 and "match their sources" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        build.main(["--gpu", str(LABS_DIR)])  # never overwrites the CPU-built notebooks


def test_every_source_has_an_up_to_date_notebook():
    assert sources(), f"no lab sources in {SRC_DIR}"
    for src in sources():
        assert cells_match(src, LABS_DIR / f"{src.stem}.ipynb") == [], \
            "notebook out of date: run `python -m minivllm_labs.build`"


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
                text = json.dumps(dict(out.data))
            # numbers read from the recorded JSON file (the cell uses `rec`) are stable; timings measured here not
            recorded_numbers = bool(re.search(r"\brec\b", cell.source)) or "Recorded on" in text
            assert recorded_numbers or not _UNSTABLE.search(text), (cell.id, _UNSTABLE.search(text))
