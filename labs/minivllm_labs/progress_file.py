"""The learner's progress file itself: where it lives, reading it, recording one graded answer.

Why apart from progress.py: the live quiz's Check button writes here (quiz_show.quiz_widget), and the quiz is
imported by every lab; the summary per lab and topic (progress.py) needs the catalog of every lab. Keeping
the file's reading and writing here lets the quiz record an answer without importing the catalog.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

PROGRESS_ENV = "MINIVLLM_PROGRESS"


def progress_path() -> Path:
    return Path(os.environ.get(PROGRESS_ENV) or Path.home() / ".minivllm" / "progress.json")


def load(path: Path | None = None) -> dict:
    """{"answers": {qid: {lab, topic, ok, tries, date}}}; an empty record when there is no file yet (a file
    that is not valid JSON is reported, never silently replaced)."""
    p = path or progress_path()
    if not p.exists():
        return {"answers": {}}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{p} is not valid JSON ({e}); move it away or run "
                         f"`python -m minivllm_labs.progress --reset`") from None
    data.setdefault("answers", {})
    return data


def record_answer(q, ok: bool, path: Path | None = None) -> dict:
    """Record one graded answer of question `q` (its latest result counts; tries are counted), written
    atomically so a kernel killed mid-write leaves the previous file."""
    p = path or progress_path()
    data = load(p)
    prev = data["answers"].get(q.qid, {})
    data["answers"][q.qid] = {"lab": q.qid.split(".")[0], "topic": q.topic or "general", "ok": bool(ok),
                              "tries": prev.get("tries", 0) + 1,
                              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(p)
    return data["answers"][q.qid]


def record(qid: str, topic: str, ok: bool, path: Path | None = None) -> dict:
    """Record an answer by question id and topic: what the page's quiz sends through the kernel (quiz_html.py),
    which knows the question only by its id."""
    from types import SimpleNamespace

    return record_answer(SimpleNamespace(qid=qid, topic=topic), ok, path)
