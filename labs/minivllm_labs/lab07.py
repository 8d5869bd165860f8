"""Lab 07, "The claims lab": every measurable claim of both seeds, one row each, with its verdict and the
number that decides it.

Nothing is measured twice: the rows come from the catalog (`minivllm_labs.catalog.all_claims()`), i.e. from
the labs that measure them, read at run time. This module adds only the claims no other lab measures: the
hardware figures of the article (A100, V100 / H100, Pascal) judged from physics, a TPOT floor of weight bytes
over memory bandwidth, and claims whose cited sources do not exist. Its recorder measures the one number
those need on the GPU at hand: the device's copy bandwidth.

CHECKLIST lists the rows of ../shared/claims.md with a few words quoted from the seed ("needles"), so the
table can show which lab covers each row and which rows nobody has measured yet.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from minivllm_labs.common import REPO_ROOT, round_floats
from minivllm_labs.lab_info import SEEDS, Claim, LabInfo, resolve_key

RESULTS = "assets/results/h200/lab07.json"
LATENCY = "assets/results/h200/latency.json"  # minivllm bench latency on the H200 (rows: system x batch)
#: Datasheet memory bandwidths (bytes/s) of the GPUs the article's claims name, and the bf16 weights of its
#: models. A device the labs record (the H200, a reader's GPU) is never looked up here: its floor uses the
#: copy bandwidth measured on it (`measured_copy_bytes_per_s`).
BANDWIDTH = {"P40": 347e9, "V100": 900e9, "A100-80GB": 2039e9, "H100-SXM": 3350e9}
MODEL_PARAMS = {"LLaMA-2-7B": 6.74e9, "LLaMA-2-13B": 13.0e9, "LLaMA-2-70B": 69.0e9}
#: The article's A100 test: batch 1, 512-token prompt, 128 output tokens, TTFT 21 ms and TPOT 9 ms with graphs.
A100_TEST = {"prompt": 512, "output": 128, "ttft_ms": 21.0, "tpot_ms": 9.0, "req_s": 15.8}


@dataclass(frozen=True)
class Row:
    """One row of ../shared/claims.md: which seed, a few words of it, and the lab expected to measure it."""

    seed: str
    title: str
    needles: tuple[str, ...]  # verbatim substrings of the seed; a claim quoting one of them covers the row
    lab: str  # the lab that measures it ("" : judged from sources only, nothing to measure)


CHECKLIST = (
    Row("handbook", "a kernel launch costs 5-10 us", ("5-10 μs",), "lab01"),
    Row("handbook", "an 80-layer model launches 1000+ kernels", ("1000+ 个 kernel",), "lab01"),
    Row("handbook", "25-50% of a 20 ms step is launch overhead", ("25-50%",), "lab01"),
    Row("handbook", "graph limits: fixed addresses, no branches, no allocation", ("显存分配不能在 graph 内",), "lab02"),
    Row("handbook", "captures 1, 2, 4, 8, ..., max", ("1, 2, 4, 8, ..., max",), "lab02"),
    Row("handbook", "batch 5 runs on the size-8 graph", ("多出来的 3 行不算",), "lab02"),
    Row("handbook", "torch.compile is 10-30% faster", ("10-30%",), "lab03"),
    Row("handbook", "compile scope per layer is the default", ("只 compile 每个 layer",), "lab03"),
    Row("handbook", "paged attention registered with torch.library", ("torch.library",), "lab03"),
    Row("handbook", '{"level": 0} keeps graphs', ('"level": 0',), "lab04"),
    Row("handbook", "VLLM_TORCH_COMPILE_CACHE_DIR", ("VLLM_TORCH_COMPILE_CACHE_DIR",), "lab04"),
    Row("handbook", "startup takes 1-5 minutes", ("1-5 分钟",), "lab04"),
    Row("handbook", "each new shape re-traces", ("重 trace",), "lab05"),
    Row("handbook", "an unregistered op falls back to eager", ("fallback 到 eager",), "lab03"),
    Row("handbook", "prefill is not graphed; chunks are fixed", ("chunk size 也固定",), "lab02"),
    Row("handbook", "--enforce-eager frees a few hundred MB", ("几百 MB",), "lab05"),
    Row("article", "GTC 2023 15-25%; vLLM v0.4.0 1.8x at batch 1", ("15%至25%", "约1.8倍"), "lab07"),
    Row("article", "TTFT 42->23 ms, 128->112 ms, 38->21 ms from graphs", ("42ms降至23ms", "38ms降至21ms"), "lab02"),
    Row("article", "gains shrink with batch: ~20% at batch 8", ("收益降至约20%",), "lab07"),
    Row("article", "150 MB per graph, 1.5 GB for 10", ("150MB",), "lab02"),
    Row("article", "one graph per sequence; --max-num-seqs = graphs", ("每个序列对应一个图对象",), "lab02"),
    Row("article", "PagedAttention conflicts with graphs; 5-8% lower KV use", ("两者在实现上存在冲突", "5%至8%"), "lab06"),
    Row("article", "A100 13B: TPOT 12->9 ms; 12.3->15.8 req/s", ("TPOT从12ms降至9ms", "15.8次"), "lab07"),
    Row("article", "--block-size 32 fewer captures; mnbt 512 faster matching", ("增大至32", "加速图匹配"), "lab06"),
    Row("article", "--enforce-eager saves 10-15% memory", ("10%至15%",), "lab05"),
    Row("article", "V100 20-30%, A100 40-50%, H100 45-55%; Pascal unsupported", ("V100（Volta架构）", "Pascal"), "lab07"),
    Row("article", "replay reuses the capture's RNG seed", ("随机数种子与捕获时相同",), "lab02"),
    Row("article", "use_cuda_graph attribute", ("use_cuda_graph",), ""),
    Row("article", "TGI uses torch.cuda.CUDAGraph; TRT-LLM no dynamic batch", ("torch.cuda.CUDAGraph", "不支持动态batch"), ""),
    Row("article", "Replicate dashboard 28 vs 52 ms; vLLM 25 / TGI 31 / TRT-LLM 19 ms", ("28ms", "vLLM的TTFT为25ms"), ""),
)

#: Rows with nothing to measure on this engine: judged from the projects' own sources (claims.md).
SOURCE_JUDGED = {
    "use_cuda_graph attribute": ("wrong", "vllm.engine.llm_engine has no use_cuda_graph attribute in any release; "
                                 "graphs are off only with enforce_eager / cudagraph_mode NONE"),
    "TGI uses torch.cuda.CUDAGraph; TRT-LLM no dynamic batch": (
        "wrong", "vLLM captures with torch.cuda.CUDAGraph too; TensorRT-LLM batches in flight (its 'inflight "
                 "batching' scheduler)"),
    "Replicate dashboard 28 vs 52 ms; vLLM 25 / TGI 31 / TRT-LLM 19 ms": (
        "unverifiable", "no such Replicate dashboard or benchmark report is published; nothing to reproduce"),
}


def seed_text(seed: str) -> str:
    """The seed document's text (../shared/seeds/ next to the checkout, or $MINIVLLM_SEEDS_DIR)."""
    import os

    for d in (os.environ.get("MINIVLLM_SEEDS_DIR"), REPO_ROOT.parent / "shared" / "seeds", "/work/shared/seeds"):
        if d and (Path(d) / SEEDS[seed]).exists():
            return (Path(d) / SEEDS[seed]).read_text()
    raise FileNotFoundError(f"seed {SEEDS[seed]} not found (set MINIVLLM_SEEDS_DIR)")


