"""The labs' variants of the engine, behind one seam: what the handbook compares, which vLLM does not offer.

  compile_scope "layer" / "ops"   mode 1 compiles each decoder layer, or only the small elementwise layers
                                  (norms, activation), instead of the whole forward (the handbook's three scopes)
  allow_graph_breaks=True         mode 1 without fullgraph: an op Dynamo cannot trace becomes a graph break
                                  instead of a startup error (what a graph break costs)
  attention_backend "unregistered"  the attention op's Python, hidden from Dynamo the way a plain C++/CUDA
                                  extension call is (what registering the op buys)

Why one seam: the engine's own path (compilation/levels.py) has no branch for any of them. compile_model calls
`prepare_model` and `compile_forward` once each; for every configuration vLLM has, both do nothing.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from minivllm.attention.layer import Attention, unified_attention_impl
from minivllm.config import EngineConfig
from minivllm.layers.custom_op import CustomOp

Forward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def prepare_model(model: nn.Module, config: EngineConfig) -> None:
    """attention_backend="unregistered": every attention layer calls the op's Python directly."""
    if config.attention_backend == "unregistered":
        for mod in model.modules():
            if isinstance(mod, Attention):
                mod.__class__ = UnregisteredAttention


def compile_forward(model: nn.Module, forward: Forward, config: EngineConfig, options: dict) -> Forward | None:
    """Mode 1 with another compile scope or with graph breaks allowed: the compiled forward; else None (the
    engine compiles as vLLM does)."""
    c = config.compilation
    if c.compile_scope == "model" and not c.allow_graph_breaks:
        return None
    fullgraph = not c.allow_graph_breaks
    if c.compile_scope == "layer":
        for layer in model.model.layers:
            layer.forward = torch.compile(layer.forward, backend=c.backend, fullgraph=fullgraph, **options)
        return forward
    if c.compile_scope == "ops":  # only the small elementwise layers (norms, activation)
        for m in model.modules():
            if isinstance(m, CustomOp):
                m.forward_native = torch.compile(m.forward_native, backend=c.backend, fullgraph=fullgraph,
                                                 **options)
        return forward
    return torch.compile(forward, backend=c.backend, fullgraph=fullgraph, **options)


@torch._dynamo.disable
def unregistered_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
                           scale: float, use_pdl: bool = False, prefetch_metadata: bool = False,
                           batch_invariant: bool = False) -> None:
    """The attention op's Python, hidden from Dynamo, so every attention call is a graph break.

    Left visible, Dynamo traces into the Triton launchers and must functionalize their in-place writes to
    the KV cache (a global it does not own): on the H200, Inductor then cloned the whole 28 GiB cache
    (8.05e9 elements) every forward and died with an illegal memory access, and on a small model it gave
    wrong tokens. Registering the op (attention/layer.py) is what tells the compiler what it may assume."""
    unified_attention_impl(q, k, v, out, layer_idx, scale, use_pdl, prefetch_metadata, batch_invariant)


class UnregisteredAttention(Attention):
    """Attention through unregistered_attention instead of the registered op."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(q)
        unregistered_attention(q, k, v, out, self.layer_idx, self.scale, self.custom_ops.use_pdl,
                               self.custom_ops.is_enabled("decode_prefetch"), self.custom_ops.batch_invariant)
        return out
