"""The figure helpers of the labs: `figure(...)` builds a plot, `show(fig)` displays it so it renders anywhere.

Why one builder: every lab plot then looks alike, rounds its numbers (so a checked output is stable), labels
log axes in real numbers, and keeps its buttons off the title. Toggles that must work in the static book are
plotly's own buttons (`toggle=True`), not ipywidgets.

Why `show` and not a Figure as a cell's last value: plotly's default output is its JSON mime type only, which
JupyterLab draws (through the jupyterlab-plotly extension) but nbconvert HTML and the book do not: they showed
blank plots. `show` stores one output with two representations:

- application/vnd.plotly.v1+json: JupyterLab draws it with the extension's own plotly.js, even in a notebook
  opened without running (the extension is a "safe" renderer, unlike text/html scripts);
- text/html: a div and a `Plotly.newPlot` script that expects `window.Plotly`. The first figure a kernel
  shows embeds plotly.js itself (one copy per notebook, in a `<script data-minivllm-plotlyjs="VERSION">`
  guarded by `if (!window.Plotly)`, so a page that already loaded plotly.js, like the book's from its
  _static folder, skips it); later figures reuse it. No CDN, no require.js: it works in a standalone
  nbconvert HTML file with no network.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from minivllm.labs.common import round_floats

if "PLOTLY_RENDERER" not in os.environ:
    pio.renderers.default = "plotly_mimetype"

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_state = {"embedded": False, "count": 0}  # per kernel: has plotly.js been embedded yet, figures shown


def log_ticks(values: Sequence[float | None]) -> list[float]:
    """1-2-5 ticks covering the positive values, so a log axis reads "20 50 100", never "2 3 4 5"."""
    pos = [v for v in values if v is not None and v > 0]
    if not pos:
        return []
    lo, hi = min(pos), max(pos)
    ticks = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            t = m * 10.0 ** e
            if lo / 2.5 <= t <= hi * 2.5:
                ticks.append(float(f"{t:.6g}"))
    return ticks


def _tick_text(t: float) -> str:
    return f"{t:g}" if t >= 1e-3 else f"{t:.0e}"


def _log_axis(values: Sequence[float | None]) -> dict:
    ticks = log_ticks(values)
    return dict(type="log", tickvals=ticks, ticktext=[_tick_text(t) for t in ticks]) if ticks else \
        dict(type="log")


def figure(x: Sequence, series: dict[str, Sequence[float | None]], *, kind: str = "line", title: str = "",
           x_title: str = "", y_title: str = "", log_x: bool = False, log_y: bool = False,
           toggle: bool = False) -> go.Figure:
    """One trace per entry of `series` over `x`; kind "line" (markers + lines) or "bar" (grouped).

    toggle=True adds plotly buttons "all" / one per series that show one series at a time (works offline,
    in the static book). They sit between the title and the plot, never over the title."""
    if kind not in ("line", "bar"):
        raise ValueError(f"kind must be 'line' or 'bar', got {kind!r}")
    x = round_floats(list(x), 4)
    traces, all_y = [], []
    for name, ys in series.items():
        ys = round_floats(list(ys), 4)
        all_y += ys
        if kind == "line":
            traces.append(go.Scatter(x=x, y=ys, name=name, mode="lines+markers"))
        else:
            traces.append(go.Bar(x=x, y=ys, name=name))
    fig = go.Figure(data=traces)
    buttons_row = toggle and len(series) > 1
    fig.update_layout(title=dict(text=title, x=0.01, xanchor="left", y=0.98, yanchor="top"),
                      xaxis_title=x_title, yaxis_title=y_title, template="plotly_white", barmode="group",
                      legend_title_text="", height=400 if buttons_row else 380,
                      margin=dict(l=60, r=20, t=100 if buttons_row else 60, b=50))
    if log_x:
        fig.update_xaxes(**_log_axis(x))
    if log_y:
        fig.update_yaxes(**_log_axis(all_y))
    if kind == "bar" or all(isinstance(v, str) for v in x):
        fig.update_xaxes(type="category")
    if buttons_row:
        names = list(series)
        buttons = [dict(label="all", method="update", args=[{"visible": [True] * len(names)}])]
        buttons += [dict(label=n, method="update", args=[{"visible": [m == n for m in names]}])
                    for n in names]
        fig.update_layout(updatemenus=[dict(type="buttons", direction="right", buttons=buttons, x=1,
                                            xanchor="right", y=1.02, yanchor="bottom", showactive=True)])
    return fig


def _plotlyjs_script() -> str:
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    return (f'<script type="text/javascript" data-minivllm-plotlyjs="{get_plotlyjs_version()}">'
            f"if (!window.Plotly) {{\nwindow.PlotlyConfig = {{MathJaxConfig: 'local'}};\n{get_plotlyjs()}\n}}"
            "</script>")


def figure_html(fig: go.Figure, div_id: str, include_plotlyjs: bool) -> str:
    """The text/html of a figure: a div drawn by `window.Plotly`, with plotly.js before it if asked."""
    height = fig.layout.height or 380
    div = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                      default_height=f"{height}px", config={"displaylogo": False, "responsive": True})
    return (_plotlyjs_script() + "\n" + div) if include_plotlyjs else div


def show(fig: go.Figure) -> None:
    """Display a figure so that it renders in JupyterLab (live or not), nbconvert HTML and the book."""
    from IPython.display import display

    if not isinstance(fig, go.Figure):
        raise TypeError(f"show() takes a plotly.graph_objects.Figure, got {type(fig).__name__}")
    spec = json.loads(pio.to_json(fig, validate=True))
    _state["count"] += 1
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    div_id = f"mv-plot-{_state['count']}-{digest}"  # stable from build to build, unique in a notebook
    html = figure_html(fig, div_id, include_plotlyjs=not _state["embedded"])
    _state["embedded"] = True
    title = (fig.layout.title.text or "").strip()
    display({"text/plain": f"<plotly figure{': ' + title if title else ''}>", "text/html": html,
             PLOTLY_MIME: {"data": spec.get("data", []), "layout": spec.get("layout", {}),
                           "config": {"displaylogo": False}}}, raw=True)
