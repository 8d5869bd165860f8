"""CustomOp: a layer with a plain-PyTorch forward and, optionally, a hand-written kernel; and the per-engine
selection of which kernels run.

Like vLLM's CustomOp, the choice is made per op name from `compilation_config.custom_ops`: "+rms_norm"
forces the hand-written version, "-rms_norm" the native one (which Inductor can fuse with its neighbours),
"all"/"none" set the default. The hand-written kernels live in minivllm/kernels and are registered with
torch.library, so torch.compile sees each as one opaque op.

Why the selection is an object attached to the model, not a module global: a notebook builds engine after
engine in one process (eager, then graphs, then level 3, ...), and two live engines with different
custom_ops must each run their own kernels. So the engine resolves its spec once into a frozen
`CustomOpSelection` and `attach_custom_ops` hands it to every layer of its own model; a layer's forward reads
only `self.custom_ops`. Building, or failing to build, another engine changes nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

# Every name custom_ops accepts, and what turning it on does. All are on with "all" (the default at level 0).
KNOWN_OPS: dict[str, str] = {
    "rms_norm": "RMSNorm (and residual add + RMSNorm) as one Triton kernel instead of ~10 PyTorch ops",
    "silu_and_mul": "the MLP's SiLU(gate) * up as one Triton kernel",
    "rotary_embedding": "RoPE of q and k in one Triton kernel",
    "qk_norm_rope": "Qwen3's q RMSNorm, k RMSNorm and RoPE in one kernel instead of three",
    "gemv": "Triton matrix-vector products for 1-2 row batches (cuBLAS tiles are built for many rows), "
            "with SiLU-and-mul fused into the down projection's",
    "gemv_norm": "residual add + RMSNorm inside the prologue of the 1-row GEMV after it (two kernels fewer "
                 "per layer; needs gemv and rms_norm)",
    "pdl": "programmatic dependent launch of every Triton kernel (Hopper+): a kernel's programs start while "
           "the previous kernel drains",
    "decode_prefetch": "the decode attention kernel reads seq_lens and its first block ids before the PDL "
                       "wait (the step's host copies wrote them, never a kernel)",
}


@dataclass(frozen=True)
class CustomOpSelection:
    """Which hand-written kernels one engine runs: the names in `enabled` (all others run natively)."""

    enabled: frozenset[str] = frozenset()
    batch_invariant: bool = False  # Linear runs kernels/triton_matmul.py; attention fixes its splits and tiles

    @classmethod
    def from_spec(cls, spec: list[str], has_kernels: bool) -> CustomOpSelection:
        """Resolve a custom_ops list such as ["all", "-silu_and_mul"]; later entries win. has_kernels=False
        (no Triton kernels where this engine runs) selects every op's native version."""
        if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
            raise ValueError(f"compilation_config.custom_ops must be a list such as [\"all\", \"-gemv\"], "
                             f"got {spec!r}")
        enabled: set[str] = set()
        for item in spec:
            if item == "all":
                enabled = set(KNOWN_OPS)
            elif item == "none":
                enabled = set()
            elif isinstance(item, str) and item[:1] in "+-" and item[1:] in KNOWN_OPS:
                (enabled.add if item[0] == "+" else enabled.discard)(item[1:])
            elif isinstance(item, str) and item[:1] in "+-" and len(item) > 1:
                raise ValueError(f"compilation_config.custom_ops: unknown op {item[1:]!r} in {item!r}; "
                                 f"known: {sorted(KNOWN_OPS)}")
            else:
                raise ValueError(f"compilation_config.custom_ops entries must be 'all', 'none', '+name' or "
                                 f"'-name', got {item!r}")
        return cls(frozenset(enabled) if has_kernels else frozenset())

    @classmethod
    def for_engine(cls, config) -> CustomOpSelection:
        """An EngineConfig's selection: its resolved custom_ops; kernels only with the Triton backend.

        batch_invariant: the GEMV (used at 1-2 rows only) is off, and the norms are the Triton kernels (a
        row per reduction, tiles from the row length) at every compile mode, since Inductor picks reduction
        tiles per size; matmuls (kernels/triton_matmul.py) and attention (kernels/ops.py) are opaque ops."""
        sel = cls.from_spec(list(config.custom_ops), has_kernels=config.attention_backend == "triton")
        if not config.batch_invariant:
            return sel
        norms = {"rms_norm", "qk_norm_rope"} if config.attention_backend == "triton" else set()
        return cls((sel.enabled - {"gemv", "gemv_norm"}) | norms, batch_invariant=True)

    def is_enabled(self, name: str) -> bool:
        return name in self.enabled

    @property
    def use_pdl(self) -> bool:
        """Launch the Triton kernels with programmatic dependent launch (kernels/pdl.py)."""
        return "pdl" in self.enabled

    @property
    def gemv_silu_mul(self) -> bool:
        """SiLU-and-mul inside the down projection's GEMV (1-2 rows; more rows: the kernel, then cuBLAS)."""
        return {"gemv", "silu_and_mul"} <= self.enabled

    @property
    def gemv_norm(self) -> bool:
        """Residual add + RMSNorm inside the GEMV that follows it (needs the GEMV and the RMSNorm kernel)."""
        return {"gemv_norm", "gemv", "rms_norm"} <= self.enabled


NATIVE = CustomOpSelection()


class UsesCustomOps(nn.Module):
    """A module whose forward depends on its engine's selection (a class default until one is attached)."""

    custom_ops: CustomOpSelection = NATIVE


def attach_custom_ops(model: nn.Module, selection: CustomOpSelection) -> None:
    """Give every layer of this model this selection; other models keep theirs."""
    for module in model.modules():
        if isinstance(module, UsesCustomOps):
            module.custom_ops = selection


class CustomOp(UsesCustomOps):
    """A layer with forward_native (plain PyTorch) and forward_custom (the kernel of KNOWN_OPS[name])."""

    name: str

    def forward(self, *args, **kwargs):
        if self.custom_ops.is_enabled(self.name):
            return self.forward_custom(*args, **kwargs)
        return self.forward_native(*args, **kwargs)
