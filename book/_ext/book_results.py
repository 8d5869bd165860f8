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
#: How an archive member that backs a results row is described: "experiment behind: <the row's what>".
BEHIND = "experiment behind: "
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


#: The results pages, one per topic: (file stem, title, what it holds in English, in Chinese), and which
#: rows of assets/results/h200/index.yaml (a row's `topic:`) each holds.
TOPICS = [
    ("latency", "Engine latency: graphs, compile, startup · 引擎延迟：CUDA Graph、编译、启动",
     ("TPOT by batch size and over time, compile modes with graphs, what bounds batch 1, async scheduling, the "
      "graph pool, cold and warm starts."),
     ("各 batch 大小及历次提交的 TPOT、编译模式与 CUDA Graph 的组合、batch 1 的瓶颈、异步调度、图显存池、"
      "冷启动与热启动。")),
    ("throughput", "Offline throughput · 离线吞吐",
     "The nano-vllm workload: tokens per second, correctness of the batched run, where a decode step goes.",
     "nano-vllm 负载：每秒 token 数、批量运行的正确性、一步解码的时间分布。"),
    ("attention", "Attention kernels · Attention 内核",
     "Decode and prefill attention against the copy bandwidth and SDPA, split-KV, the kernel's history.",
     "解码与预填充 attention 对比显存拷贝带宽和 SDPA、split-KV、内核的历史变化。"),
    ("fused_kernels", "GEMV and fused kernels · GEMV 与融合内核",
     ("Triton GEMV against cuBLAS, its tiles and autotuning, 算子融合 (RMSNorm + RoPE, RoPE + KV store, "
     "residual + norm), programmatic dependent launch."),
      "Triton GEMV 对比 cuBLAS、tile 与自动调优、算子融合（RMSNorm + RoPE、RoPE + KV 写入、残差 + norm）、PDL。"),
    ("checks", "Tests, A/B runs and the labs · 测试、A/B 对比与实验",
     "The GPU tests, the labs executed on the GPU, this tree against the commit before a restructure, Lab 01.",
     "GPU 测试、在 GPU 上完整执行的实验、本版本与重构前提交的对比、实验 01。"),
]


def _intro() -> list[str]:
    return [":::{container} lang-en",
            ("Every figure the handbook and the labs quote, measured on one NVIDIA H200 (random Qwen3-0.6B-shaped "
             "bf16 checkpoint unless a row says otherwise). Each row names the files it is read from, their "
             "provenance (GPU, torch, commit, date, as stored in the file) and the command that reproduces it. "
             "The whole set is re-run with `MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash "
             "scripts/gpu_check.sh all`; a checkpoint of the same shape is made by `python -m "
             "minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 /tmp/ckpt/qwen3-0.6b`. "
             "Defaults unless said: `cudagraph_mode=FULL_AND_PIECEWISE`, compile level 0, async scheduling on; "
             "\"GPU ms\" is a step's span on the GPU clock. The rows themselves are written in English: they "
             "quote commits, file keys and commands."),
            ":::", "",
            ":::{container} lang-zh",
            ("手册和实验引用的每个数字都在这里，均在一块 NVIDIA H200 上测得（除非该行另有说明，模型为随机权重、"
             "Qwen3-0.6B 形状的 bf16 检查点）。每行列出数据文件、文件自带的来源信息（GPU、torch 版本、commit、"
             "日期）以及复现命令。整套测量用 `MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash "
             "scripts/gpu_check.sh all` 重跑；同形状的检查点用 `python -m minivllm.tools.make_random_checkpoint "
             "--shape qwen3-0.6b --dtype bfloat16 /tmp/ckpt/qwen3-0.6b` 生成。默认配置："
             "`cudagraph_mode=FULL_AND_PIECEWISE`、编译 level 0、异步调度开启；“GPU ms”指一步在 GPU 时钟上的跨度。"
             "各行正文用英文书写：其中引用的是 commit、文件中的键和命令。"),
            ":::", ""]


#: The index's prose: what a file or row is and what it found. Its figures are {rec} roles, read from this
#: folder's records when the page is written (tests/labs/test_figures.py scans these fields).
PROSE = ("what", "what_zh", "result", "result_zh")


def rendered_index(folder: Path) -> dict:
    """The folder's index.yaml with every {rec} role of its prose replaced by the number of this folder's
    record (figures.render, as the labs' pages are), so a results page states what its files hold."""
    from minivllm_labs.figures import render

    index = load_index(folder)
    for entry in (index.get("files") or []) + (index.get("archive") or []) + (index.get("rows") or []):
        for key in PROSE:
            if isinstance(entry.get(key), str):
                entry[key] = render(entry[key], folder)
    return index


