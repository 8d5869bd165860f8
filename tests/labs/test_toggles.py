"""Every lab's live toggle on the CPU: the callback (ToggleRun.select, what the widget calls) re-runs the
engine with the embedded model and the figure changes; the GPU-only options are hidden on a CPU."""

from __future__ import annotations

import pytest
import torch
from minivllm_labs import toggles
from minivllm_labs.common import lab_model, quiet_engine_logs

pytestmark = pytest.mark.slow


def _bars(fig) -> list:
    return [(t.name, tuple(t.x), tuple(t.y)) for t in fig.data]


@pytest.mark.parametrize("lab", ["lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07", "lab10"])
def test_each_labs_toggle_redraws_its_figure(lab):
    quiet_engine_logs()
    run = toggles.ToggleRun(toggles.TOGGLES[lab], lab_model())
    options = run.toggle.available()
    assert len(options) >= 2 and all(not o.gpu_only for o in options) or torch.cuda.is_available()
    try:
        first = run.select(options[0].label)
        fig1 = _bars(run.figure())
        run.select(options[1].label)
        fig2 = _bars(run.figure())
    finally:
        run.close()
    assert fig1 != fig2 and all(len(x) == 2 for _, x, _ in fig2), (fig1, fig2)
    for metric in run.toggle.metrics:
        assert first[metric] is not None and first[metric] >= 0, (metric, first)
    if lab == "lab06":  # the same prompts again: prefix caching computes fewer tokens than without it
        on, off = run.results["prefix caching on"], run.results["prefix caching off"]
        assert on["computed_tokens"] < off["computed_tokens"]


def test_gpu_options_only_on_a_gpu_and_a_clear_error():
    t = toggles.TOGGLES["lab01"]
    assert [o.label for o in t.available(cuda=False)] == ["batch 1", "batch 2", "batch 4"]
    assert "FULL graphs, batch 1" in [o.label for o in t.available(cuda=True)]
    run = toggles.ToggleRun(t, "unused")
    with pytest.raises(ValueError, match="no option 'nope'"):
        run.option("nope")


def test_every_lab_has_a_toggle_and_a_stable_line(capsys, monkeypatch):
    monkeypatch.setenv("MINIVLLM_LAB_STATIC", "1")
    for lab in [*(f"lab0{n}" for n in range(1, 8)), "lab10"]:
        toggles.toggle_widget(lab, model="unused")
        line = capsys.readouterr().out
        assert line.startswith("Live toggle") and line.count("\n") == 1, line


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU options need CUDA (scripts/gpu_check.sh device-kit)")
@pytest.mark.parametrize("lab", ["lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07", "lab10"])
def test_each_gpu_option_runs(lab):
    quiet_engine_logs()
    run = toggles.ToggleRun(toggles.TOGGLES[lab], lab_model("qwen3-0.6b"))
    try:
        for o in run.toggle.options:
            if o.gpu_only:
                assert run.select(o.label)["tpot_ms"] > 0, o.label
    finally:
        run.close()
    assert len(run.figure().data[0].x) == sum(o.gpu_only for o in run.toggle.options)
