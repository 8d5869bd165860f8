"""What a lab declares about itself: its claims (with verdicts and where their numbers live) and its LabInfo.

Why its own file: every lab module defines LAB_INFO with these types, and catalog.py imports every lab module
to find them; with the types in catalog.py each lab would import the module that imports it.
"""

from __future__ import annotations

import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

VERDICTS = ("right", "partly", "wrong", "unverifiable")
SEEDS = {"handbook": "000_e3d381e086050e09.txt", "article": "004_0d963349e363baa8.txt"}


@dataclass(frozen=True)
class Claim:
    """One claim of a seed, with the measured verdict and where its number lives.

    `evidence_file` is relative to the repository root (normally assets/results/h200/<lab>.json) and
    `evidence_key` a dotted path into it ("padding.cost_ms.median"; list items by index: "rows.3.tpot").
    `figure` is the number the verdict cites, as stored there; `rule`, when given, recomputes the verdict
    from that number, so a test can check that verdict and number agree."""

    cid: str
    seed: str  # "handbook" or "article" (a key of SEEDS)
    claim_zh: str  # the seed's words
    claim_en: str
    verdict: str  # one of VERDICTS
    summary: str  # one line: what was measured and what it shows
    summary_zh: str
    evidence_file: str
    evidence_key: str
    figure: float | int | str | None = None
    rule: Callable[[Any], str] | None = None
    lab: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.cid}: verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.seed not in SEEDS:
            raise ValueError(f"{self.cid}: seed must be one of {tuple(SEEDS)}, got {self.seed!r}")

    def as_dict(self) -> dict:
        return {"id": self.cid, "seed": self.seed, "seed_file": SEEDS[self.seed], "claim_zh": self.claim_zh,
                "claim_en": self.claim_en, "verdict": self.verdict, "summary": self.summary,
                "summary_zh": self.summary_zh, "evidence_file": self.evidence_file,
                "evidence_key": self.evidence_key, "figure": self.figure, "lab": self.lab}


@dataclass(frozen=True)
class LabInfo:
    lab: str  # "lab02"
    notebook: str  # "labs/02_inside_a_cuda_graph.ipynb"
    title: str
    title_zh: str
    sections: tuple[str, ...] = ()  # handbook sections covered, e.g. ("§1.2", "§1.3")
    questions: tuple = ()  # quiz.Question / quiz.NumericQuestion
    claims: tuple[Claim, ...] = ()
    code: tuple[str, ...] = field(default=())  # engine files the lab links into, "minivllm/worker/graph_capture.py"

    def as_dict(self) -> dict:
        from minivllm_labs.quiz import question_dict

        return {"lab": self.lab, "notebook": self.notebook, "title": self.title, "title_zh": self.title_zh,
                "sections": list(self.sections), "code": list(self.code),
                "questions": [question_dict(q) for q in self.questions],
                "claims": [c.as_dict() for c in self.claims]}


def resolve_key(data: Any, key: str) -> Any:
    """Follow a dotted evidence key ("a.b.3.c") into loaded JSON; KeyError names the missing part."""
    cur = data
    for part in key.split("."):
        if isinstance(cur, list) and part.lstrip("-").isdigit():
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            raise KeyError(f"{key!r}: no {part!r} in {type(cur).__name__}")
    return cur


def lab_modules() -> list[str]:
    """Every `labs/minivllm_labs/labNN.py`, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if re.fullmatch(r"lab\d\d", m.name))
