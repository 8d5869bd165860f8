"""Figures in lab text come from records: {rec}`<file>.json:<key>[*scale][:format]` is replaced by the number stored
in assets/results/h200/<file>, and every other number with a unit must be a declared constant. A key may be the
ratio of two keys of one record, {rec}`<file>.json:<key>/<key>:.2f` (a speedup is two measurements, not a third).

Why: hand-typed figures drift. A sentence written against one record ("TPOT 0.93 ms") stays when the record is
re-made (0.90 ms), and the notebook then prints one number under text that says another. So text names the
record and key and the number is read when the text is shown: the book's {rec} role (book/_ext/minivllm_book.py)
and, with the same grammar, the labs' question and claim data (quiz_data.py) and their markdown cells
(build.py). A number that is not a measurement (a datasheet figure, a seed's claim under test, a scenario's
input) is declared once in data/constants.yaml with its source; tests/labs/test_figures.py scans the text and
fails on a number with a unit that is neither.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from minivllm_labs.common import REPO_ROOT

RECORDS = REPO_ROOT / "assets" / "results" / "h200"
CONSTANTS = Path(__file__).resolve().parent / "data" / "constants.yaml"

#: {rec}`lab02.json:padding.capture.seconds:.2f`, {rec}`lab09.json:rows.0.util*100:.0f`, {rec}`ab.json:old.tpot/new.tpot:.2f`
ROLE = re.compile(r"\{rec\}`(?P<file>[\w.-]+\.json):(?P<path>[^`*:]+?)(?:\*(?P<scale>[\d.e+-]+))?(?::(?P<fmt>[^`:]+))?`")

#: A number with a unit: what can drift. Plain counts ("35 sizes", "batch 64") are not figures of a record's
#: kind and are left alone; so are numbers inside code spans and links (names, flags, paths).
UNITS = (r"ms|us|µs|μs|ns|s|GiB|MiB|KiB|GB|MB|KB|TB/s|GB/s|TFLOP/s|FLOP/byte|%|x|×|times|tok/s|tokens/s|"
         r"min|minutes|minute|hours|hour|倍|秒|毫秒|微秒|分钟|小时")
FIGURE = re.compile(r"(?<![A-Za-z0-9_.$/-])(?:~|about |约)?(\d[\d,]*(?:\.\d+)?(?:%?\s?(?:-|–|to|→|->|至)\s?\d[\d,]*(?:\.\d+)?)?)"
                    r"\s?(" + UNITS + r")(?![A-Za-z0-9_/])(?!\s*\d)")  # "64 x 8" multiplies: not a figure
_CODE = re.compile(r"`[^`\n]*`|\]\([^)]*\)|https?://\S+")


def lookup(data: Any, path: str) -> Any:
    """`a.b.3.c` into nested dicts and lists (a key holding a dot, "torch.compile", is matched whole);
    `rows[system=FULL,batch=1]` picks the one list item that matches; `len()` counts a list. The book's {rec}
    role (book/_ext/minivllm_book.py) calls this too."""
    parts = re.findall(r"[^.\[\]]+(?:\[[^\]]*\])?|\[[^\]]*\]", path)
    i = 0
    while i < len(parts):
        name, _, sel = parts[i].partition("[")
        j = i
        while isinstance(data, dict) and name and name not in data and j + 1 < len(parts):
            j += 1
            name += "." + parts[j].partition("[")[0]
            sel = parts[j].partition("[")[2]
        if name == "len()":
            data = len(data)
        elif name:
            data = data[int(name)] if isinstance(data, list) else data[name]
        if sel:
            conds = dict(c.split("=", 1) for c in sel.rstrip("]").split(","))
            hits = [r for r in data if all(str(r.get(k)) == v for k, v in conds.items())]
            if len(hits) != 1:
                raise KeyError(f"[{sel} matches {len(hits)} items, not 1")
            data = hits[0]
        i = j + 1
    return data


@cache
def _record(file: str, records: Path = RECORDS) -> dict | None:
    try:
        return json.loads((records / file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


#: The "/" of a ratio `a/b` (a key that holds a slash, "copy / fill" or "rope (+q/k norm)", is read whole first).
_RATIO = re.compile(r"(?<=\S)/(?=\S)")


def value(file: str, path: str, scale: str | None = None, records: Path = RECORDS) -> Any:
    """The number a role names (KeyError / FileNotFoundError when the record lacks it): `a/b` is key a divided
    by key b of the same record, so a ratio is read from its two measurements. `records` is the results folder
    (another device's folder for its own index.yaml)."""
    data = _record(file, records)
    if data is None:
        raise FileNotFoundError(f"{records.relative_to(REPO_ROOT) if records.is_relative_to(REPO_ROOT) else records}"
                                f"/{file} is not recorded in this checkout")
    try:
        v = lookup(data, path)
    except (KeyError, IndexError, TypeError, ValueError):
        num, *den = _RATIO.split(path, maxsplit=1)
        if not den:
            raise
        v = lookup(data, num) / lookup(data, den[0])
    return v * float(scale) if scale else v


def render(text: str, records: Path = RECORDS) -> str:
    """`text` with every {rec} role replaced by its number read from `records`; a role whose record or key is
    missing reads "n/a (file:key)" instead of raising, so a checkout without a record still shows its text."""
    def one(m: re.Match) -> str:
        try:
            return format(value(m["file"], m["path"], m["scale"], records), m["fmt"] or "")
        except (OSError, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
            return f"n/a ({m['file']}:{m['path']})"
    return ROLE.sub(one, text) if "{rec}" in text else text


def render_data(obj: Any) -> Any:
    """Every string of a parsed data file rendered (dicts and lists walked)."""
    if isinstance(obj, str):
        return render(obj)
    if isinstance(obj, dict):
        return {k: render_data(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [render_data(v) for v in obj]
    return obj


def broken_roles(text: str, records: Path = RECORDS) -> list[str]:
    """The roles of `text` whose record or key is missing."""
    bad = []
    for m in ROLE.finditer(text):
        try:
            value(m["file"], m["path"], m["scale"], records)
        except (OSError, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
            bad.append(f"{m[0]}: {e}")
    return bad


def normal(figure: str) -> str:
    """One spelling per figure: "5–10 µs" and "5-10 us" are the same declared constant."""
    s = figure.replace("µ", "u").replace("μ", "u").replace("–", "-").replace("×", "x").replace(",", "")
    s = re.sub(r"^(~|about |约)", "", s)
    s = s.replace("→", "->").replace(" to ", "-").replace("至", "-")
    s = re.sub(r"%(?=\s*-)", "", s)  # "10%至15%" is the range 10-15%
    return re.sub(r"\s+", "", s)


#: "2 x layers", "2 × 层数", "127 x TPOT": a spaced x between a number and a name multiplies (a formula), it is
#: no ratio; "3.74x slower" and "1.6 x 1.25 ms" stay figures.
_TIMES_A_NAME = re.compile(r"\s+[A-Za-z_(（\u3400-\u9fff]")


def figures(text: str) -> list[str]:
    """The hand-typed numbers with units of `text` (roles, code spans and links removed first)."""
    text = _CODE.sub(" ", ROLE.sub(" ", text))
    return [normal(m[1] + " " + m[2]) for m in FIGURE.finditer(text)
            if not (m[2] in ("x", "×") and text[m.start(2) - 1].isspace() and _TIMES_A_NAME.match(text, m.end()))]


@cache
def constants() -> dict[str, dict]:
    """data/constants.yaml by name: each a figure that is not a measurement of this engine, with its source."""
    import yaml

    return {c["name"]: c for c in yaml.safe_load(CONSTANTS.read_text(encoding="utf-8"))["constants"]}


@cache
def declared() -> frozenset[str]:
    """Every spelling of every declared constant, normalised."""
    return frozenset(normal(f) for c in constants().values() for f in c["forms"])
