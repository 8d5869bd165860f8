"""The index of the labs: each lab's handbook sections, its graded questions and the claims it measures.

    python -m minivllm_labs.catalog            # a readable list
    python -m minivllm_labs.catalog --json     # what the book, Lab 07, Lab 08 and the tests read

Why an index: the book's pages, the claims lab and the interview bank all cite the same questions and
verdicts; keeping them as data next to the code that measures them means a verdict cannot drift away from
its number. Every lab module `labs/minivllm_labs/labNN.py` defines `LAB_INFO: LabInfo`; this module finds them.
"""

from __future__ import annotations

import argparse
import importlib
import json

from minivllm_labs.lab_info import SEEDS, VERDICTS, Claim, LabInfo, lab_modules, resolve_key  # noqa: F401


def labs() -> list[LabInfo]:
    out = []
    for name in lab_modules():
        info = getattr(importlib.import_module(f"minivllm_labs.lab{name[3:]}"), "LAB_INFO", None)
        if info is not None:
            out.append(info)
    return out


def all_claims() -> list[Claim]:
    return [c for info in labs() for c in info.claims]


def all_questions() -> list:
    return [q for info in labs() for q in info.questions]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.catalog", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the whole index as JSON")
    args = ap.parse_args(argv)
    infos = labs()
    if args.json:
        print(json.dumps({"labs": [i.as_dict() for i in infos]}, indent=1, ensure_ascii=False))
        return 0
    for i in infos:
        print(f"{i.lab}  {i.title} · {i.title_zh}  ({', '.join(i.sections)})  {i.notebook}")
        for q in i.questions:
            cited = ", ".join(f"{f.rsplit('/', 1)[-1]}:{k}" for f, k, _ in q.cites)
            print(f"    question {q.qid}  [{q.source}]  " + (cited or f"not measured: {q.not_measured or '?'}"))
        for c in i.claims:
            print(f"    claim {c.cid}  {c.verdict:<12} {c.evidence_file}:{c.evidence_key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
