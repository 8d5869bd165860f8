"""Lab 03, "torch.compile in the engine": the measurements, shared by the notebook and `record lab03`.

The handbook (§2) says Dynamo traces the model into an FX graph, Inductor turns it into fused Triton kernels,
compile is "10-30% faster than eager", "compiling per layer is vLLM's default", custom ops are registered
with torch.library so compile can see them, and compile and CUDA graphs stack ("两者叠加最佳"). Measured here:

a) dynamo_view:      the FX graph Dynamo captures from one decoder layer, its graph breaks and guards, with
                     attention registered and unregistered, and what fullgraph=True does with the latter.
b) inductor_kernel:  the kernel Inductor generates for a residual add + RMSNorm, next to the engine's own.
c) configs:          the engine at compile levels 0 / 2 / 3, with and without graphs, on two builds (the
                     hand-fused Triton kernels, custom_ops ["all"]; PyTorch's own ops, ["none"]): TPOT,
                     kernels per step, compile time, traces, recompiles, pieces.
d) scopes:           what Dynamo traces for compile_scope model / layer / ops, and level 3's split.

Engine internals this lab touches (a decoder layer, the runner's buffers) are used only in this file.
Tables, plots and the questions' evidence: lab03_views.py; questions and claims: data/lab03.yaml.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

import torch

from minivllm.config import CompilationMode
from minivllm_labs.common import REPO_ROOT, max_positions, quiet_engine_logs, round_floats

CAPTURE_SIZES = [1, 2, 4, 8, 16, 32, 64]


def _cuda() -> bool:
    return torch.cuda.is_available()


@dataclass(frozen=True)
class EngineSetup:
    """One engine configuration of the sweep: a compile level, a CUDA graph mode and the op build."""

    name: str
    level: int = 0
    graphs: str = "NONE"  # cudagraph_mode; NONE = no graphs
    custom_ops: tuple[str, ...] | None = None  # None: the engine's default for the level
    backend: str = "inductor"
    scope: str = "model"
    attention_backend: str = "auto"
    extra: dict = field(default_factory=dict)

    def compilation_config(self) -> dict:
        cc = {"mode": self.level, "backend": self.backend, "compile_scope": self.scope, **self.extra}
        if self.custom_ops is not None:
            cc["custom_ops"] = list(self.custom_ops)
        return cc


# The GPU sweep. Default custom_ops: the hand-written kernels at level 0, Inductor's code at levels >= 1.
GPU_SETUPS = (
    EngineSetup("eager"), EngineSetup("L2", 2), EngineSetup("L3", 3),
    EngineSetup("graphs", 0, "FULL_DECODE_ONLY"), EngineSetup("L2+graphs", 2, "FULL_DECODE_ONLY"),
    EngineSetup("L3+graphs", 3, "FULL_AND_PIECEWISE"),
    # interview question 1: the same four corners with PyTorch's own ops and with the hand-fused kernels
    EngineSetup("torch-ops eager", custom_ops=("none",)),
    EngineSetup("torch-ops graphs", 0, "FULL_DECODE_ONLY", ("none",)),
    EngineSetup("fused L3", 3, custom_ops=("all",)),
    EngineSetup("fused L3+graphs", 3, "FULL_AND_PIECEWISE", ("all",)),
)
CPU_SETUPS = (EngineSetup("eager"), EngineSetup("L3 (Dynamo only)", 3, backend="eager"))
QUICK_SETUPS = (EngineSetup("eager"),)
# Interview question 1's grid: build -> corner -> setup name
GRID = {"torch ops": {"eager": "torch-ops eager", "graphs": "torch-ops graphs", "compile": "L3",
                      "both": "L3+graphs"},
        "hand-fused": {"eager": "eager", "graphs": "graphs", "compile": "fused L3", "both": "fused L3+graphs"}}


def make_llm(model: str, setup: EngineSetup, max_num_seqs: int = 64, max_len: int = 128):
    from minivllm import LLM

    quiet_engine_logs()
    max_len = min(max_len, max_positions(model))
    kw = dict(max_num_seqs=max_num_seqs, max_model_len=max_len, enable_prefix_caching=False,
              num_gpu_blocks_override=max_num_seqs * ((max_len + 15) // 16) + 8,
              attention_backend=setup.attention_backend, compilation_config=setup.compilation_config())
    if not _cuda():  # the startup profile run is one forward of max_num_batched_tokens: 8192 costs ~0.7 s on a CPU
        kw["max_num_batched_tokens"] = max(256, max_len)
    if setup.graphs == "NONE" or not _cuda():
        kw["cudagraph_mode"] = "NONE"
    else:
        kw.update(cudagraph_mode=setup.graphs, cudagraph_capture_sizes=CAPTURE_SIZES)
    return LLM(model=model, **kw)


# ---- a) what Dynamo sees ------------------------------------------------------------------------------
def _layer_call(llm, n: int = 2):
    """(layer 0, its arguments, the forward context): a decode batch of n rows in the runner's buffers."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm_labs.lab01 import _decode_inputs

    r = llm.model_runner
    meta = _decode_inputs(r, n, 8)
    ib = r.input_batch
    x = r.model.model.embed_tokens(ib.input_ids[:n])
    return r.model.model.layers[0], (ib.positions[:n], x, x.clone()), \
        set_forward_context(meta, r.backend, r.kv_caches)


