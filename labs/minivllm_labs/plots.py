"""The figure helpers of the labs: `figure(...)` builds a plot, `show(fig)` displays it so it renders anywhere.

Why one builder: every lab plot then looks alike, rounds its numbers (so a checked output is stable), labels
log axes in real numbers, and keeps its buttons off the title. Toggles that must work in the static book are
plotly's own buttons (`toggle=True`), not ipywidgets.

Why `show` and not a Figure as a cell's last value: plotly's default output is its JSON mime type only, which
JupyterLab draws (through the jupyterlab-plotly extension) but nbconvert HTML and the book do not: they showed
blank plots. `show` stores one output with two representations:

- application/vnd.plotly.v1+json: JupyterLab draws it with the extension's own plotly.js, even in a notebook
  opened without running (the extension is a "safe" renderer, unlike text/html scripts);
- text/html: a div and a `Plotly.newPlot` script. When the page has no `window.Plotly` yet, the script
  loads plotly.min.js from a `_static/` folder beside the page (labs/_static/, written by `make` and by the
  lab build, for nbconvert HTML exported into labs/; the book's own _static/, which also loads it in every
  page's head). No CDN, no require.js, and no 4.8 MB copy of plotly.js inside every notebook.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from minivllm_labs.common import round_floats

if "PLOTLY_RENDERER" not in os.environ:
    pio.renderers.default = "plotly_mimetype"

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_state = {"count": 0}  # figures shown in this kernel (numbers the divs)


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


PLOTLYJS_NAME = "plotly.min.js"
# Where a page may find plotly.js, relative to it: labs/_static/ beside a notebook exported by nbconvert into
# labs/, and the book's _static/ one or two levels up. The book also loads it in every page's head, so there
# the loader below never runs.
_PLOTLYJS_PATHS = ["_static/" + PLOTLYJS_NAME, "../_static/" + PLOTLYJS_NAME, "../../_static/" + PLOTLYJS_NAME]

_DRAW = """<div id="{div_id}" class="plotly-graph-div minivllm-plot" style="height:{height}px; width:100%;"></div>
<script type="text/javascript">(function () {{
  var draw = function () {{ Plotly.newPlot("{div_id}", {data}, {layout}, {config}); }};
  if (window.Plotly) {{ draw(); return; }}
  var queue = window.__minivllmPlotly;
  if (queue) {{ queue.push(draw); return; }}
  queue = window.__minivllmPlotly = [draw];
  var paths = {paths};
  (function load(i) {{
    if (i >= paths.length) {{ return; }}
    var s = document.createElement("script");
    s.src = paths[i];
    s.onload = function () {{ queue.forEach(function (f) {{ f(); }}); }};
    s.onerror = function () {{ s.remove(); load(i + 1); }};
    document.head.appendChild(s);
  }})(0);
}})();</script>"""


def install_plotlyjs(directory) -> "os.PathLike":
    """Write plotly.js (from the installed plotly package, so its version matches the figures) into
    `directory`/plotly.min.js; labs/_static/ and the book's _static/ get it this way, never from a CDN."""
    from pathlib import Path

    from plotly.offline import get_plotlyjs

    path = Path(directory) / PLOTLYJS_NAME
    js = get_plotlyjs()
    if not path.exists() or path.read_text(encoding="utf-8") != js:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(js, encoding="utf-8")
    return path


def figure_html(fig: go.Figure, div_id: str) -> str:
    """The text/html of a figure: a div drawn by `window.Plotly`, loading plotly.js from a local _static
    folder first if the page has not (no CDN, no require.js)."""
    spec = json.loads(pio.to_json(fig, validate=True))
    height = fig.layout.height or 380
    return _DRAW.format(div_id=div_id, height=height, data=json.dumps(spec.get("data", [])),
                        layout=json.dumps(spec.get("layout", {})),
                        config=json.dumps({"displaylogo": False, "responsive": True}),
                        paths=json.dumps(_PLOTLYJS_PATHS))


def show(fig: go.Figure) -> None:
    """Display a figure so that it renders in JupyterLab (live or not), nbconvert HTML and the book."""
    from IPython.display import display

    if not isinstance(fig, go.Figure):
        raise TypeError(f"show() takes a plotly.graph_objects.Figure, got {type(fig).__name__}")
    spec = json.loads(pio.to_json(fig, validate=True))
    _state["count"] += 1
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    div_id = f"mv-plot-{_state['count']}-{digest}"  # stable from build to build, unique in a notebook
    html = figure_html(fig, div_id)
    title = (fig.layout.title.text or "").strip()
    display({"text/plain": f"<plotly figure{': ' + title if title else ''}>", "text/html": html,
             PLOTLY_MIME: {"data": spec.get("data", []), "layout": spec.get("layout", {}),
                           "config": {"displaylogo": False}}}, raw=True)
