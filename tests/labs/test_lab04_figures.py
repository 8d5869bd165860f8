"""Lab 04: the two recorded cold / warm starts, side by side, and which one the book quotes."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly", reason="needs the labs extras: pip install -e .[labs]")

from minivllm_labs import lab04
from minivllm_labs import lab04_views as views
from minivllm_labs.recorded import load_recorded


def test_startup_figures_name_both_records_and_the_one_quoted():
    rec, bench = load_recorded("lab04"), views.startup_record()
    text = views.startup_figures_text(rec, bench)
    assert f"cold {rec['cache']['cold']['total_s']} s, warm {rec['cache']['warm']['total_s']} s" in text
    assert f"cold {round(bench['cold']['phases_s']['total'], 1)} s" in text
    assert "the figure the book quotes" in text and "superseded" in text
    assert "not recorded" in views.startup_figures_text(None, {})


def test_the_graphs_engine_is_mode_0():
    """The prose calls the "graphs" run a mode-0 engine; the default would now be mode 3 on CUDA."""
    assert lab04.MODES["graphs"] == {"compilation_config": {"mode": 0}}
    assert lab04.MODES["level 3 + graphs"]["compilation_config"]["mode"] == 3
