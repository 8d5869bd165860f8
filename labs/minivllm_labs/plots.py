"""The figure helpers of the labs: `figure(...)` builds a plot, `show(fig)` displays it so it renders anywhere.

Why one builder: every lab plot then looks alike, rounds its numbers (so a checked output is stable), labels
log axes in real numbers, keeps its buttons off the title, its legend below the plot (a legend at the side
squeezed the plot to a sliver on a phone), one colour per series whichever series a button shows, and its
titles in both languages (`zh=`: the book's language switch and a Chinese page show the Chinese ones).
Toggles that must work in the static book are plotly's own menus (`toggle=True`), not ipywidgets.

Why `show` and not a Figure as a cell's last value: plotly's default output is its JSON mime type only, which
JupyterLab draws (through the jupyterlab-plotly extension) but nbconvert HTML and the book do not: they showed
blank plots. `show` stores one output with three representations:

- application/vnd.plotly.v1+json: JupyterLab draws it with the extension's own plotly.js, even in a notebook
  opened without running (the extension is a "safe" renderer, unlike text/html scripts);
- text/html: the figure's data as a plain table (what a viewer that runs no script shows: GitHub, an untrusted
  notebook), replaced by the drawn plot where scripts run. The first figure a kernel shows carries plotly.js
  itself, gzip-compressed (about 2 MB instead of 4.8), in `<script data-minivllm-plotlyjs>`, so an nbconvert
  export of a fresh clone draws every plot with no network and no _static folder; the book drops that copy
  and serves one file (book/_ext/book_prepare.py). No CDN, no require.js;
- text/plain: `<plotly figure: TITLE>`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import math
import os
import re
from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from minivllm_labs.common import round_floats

# plotly reads this variable the first time it needs its renderers (only for a Figure left as a cell's value):
# setting it instead of pio.renderers.default keeps plotly.io._renderers, and the nbformat and jsonschema it
# imports (about 3 s on a 2-core CPU), out of every lab's setup cell.
os.environ.setdefault("PLOTLY_RENDERER", "plotly_mimetype")

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


#: One colour per series, by its place in `series`: a button that shows one series keeps that series' colour.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]
#: plotly's modebar without the controls that reach the network ("Share chart", "Edit in Chart Studio").
CONFIG = {"displaylogo": False, "responsive": True, "showSendToCloud": False, "showEditInChartStudio": False,
          "showLink": False, "modeBarButtonsToRemove": ["sendDataToCloud", "editInChartStudio", "lasso2d",
                                                       "select2d"]}
#: The least height of the plot area in px; the page grows the figure when a narrow screen's legend or tick
#: labels would squeeze the plot below it.
MIN_PLOT_HEIGHT = 220


def wrap_label(text, width: int = 16):
    """A long category label on lines of about `width` characters (plotly's `<br>`), so ten bars' labels fit
    under the plot instead of being turned and pushing the plot area up."""
    if not isinstance(text, str) or len(text) <= width or "<br>" in text:
        return text
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join(lines + [line])


def figure(x: Sequence, series: dict[str, Sequence[float | None]], *, kind: str = "line", title: str = "",
           x_title: str = "", y_title: str = "", log_x: bool = False, log_y: bool = False,
           toggle: bool = False, zh: dict | None = None) -> go.Figure:
    """One trace per entry of `series` over `x`; kind "line" (markers + lines) or "bar" (grouped).

    toggle=True adds a plotly menu "all" / one entry per series that shows one series at a time (works
    offline, in the static book); it sits between the title and the plot, never over the title. Give each
    axis its unit, one quantity per axis: series of different units belong in separate figures or subplots.
    zh: the Chinese title, axes and series names, {"title", "x", "y", "names": {english name: 中文}}."""
    if kind not in ("line", "bar"):
        raise ValueError(f"kind must be 'line' or 'bar', got {kind!r}")
    x = round_floats(list(x), 4)
    categorical = kind == "bar" or all(isinstance(v, str) for v in x)
    if categorical:
        x = [wrap_label(v) for v in x]
    traces, all_y = [], []
    for i, (name, ys) in enumerate(series.items()):
        ys = round_floats(list(ys), 4)
        all_y += ys
        color = PALETTE[i % len(PALETTE)]
        if kind == "line":
            traces.append(go.Scatter(x=x, y=ys, name=name, mode="lines+markers", line=dict(color=color),
                                     marker=dict(color=color)))
        else:
            traces.append(go.Bar(x=x, y=ys, name=name, marker=dict(color=color)))
    fig = go.Figure(data=traces)
    menu = toggle and len(series) > 1
    fig.update_layout(title=dict(text=title), xaxis_title=x_title, yaxis_title=y_title, barmode="group",
                      height=420 if menu else 400)
    if log_x:
        fig.update_xaxes(**_log_axis(x))
    if log_y:
        fig.update_yaxes(**_log_axis(all_y))
    if categorical:
        fig.update_xaxes(type="category")
    if menu:
        names = list(series)
        buttons = [dict(label="all", method="restyle", args=[{"visible": [True] * len(names)}])]
        buttons += [dict(label=n, method="restyle", args=[{"visible": [m == n for m in names]}])
                    for n in names]
        fig.update_layout(updatemenus=[dict(type="dropdown", direction="down", buttons=buttons, x=0,
                                            xanchor="left", y=1.02, yanchor="bottom", showactive=True)])
    zh = dict(zh or {})
    if menu and zh:
        names_zh = zh.get("names", {})
        zh.setdefault("layout", {})["updatemenus[0].buttons[0].label"] = "全部"
        for i, n in enumerate(series, 1):
            if n in names_zh:
                zh["layout"][f"updatemenus[0].buttons[{i}].label"] = names_zh[n]
    return finish(fig, zh=zh or None)


def finish(fig: go.Figure, zh: dict | None = None) -> go.Figure:
    """The labs' common layout, applied to every figure `figure()` builds and `show()` displays (and by the
    book to every stored one): white template, the title at the left, the legend in rows below the plot (shown
    even when a menu leaves one series), each trace's colour fixed, axes that make room for their labels, and
    the Chinese strings (`bilingual`). Idempotent."""
    if zh:
        bilingual(fig, **zh)
    lay = fig.layout
    menu = bool(lay.updatemenus)
    fig.update_layout(template="plotly_white")
    if isinstance(lay.title.text, str):
        fig.update_layout(title=dict(x=0.01, xanchor="left", y=0.98, yanchor="top", font=dict(size=16)))
    for t in fig.data:  # long category labels on two or three lines (a figure stored before figure() did it)
        if t.type == "bar" and t.x is not None and all(isinstance(v, str) for v in t.x):
            t.x = [wrap_label(v) for v in t.x]
    for m in lay.updatemenus:  # a row of buttons overflows a phone's width: one dropdown at the left instead
        m.update(type="dropdown", direction="down", x=0, xanchor="left", y=1.02, yanchor="bottom")
    named = [t for t in fig.data if t.name]
    fig.update_layout(showlegend=len(named) > 1 or (menu and bool(named)),
                      legend=dict(orientation="h", x=0, xanchor="left", y=0, yanchor="bottom", yref="container",
                                  title_text="", font=dict(size=12)),
                      margin=dict(l=60, r=20, t=95 if menu else 60, b=40, autoexpand=True),
                      height=lay.height or (420 if menu else 400))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    for i, t in enumerate(fig.data):
        color = PALETTE[i % len(PALETTE)]
        if t.type == "bar" and t.marker.color is None:
            t.marker.color = color
        elif t.type == "scatter" and t.line.color is None and t.marker.color is None:
            t.line.color = color
            t.marker.color = color
    return fig


def bilingual(fig: go.Figure, title: str = "", x: str = "", y: str = "", names: dict | None = None,
              layout: dict | None = None) -> go.Figure:
    """Store the figure's Chinese strings beside its English ones in layout.meta: the title, the x and y axis
    titles, series names ({english: 中文}) and any other layout text by its plotly path ({"yaxis2.title.text":
    "..."}). The drawing script shows the page's language (html[data-lang], the book's switch) and follows a
    switch; outside the book the English ones show."""
    zh_layout = dict(layout or {})
    if title:
        zh_layout["title.text"] = title
    if x:
        zh_layout["xaxis.title.text"] = x
    if y:
        zh_layout["yaxis.title.text"] = y
    full = fig.to_plotly_json()["layout"]
    en_layout = {path: _get(full, path) for path in zh_layout}
    names = names or {}
    en_names = [t.name for t in fig.data]
    zh_names = [names.get(n, n) if n else n for n in en_names]
    fig.update_layout(meta={"mv_i18n": {"en": {"layout": en_layout, "names": en_names},
                                        "zh": {"layout": zh_layout, "names": zh_names}}})
    return fig


def _get(layout: dict, path: str):
    """layout["xaxis"]["title"]["text"] for "xaxis.title.text" ("updatemenus[0].buttons[1].label" too)."""
    node = layout
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            idx = int(part[1:-1])
            node = node[idx] if isinstance(node, list) and idx < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return ""
    return node


PLOTLYJS_NAME = "plotly.min.js"

# The embedded copy: plotly.min.js gzipped, base64, unpacked by the browser's DecompressionStream and run as
# a script (with an AMD `define` hidden, as nbconvert pages load require.js, which would capture plotly's
# module instead of window.Plotly). Figures drawn before it is ready wait in window.__minivllmPlotly.
_EMBED = """<script data-minivllm-plotlyjs="{version}">(function () {{
  if (window.Plotly || window.__minivllmPlotlyLoading) {{ return; }}
  window.__minivllmPlotlyLoading = true;
  var raw = atob("{b64}"), bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) {{ bytes[i] = raw.charCodeAt(i); }}
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then(function (js) {{
    var amd = window.define;
    window.define = undefined;
    var s = document.createElement("script");
    s.textContent = js;
    document.head.appendChild(s);
    window.define = amd;
    var queue = window.__minivllmPlotly || [];
    window.__minivllmPlotly = null;
    queue.forEach(function (f) {{ f(); }});
  }});
}})();</script>
"""

# Draws one figure where window.Plotly exists (or once the embedded copy has loaded): empties the div (its
# plain-table fallback), shows the page's language (layout.meta.mv_i18n, html[data-lang]) and follows the
# book's switch (window.mvPlotLang), and grows the figure when the plot area would be shorter than
# MIN_PLOT_HEIGHT (a narrow screen's legend rows and tick labels take the height first).
_DRAW = r"""<div id="{div_id}" class="plotly-graph-div minivllm-plot"
 style="min-height:{height}px; width:100%;">{fallback}</div>
