"""Every lab's setup cell imports the figure helper (minivllm_labs.plots). Setting plotly's default renderer
through `pio.renderers` imports plotly.io._renderers, which imports nbformat -> jsonschema -> rfc3987_syntax,
and that compiles about 40 grammars: about 3 s of each lab's Run All on a 2-core CPU. The helper sets
PLOTLY_RENDERER instead; this checks both halves in a fresh interpreter (pytest itself has nbformat loaded)."""

import os
import subprocess
import sys

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
