"""Lab 04, "Startup and the compile cache": the measurements, shared by the notebook and the recorder.

The handbook (§3) says startup takes 1-5 minutes (weights, a ~10 s profile run, torch.compile "once per
size", a few seconds of graph capture), that a cache in VLLM_TORCH_COMPILE_CACHE_DIR avoids recompiling,
and (interview question 4) that a few dummy requests after startup "trigger the compile". Measured here:

a) startup_phases: every startup phase of LLM(...) for enforce_eager, graphs only (mode 0) and level 3 +
   graphs, from llm.startup_report() (compile split into Dynamo and AOT autograd + Inductor), and TPOT.
b) cold_warm:      the same level-3 engine started cold (empty MINIVLLM_CACHE_DIR) and warm, the warm start
                   in a fresh process (a real restart); what the cache entry holds.
c) cache_faults:   a corrupted entry (bytes flipped in the notebook) detected and rebuilt; config changes
                   that miss the cache (max_model_len) and one that hits it (seed).
d) recipes:        {"mode": 0} runs no Dynamo and, in this engine, keeps the full decode graphs (vLLM's mode 0 alone
                   sets NONE; "level": its old name); warm-up requests
                   find nothing to compile (the recompile counter), unlike stock torch.compile (level 1).

Everything runs on CUDA and on a CPU (no graphs there), through the public API (LLM, startup_report,
compile_report); the cache directory is always a private temporary one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch

from minivllm_labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm_labs.lab04_views import PHASES
from minivllm_labs.lab_info import LabInfo
from minivllm_labs.plots import show  # noqa: F401  (the labs' one display call for figures)

# "graphs" is mode 0 with graphs (the engine's default on CUDA is mode 3, as vLLM's): no Dynamo, full decode graphs
MODES = {"eager": {"enforce_eager": True}, "graphs": {"compilation_config": {"mode": 0}},
         "level 3 + graphs": {"compilation_config": {"mode": 3}}}


def _cuda() -> bool:
    return torch.cuda.is_available()


def engine_kwargs(model: str) -> dict:
    """Small, fixed KV cache (engines of this lab run one after another in one process)."""
    max_len = min(512, max_positions(model))
    kw = dict(model=model, max_model_len=max_len, enable_prefix_caching=False)
    if _cuda():
        kw.update(kv_cache_memory_bytes=2 << 30)
    else:  # one prompt of max_len per step at most: the CPU profile run (it measures nothing there) stays short
        kw.update(max_num_seqs=8, num_gpu_blocks_override=8 * ((max_len + 15) // 16) + 8,
                  max_num_batched_tokens=max_len)
    return kw


@contextmanager
def cache_dir(root: str | None = None) -> Iterator[str]:
    """Point MINIVLLM_CACHE_DIR at a private directory for the duration (restored afterwards)."""
    saved = os.environ.get("MINIVLLM_CACHE_DIR")
    root = root or tempfile.mkdtemp(prefix="minivllm-lab04-cache-")
    os.environ["MINIVLLM_CACHE_DIR"] = root
    try:
        yield root
    finally:
        if saved is None:
            os.environ.pop("MINIVLLM_CACHE_DIR", None)
        else:
            os.environ["MINIVLLM_CACHE_DIR"] = saved


@contextmanager
def engine_warnings() -> Iterator[list[str]]:
    """Collect the engine's warnings (cache corrupted, rebuilding ...) instead of printing them."""
    log = logging.getLogger("minivllm")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    quiet_engine_logs()
    saved, log.handlers = log.handlers, [Keep(logging.WARNING)]
    try:
        yield seen
    finally:
        log.handlers = saved


def start(model: str, **kw):
    from minivllm import LLM

    quiet_engine_logs()
    return LLM(**{**engine_kwargs(model), **kw})


def free(llm) -> None:
    llm.shutdown()