<script type="text/javascript">(function () {{
  if (!window.mvPlotLang) {{
    window.mvPlotLang = function (lang, gd) {{
      var gds = gd ? [gd] : document.querySelectorAll(".minivllm-plot.js-plotly-plot");
      Array.prototype.forEach.call(gds, function (g) {{
        var i18n = g.layout && g.layout.meta && g.layout.meta.mv_i18n, t = i18n && (i18n[lang] || i18n.en);
        if (!t || g.__mvLang === lang) {{ return; }}
        g.__mvLang = lang;
        g.__mvWrapped = false;
        Plotly.relayout(g, t.layout);
        if (t.names && t.names.length === g.data.length) {{ Plotly.restyle(g, {{name: t.names}}); }}
      }});
    }};
  }}
  var draw = function () {{
    var gd = document.getElementById("{div_id}");
    gd.innerHTML = "";
    var layout = {layout};  // a narrow screen stacks the legend and the tick labels: start taller
    if (gd.clientWidth && gd.clientWidth < 600) {{ layout.height = Math.round({height} * 1.25); }}
    gd.style.height = (layout.height || {height}) + "px";
    Plotly.newPlot(gd, {data}, layout, {config}).then(function () {{
      var lang = document.documentElement.getAttribute("data-lang");
      if (lang && lang !== "en") {{ window.mvPlotLang(lang, gd); }}
      var fit = function () {{
        var full = gd._fullLayout, size = full && full._size, title = full && full.title && full.title.text;
        if (title && !gd.__mvWrapped) {{  // a title wider than the figure goes on two or more lines
          gd.__mvWrapped = true;
          if (gd.__mvTop === undefined) {{ gd.__mvTop = full.margin.t; }}
          var room = Math.max(24, Math.floor((full.width - 24) / 8.5)), lines = [""], used = 0;
          var units = function (t) {{ return t.replace(/[\u3000-\u9fff\uff00-\uffef]/g, "xx").length; }};
          var tokens = /[\u3000-\u9fff\uff00-\uffef]|\s+|[^\s\u3000-\u9fff\uff00-\uffef]+/g;
          (title.replace(/<br>/g, " ").match(tokens) || [])
            .forEach(function (tok) {{
              if (used + units(tok) > room && used > 0) {{ lines.push(""); used = 0; }}
              if (used === 0 && /^\s+$/.test(tok)) {{ return; }}
              lines[lines.length - 1] += tok;
              used += units(tok);
            }});
          // plotly centres a title's extra lines on its anchor: move it down by half of them, keep the gap
          var text = lines.join("<br>"), top = gd.__mvTop + 20 * (lines.length - 1);
          var y = 1 - (8 + 10 * (lines.length - 1)) / full.height;
          if (text !== title || top !== full.margin.t) {{
            Plotly.relayout(gd, {{"title.text": text, "margin.t": top, "title.y": y}});
            return;
          }}
        }}
        if (!size || size.h >= {min_h} - 1) {{ return; }}
        var h = gd._fullLayout.height + {min_h} - size.h;
        gd.style.height = h + "px";
        Plotly.relayout(gd, {{height: h}});
      }};
      fit();
      gd.on("plotly_afterplot", fit);
    }});
  }};
  if (window.Plotly) {{ draw(); return; }}
  (window.__minivllmPlotly = window.__minivllmPlotly || []).push(draw);
}})();</script>"""


def install_plotlyjs(directory) -> "os.PathLike":
    """Write plotly.js (from the installed plotly package, so its version matches the figures) into
    `directory`/plotly.min.js, for a page that serves it as a file (the book does its own copy)."""
    from pathlib import Path

    from plotly.offline import get_plotlyjs

    path = Path(directory) / PLOTLYJS_NAME
    js = get_plotlyjs()
    if not path.exists() or path.read_text(encoding="utf-8") != js:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(js, encoding="utf-8")
    return path


def embedded_plotlyjs() -> str:
    """plotly.js as one <script> that defines window.Plotly (gzip + base64, unpacked in the browser)."""
    import plotly
    from plotly.offline import get_plotlyjs

    packed = base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), mtime=0)).decode("ascii")
    return _EMBED.format(version=plotly.__version__, b64=packed)


def strip_embedded_plotlyjs(html: str) -> str:
    """A figure's text/html without the plotly.js copy embedded_plotlyjs() put before it: the GPU runs' executed
    notebooks are kept in the repository, where 2 MB of plotly.js per notebook would only repeat labs/'s copy."""
    return re.sub(r"<script data-minivllm-plotlyjs=.*?</script>\n?", "", html, count=1, flags=re.S)


