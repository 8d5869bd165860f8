"""The one figure helper of the labs.

Why one helper: every lab plot then looks alike, rounds its numbers (so a checked output is stable), and is
a plain `plotly.graph_objects.Figure` whose output is plotly's JSON mime type: small, deterministic, drawn by
JupyterLab and by the book. Toggles that must work in the static book are plotly's own buttons
(`toggle=True`), not ipywidgets. Live widgets redraw a plain Figure into an ipywidgets.Output instead of
using FigureWidget, which since plotly 6 needs the extra `anywidget` package.

The renderer is "plotly_mimetype" unless PLOTLY_RENDERER says otherwise (the book build sets
PLOTLY_RENDERER=notebook so static pages carry the plot).
"""

from __future__ import annotations

import os
from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from minivllm.labs.common import round_floats

if "PLOTLY_RENDERER" not in os.environ:
    pio.renderers.default = "plotly_mimetype"


def figure(x: Sequence, series: dict[str, Sequence[float | None]], *, kind: str = "line", title: str = "",
           x_title: str = "", y_title: str = "", log_x: bool = False, log_y: bool = False,
           toggle: bool = False) -> go.Figure:
    """One trace per entry of `series` over `x`; kind "line" (markers + lines) or "bar" (grouped).

    toggle=True adds plotly buttons "all" / one per series that show one series at a time (works offline,
    in the static book)."""
    if kind not in ("line", "bar"):
        raise ValueError(f"kind must be 'line' or 'bar', got {kind!r}")
    x = round_floats(list(x), 4)
    traces = []
    for name, ys in series.items():
        ys = round_floats(list(ys), 4)
        if kind == "line":
            traces.append(go.Scatter(x=x, y=ys, name=name, mode="lines+markers"))
        else:
            traces.append(go.Bar(x=x, y=ys, name=name))
    fig = go.Figure(data=traces)
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, template="plotly_white",
                      barmode="group", legend_title_text="", height=380, margin=dict(l=60, r=20, t=60, b=50))
    if log_x:
        fig.update_xaxes(type="log")
    if log_y:
        fig.update_yaxes(type="log")
    if kind == "bar" or all(isinstance(v, str) for v in x):
        fig.update_xaxes(type="category")
    if toggle and len(series) > 1:
        names = list(series)
        buttons = [dict(label="all", method="update", args=[{"visible": [True] * len(names)}])]
        buttons += [dict(label=n, method="update", args=[{"visible": [m == n for m in names]}])
                    for n in names]
        fig.update_layout(updatemenus=[dict(type="buttons", direction="right", buttons=buttons, x=0, y=1.15,
                                            xanchor="left", yanchor="top", showactive=True)])
    return fig
