"""Every script the labs' pages carry parses: the quizzes (choice and numeric), every lab's toggle, the language
switch, the mock interview. A syntax error there leaves a control dead in the browser with no message in the
notebook, so each is checked with node (whose parser is V8's, as Chromium's)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", page, re.DOTALL)


def _pages() -> list[tuple[str, str]]:
    from minivllm_labs.catalog import all_questions
    from minivllm_labs.lab08_views import mock_html
    from minivllm_labs.language import switch_html
    from minivllm_labs.quiz import NumericQuestion, Question
    from minivllm_labs.quiz_html import quiz_html
    from minivllm_labs.toggles import TOGGLES, toggle_html

    qs = all_questions()
    pages = [("choice quiz", quiz_html(next(q for q in qs if isinstance(q, Question)), None)),
             ("numeric quiz", quiz_html(next(q for q in qs if isinstance(q, NumericQuestion)), None)),
             ("language switch", switch_html("en")), ("mock interview", mock_html(3, 0, None))]
    return pages + [(f"toggle {lab}", toggle_html(lab)) for lab in TOGGLES]


def test_every_page_script_parses(tmp_path):
    bad = []
    for name, page in _pages():
        scripts = _scripts(page)
        assert scripts, name
        for i, js in enumerate(scripts):
            f = tmp_path / f"s{i}.js"
            f.write_text(js)
            r = subprocess.run(["node", "--check", str(f)], capture_output=True, text=True, timeout=30, check=False)
            if r.returncode:
                bad.append(f"{name}: {r.stderr.strip()[:400]}")
    assert not bad, "\n".join(bad)