def tpot_ms(llm, new_tokens: int = 32, reps: int = 3) -> float:
    """Median time per output token of one greedy request (after a warm-up request)."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    prompt = {"prompt_token_ids": [3 + 7 * j % 200 for j in range(16)]}
    llm.generate(prompt, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), use_tqdm=False)
    return statistics.median(llm.generate(prompt, sp, use_tqdm=False)[0].metrics.tpot for _ in range(reps)) * 1e3


def phases_of(report: dict) -> dict:
    """startup_report().as_dict() -> seconds per PHASES entry (compile split into Dynamo / backend / other)."""
    ph, comp = report["phases_s"], report.get("compile") or {}
    compile_s = ph.get("torch.compile", 0.0)
    dyn, back = comp.get("dynamo_s") or 0.0, comp.get("backend_s") or 0.0
    out = {k: ph.get(k, 0.0) for k in ("load_weights", "profile_run", "kv_cache", "cudagraph_capture")}
    out.update({"Dynamo": dyn, "AOT + Inductor": back, "compile (other)": max(compile_s - dyn - back, 0.0)})
    return {k: out[k] for k in PHASES}


def _summary(rep: dict) -> dict:
    comp, cg = rep.get("compile") or {}, rep.get("cudagraph") or {}
    return {"phases_s": phases_of(rep), "total_s": rep["phases_s"]["total"],
            "compile_s": rep["phases_s"].get("torch.compile", 0.0), "compile_level": comp.get("level", 0),
            "cache_warm": comp.get("cache_warm"), "dynamo_skipped": bool(comp.get("dynamo_skipped")),
            "unique_graphs": comp.get("unique_graphs", 0), "cudagraph_mode": str(cg.get("mode")),
            "capture_sizes": len(cg.get("capture_sizes", [])), "kv_cache_tokens": rep.get("kv_cache_tokens")}


# ---- a) startup phases -------------------------------------------------------------------------------
def startup_phases(model: str, modes: dict = MODES, tpot: dict | None = None) -> tuple[dict, str | None]:
    """One fresh engine per mode, in the current MINIVLLM_CACHE_DIR (empty: the compile is cold); phases,
    totals and (tpot={"new_tokens": n, "reps": r}) TPOT. Returns the results and the cache entry used."""
    out, entry = {}, None
    for name, kw in modes.items():
        llm = start(model, **kw)
        rep = llm.startup_report().as_dict()
        out[name] = {**_summary(rep), "tpot_ms": tpot_ms(llm, **tpot) if tpot else None}
        entry = rep["compile"].get("cache_dir") or entry
        free(llm)
    return round_floats(out), entry


# ---- b) cold vs warm ---------------------------------------------------------------------------------
def entry_files(entry: Path) -> dict:
    """What one cache entry holds: the top-level files, and how many files each sub-directory has."""
    top = sorted(p.name for p in entry.iterdir() if p.is_file())
    subdirs = {p.name: sum(1 for f in p.rglob("*") if f.is_file()) for p in entry.iterdir() if p.is_dir()}
    pieces = [n for n in top if n.startswith("piece_")]
    return {"files": [n for n in top if not n.startswith("piece_")] + ([f"piece_*.bin x{len(pieces)}"] if pieces
                                                                        else []), "subdirs": subdirs}


def _child_start(model: str, kw: dict) -> dict:
    """Run in a fresh process: import, start, report (what a restart of a server costs)."""
    t0 = time.perf_counter()
    import minivllm.llm  # noqa: F401 - torch, triton and transformers are imported here

    imported = time.perf_counter() - t0
    llm = start(model, **kw)
    rep = llm.startup_report().as_dict()
    return {"import_s": imported, "report": json.loads(json.dumps(rep, default=str))}


def restart(model: str, kw: dict, timeout: int = 600) -> dict:
    """Start an engine in a new Python process (same MINIVLLM_CACHE_DIR) and return its startup report."""
    code = ("import json, sys; from minivllm_labs.lab04 import _child_start; "
            "print('LAB04' + json.dumps(_child_start(sys.argv[1], json.loads(sys.argv[2]))))")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, model, json.dumps(kw)], capture_output=True, text=True,
                          timeout=timeout)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("LAB04")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"the restarted engine failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    res = json.loads(line[5:])
    res["process_s"] = time.perf_counter() - t0
    return res


def cold_warm(model: str, cold: dict, entry: str, level: int = 3, new_process: bool = True) -> dict:
    """A warm start after the cold one (`cold`: its summary from startup_phases, same cache directory).
    new_process=True restarts Python first (a real restart); False starts again in this process."""
    kw = {"compilation_config": {"mode": level}}
    if new_process:
        run = restart(model, kw)
        warm, imported, process = _summary(run["report"]), run["import_s"], run["process_s"]
    else:
        llm = start(model, **kw)
        warm, imported, process = _summary(llm.startup_report().as_dict()), None, None
        free(llm)
    return round_floats({"level": level, "cold": cold, "warm": warm, "new_process": new_process,
                         "warm_import_s": imported, "warm_process_s": process, "entry": entry_files(Path(entry)),
                         "warm_over_cold": warm["total_s"] / cold["total_s"],
                         "compile_warm_over_cold": warm["compile_s"] / max(cold["compile_s"], 1e-9)})


# ---- c) a corrupted entry, and config changes ------------------------------------------------------------
def corrupt(entry: Path) -> str:
    """Flip bytes in the largest file of a cache entry (what a crashed copy or a bad disk leaves)."""
    files = [p for p in entry.rglob("*") if p.is_file() and p.name != "minivllm_manifest.json"]
    victim = max(files, key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    for i in range(0, len(data), max(len(data) // 64, 1)):
        data[i] ^= 0xFF
    victim.write_bytes(bytes(data))
    return victim.relative_to(entry).as_posix()


def _short(warning: str, entry: str) -> str:
    """An engine warning without the temporary path, long hashes cut (stable, readable)."""
    text = warning.replace(entry, "<entry>")
    return re.sub(r"[a-z0-9]{20,}", lambda m: m[0][:8] + "...", text)


def cache_faults(model: str, entry: str, level: int = 3) -> dict:
    """Corrupt a warm entry, start (detected, rebuilt), start again (warm); then a config change outside the
    key (seed) and one inside it (max_model_len)."""
    kw = {"compilation_config": {"mode": level}}
    rows = []

    def run(what: str, **extra) -> None:
        with engine_warnings() as warned:
            llm = start(model, **{**kw, **extra})
        comp = llm.startup_report().compile
        rows.append({"start": what, "entry": Path(comp["cache_dir"]).name, "same_entry": comp["cache_dir"] == entry,
                     "cache_warm": comp.get("cache_warm"), "compile_s": comp.get("seconds"),
                     "warnings": [_short(w, comp["cache_dir"]) for w in warned if "cache" in w.lower()]})
        free(llm)

    victim = corrupt(Path(entry))
    run("after corrupting one file")
    run("again")
    run("seed=1 (not in the key)", seed=1)
    run("max_model_len halved (in the key)", max_model_len=engine_kwargs(model)["max_model_len"] // 2)
    return round_floats({"level": level, "corrupted_file": victim, "rows": rows})


# ---- d) the handbook's recipes -------------------------------------------------------------------------
def level0(graphs_run: dict) -> dict:
    """{"mode": 0} (the "graphs" run is a mode-0 engine) and its deprecated alias {"level": 0}."""
    from minivllm.config import CompilationConfig

    try:
        alias = CompilationConfig.from_any({"mode": 0}).level
    except ValueError as e:
        alias = f"rejected: {e}"
    return {"cudagraph_mode": graphs_run["cudagraph_mode"], "capture_sizes": graphs_run["capture_sizes"],
            "compile_level": graphs_run["compile_level"], "mode_alias_level": alias}


SHAPES = ((1, 5), (2, 9), (3, 17), (5, 4), (7, 30))  # (batch, prompt length) of the requests after startup


def warmup(model: str, level: int = 3) -> dict:
    """Requests of new batch sizes and prompt lengths after startup: run-time recompiles, for the engine's
    symbolic-batch compile (`level`, warm from the cache here) and for stock torch.compile (level 1, backend
    "eager", no graphs: Dynamo alone decides when to recompile, and stays cheap)."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    out = {"shapes": [list(s) for s in SHAPES], "level": level}
    for name, kw in (("level3", {"compilation_config": {"mode": level}}),
                     ("level1", {"compilation_config": {"mode": 1, "backend": "eager"}, "cudagraph_mode": "NONE"})):
        llm = start(model, **kw)
        counts, ms = [], []
        for batch, length in SHAPES:
            prompts = [{"prompt_token_ids": [3 + (i + j) % 200 for j in range(length)]} for i in range(batch)]
            t0 = time.perf_counter()
            llm.generate(prompts, sp, use_tqdm=False)
            ms.append((time.perf_counter() - t0) * 1e3)
            counts.append(llm.compile_report()["recompiles_at_runtime"])
        out[name] = {"recompiles_after_each": counts, "recompiles_at_runtime": counts[-1], "request_ms": ms,
                     "graphs_traced_at_startup": llm.compile_report()["graphs_traced_at_startup"]}
        free(llm)
    return round_floats(out)


