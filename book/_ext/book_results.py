"""The results page, generated at build time from assets/results/h200/ and its index.yaml.

Why generated: a figure in the book must come from a recorded file, with the GPU, torch version, commit and
date that file carries, and with the command that reproduces it. The folder's index.yaml says what each file
is and, under `rows`, which figure each row of the page states and which files back it; this module reads
each file's own provenance (three layouts exist: `bench` records with `git.commit`/`date_utc`, lab records
with `commit`/`date`, kernel sweeps with `git_commit`/`date`) so a row cannot claim a commit its file does
not carry. Experiments that decided something live as members of one archive.json, each with its own
provenance; a row names a member as it names a file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

RESULTS = Path("assets/results")
#: The reference device's folder, its index and its archive of experiments.
REFERENCE = RESULTS / "h200"
INDEX = "index.yaml"
ARCHIVE = "archive.json"


def load_index(folder: Path) -> dict:
    """The folder's index.yaml: `files` (this folder's files), `archive` (archive.json's members), `rows`."""
    return yaml.safe_load((folder / INDEX).read_text())


def recorded_files(folder: Path) -> dict[str, dict]:
    """Every recorded JSON by name: the folder's own files and archive.json's members."""
    out = {f.name: json.loads(f.read_text()) for f in sorted(folder.glob("*.json")) if f.name != ARCHIVE}
    if (folder / ARCHIVE).exists():
        out.update(json.loads((folder / ARCHIVE).read_text())["files"])
    return out


def provenance(path: Path) -> dict:
    """GPU, torch, commit, date and command of one results file ('' where the file has none)."""
    return provenance_of(json.loads(path.read_text()))


def provenance_of(data: dict) -> dict:
    """GPU, torch, commit, date and command of one recorded JSON object ('' where it has none)."""
    p = data.get("provenance") or {}
    git = p.get("git") if isinstance(p.get("git"), dict) else {}
    commit = git.get("commit") or p.get("commit") or p.get("git_commit") or ""
    dirty = git.get("dirty", p.get("dirty"))
    command = p.get("command") or p.get("script") or ""
    return {"gpu": p.get("gpu", ""), "torch": p.get("torch", ""),
            "commit": f"{commit}{' (dirty)' if dirty else ''}",
            "date": (p.get("date_utc") or p.get("date") or "")[:10], "command": normalize_command(command)}


def normalize_command(cmd: str) -> str:
    """The recorded command as a user types it: `minivllm ...` instead of the recorder's script path."""
    cmd = re.sub(r"^\S*python\S*\s+(?=\S*/minivllm/cli\.py)", "", cmd)
    cmd = re.sub(r"^\S*/minivllm/cli\.py\b", "minivllm", cmd)
    cmd = re.sub(r"--json \S+", "--json OUT.json", cmd)
    return re.sub(r"--out \S+", "--out OUT.json", cmd)


def file_id(name: str) -> str:
    return "result-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _summary(provs: list[dict]) -> str:
    """One line for the files of a row: GPU, torch versions, commits, date range."""
    def uniq(key: str) -> list[str]:
        return sorted({p[key] for p in provs if p[key]})

    dates = uniq("date")
    date = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "?"
    return "; ".join(x for x in [", ".join(uniq("gpu")) or "GPU ?", "torch " + (", ".join(uniq("torch")) or "?"),
                                 "commit " + (", ".join(uniq("commit")) or "?"), date] if x)


def page(root: Path) -> str:
    folder = root / REFERENCE
    index = load_index(folder)
    rows = index["rows"]
    data = recorded_files(folder)
    prov = {name: provenance_of(d) for name, d in data.items()}
    in_archive = {e["file"] for e in index.get("archive") or []}
    what = {e["file"]: e["what"] for e in (index.get("files") or []) + (index.get("archive") or [])}
    out = ["# Recorded results · 测量结果", "",
           ":::{container} lang-en",
           ("Every figure the handbook and the labs quote, measured on one NVIDIA H200 (random Qwen3-0.6B-shaped "
           "bf16 checkpoint unless a row says otherwise). Each row names the files it is read from, their "
           "provenance (GPU, torch, commit, date, as stored in the file) and the command that reproduces it. "
           "The whole set is re-run with `MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash "
           "scripts/gpu_check.sh all`; a checkpoint of the same shape is made by `python -m "
           "minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 /tmp/ckpt/qwen3-0.6b`. "
           "Defaults unless said: `cudagraph_mode=FULL_AND_PIECEWISE`, compile level 0, async scheduling on; "
           "\"GPU ms\" is a step's span on the GPU clock."),
           ":::", "",
           ":::{container} lang-zh",
           ("手册和实验引用的每个数字都在这里，均在一块 NVIDIA H200 上测得（除非该行另有说明，模型为随机权重、"
           "Qwen3-0.6B 形状的 bf16 检查点）。每行列出数据文件、文件自带的来源信息（GPU、torch 版本、commit、日期）"
           "以及复现命令。整套测量用 `MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh "
           "all` 重跑。默认配置：`cudagraph_mode=FULL_AND_PIECEWISE`、编译 level 0、异步调度开启。"),
           ":::", "",
           "```{list-table}", ":header-rows: 1", ":widths: 20 45 35", ":class: results-table", "",
           "* - what · 测的是什么", "  - result · 结果",
           "  - files, provenance, command · 文件、来源、复现命令"]
    named = set()
    for i, row in enumerate(rows, 1):
        names = row.get("files") or []
        missing = [n for n in names if n not in prov]
        if missing:
            raise SystemExit(f"assets/results/h200/index.yaml row {i} ({row['what'][:40]}...): no such file {missing}")
        named.update(names)
        provs = [prov[n] for n in names]
        links = ", ".join(f"[{n}](#{file_id(n)})" for n in names)
        command = row.get("command") or (provs[0]["command"] if provs else "")
        out += [f"* - ({file_id('row-' + str(i))})=", f"    **{i}.** {_cell(row['what'])}",
                f"  - {_cell(row['result'])}",
                f"  - {links}<br>{_cell(_summary(provs)) if provs else ''}<br>*{_cell(row.get('source', ''))}*"
                + (f"<br>`{_cell(command)}`" if command and command not in row.get("source", "") else "")]
    out += ["```", "", "## Every results file · 全部数据文件", "",
            ":::{container} lang-en",
            (f"From `assets/results/h200/{INDEX}`. A file marked *archive* is a member of `{ARCHIVE}`: an "
            "experiment that decided something, kept with its provenance in one file."),
            ":::", "", ":::{container} lang-zh",
            (f"来自 `assets/results/h200/{INDEX}`。标为 *archive* 的是 `{ARCHIVE}` 中的一项：做出过某个决定的实验，"
            "连同其来源信息合存于一个文件。"),
            ":::", "",
            "```{list-table}", ":header-rows: 1", ":widths: 20 28 8 8 10 26", ":class: results-files", "",
            "* - file", "  - what", "  - GPU", "  - torch", "  - commit, date", "  - recorded command"]
    for name in sorted(prov):
        p = prov[name]
        tag = (" (archive)" if name in in_archive else "") + ("" if name in named else " (no row)")
        out += [f"* - ({file_id(name)})=", f"    `{name}`{tag}", f"  - {_cell(what.get(name, ''))}",
                f"  - {p['gpu']}", f"  - {p['torch']}", f"  - {p['commit']} {p['date']}",
                f"  - `{_cell(p['command'])}`" if p["command"] else "  - "]
    out += ["```", ""]
    return "\n".join(out)
