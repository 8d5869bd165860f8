"""The workshop kit: the answer key exports in both languages, a learner's progress file is written by the
live quiz and read back by a new process (it survives a kernel restart), and the teacher's page is in the
book's table of contents in EN and ZH."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from minivllm_labs import answers, progress
from minivllm_labs.catalog import all_questions, labs
from minivllm_labs.common import REPO_ROOT

#: Labs whose notebook has not run end to end on the H200 (labs_gpu.json has no row for them).
NOT_RUN_ON_H200: set[str] = set()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_answer_key_holds_every_question(lang):
    key = answers.key_markdown(lang)
    for q in all_questions():
        assert f"### {q.qid}" in key
    assert ("参考答案" in key) == (lang == "zh") and "**✓**" in key
    # the measurement behind the answer, with the device it rests on
    assert ("Measured on" if lang == "en" else "H200 实测") in key


def test_the_answer_key_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "minivllm_labs.answers", "--lang", "zh", "--lab", "lab01"],
                         capture_output=True, text=True, check=True, env=os.environ).stdout
    assert out.startswith("# 参考答案") and "lab01.q1" in out and "lab02." not in out
    bad = subprocess.run([sys.executable, "-m", "minivllm_labs.answers", "--lab", "lab99"], capture_output=True,
                         text=True, env=os.environ, check=False)
    assert bad.returncode != 0 and "no lab 'lab99'" in bad.stderr


def test_progress_survives_a_restart(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    qs = [q for q in all_questions() if q.qid.startswith("lab01.")][:2]
    progress.record_answer(qs[0], True)
    progress.record_answer(qs[1], False)
    progress.record_answer(qs[1], True)
    code = ("from minivllm_labs.progress import summary; import json; "
            "print(json.dumps(summary()))")
    s = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  env={**os.environ, progress.PROGRESS_ENV: str(path)}).stdout)
    assert s["labs"]["lab01"]["answered"] == 2 and s["labs"]["lab01"]["right"] == 2
    assert json.loads(path.read_text())["answers"][qs[1].qid]["tries"] == 2
    assert sum(t["total"] for t in s["topics"].values()) == len(all_questions())
    text = progress.progress_text(path)
    assert "lab01" in text and "revisit" in text


def test_a_broken_progress_file_is_reported_not_replaced(tmp_path):
    p = tmp_path / "progress.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        progress.record_answer(all_questions()[0], True, p)
    assert p.read_text() == "{not json"


def test_the_live_quiz_writes_the_progress_file(tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    from minivllm_labs.quiz import Question
    from minivllm_labs.quiz_show import quiz_widget

    monkeypatch.setenv(progress.PROGRESS_ENV, str(tmp_path / "p.json"))
    q = next(q for q in all_questions() if isinstance(q, Question))
    box = quiz_widget(q, None)
    choice, button = box.children[1], box.children[2]
    choice.value = q.labels()[q.correct]
    button.click()
    assert json.loads((tmp_path / "p.json").read_text())["answers"][q.qid]["ok"] is True


def test_the_teachers_page_is_in_the_book_in_both_languages():
    sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
    import book_prepare

    assert "workshop" in book_prepare.HANDBOOK
    page = (REPO_ROOT / "book" / "handbook" / "workshop.md").read_text()
    assert ":::{container} lang-en" in page and ":::{container} lang-zh" in page
    for needle in ("--allow-root", "gpu_memory_utilization", "minivllm_labs.answers --lang zh", "MINIVLLM_PROGRESS",
                   "localhost"):
        assert page.count(needle) >= 2, needle  # in both languages
    gpu = json.loads((REPO_ROOT / "assets" / "results" / "h200" / "labs_gpu.json").read_text())
    ran = {n["notebook"]: n["status"] for n in gpu["notebooks"]}
    for info in labs():
        name = info.notebook.split('/')[-1].removesuffix('.ipynb')
        row = next((line for line in page.splitlines() if f"{{lab}}`{name[:2]}`" in line and line.startswith("|")), "")
        # timed agenda: the H200's end-to-end seconds; only a lab whose notebook has not run end to end on the
        # H200 (NOT_RUN_ON_H200) may say so instead
        if name[:2] in NOT_RUN_ON_H200:
            assert "not run end to end on the H200 yet" in row, name
        else:
            assert f"notebook={name}]" in row, name
            assert ran.get(name) == "ok", f"{name}: no end-to-end H200 run in labs_gpu.json"