def fallback_table(spec: dict) -> str:
    """The figure as text for a page that runs no script: its title and a table of each trace's points."""
    lay = spec.get("layout", {})
    title = _get(lay, "title.text") or ""
    traces = [t for t in spec.get("data", []) if isinstance(t.get("x"), list) and isinstance(t.get("y"), list)]
    out = [f"<p><b>{html.escape(_plain(title))}</b> <i>(interactive figure: it draws where scripts run)</i></p>"]
    if traces and all(len(t["x"]) <= 40 for t in traces):
        xs = list(dict.fromkeys(str(v) for t in traces for v in t["x"]))
        head = "".join(f"<th>{html.escape(_plain(t.get('name') or ''))}</th>" for t in traces)
        rows = []
        for x in xs:
            cells = []
            for t in traces:
                vals = {str(a): b for a, b in zip(t["x"], t["y"])}
                cells.append(f"<td>{'' if vals.get(x) is None else html.escape(str(vals[x]))}</td>")
            rows.append(f"<tr><td>{html.escape(_plain(x))}</td>{''.join(cells)}</tr>")
        xt = _plain(_get(lay, "xaxis.title.text") or "")
        out.append(f"<table><tr><th>{html.escape(xt)}</th>{head}</tr>{''.join(rows)}</table>")
    return "".join(out)


