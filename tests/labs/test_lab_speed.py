"""What keeps a lab's Run All short on a 2-core CPU (the lab standard's 90 s), and the build's tool to see it.

Every lab's setup cell imports the figure helper (minivllm_labs.plots). Setting plotly's default renderer
through `pio.renderers` imports plotly.io._renderers, which imports nbformat -> jsonschema -> rfc3987_syntax,
and that compiles about 40 grammars: about 3 s of each lab's Run All. The helper sets PLOTLY_RENDERER
instead; the first test checks both halves in a fresh interpreter (pytest itself has nbformat loaded).
`python -m minivllm_labs.build NN --cell-times 5` prints a lab's slowest cells (_cell_seconds)."""

import os
import subprocess
import sys

import nbformat

from minivllm_labs.build import _cell_seconds
from minivllm_labs.common import REPO_ROOT

CODE = """
import sys
import minivllm_labs.plots
heavy = sorted(m for m in ("nbformat", "jsonschema", "plotly.io._renderers") if m in sys.modules)
import plotly.io as pio
print(heavy, pio.renderers.default)
"""


def test_plots_import_skips_plotly_renderers_and_keeps_the_mimetype_default():
    env = {k: v for k, v in os.environ.items() if k != "PLOTLY_RENDERER"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "labs")])
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[] plotly_mimetype", out.stdout + out.stderr


def test_cell_seconds_reads_nbclient_timing_and_skips_unrun_cells():
    ran = nbformat.v4.new_code_cell("lab = open_lab('01')\nmore")
    ran.id = "01-04"
    ran.metadata["execution"] = {"iopub.execute_input": "2026-12-03T18:00:01.250Z",
                                 "shell.execute_reply": "2026-12-03T18:00:03.750Z"}
    skipped = nbformat.v4.new_code_cell("print(1)")
    nb = nbformat.v4.new_notebook(cells=[ran, skipped, nbformat.v4.new_markdown_cell("# text")])
    assert _cell_seconds(nb) == [(2.5, "01-04", "lab = open_lab('01')")]
