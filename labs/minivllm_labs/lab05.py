"""Lab 05, "When to turn it off, and the fallback ladder": faults injected on purpose, diagnosed and walked.

The handbook (§4, §4.6) says: a capture error -> turn graphs off; a torch.compile error -> turn compile off;
a silent wrong result -> turn both off, then reproduce in fp32 at a small batch to find the op. Its §4.5
table lists when to run eagerly. Here each rung gets a real fault (`inject`), which is diagnosed with
`minivllm.diagnose(exc)` and walked with `LLM(..., fallback="auto")`:

  host_sync    a `.item()` in a decoder layer: fine eagerly, illegal inside a CUDA graph capture (CUDA only)
  untraceable  a data-dependent `if` in a decoder layer: Dynamo cannot trace it with fullgraph=True
  mistraced    a layer whose traced code differs from its eager code: wrong tokens, no error
  count        counts calls of a layer's forward: what a print inside a captured region would show

The fault patches DecoderLayer.forward of the model class for the duration of a `with` block (engines are
built inside it), touching one layer; the original is always restored. Figures, tables, questions and
claims: lab05_views.py and data/lab05.yaml.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

import torch

from minivllm_labs.common import max_positions, quiet_engine_logs, round_floats
from minivllm_labs.lab04 import cache_dir, engine_kwargs, engine_warnings
from minivllm_labs.lab_info import LabInfo

FAULT_LAYER = 1
CALLS: list[int] = []  # appended to by the "count" fault, one entry per call of the faulty layer
KINDS = ("host_sync", "untraceable", "mistraced", "count")


def _cuda() -> bool:
    return torch.cuda.is_available()


@contextmanager
def inject(kind: str, layer: int = FAULT_LAYER) -> Iterator[None]:
    """Patch the decoder layer's forward so that layer `layer` carries fault `kind` (restored on exit)."""
    from minivllm.models.llama import DecoderLayer

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    original = DecoderLayer.forward

    def forward(self, positions, x, residual):
        out, residual = original(self, positions, x, residual)
        if self.self_attn.attn.layer_idx != layer:
            return out, residual
        if kind == "host_sync":  # reads a value back to Python: a host sync (legal eagerly)
            out = out + 0.0 * out.float().abs().amax().item()
        elif kind == "untraceable":  # a Python branch on a tensor's value
            if out.abs().amax() > 1e9:
                out = out.clamp(-1e9, 1e9)
        elif kind == "mistraced":  # the traced program is not the eager one
            if torch.compiler.is_compiling():
                out = -out
        elif kind == "count":
            CALLS.append(1)
        return out, residual

    # Every kind shares the code object of `forward` below, and Dynamo keys what it learned (compiled code,
    # frames it gave up on after a failed trace or too many recompiles) by code object: forget it on the way
    # in and out, or a fault would run with what Dynamo decided for an earlier cell. The engine itself never
    # resets Dynamo (that would wipe other live engines' compiled code); a lab that rewrites model code must.
    torch._dynamo.reset()
    DecoderLayer.forward = forward
    try:
        yield
    finally:
        DecoderLayer.forward = original
        torch._dynamo.reset()


def start(model: str, **kw):
    from minivllm import LLM

    quiet_engine_logs()
    return LLM(**{**engine_kwargs(model), **kw})


PROBE = [{"prompt_token_ids": [3 + (5 * i + 11 * j) % 200 for j in range(6 + 3 * i)]} for i in range(3)]


def greedy(llm, n: int = 8) -> list[list[int]]:
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate(PROBE, sp, use_tqdm=False)]