def _plain(text) -> str:
    return re.sub(r"<[^>]+>", " ", str(text)).replace("  ", " ").strip()


def figure_html(fig: go.Figure | dict, div_id: str, embed_plotlyjs: bool = False) -> str:
    """The text/html of a figure: a plain-table fallback in a div that window.Plotly draws over (no CDN, no
    require.js); with embed_plotlyjs, plotly.js itself comes first (one copy per notebook)."""
    spec = fig if isinstance(fig, dict) else json.loads(pio.to_json(fig, validate=True))
    layout = spec.get("layout", {})
    height = int(layout.get("height") or 400)
    draw = _DRAW.format(div_id=div_id, height=height, data=json.dumps(spec.get("data", [])),
                        layout=json.dumps(layout), config=json.dumps(CONFIG), min_h=MIN_PLOT_HEIGHT,
                        fallback=fallback_table(spec))
    return (embedded_plotlyjs() + draw) if embed_plotlyjs else draw


def in_language(spec: dict, lang: str) -> dict:
    """The figure's JSON with its Chinese strings (bilingual's layout.meta) in place when lang is "zh"."""
    zh = (((spec.get("layout") or {}).get("meta") or {}).get("mv_i18n") or {}).get("zh")
    if lang != "zh" or not zh:
        return spec
    out = json.loads(json.dumps(spec))
    for path, value in (zh.get("layout") or {}).items():
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node = out["layout"]
        for part, nxt in zip(parts, parts[1:]):
            key = int(part[1:-1]) if part.startswith("[") else part
            if isinstance(key, int):
                if not isinstance(node, list) or key >= len(node):
                    break
                node = node[key]
            else:
                node = node.setdefault(key, [] if nxt.startswith("[") else {})
        else:
            if isinstance(node, dict) and not parts[-1].startswith("["):
                node[parts[-1]] = value
    for trace, name in zip(out.get("data", []), zh.get("names") or []):
        if name:
            trace["name"] = name
    return out


def show(fig: go.Figure) -> None:
    """Display a figure so that it renders in JupyterLab (live or not), nbconvert HTML and the book."""
    from IPython.display import display

    from minivllm_labs.language import current

    if not isinstance(fig, go.Figure):
        raise TypeError(f"show() takes a plotly.graph_objects.Figure, got {type(fig).__name__}")
    finish(fig)
    spec = json.loads(pio.to_json(fig, validate=True))
    _state["count"] += 1
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    div_id = f"mv-plot-{_state['count']}-{digest}"  # stable from build to build, unique in a notebook
    page = figure_html(spec, div_id, embed_plotlyjs=_state["count"] == 1)
    title = _plain(fig.layout.title.text or "")
    drawn = in_language(spec, current())  # JupyterLab's renderer draws the figure's own text: one language
    display({"text/plain": f"<plotly figure{': ' + title if title else ''}>", "text/html": page,
             PLOTLY_MIME: {"data": drawn.get("data", []), "layout": drawn.get("layout", {}),
                           "config": {k: v for k, v in CONFIG.items() if k != "responsive"}}}, raw=True)
