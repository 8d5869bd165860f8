"""The custom-op selection belongs to the engine: resolved from custom_ops once, attached to its own model.

A notebook builds engine after engine in one process; each must keep running the kernels it was built
with, whatever a later engine asks for, and an engine that fails to build must change nothing.
On CPU the Triton kernels run under TRITON_INTERPRET=1 (conftest.py), so the models stay tiny.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from minivllm.layers.custom_op import KNOWN_OPS, NATIVE, CustomOpSelection, UsesCustomOps, attach_custom_ops
from minivllm.layers.layernorm import RMSNorm

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the kernels run under the interpreter


def test_from_spec_resolves_all_none_plus_minus_in_order():
    assert CustomOpSelection.from_spec(["all"], True).enabled == frozenset(KNOWN_OPS)
    assert CustomOpSelection.from_spec(["none"], True) == NATIVE
    sel = CustomOpSelection.from_spec(["all", "-gemv", "-pdl"], True)
    assert not sel.is_enabled("gemv") and not sel.use_pdl and sel.is_enabled("rms_norm")
    assert not sel.gemv_norm and not sel.gemv_silu_mul  # both need the GEMV
    assert CustomOpSelection.from_spec(["none", "+rms_norm"], True).enabled == {"rms_norm"}
    assert CustomOpSelection.from_spec(["+rms_norm", "none"], True) == NATIVE  # later entries win
    assert CustomOpSelection.from_spec(["all"], has_kernels=False) == NATIVE  # no Triton: every op native


@pytest.mark.parametrize("spec,match", [
    (["+rope_attention"], "unknown op 'rope_attention'"),  # a removed op is named, with the known ones
    (["all", "-bogus"], "unknown op 'bogus'"),
    (["rms_norm"], "entries must be 'all', 'none', '\\+name' or '-name'"),
    (["+"], "entries must be"),
    ([3], "entries must be"),
    ("all", "must be a list"),
])
def test_from_spec_rejects_bad_entries(spec, match):
    with pytest.raises(ValueError, match=match):
        CustomOpSelection.from_spec(spec, True)


def _tiny_model(tmp_path, name: str):
    from minivllm.loader import load_model_config
    from minivllm.models.llama import DecoderModel
    from minivllm.tools.make_random_checkpoint import make_random_checkpoint

    cfg = load_model_config(make_random_checkpoint("tiny", tmp_path / name, dtype="float32"))
    model = DecoderModel(cfg)
    for i, p in enumerate(model.parameters()):  # the layers allocate with torch.empty
        p.data.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(i)) * 0.1 + (p.dim() == 1))
    return model.to(DEVICE)


def _spy_norms(monkeypatch) -> Counter:
    """Count (module id, path) of every RMSNorm forward."""
    calls: Counter = Counter()
    for which in ("forward_native", "forward_custom"):
        orig = getattr(RMSNorm, which)

        def wrapped(self, *a, _orig=orig, _which=which, **kw):
            calls[(id(self), _which)] += 1
            return _orig(self, *a, **kw)

        monkeypatch.setattr(RMSNorm, which, wrapped)
    return calls


def _paths(calls: Counter, model) -> set[str]:
    ids = {id(m) for m in model.modules() if isinstance(m, RMSNorm)}
    return {which for (i, which), n in calls.items() if i in ids and n}


def test_two_models_keep_their_own_selection(tmp_path, monkeypatch):
    """Model A with "all", model B with "none", run interleaved: each norm takes its own model's path, and
    attaching B's selection never touched A's modules."""
    from minivllm.attention.metadata import set_forward_context

    a, b = _tiny_model(tmp_path, "a"), _tiny_model(tmp_path, "b")
    sel_a = CustomOpSelection.from_spec(["all"], True)
    attach_custom_ops(a, sel_a)
    attach_custom_ops(b, CustomOpSelection.from_spec(["none"], True))
    assert all(m.custom_ops is sel_a for m in a.modules() if isinstance(m, UsesCustomOps))
    calls = _spy_norms(monkeypatch)
    ids, pos = torch.tensor([3, 1, 4], device=DEVICE), torch.arange(3, device=DEVICE)
    with torch.no_grad(), set_forward_context(None, "triton"):  # no KV cache: attention is the identity
        out_a = a(ids, pos)
        b(ids, pos)
        again = a(ids, pos)
    assert _paths(calls, a) == {"forward_custom"} and _paths(calls, b) == {"forward_native"}
    torch.testing.assert_close(again, out_a, rtol=0, atol=0)


def test_two_live_engines_keep_their_own_selection_and_a_failed_one_changes_nothing(monkeypatch):
    """Two LLMs in one process with different custom_ops: generating with one, then the other, then the first
    again, each engine's norms take its own path; an engine whose custom_ops is refused at construction
    leaves the first engine's selection, path and greedy tokens as they were."""
    from minivllm import LLM, SamplingParams

    # On a CPU an engine selects no kernels (attention runs the PyTorch reference); the elementwise kernels do
    # run here under the interpreter, so let the engines select them as a GPU engine would.
    monkeypatch.setattr(CustomOpSelection, "for_engine", classmethod(
        lambda cls, config: cls.from_spec(config.compilation.resolved_custom_ops(), has_kernels=True)))
    common = dict(max_model_len=64, max_num_seqs=2, enforce_eager=True)
    llm_a = LLM(compilation_config={"custom_ops": ["all", "-gemv"]}, **common)
    llm_b = LLM(compilation_config={"custom_ops": ["none"]}, **common)
    model_a, model_b = llm_a.model_runner.model, llm_b.model_runner.model
    sel_a = next(m.custom_ops for m in model_a.modules() if isinstance(m, UsesCustomOps))
    assert sel_a == CustomOpSelection.from_spec(["all", "-gemv"], True)
    calls = _spy_norms(monkeypatch)
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    prompt = [{"prompt_token_ids": [5, 6, 7, 8]}]

    def tokens(llm) -> list[int]:
        return llm.generate(prompt, params)[0].outputs[0].token_ids

    first = tokens(llm_a)
    tokens(llm_b)
    assert _paths(calls, model_a) == {"forward_custom"} and _paths(calls, model_b) == {"forward_native"}
    with pytest.raises(ValueError, match="rope_kv_store"):
        LLM(compilation_config={"custom_ops": ["all", "+rope_kv_store"]}, **common)
    calls.clear()
    assert tokens(llm_a) == first
    assert _paths(calls, model_a) == {"forward_custom"}
    assert all(m.custom_ops is sel_a for m in model_a.modules() if isinstance(m, UsesCustomOps))