def _clean(text: str, limit: int = 400) -> str:
    """An error message without paths, addresses or line numbers (stable across machines), shortened."""
    text = re.sub(r"File \"[^\"]+\", line \d+", "File ...", text)
    text = re.sub(r"(/[\w.\-]+)+", "<path>", text)
    text = re.sub(r"0x[0-9a-f]+", "0x...", text)
    return " / ".join(ln.strip() for ln in text.splitlines() if ln.strip())[:limit]


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what caused it ("raise ... from", or raised while handling), outermost first: a
    failed capture raises again when the capture is closed, so the driver's first message sits deepest."""
    out = [exc]
    while len(out) < 8 and (out[-1].__cause__ or out[-1].__context__) is not None:
        out.append(out[-1].__cause__ or out[-1].__context__)
    return out


#: §4.6's rules of thumb, applied literally to the text of an error
HEURISTICS = (("graph", re.compile(r"cudaGraphExec|graphExec", re.I)),
              ("compile", re.compile(r"inductor|dynamo|fx trace|torch\.fx", re.I)))


def handbook_heuristic(message: str | None) -> str:
    """What §4.6 concludes from a message: 'graph', 'compile', 'numerics' (no error at all) or 'none'."""
    if message is None:
        return "numerics"
    return next((layer for layer, rx in HEURISTICS if rx.search(message)), "none")


def _culprit(ladder: list[dict]) -> str:
    """The layer the ladder blames: what the first rung that worked had turned off."""
    ok = next((r["step"] for r in ladder if r["ok"]), None)
    return {"as configured": "none", "CUDA graphs off": "graph", "torch.compile off": "compile",
            "both off": "graph+compile", None: "unknown"}[ok]


# ---- the faults ----------------------------------------------------------------------------------------
FAULT_CONFIG = {  # the engine each fault is planted in
    "host_sync": {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1, 2, 4, 8]},
    "untraceable": {"compilation_config": {"mode": 3}},
    "mistraced": {"compilation_config": {"mode": 2}},
}
#: On a CPU the silent fault's engine runs its Dynamo trace without Inductor (backend "eager", as `locate` and
#: `recompiles` do): the fault is in the traced code, so the tokens, the verify error and the ladder are the
#: same, and a cold Inductor build of the model (about 25 s of C++ compiles on 2 cores) is left out of Run All.
CPU_FAULT_CONFIG = {"mistraced": {"compilation_config": {"mode": 2, "backend": "eager"}}}


def fault_config(kind: str) -> dict:
    """The engine settings `kind` is planted in on this device."""
    return FAULT_CONFIG[kind] if _cuda() else CPU_FAULT_CONFIG.get(kind, FAULT_CONFIG[kind])


def fault_run(model: str, kind: str) -> dict:
    """Plant `kind`, start as configured (the error, or for a silent fault the tokens vs eager), diagnose,
    then start with fallback="auto" (verify=True for the silent one) and record the ladder."""
    from minivllm import diagnose

    kw = fault_config(kind)
    res: dict = {"kind": kind, "config": {k: v for k, v in kw.items()}}
    with cache_dir(), inject(kind), engine_warnings():
        reference = greedy(eager := start(model, enforce_eager=True))
        eager.shutdown()
        try:
            llm = start(model, **kw)
            tokens = greedy(llm)
            llm.shutdown()
            res.update(error=None, raw_error=None, silent=tokens != reference,
                       identical_probes=sum(a == b for a, b in zip(tokens, reference)))
            try:  # the silent fault again, now with the greedy probe against eager at startup
                start(model, verify=True, **kw).shutdown()
            except Exception as e:  # noqa: BLE001 - what verify raises is the measurement
                res["verify_error"] = _clean(f"{type(e).__name__}: {e}")
                exc: BaseException | None = e
            else:
                exc = None
        except Exception as e:  # noqa: BLE001 - the fault's error is the measurement
            exc = e
            chain = [_clean(f"{type(x).__module__}.{type(x).__name__}: {x}") for x in _chain(e)]
            res.update(error=_clean(f"{type(e).__name__}: {e}"), raw_error=chain[-1], chain=chain)
        if exc is not None:
            d = diagnose(exc)
            res["diagnosis"] = {"layer": d.layer, "reason": _clean(d.reason, 200), "suggestion": d.suggestion}
        llm = start(model, fallback="auto", verify=kind == "mistraced", **kw)
        res["ladder"] = [{**r, "error": _clean(r["error"], 160)} if "error" in r else r for r in llm.fallback_report]
        res["tokens_match_eager_after_fallback"] = greedy(llm) == reference
        llm.shutdown()
    res["handbook_heuristic"] = handbook_heuristic(" ".join(res["chain"]) if res.get("chain") else None)
    res["ladder_culprit"] = _culprit(res["ladder"])
    return res


