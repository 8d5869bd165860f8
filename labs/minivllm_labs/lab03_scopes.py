"""Lab 03, part d: what Dynamo traces per compile scope, and attention registered vs unregistered (self-test 2).

Its own file so lab03.py stays short; `lab03.scopes`, `lab03.registration` and `lab03.SCOPES` are these.
"""

from __future__ import annotations

import torch

from minivllm_labs.lab03 import EngineSetup, _compile_facts, dynamo_view, make_llm, tpot_ms


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


def registration(model: str, backends: tuple[str, ...] = ("auto", "unregistered"), engine: bool = True) -> dict:
    """Self-test 2: one decoder layer under Dynamo with attention registered and unregistered; with
    engine=True also the whole engine at level 1 (Dynamo only: breaks, traces, recompiles after serving
    batches 1 and 8) and at level 2, which traces with fullgraph=True."""
    out = {}
    for ab in backends:
        llm = make_llm(model, EngineSetup(ab, 1 if engine else 0, backend="eager", attention_backend=ab),
                       max_num_seqs=8)
        out[ab] = {}
        if engine:  # serve first: the layer view below resets Dynamo, which would count as recompiles
            for b in (1, 8):
                tpot_ms(llm, b, 4, 1)
            facts = _compile_facts(llm)
            out[ab].update({k: facts[k] for k in ("graphs_traced_at_startup", "recompiles_at_runtime",
                                                  "graph_breaks")})
        out[ab]["layer"] = dynamo_view(llm)
        llm.shutdown()
    if not engine:
        return out
    try:
        llm = make_llm(model, EngineSetup("fullgraph", 2, backend="eager", attention_backend="unregistered"),
                       max_num_seqs=8)
        llm.shutdown()
        out["fullgraph_engine"] = {"ok": True}
    except Exception as e:  # noqa: BLE001 - the startup error is the measurement
        msg = str(e).strip().splitlines()
        out["fullgraph_engine"] = {"ok": False, "error_type": type(e).__name__, "message": msg[0] if msg else ""}
    torch._dynamo.reset()
    return out