def run_all(model: str, quick: bool = False, level: int | None = None, new_process: bool | None = None) -> dict:
    """All of Lab 04 in one private cache directory. H200 (random Qwen3-0.6B): level 3, warm start in a new
    process, about 3 minutes. --quick (tests, CPU): level 2, warm start in this process, short TPOT."""
    level = level or (2 if quick else 3)
    new_process = (not quick) if new_process is None else new_process
    modes = {**MODES, "level 3 + graphs": {"compilation_config": {"mode": level}}}
    tpot = {"new_tokens": 32, "reps": 3} if _cuda() else None if quick else {"new_tokens": 8, "reps": 1}
    with cache_dir():
        phases, entry = startup_phases(model, modes, tpot)
        out = {"level": level, "phases": phases,
               "cache": cold_warm(model, phases["level 3 + graphs"], entry, level, new_process)}
        out["faults"] = cache_faults(model, entry, level)
        out["level0"] = level0(phases["graphs"])
        out["warmup"] = warmup(model, level)
    out["recipes"] = round_floats({
        "eager_startup_s": phases["eager"]["total_s"], "compiled_startup_s": phases["level 3 + graphs"]["total_s"],
        "eager_tpot_ms": phases["eager"]["tpot_ms"], "graphs_tpot_ms": phases["graphs"]["tpot_ms"],
        "eager_tpot_over_graphs": phases["eager"]["tpot_ms"] / phases["graphs"]["tpot_ms"]
        if phases["graphs"]["tpot_ms"] else None})
    return out


# figures, tables, questions and claims live next door; the notebook reaches them all as lab04.<name>
from minivllm_labs.lab04_views import (  # noqa: E402,F401
    CLAIMS,
    HANDBOOK,
    Q4,
    Q_LEVEL0,
    RESULTS,
    STARTUP,
    bench_startup_table,
    cache_table,
    faults_table,
    level0_compiled_nothing,
    level0_text,
    phases_table,
    plot_cold_warm,
    plot_phases,
    startup_record,
    verdicts_table,
    warmup_table,
)

LAB_INFO = LabInfo(
    lab="lab04", notebook="labs/04_startup_and_cache.ipynb", title="Startup and the compile cache",
    title_zh="启动耗时与编译缓存", sections=("§3", "interview 4"), questions=(Q4, Q_LEVEL0), claims=CLAIMS,
    code=("minivllm/worker/worker.py", "minivllm/worker/startup.py", "minivllm/compilation/cache.py",
          "minivllm/compilation/graph_cache.py", "minivllm/compilation/backend.py"))
