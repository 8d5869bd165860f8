"""Lab 07, "The claims lab": every measurable claim of both seeds, one row each, with its verdict and the
number that decides it.

Nothing is measured twice: the rows come from the catalog (`minivllm_labs.catalog.all_claims()`), i.e. from
the labs that measure them, read at run time. This module adds only the claims no other lab measures: the
hardware figures of the article (A100, V100 / H100, Pascal) judged from physics, a TPOT floor of weight bytes
over memory bandwidth, and claims whose cited sources do not exist. Its recorder measures the one number
those need on the GPU at hand: the device's copy bandwidth.

CHECKLIST lists the rows of ../shared/claims.md with the ids of the claims that cover each, so the table can
show which lab covers each row and which rows nobody has measured yet.
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
    """One row of ../shared/claims.md: which seed, its gist, the lab expected to measure it, and the ids of the
    claims that cover it (coverage is matched by claim id, never by the claim's wording)."""

    seed: str
    title: str
    lab: str  # the lab that measures it ("" : judged from sources only, nothing to measure)
    claims: tuple[str, ...] = ()


CHECKLIST = (
    Row("handbook", "a kernel launch costs 5-10 us", "lab01", ("lab01.launch-cost",)),
    Row("handbook", "an 80-layer model launches 1000+ kernels", "lab01", ("lab01.kernel-count",)),
    Row("handbook", "25-50% of a 20 ms step is launch overhead", "lab01",
        ("lab01.overhead-share", "lab01.graph-replay")),
    Row("handbook", "graph limits: fixed addresses, no branches, no allocation", "lab02",
        ("lab02.fixed-address", "lab02.branch", "lab02.alloc")),
    Row("handbook", "captures 1, 2, 4, 8, ..., max", "lab02", ("lab02.sizes",)),
    Row("handbook", "batch 5 runs on the size-8 graph", "lab02", ("lab02.padding",)),
    Row("handbook", "torch.compile is 10-30% faster", "lab03",
        ("lab03.faster", "lab03.stack-fused", "lab03.stack-torch-ops", "lab03.fusion-kernel")),
    Row("handbook", "compile scope per layer is the default", "lab03", ("lab03.scope",)),
    Row("handbook", "paged attention registered with torch.library", "lab03", ("lab03.unregistered",)),
    Row("handbook", '{"level": 0} keeps graphs', "lab04", ("lab04.level0",)),
    Row("handbook", "VLLM_TORCH_COMPILE_CACHE_DIR", "lab04", ("lab04.cache_env",)),
    Row("handbook", "startup takes 1-5 minutes", "lab04",
        ("lab04.total", "lab04.profile", "lab04.compile_per_size", "lab04.capture", "lab04.warmup",
         "lab04.enforce_eager")),
    Row("handbook", "loading the weights takes seconds to minutes", "lab07", ("handbook.weight_loading",)),
    Row("handbook", "each new shape re-traces", "lab05", ("lab05.sparse_shapes",)),
    Row("handbook", "an unregistered op falls back to eager", "lab05", ("lab05.unregistered",)),
    Row("handbook", "how to tell a graph, compile or numerics fault apart", "lab05",
        ("lab05.rule_graph", "lab05.rule_compile", "lab05.rule_silent", "lab05.debug")),
    Row("handbook", "prefill is not graphed", "lab02", ("lab02.prefill",)),
    Row("handbook", "decode input length is always 1, so it can be captured", "lab11", ("lab11.decode-query-length",)),
    Row("handbook", "chunked-prefill chunks are fixed and can be captured", "lab07", ("handbook.chunk_size_fixed",)),
    Row("handbook", "a graph saves launch overhead, not op time", "lab09", ("lab09.graph-launch", "lab09.graph-ops")),
    Row("handbook", "--enforce-eager frees a few hundred MB", "lab05", ("lab05.oom",)),
    Row("article", "GTC 2023 15-25%; vLLM v0.4.0 1.8x at batch 1", "lab07", ("article.sources_gtc2023_vllm040",)),
    Row("article", "TTFT 42->23 ms, 128->112 ms, 38->21 ms from graphs", "lab07",
        ("article.ttft_13b_h100", "article.ttft_70b", "article.ttft_a100_13b")),
    Row("article", "gains shrink with batch (~20% at batch 8) and with model size", "lab07",
        ("article.gains_at_batch_8", "article.gains_by_model_size")),
    Row("article", "150 MB per graph, 1.5 GB for 10", "lab02", ("lab02.pool",)),
    Row("article", "one graph per sequence; --max-num-seqs = graphs", "lab02", ("lab02.max-num-seqs",)),
    Row("article", "PagedAttention conflicts with graphs; 5-8% lower KV use", "lab06",
        ("article.paged_attention_conflicts_with_graphs", "article.graphs_lower_kv_utilisation")),
    Row("article", "A100 13B: TPOT 12->9 ms; 12.3->15.8 req/s", "lab07",
        ("article.a100_13b_tpot", "article.a100_13b_requests_per_s")),
    Row("article", "--block-size 32 fewer captures; mnbt 512 faster matching", "lab06",
        ("article.block_size_32_fewer_captures", "article.block_size_32_more_fragmentation",
         "article.mnbt_512_faster_graph_matching")),
    Row("article", "--enforce-eager saves 10-15% memory", "lab05", ("lab05.oom_article",)),
    Row("article", "turn graphs off when memory is tight or input lengths vary", "lab07",
        ("article.eager_when_memory_is_tight",)),
    Row("article", "V100 20-30%, A100 40-50%, H100 45-55%; Pascal unsupported", "lab07",
        ("article.gains_by_gpu_generation", "article.pascal_no_graphs")),
    Row("article", "graphs do not change results", "lab07", ("article.graphs_same_results",)),
    Row("article", "graphs keep eager's order and precision of every operation", "lab10",
        ("article.graphs_do_not_change_results",)),
    Row("article", "replay reuses the capture's RNG seed", "lab02", ("lab02.rng",)),
    Row("article", "use_cuda_graph attribute", ""),
    Row("article", "TGI uses torch.cuda.CUDAGraph; TRT-LLM no dynamic batch", ""),
    Row("article", "Replicate dashboard 28 vs 52 ms; vLLM 25 / TGI 31 / TRT-LLM 19 ms", ""),
)

#: Rows with nothing to measure on this engine: judged from the projects' own sources (claims.md).
SOURCE_JUDGED = {
    "use_cuda_graph attribute": ("wrong", "vllm.engine.llm_engine has no use_cuda_graph attribute in the releases "
                                 "checked; graphs are turned off with enforce_eager=True or cudagraph_mode NONE"),
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
    """The checklist row that lists the claim's id."""
    return next((r for r in CHECKLIST if claim.cid in r.claims), None)


def is_verbatim(claim: Claim) -> bool | None:
    """Whether the claim's Chinese text is the seed's own words (whitespace aside); None without the seeds."""
    import re

    try:
        text = seed_text(claim.seed)
    except FileNotFoundError:
        return None
    return re.sub(r"\s+", "", claim.claim_zh) in re.sub(r"\s+", "", text)


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


from minivllm_labs import verdicts
from minivllm_labs.quiz_data import load_claims, load_questions

#: The article's hardware figures, its sources that do not exist and its batch / generation gains: the claims
#: Lab 07 judges itself (data/lab07.yaml); every other claim is measured, once, by the lab in CHECKLIST. These
#: recompute a verdict from its number (physics: weight bytes over bandwidth; the article's own arithmetic).
RULES = {
    "article.a100_13b_tpot": lambda v: "wrong" if v > 9 else "right",
    "article.a100_13b_requests_per_s": lambda v: "wrong" if v < 15.8 else "right",
    "article.pascal_no_graphs": lambda v: "wrong" if v >= 3.0 else "right",
    # "a few seconds to a few minutes": right from 2 s up; below it only for models larger than the one recorded
    "handbook.weight_loading": lambda v: "right" if v >= 2.0 else "partly",
    # one sentence, one rule: Lab 10 judges "graphs do not change the computation" by the same function
    "article.graphs_same_results": verdicts.graphs_same_results,
    "article.ttft_a100_13b": verdicts.ttft_a100_13b,  # impossible: below the prefill's arithmetic floor
    "article.gains_at_batch_8": verdicts.gains_at_batch_8,  # the gap to 20% against eager TPOT's own noise
    # the share of the KV cache that turning graphs off adds: real (> 0) but a few percent at most is "partly"
    "article.eager_when_memory_is_tight": lambda v: "wrong" if v <= 0 else ("partly" if v < 0.05 else "right"),
}
#: Values in a record that are constants (a datasheet or documentation figure the recorder writes beside its
#: measurements) or arithmetic on constants: the table says so instead of presenting them as measured.
NOT_MEASURED = {  # evidence key -> (kind, what it is, 中文)
    "physics.p40_compute_capability": ("constant", "NVIDIA's CUDA GPU list: the P40's compute capability",
                                       "常数，非测量：NVIDIA 的 CUDA GPU 列表中 P40 的计算能力"),
    "physics.a100_13b.floor_ms": ("computed", "weight bytes / the A100's datasheet bandwidth",
                                  "计算值，非测量：权重字节数 ÷ A100 规格书带宽"),
    "physics.a100_req_s_ceiling": ("computed", "the article's own TTFT and TPOT",
                                   "计算值，非测量：由文章自己的 TTFT 和 TPOT 算出"),
}
#: Units that are words, in Chinese (a number's unit in the Chinese view of a table).
UNITS_ZH = {"requests/s": "请求/s", "query tokens per request": "个 query token/请求", "(compute capability)": "（计算能力）", "(absolute difference)": "（绝对差）"}
#: The unit of each evidence key (the table prints every number with its unit).
UNITS = {
    "_us_per_op": "µs", "graph_launch_us": "µs", "_ms": "ms", "_ms.0": "ms", ".median": "ms", "floor_ms": "ms", "tpot_s": "s", "ttft_s": "s",
    "load_weights": "s", ".total": "s", "total_s": "s", "warm_over_cold": "x (ratio)", "profile_run": "s", "cudagraph_capture": "s", "_mib": "MiB",
    "_pct": "percentage points", "eager_tpot_over_graphs": "x (ratio)", "ratio_warm_over_cold.total": "x (ratio)",
    "freed_fraction_of_kv": "fraction of the KV cache", "freed_fraction_of_gpu": "fraction of GPU memory",
    "req_s_ceiling": "requests/s", "compute_capability": "(compute capability)",
    "kernels_per_layer": "kernels per layer", "capture_sizes.5": "(batch size)", "num_graphs": "graphs",
    "num_hidden_layers": "layers", "graph_breaks": "graph breaks", "pieces": "pieces", "num_kernels": "kernels",
    "unique_graphs": "graphs", "recompiles_at_runtime": "recompiles", "recompiles.symbolic batch (level 2)":
    "recompiles", "rng.distinct": "distinct samples of 3", "steps_by_path.eager": "runs of 5",
    "steps_by_path.piecewise": "runs of 5", "same_tokens": "requests of 16", "replays_with_new_blocks": "steps",
    "block32_minus_block16": "graphs", "mnbt512_minus_8192": "graphs", "calls_while_generating": "calls",
    "_share": "fraction of the step", "kernels_per_step": "kernels per step", "max_abs_diff": "(absolute difference)",
    "uniform_decode_query_len": "query tokens per request",
}


def unit_of(key: str) -> str:
    """The unit of an evidence key ("" for booleans and words): the longest matching ending wins."""
    return max(((len(end), u) for end, u in UNITS.items() if key.endswith(end)), default=(0, ""))[1]
CLAIMS = load_claims("lab07", RULES)
QUESTIONS = load_questions("lab07")
Q1, Q2 = QUESTIONS["lab07.q1"], QUESTIONS["lab07.q2"]

LAB_INFO = LabInfo(
    lab="lab07", notebook="labs/07_claims.ipynb", title="The claims lab", title_zh="逐条检验材料中的说法",
    sections=("handbook 03 (all)", "article (all)"), questions=(Q1, Q2), claims=CLAIMS,
    code=("labs/minivllm_labs/catalog.py", "labs/minivllm_labs/lab07.py"))
