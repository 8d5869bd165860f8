"""The attention layer and the `minivllm::unified_attention` custom op it calls.

Why a custom op: torch.compile must see attention as ONE opaque node. Dynamo cannot trace into Triton
launchers that read a global batch description, and a paged-KV write traced op by op is slow and
fragile. Registered with torch.library (kernels/op_registry.py), the op is a single node with a fake (shape-only) implementation,
so the whole model traces with zero graph breaks, and level 3 can split the graph right at it.
attention_backend="unregistered" (a lab variant, compilation/variants.py) calls the same Python function,
hidden from Dynamo, to show what happens then.
"""

from __future__ import annotations

import contextlib

import torch

from minivllm.attention.metadata import get_forward_context
from minivllm.config import CUDAGraphMode
from minivllm.kernels import launch, ops
from minivllm.kernels.op_registry import direct_op
from minivllm.layers.custom_op import UsesCustomOps

_MAX_PLANS = 64  # a plan keeps its scratch buffers alive (the split-KV partials): a bound on what they hold
_MAX_LAYER_PLANS = 4096  # these share their shape plan's buffers


def unified_attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                           layer_idx: int, scale: float, use_pdl: bool = False,
                           prefetch_metadata: bool = False, batch_invariant: bool = False) -> None:
    """Store this step's K/V into the paged cache and attend over the cache into `out`. q/k/v/out: [T, heads*D].
    Outside a FULL graph a decode step's Triton kernel does both in one launch (kernels/triton_decode.py).
    use_pdl / prefetch_metadata: the kernels' launch choices, from the layer's custom-op selection;
    batch_invariant: batch-independent splits and tiles (ops.paged_attention).

    The output buffer is an argument (allocated by the code before the op) rather than a result: with the
    forward split at attention, `out` then lives in the previous piece's CUDA-graph memory, at the same
    address on every replay, so the next piece can read it without a copy (vLLM does the same).
    """
    ctx = get_forward_context()
    meta = ctx.attn_metadata
    if meta is None or ctx.kv_caches is None:  # the profile run, before the KV cache exists: identity on q
        out.copy_(q)
        return
    k_cache, v_cache = ctx.kv_caches[layer_idx]
    # "triton" and "unregistered" run the same Triton kernels (they differ only in whether this op is
    # registered); off the GPU, the PyTorch reference runs instead.
    kernels = "torch" if ctx.backend == "torch" or not q.is_cuda else "triton"
    in_graph = ctx.cudagraph_runtime_mode is CUDAGraphMode.FULL  # PIECEWISE graphs leave attention out
    plan_key = layer_key = None
    if kernels == "triton" and meta.decode_only and not meta.unified:  # launches only, no other torch op
        if ctx.cudagraph_runtime_mode is CUDAGraphMode.PIECEWISE and not ctx.capturing:
            # Between PIECEWISE graphs q, k, v and out are outputs of the previous piece's graph, at the same
            # addresses in every step of this graph size, and the layer's caches never move: so the layer's
            # launches are fixed too (launch.BoundPlan), checked on their first run as a graph's inputs
            # are (compilation/cuda_graph.py). A batch-1 PIECEWISE step is host-bound: this is its whole cost.
            if ctx.stream is None:  # a forward runs on one stream: ask the driver once per step, not per layer
                ctx.stream = launch.current_stream()
            layer_key = (layer_idx, ctx.num_padded_tokens, meta.seq_lens.shape[0], ctx.stream)
            bound = meta.layer_plans.get(layer_key)
            if bound is not None and not bound.verified:
                bound.verified = bound.ptrs == (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                k_cache.data_ptr(), v_cache.data_ptr())
                if not bound.verified:
                    raise RuntimeError(f"attention layer {layer_idx}: an input moved between two PIECEWISE steps "
                                       f"of {ctx.num_padded_tokens} tokens (its graph outputs must not)")
            if bound is not None:
                bound.run()
                return
        # A decode step's layers differ only in these addresses: the first layer of a batch shape records its
        # launches, every later layer repeats them (launch.LaunchPlan), in later steps too when the dict is the
        # InputBatch's (its metadata tensors never move). The key holds whatever else the launches depend on.
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr())
        plan_key = (q.shape, q.stride(), k.stride(), v.stride(), out.stride(), q.dtype, k_cache.shape,
                    k_cache.dtype, scale, use_pdl, prefetch_metadata, batch_invariant, in_graph,
                    launch.current_stream(),
                    meta.seq_lens.shape[0])  # the kernel's grid: the batch's sequences, not its padded tokens
        plan = meta.launch_plans.get(plan_key)
        if plan is not None and plan.run(ptrs):
            if layer_key is not None:
                _keep_layer_plan(meta.layer_plans, layer_key, plan, ptrs)
            return
    with launch.record() if plan_key is not None else contextlib.nullcontext() as recorded:
        T, num_kv_heads, head_dim = q.shape[0], k_cache.shape[2], k_cache.shape[3]
        ops.paged_attention(q.view(T, -1, head_dim), k_cache, v_cache, meta, scale, kernels,
                            out=out.view(T, -1, head_dim), use_pdl=use_pdl, prefetch_metadata=prefetch_metadata,
                            batch_invariant=batch_invariant,
                            new_kv=(k.view(T, num_kv_heads, head_dim), v.view(T, num_kv_heads, head_dim)),
                            in_graph=in_graph)
    if plan_key is not None and plan_key not in meta.launch_plans:  # (a strided input would have been copied)
        unit = all(s[-1] == 1 for s in plan_key[1:5])
        if len(meta.launch_plans) >= _MAX_PLANS:  # kept across steps: one per decode batch shape seen
            meta.launch_plans.clear()
        meta.launch_plans[plan_key] = launch.LaunchPlan.build(recorded, ptrs) if unit else None


def _keep_layer_plan(plans: dict, key: tuple, plan: launch.LaunchPlan, ptrs: tuple[int, ...]) -> None:
    if len(plans) >= _MAX_LAYER_PLANS:  # layers x the decode graph sizes seen
        plans.clear()
    plans[key] = launch.BoundPlan(plan, ptrs)


@direct_op("minivllm::unified_attention", mutates_args=("out",))
def unified_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
                      scale: float, use_pdl: bool = False, prefetch_metadata: bool = False,
                      batch_invariant: bool = False) -> None:
    unified_attention_impl(q, k, v, out, layer_idx, scale, use_pdl, prefetch_metadata, batch_invariant)


@unified_attention.register_fake
def _(q, k, v, out, layer_idx, scale, use_pdl=False, prefetch_metadata=False, batch_invariant=False) -> None:
    return None


class Attention(UsesCustomOps):
    """Paged attention over this layer's slice of the KV cache (found by layer index in the forward context)."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float, layer_idx: int) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim, self.scale = num_heads, num_kv_heads, head_dim, scale
        self.layer_idx = layer_idx  # which (k_cache, v_cache) of the forward context is this layer's

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(q)
        unified_attention(q, k, v, out, self.layer_idx, self.scale, self.custom_ops.use_pdl,
                          self.custom_ops.is_enabled("decode_prefetch"), self.custom_ops.batch_invariant)
        return out