def pages(root: Path) -> dict[str, str]:
    """{"index": the results page (topics, then every results file with its provenance), topic: its page}."""
    folder = root / REFERENCE
    index = rendered_index(folder)
    rows = index["rows"]
    data = recorded_files(folder)
    prov = {name: provenance_of(d) for name, d in data.items()}
    in_archive = {e["file"] for e in index.get("archive") or []}
    row_zh = {r["what"]: r["what_zh"] for r in rows if r.get("what_zh")}

    def what_zh(e: dict) -> str:
        """A file's Chinese description: its own, or for an archive member that is "experiment behind: <a row>",
        that row's Chinese title."""
        behind = e["what"].removeprefix(BEHIND)
        return e.get("what_zh") or (f"背后的实验：{row_zh[behind]}" if behind != e["what"] and behind in row_zh
                                    else "")
    what = {e["file"]: (f"[{e['what']}]{{.lang-en}}[{what_zh(e)}]{{.lang-zh}}" if what_zh(e) else e["what"])
            for e in (index.get("files") or []) + (index.get("archive") or [])}
    topics = {t[0] for t in TOPICS}
    named: set[str] = set()
    by_topic: dict[str, list[str]] = {t[0]: [] for t in TOPICS}
    for i, row in enumerate(rows, 1):
        where = f"assets/results/h200/{INDEX} row {i} ({row['what'][:40]}...)"
        names = row.get("files") or []
        missing = [n for n in names if n not in prov]
        if missing:
            raise SystemExit(f"{where}: no such file {missing}")
        if row.get("topic") not in topics:
            raise SystemExit(f"{where}: topic {row.get('topic')!r} is not one of {sorted(topics)}")
        named.update(names)
        provs = [prov[n] for n in names]
        links = ", ".join(f"{{ref}}`{n} <{file_id(n)}>`" for n in names)
        command = row.get("command") or (provs[0]["command"] if provs else "")
        n = len(by_topic[row["topic"]]) + 1  # numbered within its page, from 1
        title = _cell(row["what"]) + (f" · {_cell(row['what_zh'])}" if row.get("what_zh") else "")
        result = (f"[{_cell(row['result'])}]{{.lang-en}}[{_cell(row['result_zh'])}]{{.lang-zh}}"
                  if row.get("result_zh") else _cell(row["result"]))
        source = f"*{_cell(row.get('source', ''))}*" if row.get("source") else ""
        cmd = f"`{_cell(command)}`" if command and command not in row.get("source", "") else ""
        by_topic[row["topic"]].append("\n".join([
            f"({file_id('row-' + str(i))})=", f"## {n}. {title}", "", result, "",
            ":::{container} results-provenance", " · ".join(x for x in [links, _cell(_summary(provs)) if provs else "",
                                                                      source, cmd] if x), ":::", ""]))
    out = {}
    for stem, title, en, zh in TOPICS:
        out[stem] = "\n".join([f"# {title}", "", f"[{en}]{{.lang-en}}[{zh}]{{.lang-zh}}", "",
                               ":::{container} lang-en",
                               ("Each section: what was measured, the result, then its files (with their "
                                "provenance: GPU, torch, commit, date), where it is quoted, and the command that "
                                "reproduces it."),
                               ":::", "", ":::{container} lang-zh",
                               ("每一节：测的是什么、结果，然后是数据文件（及其来源：GPU、torch、commit、日期）、"
                                "引用它的地方和复现命令。"), ":::", "", *by_topic[stem], ""])
    page = ["# Recorded results · 测量结果", "", *_intro(), "## By topic · 按主题", ""]
    page += [f"- [{title}](results/{stem}.md): [{en}]{{.lang-en}}[{zh}]{{.lang-zh}}"
             for stem, title, en, zh in TOPICS]
    page += ["", "## Every results file · 全部数据文件", "",
             ":::{container} lang-en",
             (f"From `assets/results/h200/{INDEX}`. A file marked *archive* is a member of `{ARCHIVE}`: an "
              "experiment that decided something, kept with its provenance in one file."),
             ":::", "", ":::{container} lang-zh",
             (f"来自 `assets/results/h200/{INDEX}`。标为 *archive* 的是 `{ARCHIVE}` 中的一项：做出过某个决定的实验，"
              "连同其来源信息合存于一个文件。"),
             ":::", "",
             "```{list-table}", ":header-rows: 1", ":widths: 20 28 8 8 10 26", ":class: results-files", "",
             "* - file · 文件", "  - what · 内容", "  - GPU", "  - torch", "  - commit, date · 日期",
             "  - recorded command · 录制命令"]
    for name in sorted(prov):
        p = prov[name]
        tag = (" (archive)" if name in in_archive else "") + ("" if name in named else " (no row)")
        page += [f"* - ({file_id(name)})=", f"    `{name}`{tag}", f"  - {_cell(what.get(name, ''))}",
                 f"  - {p['gpu']}", f"  - {p['torch']}", f"  - [{p['commit']} {p['date']}]{{.results-provenance}}",
                 f"  - `{_cell(p['command'])}`" if p["command"] else "  - "]
    page += ["```", ""]
    page += other_devices(root)
    return {"index": "\n".join(page), **out}


def other_devices(root: Path) -> list[str]:
    """Every other GPU's folder under assets/results/ (`make labs-record` on that GPU): its files, each with
    the provenance it carries, so a second device's records are listed beside the H200's."""
    folders = sorted(f for f in (root / RESULTS).iterdir() if f.is_dir() and f.name != REFERENCE.name
                     and any(f.glob("*.json")))
    if not folders:
        return []
    out = ["## Other recorded devices · 其他已记录的设备", "",
           ("[Recorded with `make labs-record` on that GPU; each lab's page shows them beside the H200.]{.lang-en}"
            "[在该 GPU 上用 `make labs-record` 录制；各实验页把它们与 H200 并排展示。]{.lang-zh}"), ""]
    for folder in folders:
        rows = []
        for f in sorted(folder.glob("*.json")):
            try:
                p = provenance(f)
            except (ValueError, OSError):
                continue
            rows.append(f"| `{folder.name}/{f.name}` | {p['gpu']} | {p['torch']} | {p['commit']} | {p['date']} |")
        out += [f"### `{folder.name}`", "", "| file · 文件 | GPU | torch | commit | date · 日期 |",
                "|---|---|---|---|---|", *rows, ""]
    return out


def page(root: Path) -> str:
    """The results page itself: the topics, then every results file (the topic pages are in pages())."""
    return pages(root)["index"]