def fault_runs(model: str) -> dict:
    out = {"compile": fault_run(model, "untraceable"), "numerics": fault_run(model, "mistraced")}
    out["graph"] = fault_run(model, "host_sync") if _cuda() else None
    return out


# ---- locating the op: fp32, a small batch, layer by layer ------------------------------------------------
@torch.inference_mode()
def locate(model: str, batch: int = 2, context: int = 8) -> dict:
    """With the mistraced fault planted: run each decoder layer eagerly and traced by Dynamo (backend eager:
    no Inductor, so only the tracing differs) on the same fp32 inputs; then its sub-modules. The first layer
    whose outputs differ while all its sub-modules agree puts the fault in that layer's own code."""
    from minivllm.attention.metadata import set_forward_context
    from minivllm_labs.lab01 import _decode_inputs

    rows = []
    with inject("mistraced"):
        llm = start(model, enforce_eager=True, dtype="float32", max_num_seqs=max(batch, 2))
        runner = llm.model_runner
        net = runner.model.model
        meta = _decode_inputs(runner, batch, context)
        ib = runner.input_batch
        with set_forward_context(meta, runner.backend, runner.kv_caches):
            x, residual = net.embed_tokens(ib.input_ids[:batch]), None
            positions = ib.positions[:batch]
            for i, layer in enumerate(net.layers):
                traced = torch.compile(layer, backend="eager", fullgraph=True, dynamic=False)
                out_e, res_e = layer(positions, x, residual)
                out_t, _ = traced(positions, x, residual)
                h = x if residual is None else x + residual
                subs = {"input_layernorm": lambda: layer.input_layernorm(h),
                        "mlp": lambda: layer.mlp(layer.mlp.gate_up_proj(out_e))}
                sub_diff = {}
                for name, fn in subs.items():
                    traced_fn = torch.compile(fn, backend="eager", fullgraph=True, dynamic=False)
                    sub_diff[name] = (fn() - traced_fn()).abs().max().item()
                rows.append({"layer": i, "max_abs_diff": (out_e - out_t).abs().max().item(),
                             "submodules": sub_diff})
                x, residual = out_e, res_e
        llm.shutdown()
    torch._dynamo.reset()
    first = next((r["layer"] for r in rows if r["max_abs_diff"] > 1e-4), None)
    return round_floats({"dtype": "float32", "batch": batch, "layers": rows, "first_bad_layer": first,
                         "planted_in": FAULT_LAYER})


