"""A learner's progress across the labs: score per lab and per topic, kept locally in one small file.

    python -m minivllm_labs.progress            # what you got right, per lab and per topic, and what to revisit
    python -m minivllm_labs.progress --json
    python -m minivllm_labs.progress --reset

Why a file: a self-study learner answers the quizzes over days and kernel restarts; the live quiz's Check
button records each answer here (quiz_show.quiz_widget), so one command shows what to revisit. The file is
~/.minivllm/progress.json, or $MINIVLLM_PROGRESS (a workshop gives each learner their own). It holds only
question ids, right / wrong and a count of tries: nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minivllm_labs.progress_file import PROGRESS_ENV, load, progress_path, record_answer  # noqa: F401


def summary(path: Path | None = None) -> dict:
    """Per lab and per topic: questions answered, answered right, and the catalog's total; `revisit` lists
    the questions whose latest answer was wrong."""
    from minivllm_labs.catalog import all_questions

    answers = load(path)["answers"]
    questions = {q.qid: q for q in all_questions()}

    def group(key) -> dict:
        out: dict[str, dict] = {}
        for qid, q in questions.items():
            g = out.setdefault(key(qid, q), {"total": 0, "answered": 0, "right": 0})
            g["total"] += 1
            if qid in answers:
                g["answered"] += 1
                g["right"] += answers[qid]["ok"]
        return dict(sorted(out.items()))

    return {"path": str(path or progress_path()),
            "labs": group(lambda qid, q: qid.split(".")[0]),
            "topics": group(lambda qid, q: q.topic or "general"),
            "revisit": sorted(qid for qid, a in answers.items() if not a["ok"])}


def progress_text(path: Path | None = None) -> str:
    s = summary(path)
    lines = [f"Progress · 学习进度 ({s['path']})", "", f"{'lab':<10}{'right':>7}{'answered':>10}{'total':>7}"]
    lines += [f"{k:<10}{v['right']:>7}{v['answered']:>10}{v['total']:>7}" for k, v in s["labs"].items()]
    lines += ["", f"{'topic':<28}{'right':>7}{'answered':>10}{'total':>7}"]
    lines += [f"{k:<28}{v['right']:>7}{v['answered']:>10}{v['total']:>7}" for k, v in s["topics"].items()]
    lines += ["", "revisit · 建议复习: " + (", ".join(s["revisit"]) or "nothing yet · 暂无")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.progress", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    ap.add_argument("--reset", action="store_true", help="delete the progress file")
    args = ap.parse_args(argv)
    if args.reset:
        progress_path().unlink(missing_ok=True)
        print(f"removed {progress_path()}")
        return 0
    print(json.dumps(summary(), indent=1, ensure_ascii=False) if args.json else progress_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
