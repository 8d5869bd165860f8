"""Every lab's live toggle on the CPU (labs 01-08): the callback (ToggleRun.select, what the widget calls)
re-runs the engine with the embedded model and the figure changes, by a count the knob decides (not a time);
the GPU-only options are hidden on a CPU."""

from __future__ import annotations

import functools
import json
import re

import pytest
import torch
from minivllm_labs import toggles
from minivllm_labs.common import lab_model, quiet_engine_logs

pytestmark = pytest.mark.slow


LABS = [f"lab{n:02d}" for n in range(1, 12)]


def _bars(figs) -> dict:
    """{series name: {option label: bar value}} of a toggle's figures (the plot wraps long labels with <br>)."""
    return {t.name: {x.replace("<br>", " "): y for x, y in zip(t.x, t.y)} for fig in figs for t in fig.data}


def test_every_lab_has_a_toggle():
    assert sorted(toggles.TOGGLES) == LABS


@functools.cache
def clicks(lab: str) -> tuple[dict, list[dict]]:
    """Every CPU option of a lab clicked once, in order, then the first again (its engine is kept): (results
    by label, the figure's bars after each click, the second click's result). Run once per lab for the tests
    below (the compile options' Dynamo traces take seconds each)."""
    quiet_engine_logs()
    run = toggles.ToggleRun(toggles.TOGGLES[lab], lab_model())
    figs = []
    options = run.toggle.available(cuda=False)
    try:
        for o in options:
            run.select(o.label)
            figs.append(_bars(run.figures()))
        results = dict(run.results)
        again = run.select(options[0].label)
    finally:
        run.close()
    return results, figs, again


@pytest.mark.parametrize("lab", LABS)
def test_each_labs_toggle_redraws_its_figure(lab):
    """Two clicks on the CPU options: the second adds its bars, keeps the first's, and the count the toggle
    names in `differs` (steps, KV blocks, pieces, rungs, tokens: not a time, so not noise) changes between
    the two options in what the engine measured; where the figure shows that count, its bars differ too."""
    toggle = toggles.TOGGLES[lab]
    options = toggle.available(cuda=False)
    assert len(options) >= 2 and all(not o.gpu_only for o in options)
    a, b = options[0].label, options[1].label
    results, (fig1, fig2, *_), again = clicks(lab)
    first, second = results[a], results[b]
    names = [toggles.METRIC_LABELS[m] for m in toggle.metrics]
    assert list(fig1) == names and all(list(bars) == [a] for bars in fig1.values()), fig1
    assert list(fig2) == names and all(list(bars) == [a, b] for bars in fig2.values()), fig2
    for m, name in zip(toggle.metrics, names):
        assert fig2[name][a] == fig1[name][a] == pytest.approx(first[m], rel=1e-3), (m, fig1, fig2)  # 4 digits
        assert second[m] is not None and second[m] >= 0 and fig2[name][b] == pytest.approx(second[m], rel=1e-3)
    key = toggle.differs
    if key is None:  # Lab 10: on a CPU both engines keep every token; test_lab10.py checks what the mode changes
        assert lab == "lab10" and first["same_as_alone"] == second["same_as_alone"] == 100.0, (first, second)
        return
    assert first[key] != second[key], f"{lab}: {a!r} and {b!r} measured the same {key} ({first[key]})"
    assert again[key] == first[key], f"{lab}: a second click on {a!r} (its engine kept) measured {again[key]}"
    if key in toggle.metrics:
        name = toggles.METRIC_LABELS[key]
        assert fig2[name][a] != fig2[name][b]