# ---- the §4.5 rows ---------------------------------------------------------------------------------------
def debug_counts(model: str, new_tokens: int = 16) -> dict:
    """Calls of one layer's Python forward (where a print or breakpoint would run), eager vs FULL graphs."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    out = {"new_tokens": new_tokens}
    modes = {"eager": {"enforce_eager": True}}
    if _cuda():
        modes["FULL graphs"] = FAULT_CONFIG["host_sync"]
    with inject("count"):
        for name, kw in modes.items():
            CALLS.clear()
            llm = start(model, **kw)
            at_start = len(CALLS)
            llm.generate(PROBE[:1], sp, use_tqdm=False)
            out[name] = {"calls_at_startup": at_start, "calls_while_generating": len(CALLS) - at_start,
                         "forward_steps": new_tokens}
            llm.shutdown()
    return out


def kv_memory(model: str) -> dict | None:
    """KV-cache size from gpu_memory_utilization=0.9 for eager, graphs, and level 3 + graphs (CUDA only)."""
    if not _cuda():
        return None
    from minivllm import LLM

    quiet_engine_logs()
    kw = dict(model=model, max_model_len=max_positions(model), enable_prefix_caching=False)
    out = {}
    with cache_dir():
        for name, extra in (("eager", {"enforce_eager": True}), ("graphs", {}),
                            ("level 3 + graphs", {"compilation_config": {"mode": 3}})):
            llm = LLM(**kw, **extra)
            rep = llm.startup_report()
            free, total = torch.cuda.mem_get_info()
            out[name] = {"kv_cache_tokens": rep.kv_cache_tokens, "kv_cache_gib": rep.kv_cache_gib,
                         "capture_gib": rep.memory_gib.get("cudagraph_capture", 0.0),
                         "free_after_startup_gib": free / 2**30}
            llm.shutdown()
    out["total_gib"] = total / 2**30
    freed = out["eager"]["kv_cache_gib"] - out["graphs"]["kv_cache_gib"]
    out["eager_frees_mib"] = freed * 1024
    out["freed_fraction_of_kv"] = freed / out["graphs"]["kv_cache_gib"]
    out["freed_fraction_of_gpu"] = freed / out["total_gib"]
    return round_floats(out)


def recompiles(model: str) -> dict:
    """Requests of 5 new shapes: run-time recompiles with a symbolic batch (level 2) and without (level 1).
    Backend "eager" (Dynamo only) and no graphs (no padding to captured sizes): recompiles are Dynamo's own,
    and the run stays cheap."""
    from minivllm import SamplingParams

    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    out = {}
    for name, level in (("stock torch.compile (level 1)", 1), ("symbolic batch (level 2)", 2)):
        llm = start(model, compilation_config={"mode": level, "backend": "eager"}, cudagraph_mode="NONE")
        for batch, length in ((1, 5), (2, 9), (3, 17), (5, 4), (7, 30)):
            llm.generate([{"prompt_token_ids": [3 + (i + j) % 200 for j in range(length)]} for i in range(batch)],
                         sp, use_tqdm=False)
        out[name] = llm.compile_report()["recompiles_at_runtime"]
        llm.shutdown()
    return out


def run_all(model: str, quick: bool = False) -> dict:
    """All of Lab 05 (H200, random Qwen3-0.6B: about 3 minutes; --quick on a CPU: well under a minute)."""
    out = {"faults": fault_runs(model), "locate": locate(model), "debug": debug_counts(model, 8 if quick else 16),
           "recompiles": recompiles(model), "oom": None if quick else kv_memory(model)}
    out["heuristics"] = heuristics(out["faults"])
    return round_floats(out)


def heuristics(faults: dict) -> list[dict]:
    """Per fault: what §4.6's message rules say, what diagnose() says, what the ladder showed."""
    return [{"fault": k, "handbook_says": v["handbook_heuristic"], "diagnose_says":
             (v.get("diagnosis") or {}).get("layer"), "ladder_blames": v["ladder_culprit"]}
            for k, v in faults.items() if v]


# drawings, tables, questions and claims live next door; the notebook reaches them all as lab05.<name>
from minivllm_labs.lab05_views import (  # noqa: E402,F401
    CLAIMS,
    Q3,
    Q_SILENT,
    RESULTS,
    fault_summary,
    heuristics_table,
    ladder_html,
    ladder_svg,
    ladder_path,
    locate_table,
    scenario_rows,
    scenario_table,
    show,
)

LAB_INFO = LabInfo(
    lab="lab05", notebook="labs/05_fallback_ladder.ipynb", title="When to turn it off, and the fallback ladder",
    title_zh="什么时候关掉，以及降级路径", sections=("§4", "§4.5", "§4.6", "self-test 3"), questions=(Q3, Q_SILENT),
    claims=CLAIMS, code=("minivllm/engine/fallback.py", "minivllm/compilation/diagnose.py",
                         "minivllm/worker/graph_capture.py", "minivllm/compilation/backend.py"))