def test_compiled_model_traces_its_selection_with_no_graph_break(tmp_path):
    """Dynamo reads the attached selection like any module attribute: fullgraph traces of one model under
    two selections hold the ops each selects (gemv_norm: the add + norm inside the projection op)."""
    from torch._dynamo.utils import counters

    from minivllm.attention.metadata import set_forward_context

    model = _tiny_model(tmp_path, "c").requires_grad_(False)
    traced = {}
    for spec in (["all"], ["all", "-gemv_norm"]):
        attach_custom_ops(model, CustomOpSelection.from_spec(spec, True))
        torch._dynamo.reset()
        counters.clear()
        seen: set[str] = set()

        def backend(gm, example_inputs, seen=seen):
            seen.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return gm.forward

        compiled = torch.compile(model, fullgraph=True, backend=backend)
        with torch.inference_mode(), set_forward_context(None, "triton"):
            ids, pos = torch.tensor([3], device=DEVICE), torch.tensor([0], device=DEVICE)
            torch.testing.assert_close(compiled(ids, pos), model(ids, pos), rtol=0, atol=0)
        assert sum(counters["graph_break"].values()) == 0
        traced[spec[-1]] = {s.removeprefix("minivllm.").removesuffix(".default") for s in seen
                            if s.startswith("minivllm.")}
    torch._dynamo.reset()
    assert "add_rms_norm_linear" in traced["all"] and "add_rms_norm_linear" not in traced["-gemv_norm"]
    assert "rms_norm" in traced["-gemv_norm"] and "unified_attention" in traced["all"]