def test_what_each_cpu_toggle_measures():
    """The counts behind each toggle's point, on the CPU options: the knob does what the lab says it does."""
    got = {lab: clicks(lab)[0] for lab in LABS}
    new = toggles.TOGGLES["lab01"].new_tokens  # batch b decodes b sequences
    assert [got["lab01"][f"batch {b}"]["generated_tokens"] for b in (1, 2, 4)] == [new, 2 * new, 4 * new]
    assert [got["lab02"][f"max_num_seqs {n}"]["steps"] for n in (1, 2, 4)] == sorted(
        (got["lab02"][f"max_num_seqs {n}"]["steps"] for n in (1, 2, 4)), reverse=True)
    l3 = got["lab03"]
    assert (l3["mode 0 (no Dynamo)"]["graphs_traced"], l3["mode 0 (no Dynamo)"]["pieces"]) == (0, 0)
    assert l3["mode 3 (split at attention)"]["pieces"] > l3["mode 3 (split at attention)"]["graphs_traced"] >= 1
    assert l3["mode 2 (one graph)"]["graphs_traced"] >= 1 and l3["mode 2 (one graph)"]["pieces"] == 0
    assert [got["lab04"][f"block {b}"]["kv_blocks"] for b in (8, 16, 32)] == [
        4 * got["lab04"]["block 32"]["kv_blocks"], 2 * got["lab04"]["block 32"]["kv_blocks"],
        got["lab04"]["block 32"]["kv_blocks"]]
    l5 = got["lab05"]
    assert (l5["registered, mode 2"]["rungs"], l5["registered, mode 2"]["mode_run"]) == (1, 2)
    assert (l5["unregistered, mode 2"]["rungs"], l5["unregistered, mode 2"]["mode_run"]) == (2, 0)
    l6 = got["lab06"]  # the same prompts again: prefix caching computes fewer tokens than without it
    assert l6["prefix caching on"]["computed_tokens"] < l6["prefix caching off"]["computed_tokens"]
    assert l6["max_num_seqs 2"]["steps"] > l6["prefix caching on"]["steps"]
    assert got["lab07"]["batch 1"]["floor_ms"] > 0
    l8 = got["lab08"]  # a chunk is the budget left after the step's decodes; unchunked, the prompt is one step
    for budget in (32, 64):
        r = l8[f"budget {budget}"]
        assert r["max_step_tokens"] == budget and sum(r["chunks"]) == toggles.LONG_PROMPT, r
        assert all(c <= budget - r["batch"] for c in r["chunks"][:-1]) and r["prefill_steps"] == len(r["chunks"])
    assert l8["budget 32"]["prefill_steps"] > l8["budget 64"]["prefill_steps"] > l8["not chunked"]["prefill_steps"]
    assert l8["not chunked"]["chunks"] == [toggles.LONG_PROMPT]
    assert l8["not chunked"]["max_step_tokens"] > toggles.LONG_PROMPT
    l11 = got["lab11"]  # k = 0 drafts nothing; with k = 4 the repeated questions' drafts are accepted
    assert l11["k = 0 (off)"]["draft_tokens"] == 0 and l11["k = 0 (off)"]["tokens_per_step"] == 1.0
    assert l11["ngram k = 4"]["tokens_per_step"] > 1 and l11["ngram k = 4"]["acceptance_pct"] > 0
    line = toggles.chunk_line(l8["budget 32"])
    assert "chunks of" in line and "chunk 依次为" in line and line.count("\n") == 1


def test_gpu_options_only_on_a_gpu_and_a_clear_error():
    t = toggles.TOGGLES["lab01"]
    assert [o.label for o in t.available(cuda=False)] == ["batch 1", "batch 2", "batch 4"]
    assert "decode graphs, batch 1" in [o.label for o in t.available(cuda=True)]
    run = toggles.ToggleRun(t, "unused")
    with pytest.raises(ValueError, match="no option 'nope'"):
        run.option("nope")


def test_every_lab_shows_html_buttons_and_a_stable_line(monkeypatch):
    """No ipywidgets view (it reads "model not found" after a reopen): the control is HTML whose buttons name
    every option this device runs, in full, and the page finds the kernel by the lab's notebook file."""
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    for lab in LABS:
        toggles.toggle_widget(lab)
        bundle = shown[-1]
        assert set(bundle) == {"text/plain", "text/html"}, lab
        assert bundle["text/plain"].startswith("Live toggle") and "\n" not in bundle["text/plain"]
        page = bundle["text/html"]
        for o in toggles.TOGGLES[lab].available(cuda=False):
            button = re.search(f'data-label="{re.escape(o.label)}">(.*?)</button>', page)  # its Chinese beside it
            assert button and o.label in button[1], (lab, o.label)
        assert f'data-notebook="{lab[3:]}_' in page and "mvKernel" in page


def test_a_page_click_runs_in_the_kernel_and_prints_the_result_line(capsys):
    out = toggles.click("lab04", "block 16")
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith(toggles.RESULT_MARK)]
    assert len(line) == 1 and json.loads(line[0][len(toggles.RESULT_MARK):]) == out
    assert out["done"] == ["block 16"] and out["error"] is None
    assert [m["name"] for m in out["metrics"]] == [toggles.METRIC_LABELS[m] for m in toggles.TOGGLES["lab04"].metrics]
    assert toggles.click("lab04", "nope")["error"].startswith("nope: ValueError")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU options need CUDA (scripts/gpu_check.sh device-kit)")
@pytest.mark.parametrize("lab", LABS)
def test_each_gpu_option_runs(lab):
    quiet_engine_logs()
    run = toggles.ToggleRun(toggles.TOGGLES[lab], lab_model("qwen3-0.6b"))
    try:
        for o in run.toggle.options:
            if o.gpu_only:
                assert run.select(o.label)["tpot_ms"] > 0, o.label
    finally:
        run.close()
    assert len(run.figures()[0].data[0].x) == sum(o.gpu_only for o in run.toggle.options)


def test_no_toggle_chart_mixes_units():
    """Each chart of a toggle holds one unit: the ms metrics together, every other metric alone (issue 44: Lab
    05's chart put TPOT ms beside rung counts on one axis)."""
    for lab, toggle in toggles.TOGGLES.items():
        run = toggles.ToggleRun(toggle, "unused")
        run.results = {o.label: {m: 1.0 for m in toggle.metrics} for o in toggle.available(cuda=False)}
        figs = run.figures()
        units = [{("ms" if m.endswith("_ms") else m) for m in toggle.metrics
                  if toggles.METRIC_LABELS.get(m, m) in {t.name for t in f.data}} for f in figs]
        assert all(len(u) == 1 for u in units), (lab, units)
        assert sum(len(f.data) for f in figs) == len(toggle.metrics), lab
