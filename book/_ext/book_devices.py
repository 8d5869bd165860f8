"""Every recorded device on every lab page, with a selector: the book's side of `record all`.

Why at build time: the book shows the notebooks' stored outputs, made on a CPU with only the H200's records
in sight; a GPU recorded later (assets/results/<gpu>/, or $MINIVLLM_RESULTS_ROOT) must appear without
re-running any notebook. So the build adds one output cell under each lab's opening cell: the devices that
recorded the lab, the lab's comparison figure with a series per device, its table per device, and the
device each verdict rests on (minivllm_labs.devices). The checkboxes choose which devices show; their
script is inline, so the block works in any page that draws plotly (no kernel, no network).
"""

from __future__ import annotations

import html

_STYLE = """<style>
.minivllm-devices { border: 1px solid #d0d7de; border-radius: 6px; padding: 0.6em 0.9em; margin: 0.8em 0; }
.minivllm-devices .devices-selector label { margin-right: 1.2em; white-space: nowrap; }
.minivllm-devices .device-table pre { font-size: 0.8em; overflow-x: auto; }
.minivllm-devices .differs { color: #b35900; font-weight: bold; }
</style>"""

_SCRIPT = """<script>(function () {
  var root = document.getElementById("%(id)s");
  if (!root) { return; }
  function apply() {
    var on = {};
    root.querySelectorAll("input[data-device]").forEach(function (b) { on[b.dataset.device] = b.checked; });
    root.querySelectorAll("[data-device]:not(input)").forEach(function (el) {
      el.style.display = on[el.dataset.device] === false ? "none" : "";
    });
    root.querySelectorAll(".plotly-graph-div").forEach(function (div) {
      if (!window.Plotly || !div.data) { return; }
      window.Plotly.restyle(div, {visible: div.data.map(function (t) { return on[t.legendgroup] !== false; })});
    });
  }
  root.querySelectorAll("input[data-device]").forEach(function (b) { b.addEventListener("change", apply); });
})();</script>"""


def _bi(text: str) -> str:
    """"English · 中文" (the labs' bilingual labels) as two spans, one shown per language; other text as it is."""
    en, sep, zh = text.partition(" · ")
    if not sep:
        return html.escape(text)
    return (f'<span class="lang-en">{html.escape(en)}</span>'
            f'<span class="lang-zh" lang="zh">{html.escape(zh)}</span>')


def devices_html(lab: str) -> str:
    """The block of one lab ("lab01"): selector, figure, tables, verdicts; every device named."""
    from minivllm_labs import devices
    from minivllm_labs.lab01_views import VERDICT_ZH
    from minivllm_labs.plots import figure_html

    recs = devices.device_records(lab)
    names = {slug: devices.device_name(r) for slug, r in recs.items()}
    every = devices.device_names()  # a lab no device recorded still names the recorded devices
    block = f"devices-{lab}"
    out = [f'<div class="minivllm-devices" id="{block}">', _STYLE,
           ('<p><b><span class="lang-en">Recorded devices, side by side</span>'
            '<span class="lang-zh">已记录的设备（并排对比）</span></b></p>')]
    boxes = [f'<label><input type="checkbox" data-device="{html.escape(n)}" checked> {html.escape(n)}'
             f' <code>{slug}</code></label>' for slug, n in names.items()]
    out.append('<p class="devices-selector">' + "".join(boxes) + "</p>")
    missing = [s for s in every if s not in recs]
    if missing:
        named = ", ".join(f"{html.escape(every[s])} <code>{s}</code>" for s in missing)
        out.append(f'<p><span class="lang-en">No {lab} record yet from: {named}</span>'
                   f'<span class="lang-zh" lang="zh">以下设备尚无 {lab} 记录：{named}</span></p>')
    out.append('<p><span class="lang-en">Record your own GPU with <code>make labs-record</code> '
               "(<code>python -m minivllm_labs.record all</code>); it appears here beside the H200.</span>"
               '<span class="lang-zh">在你的 GPU 上运行 <code>make labs-record</code>，其记录会出现在这里，与 H200 并排。'
               "</span></p>")
    out.append(f"<p>{_bi(devices.rests_on(lab))}</p>")
    if recs:
        fig = devices.compare_figure(lab, recs)
        if fig is not None:
            out.append(figure_html(fig, f"{block}-plot"))
        for slug, r in recs.items():
            table = devices.compare_tables(lab, {slug: r})
            for gpu, text in table.items():
                name = html.escape(gpu)
                out.append(f'<div class="device-table" data-device="{name}"><b>{name}</b>'
                           f"<pre>{html.escape(text)}</pre></div>")
        rows = devices.verdict_rows(lab, recs)
        if rows:
            head = "".join(f'<th data-device="{html.escape(n)}">{html.escape(n)}</th>' for n in names.values())
            body = []
            for r in rows:
                cells = "".join(
                    f'<td data-device="{html.escape(gpu)}">{html.escape(devices._short(v["value"]))}'
                    + (f' &rarr; {v["verdict"]}' if v["verdict"] else "") + "</td>"
                    for gpu, v in r["devices"].items())
                flag = f' <span class="differs">{_bi("differs · 不同")}</span>' if r["differs"] else ""
                claim = (f'<span class="lang-en">{html.escape(r["claim"])}</span>'
                         f'<span class="lang-zh" lang="zh">{html.escape(r["claim_zh"])}</span>')
                verdict = (f'<span class="lang-en">{r["verdict"]}</span>'
                           f'<span class="lang-zh" lang="zh">{VERDICT_ZH.get(r["verdict"], r["verdict"])}</span>')
                body.append(f"<tr><td>{claim}</td><td>{verdict}{flag}</td>{cells}</tr>")
            out.append(f"<table><thead><tr><th>{_bi('claim · 论断')}</th><th>{_bi('verdict · 结论')}</th>" + head + "</tr></thead><tbody>"
                       + "".join(body) + "</tbody></table>")
    out.append(_SCRIPT % {"id": block})
    out.append("</div>")
    return "\n".join(out)


def add_devices_cell(nb: dict, stem: str) -> None:
    """Insert the block as an output-only cell after the notebook's opening cell (`open_lab(...)`)."""
    from minivllm_labs import devices

    lab = f"lab{stem[:2]}"
    if not devices.device_records(lab):  # a lab that records nothing (Lab 08's mock scheduler): no block
        return
    cell = {"cell_type": "code", "execution_count": None, "id": f"{stem[:2]}-book-devices",
            "metadata": {"tags": ["remove-input"]}, "source": f"lab.compare()  # {lab}",
            "outputs": [{"output_type": "display_data", "metadata": {},
                         "data": {"text/plain": f"<recorded devices of {lab}>", "text/html": devices_html(lab)}}]}
    cells = nb["cells"]
    at = next((i + 1 for i, c in enumerate(cells) if c["cell_type"] == "code" and "open_lab(" in "".join(c["source"])),
              len(cells))
    cells.insert(at, cell)