def compact_fx(code: str, max_lines: int = 40) -> str:
    """FX's generated forward, shortened for reading: module paths trimmed, aliasing lines and the
    `x = None` clean-ups dropped."""
    out = []
    for line in code.strip().splitlines():
        if re.fullmatch(r"\s+l_\w+ = L_\w+", line) or not line.strip():
            continue
        line = re.sub(r";\s+[\w, =]+ = None$", "", line.rstrip())
        line = re.sub(r"\b[lL]_self_modules_", "", line)
        line = line.replace("_modules_", ".").replace("_parameters_weight_", ".weight").replace("_buffers_", ".")
        if line.startswith("def forward"):
            line = "def forward(self, ...):"
        out.append(line)
    if len(out) <= max_lines:
        return "\n".join(out)
    att = next((i for i, ln in enumerate(out) if "attention" in ln and "torch.ops" in ln), None)
    head = max_lines // 2
    if att is None or att < head:
        return "\n".join(out[:max_lines] + [f"    ... ({len(out) - max_lines} more lines)"])
    window = out[att - 4:att + max_lines // 2 - 4]  # the attention op and the lines around it
    return "\n".join(out[:head] + [f"    ... ({att - 4 - head} lines)"] + window
                     + [f"    ... ({len(out) - att - max_lines // 2 + 4} more lines)"])


@torch.inference_mode()
def dynamo_view(llm) -> dict:
    """torch._dynamo.explain on one decoder layer: graphs, breaks (with reasons), ops, guards, the FX code;
    then torch.compile(fullgraph=True) on the same layer, which refuses any break."""
    layer, args, ctx = _layer_call(llm)
    with ctx:
        torch._dynamo.reset()
        ex = torch._dynamo.explain(layer)(*args)
        reasons = Counter(str(b.reason).strip().splitlines()[0] for b in ex.break_reasons)
        guards = Counter(g.source.name for g in ex.out_guards)
        res = {"graphs": ex.graph_count, "graph_breaks": ex.graph_break_count, "ops": ex.op_count,
               "break_reasons": dict(reasons), "guards": len(ex.out_guards), "guards_by_source": dict(guards),
               "fx_code": compact_fx(ex.graphs[0].code) if ex.graphs else "",
               "attention_nodes": sum(1 for g in ex.graphs for nd in g.graph.nodes
                                      if nd.op == "call_function" and "attention" in str(nd.target))}
        torch._dynamo.reset()
        try:
            torch.compile(layer, backend="eager", fullgraph=True)(*args)
            res["fullgraph"] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - the error is the measurement
            msg = str(e).strip().splitlines()
            res["fullgraph"] = {"ok": False, "error_type": type(e).__name__, "message": msg[0] if msg else ""}
        torch._dynamo.reset()
    res["attention_backend"] = llm.config.attention_backend
    return res


def _op_name(node) -> str:
    t = node.target
    return getattr(t, "__name__", None) or str(t).rsplit(".", 1)[-1]


@torch.inference_mode()
def split_pieces(llm, n: int = 2) -> dict:
    """Trace the whole forward once (Dynamo, fullgraph, no compiler) and cut it where the engine's level 3
    cuts it: at each attention op (compilation/backend.py ATTENTION_OPS). Per piece: its op count and its
    first and last ops, so the repeated middle pieces (one per layer boundary) can be seen to be the same."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm.compilation.backend import ATTENTION_OPS
    from minivllm_labs.lab01 import _decode_inputs

    r = llm.model_runner
    meta = _decode_inputs(r, n, 8)
    ib = r.input_batch
    graphs = []

    def recorder(gm, _example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with set_forward_context(meta, r.backend, r.kv_caches):
        torch.compile(r.model.forward, backend=recorder, fullgraph=True)(ib.input_ids[:n], ib.positions[:n])
    torch._dynamo.reset()
    pieces, ops = [], []
    for node in graphs[0].graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if any(a in str(node.target) for a in ATTENTION_OPS):
            pieces.append(ops)
            ops = []
        else:
            ops.append(_op_name(node))
    pieces.append(ops)
    rows = [{"ops": len(p), "first": p[:3], "last": p[-2:]} for p in pieces]
    return {"traces": len(graphs), "attention_splits": len(pieces) - 1, "pieces": rows,
            "distinct_middle": len({tuple(p) for p in pieces[1:-1]}),
            "num_layers": r.model_config.num_hidden_layers}


# ---- b) what Inductor makes of an add + RMSNorm --------------------------------------------------------
def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """The engine's fused_add_rms_norm in plain PyTorch: five elementwise/reduction ops eagerly."""
    h = x + residual
    hf = h.float()
    return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight, h


def _kernel_sources(code: str) -> list[str]:
    """The kernel sources inside Inductor's output module (Triton on CUDA, C++ on a CPU)."""
    return [m.group(1).strip() for m in re.finditer(r"async_compile\.\w+\(.*?'''(.*?)'''", code, re.DOTALL)]


def hand_written_kernel(name: str = "_rms_norm_kernel", path: str = "minivllm/kernels/triton_norm.py") -> str:
    """The engine's Triton kernel `name`, read as text (no Triton import needed on a CPU)."""
    lines = (REPO_ROOT / path).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {name}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    return "\n".join(lines[start - 1:end]).rstrip()  # with its @triton.jit line


def inductor_kernel(hidden: int = 1024, rows: int = 4) -> dict:
    """Compile add_rms_norm with Inductor and keep the generated kernel(s)."""
    from torch._inductor.utils import run_and_get_code

    dev = "cuda" if _cuda() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    x, r = (torch.randn(rows, hidden, device=dev, dtype=dtype) for _ in range(2))
    w = torch.randn(hidden, device=dev, dtype=dtype)
    torch._dynamo.reset()
    (out, _), codes = run_and_get_code(torch.compile(add_rms_norm, dynamic=False), x, r, w)
    ref, _ = add_rms_norm(x, r, w)
    kernels = [k for c in codes for k in _kernel_sources(c)]
    torch._dynamo.reset()
    return {"device": dev, "language": "triton" if dev == "cuda" else "c++", "num_kernels": len(kernels),
            "eager_ops": 7, "max_abs_diff": (out.float() - ref.float()).abs().max().item(),
            "kernel": kernels[0] if kernels else ""}


# ---- c) the engine sweep -------------------------------------------------------------------------------
def _prompts(llm, batch: int, length: int = 16) -> list[dict]:
    vocab = min(llm.engine.model_config.vocab_size, 500)
    return [{"prompt_token_ids": [3 + (7 * i + 13 * j) % (vocab - 3) for j in range(length)]}
            for i in range(batch)]


def tpot_ms(llm, batch: int, new_tokens: int, repeats: int) -> dict:
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    xs = []
    for _ in range(repeats):
        outs = llm.generate(_prompts(llm, batch), sp, use_tqdm=False)
        xs.append(statistics.median(o.metrics.tpot for o in outs) * 1e3)
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def measure_setup(model: str, setup: EngineSetup, batches: tuple[int, ...], new_tokens: int, repeats: int,
                  census: bool = True) -> dict:
    """Build the engine, then: compile facts at startup, TPOT per batch, kernels (CUDA) or ops (CPU) per
    decode step for graph-free engines, and the compile report after serving (run-time recompiles)."""
    from minivllm_labs.lab01 import kernel_census

    llm = make_llm(model, setup)
    comp = llm.startup_report().compile or {}
    row = {"level": setup.level, "graphs": setup.graphs, "custom_ops": llm.config.compilation.resolved_custom_ops(),
           "compile_s": comp.get("seconds"), "dynamo_s": comp.get("dynamo_s"), "backend_s": comp.get("backend_s")}
    tpot_ms(llm, 1, 4, 1)  # warm-up
    row["tpot_ms"] = {str(b): tpot_ms(llm, b, new_tokens, repeats) for b in batches}
    if census and setup.graphs == "NONE":
        c = kernel_census(llm)
        row["kernels_per_step"] = c.get("kernels_per_step")
        row["ops_per_step"] = c.get("ops_per_step")
    row.update(_compile_facts(llm))
    llm.shutdown()
    return row


def _compile_facts(llm) -> dict:
    """Traces, breaks, recompiles and pieces of this engine (none at mode 0, with or without graphs: nothing
    is compiled, and the report's counters would then be the whole process's)."""
    keys = ("graphs_traced_at_startup", "recompiles_at_runtime", "graph_breaks", "pieces", "compiled_pieces",
            "attention_splits")
    rep = llm.compile_report()
    if llm.config.compile_mode == CompilationMode.NONE:
        return {k: (0 if k in keys[:3] else None) for k in keys}
    return {k: rep.get(k) for k in keys}


def sweep(model: str, setups=GPU_SETUPS, batches: tuple[int, ...] = (1, 8, 64), new_tokens: int = 32,
          repeats: int = 3, census: bool = True) -> dict:
    """Every setup in turn; one that fails to start is recorded with its error and the sweep goes on."""
    out = {}
    for s in setups:
        try:
            out[s.name] = measure_setup(model, s, batches, new_tokens, repeats, census)
        except Exception as e:  # noqa: BLE001 - a failing setup is a result, not the end of the record
            msg = str(e).strip().splitlines()
            out[s.name] = {"level": s.level, "graphs": s.graphs, "error": f"{type(e).__name__}: "
                                                                          f"{msg[0] if msg else ''}"[:300]}
            torch._dynamo.reset()
    return round_floats(out)


# ---- d) compile scopes, and attention registered vs unregistered (self-test 2) ----------------------
SCOPES = {"model": EngineSetup("model", 1, backend="eager"),
          "layer": EngineSetup("layer", 1, backend="eager", scope="layer"),
          "ops": EngineSetup("ops", 1, backend="eager", scope="ops"),
          "split (level 3)": EngineSetup("split", 3, backend="eager")}


def scopes(model: str, names: tuple[str, ...] = tuple(SCOPES)) -> dict:
    """What Dynamo traces per compile_scope (level 1), and level 3's split, with the "eager" backend: only
    Dynamo runs (the count of traces and breaks is Dynamo's; Inductor would add only compile time)."""
    out = {}
    for name in names:
        llm = make_llm(model, SCOPES[name], max_num_seqs=8)
        tpot_ms(llm, 2, 4, 1)  # one request through: run-time traces of the layer / ops scopes happen here
        out[name] = _compile_facts(llm)
        out[name]["num_layers"] = llm.model_runner.model_config.num_hidden_layers
        llm.shutdown()
    return out


def _error(e: Exception) -> dict:
    msg = str(e).strip().splitlines()
    return {"ok": False, "error_type": type(e).__name__, "message": msg[0] if msg else ""}


def registration(model: str, backends: tuple[str, ...] = ("auto", "unregistered"), engine: bool = True) -> dict:
    """Self-test 2: one decoder layer under Dynamo with attention registered and unregistered; with
    engine=True also the whole engine at level 1 (Dynamo only). Level 1 compiles with fullgraph=True, as
    every vLLM mode does: registered, the engine serves batches 1 and 8 (traces, breaks, recompiles
    counted); unregistered, its startup fails, and that error ("fullgraph_engine") is the measurement."""
    out: dict = {}
    for ab in backends:
        llm, failure = None, None
        if engine:
            try:
                llm = make_llm(model, EngineSetup(ab, 1, backend="eager", attention_backend=ab), max_num_seqs=8)
            except Exception as e:  # noqa: BLE001 - the startup error is the measurement
                failure = _error(e)
                torch._dynamo.reset()
        out[ab] = {}
        if llm is not None:  # serve first: the layer view below resets Dynamo, which would count as recompiles
            for b in (1, 8):
                tpot_ms(llm, b, 4, 1)
            facts = _compile_facts(llm)
            out[ab].update({k: facts[k] for k in ("graphs_traced_at_startup", "recompiles_at_runtime",
                                                  "graph_breaks")})
        else:  # no engine asked for, or its startup failed: the layer view needs one, without compile
            llm = make_llm(model, EngineSetup(ab, 0, backend="eager", attention_backend=ab), max_num_seqs=8)
        out[ab]["layer"] = dynamo_view(llm)
        llm.shutdown()
        if engine and ab == "unregistered":
            out["fullgraph_engine"] = failure or {"ok": True}
    torch._dynamo.reset()
    return out


# ---- everything, for the recorder ------------------------------------------------------------------------
def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 03's measurements (a cold GPU run with a 0.6B model: about three minutes, most of it
    Inductor compiling levels 2 and 3)."""
    out: dict = {"device": "cuda" if _cuda() else "cpu", "hand_written": hand_written_kernel()}
    if quick:  # the tests' run: one layer view and one engine row, no Inductor compile (C++ on a CPU is slow)
        out["registration"] = registration(model, ("auto",), engine=False)
        out["configs"] = sweep(model, QUICK_SETUPS, (1,), new_tokens=4, repeats=1)
        out["grid"] = GRID
        return round_floats(out)
    out["inductor"] = inductor_kernel()
    out["registration"] = registration(model)
    out["scopes"] = scopes(model)
    llm = make_llm(model, EngineSetup("eager", custom_ops=("none",)), max_num_seqs=8)  # level 3's op build
    out["split"] = split_pieces(llm)
    llm.shutdown()
    gpu = _cuda()
    out["configs"] = sweep(model, GPU_SETUPS if gpu else CPU_SETUPS, (1, 8, 64) if gpu else (1,), new_tokens=16,
                           repeats=3)
    out["grid"] = GRID
    return round_floats(out)


from minivllm_labs.lab03_views import (  # noqa: E402
    CLAIMS,
    Q1,
    Q2,
    Q3,
    Q4,
    configs_table,
    dynamo_text,
    grid_table,
    kernel_text,
    plot_grid,
    plot_levels,
    registration_table,
    scopes_table,
    show,
    show_quiz,
    split_text,
    verdicts_table,
)
from minivllm_labs.lab_info import LabInfo  # noqa: E402

LAB_INFO = LabInfo(
    lab="lab03", notebook="labs/03_torch_compile.ipynb", title="torch.compile in the engine",
    title_zh="引擎里的 torch.compile", sections=("§2.1", "§2.2", "§2.3", "§2.4", "§5"),
    questions=(Q1, Q2, Q3, Q4), claims=CLAIMS,
    code=("minivllm/compilation/backend.py", "minivllm/attention/layer.py", "minivllm/layers/custom_op.py",
          "minivllm/kernels/triton_norm.py", "minivllm/config.py"),
)

__all__ = [
    "LAB_INFO",
    "Q1",
    "Q2",
    "Q3",
    "Q4",
    "EngineSetup",
    "configs_table",
    "dynamo_text",
    "dynamo_view",
    "grid_table",
    "hand_written_kernel",
    "inductor_kernel",
    "kernel_text",
    "make_llm",
    "measure_setup",
    "plot_grid",
    "plot_levels",
    "registration",
    "registration_table",
    "run_all",
    "scopes",
    "scopes_table",
    "show",
    "show_quiz",
    "split_text",
    "sweep",
    "verdicts_table",
]
