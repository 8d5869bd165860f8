"""The answer key of every lab's questions, as one Markdown file for teachers.

    python -m minivllm_labs.answers > key.md              # English
    python -m minivllm_labs.answers --lang zh > key.md    # 中文
    python -m minivllm_labs.answers --lab lab03           # one lab

Why an export: in the notebooks the model answers stay collapsed, so learners answer before they read them;
a teacher running a workshop wants them all in one place, with the right option, why each wrong option is
wrong (the misconception it stands for), and the recorded measurement that decides it.
"""

from __future__ import annotations

import argparse
import sys

from minivllm_labs.catalog import labs
from minivllm_labs.quiz import NumericQuestion, default_results, evidence_text, letter

HEAD = {"en": ("Answer key", "right answer", "model answer", "measured", "options"),
        "zh": ("参考答案", "正确答案", "参考解答", "实测依据", "选项")}


def _pick(en: str, zh: str, lang: str) -> str:
    return (zh or en) if lang == "zh" else en


def question_markdown(q, lang: str = "en") -> str:
    _, right, model, measured, options = HEAD[lang]
    lines = [f"### {q.qid}" + (f" · {q.topic}" if q.topic else ""), "", _pick(q.prompt, q.prompt_zh, lang), ""]
    if isinstance(q, NumericQuestion):
        tol = f" (± {q.rel_tol:.0%})"
        lines.append(f"**{right}:** {q.answer:g} {q.unit}{tol}".rstrip())
    else:
        lines.append(f"**{options}:**")
        for i, o in enumerate(q.options):
            mark = " **✓**" if i == q.correct else ""
            why = _pick(o.why, o.why_zh, lang)
            lines.append(f"- {letter(i)}. {_pick(o.text, o.text_zh, lang)}{mark}" + (f" — {why}" if why else ""))
        lines += ["", f"**{right}:** {letter(q.correct)}"]
    lines += ["", f"**{model}:** {_pick(q.model_answer, q.model_answer_zh, lang)}"]
    try:
        evidence = evidence_text(q.evidence, default_results(q), lang)
    except (KeyError, IndexError, TypeError, ValueError, OSError) as e:  # a record without the key: say so
        evidence = f"({type(e).__name__}: {e})"
    if evidence:
        lines += ["", f"**{measured}:**", "", "```", evidence.strip(), "```"]
    return "\n".join(lines)


def key_markdown(lang: str = "en", only: str | None = None) -> str:
    """Every lab's questions in catalog order (or one lab's), in one language."""
    title = HEAD[lang][0]
    out = [f"# {title} · minivllm labs", ""]
    found = False
    for info in labs():
        if only and info.lab != only:
            continue
        found = True
        if not info.questions:
            continue
        out += [f"## {info.lab}: {_pick(info.title, info.title_zh, lang)}", ""]
        for q in info.questions:
            out += [question_markdown(q, lang), ""]
    if only and not found:
        raise SystemExit(f"no lab {only!r} (labs: {', '.join(i.lab for i in labs())})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.answers", description=__doc__.splitlines()[0])
    ap.add_argument("--lang", choices=sorted(HEAD), default="en")
    ap.add_argument("--lab", help="one lab only, e.g. lab03")
    args = ap.parse_args(argv)
    sys.stdout.write(key_markdown(args.lang, args.lab) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
