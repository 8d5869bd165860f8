"""Read a lab's questions and claims from its data file, data/labNN.yaml.

Why data: every lab's questions and claims have the same shape (prompt, options with why, model answer, in
English and Chinese; claim, verdict, where its number lives), and as Python they were the same constructor
call written out a hundred times. As YAML they are text a reviewer reads as text, and the only code is here.

What stays code is what reads numbers: a question's `evidence: name` names a function of the lab's views
(results dict -> the lines under the model answer), and a claim's `rule: true` says the views recompute the
verdict from the number (`rules` maps the claim id to that function). The loader refuses a name it is not
given and a function no entry asks for, so data and code cannot drift apart silently.

A choice question lists either `options` and the `correct` letter, or its `right` option and the `wrong` ones
(Lab 08's bank): those are shuffled with random.Random(question id), the same order on every machine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from minivllm_labs.figures import render_data
from minivllm_labs.lab_info import Claim
from minivllm_labs.quiz import NumericQuestion, Option, Question, evidence_text

DATA_DIR = Path(__file__).resolve().parent / "data"

#: A question's evidence: its lab's results (or None) -> the lines that back the model answer.
Evidence = Callable[[dict | None], str]


@cache
def lab_data(lab: str) -> dict[str, Any]:
    """The parsed data/<lab>.yaml ({"lab", "questions", "claims"}), read once per process, every
    {rec}`<file>.json:<key>:<format>` in its text replaced by the recorded number (figures.py)."""
    import yaml

    doc = render_data(yaml.safe_load((DATA_DIR / f"{lab}.yaml").read_text(encoding="utf-8")))
    if doc.get("lab") != lab:
        raise ValueError(f"data/{lab}.yaml says lab {doc.get('lab')!r}")
    return doc


def _option(d: Mapping[str, str]) -> Option:
    return Option(d["text"], d["why"], d.get("text_zh", ""), d.get("why_zh", ""))


def question_from_data(d: Mapping[str, Any], evidence: Evidence | None = None) -> Question | NumericQuestion:
    """One entry of a data file (a dict as YAML reads it) as a Question or NumericQuestion."""
    common: dict[str, Any] = dict(qid=d["id"], prompt=d["prompt"], prompt_zh=d.get("prompt_zh", ""),
                                  model_answer=d["model_answer"], model_answer_zh=d.get("model_answer_zh", ""),
                                  source=d.get("source", "lab"), topic=d.get("topic", ""),
                                  cites=tuple((c["file"], c["key"], c["label"]) for c in d.get("cites", ())),
                                  not_measured=d.get("not_measured", ""))
    if evidence is not None:
        common["evidence"] = evidence
    if "answer" in d:
        return NumericQuestion(answer=float(d["answer"]), rel_tol=d["rel_tol"], unit=d.get("unit", ""), **common)
    if "right" in d:
        opts = [_option(d["right"])] + [_option(w) for w in d["wrong"]]
        order = list(range(len(opts)))
        random.Random(d["id"]).shuffle(order)  # string seeds are hashed with sha512: stable everywhere
        return Question(options=tuple(opts[i] for i in order), correct=order.index(0), **common)
    return Question(options=tuple(_option(o) for o in d["options"]), correct=ord(d["correct"]) - ord("A"),
                    **common)


def load_questions(lab: str, evidence: Mapping[str, Evidence] | Callable[[dict], Evidence] | None = None
                   ) -> dict[str, Question | NumericQuestion]:
    """The lab's questions by id, in file order. `evidence` maps the names the entries give to functions, or
    is a function of the raw entry (Lab 08 builds each entry's evidence from its `cites`)."""
    entries = lab_data(lab).get("questions", [])
    if callable(evidence):
        return {d["id"]: question_from_data(d, evidence(d)) for d in entries}
    given = dict(evidence or {})
    asked = {d["evidence"] for d in entries if "evidence" in d}
    if missing := asked - set(given):
        raise KeyError(f"data/{lab}.yaml names evidence {sorted(missing)} that the lab does not define")
    if unused := set(given) - asked:
        raise KeyError(f"evidence {sorted(unused)} is named by no question of data/{lab}.yaml")
    return {d["id"]: question_from_data(d, with_cites(given.get(d.get("evidence", "")), d)) for d in entries}


def cite_lines(cites, lang: str = "en") -> list[str]:
    """Each cited number as read now from its results file: "label: value (file:key)". A cite is (file, key,
    label) or (file, key, label, label_zh); in Chinese the Chinese label is used where there is one."""
    from minivllm_labs.common import REPO_ROOT
    from minivllm_labs.lab_info import resolve_key

    zh = lang == "zh"
    out = []
    for path, key, label, *rest in cites:
        if zh and rest and rest[0]:
            label = rest[0]
        p = REPO_ROOT / path
        try:
            value = resolve_key(json.loads(p.read_text(encoding="utf-8")), key)
        except FileNotFoundError:
            out.append(f"{label}：本仓库尚未记录（{path}:{key}）" if zh else
                       f"{label}: not recorded in this checkout ({path}:{key})")
            continue
        except (KeyError, IndexError):
            value = "missing key"
        if isinstance(value, float):
            value = float(f"{value:.4g}")
        elif zh and isinstance(value, str) and " " in value:  # a message as the library wrote it: quoted
            value = f"“{value}”"
        out.append(f"{label}：{value}（{path}:{key}）" if zh else f"{label}: {value} ({path}:{key})")
    return out


def with_cites(evidence: Evidence | None, d: Mapping[str, Any]) -> Evidence | None:
    """The lab's evidence function followed by the entry's cited H200 numbers, file and key named, so every
    option's feedback quotes the measurement it rests on."""
    cites = tuple((c["file"], c["key"], c["label"], c.get("label_zh", "")) for c in d.get("cites", ()))
    if not cites:
        return evidence

    def quoted(results: dict | None, lang: str = "en") -> str:
        head = "H200 实测（结果文件:key）：" if lang == "zh" else "Recorded on the H200 (results file:key):"
        lines = [head, *cite_lines(cites, lang)]
        own = evidence_text(evidence, results, lang) if evidence is not None else ""
        return "\n".join([own, *lines] if own else lines)

    return quoted


def load_claims(lab: str, rules: Mapping[str, Callable[[Any], str]] | None = None) -> tuple[Claim, ...]:
    """The lab's claims, in file order; `rules` maps the id of each claim marked `rule: true` to its rule."""
    entries = lab_data(lab).get("claims", [])
    rules = dict(rules or {})
    asked = {d["id"] for d in entries if d.get("rule")}
    if asked != set(rules):
        raise KeyError(f"data/{lab}.yaml: claims with `rule: true` {sorted(asked)}, rules given for "
                       f"{sorted(rules)}")
    return tuple(Claim(cid=d["id"], seed=d["seed"], claim_zh=d["claim_zh"], claim_en=d["claim_en"],
                       verdict=d["verdict"], summary=d["summary"], summary_zh=d["summary_zh"],
                       evidence_file=d["evidence_file"], evidence_key=d["evidence_key"], figure=d.get("figure"),
                       rule=rules.get(d["id"]), lab=lab) for d in entries)


def entries(lab: str) -> dict[str, dict[str, Any]]:
    """The raw question entries by id (Lab 08's page links each to its lab and engine code)."""
    return {d["id"]: d for d in lab_data(lab).get("questions", [])}