def row_of(claim: Claim) -> Row | None:
    """The checklist row a claim covers: the first of its seed whose needle the claim quotes."""
    for r in CHECKLIST:
        if r.seed == claim.seed and any(n in claim.claim_zh for n in r.needles):
            return r
    return None


# ---- evidence -----------------------------------------------------------------------------------------
def evidence_value(claim: Claim, root: Path = REPO_ROOT) -> tuple[str, Any]:
    """('ok', value) from the claim's file + key, ('missing', None) if the file is not recorded yet."""
    p = root / claim.evidence_file
    if not p.exists():
        return "missing", None
    return "ok", resolve_key(json.loads(p.read_text()), claim.evidence_key)


# ---- physics: the TPOT floor ----------------------------------------------------------------------------
def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 10) -> dict:
    """Device-to-device copy rate (read + write bytes / time), the ceiling a decode step's weight reads see."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        nbytes = min(nbytes, 64 << 20)
    a = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    b.copy_(a)
    times = []
    for _ in range(reps):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        b.copy_(a)
        if dev == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"device": dev, "bytes": nbytes, "bytes_per_s": 2 * nbytes / times[len(times) // 2]}


def tpot_floor_ms(params: float, bandwidth: float, dtype_bytes: int = 2) -> float:
    """A decode step reads every weight once: weight bytes / bandwidth is the least a token can take at batch 1."""
    return params * dtype_bytes / bandwidth * 1e3


def physics(measured_bw: float | None = None) -> dict:
    floors = {m: {g: tpot_floor_ms(p, bw) for g, bw in BANDWIDTH.items()} for m, p in MODEL_PARAMS.items()}
    t = A100_TEST
    # One batch-1 request takes TTFT + (output - 1) x TPOT, so it completes at most 1 / that per second.
    req_s = 1e3 / (t["ttft_ms"] + (t["output"] - 1) * t["tpot_ms"])
    out = {"floors_ms": floors, "a100_13b": {"floor_ms": floors["LLaMA-2-13B"]["A100-80GB"],
                                             "claimed_tpot_ms": t["tpot_ms"]},
           "a100_req_s_ceiling": req_s, "a100_req_s_claimed": t["req_s"], "p40_compute_capability": 6.1}
    if measured_bw:
        out["measured_copy_bytes_per_s"] = measured_bw
        for m, p in MODEL_PARAMS.items():
            floors[m]["measured"] = tpot_floor_ms(p, measured_bw)
    return round_floats(out)


def run_all(model: str, quick: bool = False) -> dict:
    """The copy bandwidth of this device and the physics rows (seconds on any device)."""
    bw = copy_bandwidth(reps=3 if quick else 20)
    return {"copy_bandwidth": round_floats(bw), "physics": physics(bw["bytes_per_s"])}


from minivllm_labs.quiz_data import load_claims

#: The article's hardware figures, its sources that do not exist and its batch / generation gains: the claims
#: Lab 07 judges itself (data/lab07.yaml); every other claim is measured, once, by the lab in CHECKLIST. These
#: recompute a verdict from its number (physics: weight bytes over bandwidth; the article's own arithmetic).
RULES = {
    "article.a100_13b_tpot": lambda v: "wrong" if v > 9 else "right",
    "article.a100_13b_requests_per_s": lambda v: "wrong" if v < 15.8 else "right",
    "article.pascal_no_graphs": lambda v: "wrong" if v >= 3.0 else "right",
}
CLAIMS = load_claims("lab07", RULES)

LAB_INFO = LabInfo(
    lab="lab07", notebook="labs/07_claims.ipynb", title="The claims lab", title_zh="逐条检验材料中的说法",
    sections=("handbook 03 (all)", "article (all)"), questions=(), claims=CLAIMS,
    code=("labs/minivllm_labs/catalog.py", "labs/minivllm_labs/lab07.py"))
