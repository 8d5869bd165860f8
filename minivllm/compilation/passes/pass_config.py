"""PassConfig: which of the engine's graph passes run (`compilation_config={"pass_config": {...}}`), with
vLLM's field names (vllm/config/compilation.py, PassConfig).

Kept free of torch imports: config.py holds one, and the passes themselves (pass_manager.py) load
Inductor's pattern matcher only when a pass is asked for.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

# vLLM's names before its rename, still accepted there with a warning: old name -> the fields it sets
DEPRECATED = {"enable_fusion": ("fuse_norm_quant", "fuse_act_quant"), "enable_noop": ("eliminate_noops",)}
# vLLM's passes that need what a one-GPU engine without FP8 attention lacks (refused by name)
NOT_BUILT = {"fuse_attn_quant": "attention with an FP8 output", "enable_sp": "tensor parallelism",
             "fuse_gemm_comms": "tensor parallelism", "fuse_allreduce_rms": "tensor parallelism",
             "enable_qk_norm_rope_fusion": "the hand-written qk_norm_rope kernel (custom op, no pass)"}


@dataclass(frozen=True)
class PassConfig:
    """The fields in the order the passes run (no-ops first: removing them can let a fusion match, as in
    vLLM's PostGradPassManager). Every pass is off unless asked for (vLLM turns eliminate_noops on by default and the fusions on
    at -O2 for quantized models; here the default compile is what it was without passes)."""

    eliminate_noops: bool = False  # reshape/view to the same shape, slice of the full range -> removed
    fuse_norm_quant: bool = False  # RMSNorm (with or without the residual add) + FP8 per-token quant -> one op
    fuse_act_quant: bool = False  # SiLU-and-mul + FP8 per-token quant -> one op

    def __post_init__(self) -> None:
        for f in fields(self):
            if not isinstance(getattr(self, f.name), bool):
                raise ValueError(f"compilation_config.pass_config.{f.name} must be True or False, got "
                                 f"{getattr(self, f.name)!r}")

    @classmethod
    def from_any(cls, value) -> PassConfig:
        if isinstance(value, cls):
            return cls(**{f.name: getattr(value, f.name) for f in fields(cls)})
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise ValueError(f"compilation_config.pass_config must be a dict such as {{\"fuse_norm_quant\": true}}, "
                             f"got {value!r}")
        known = {f.name for f in fields(cls)}
        out: dict = {}
        for key, val in value.items():
            if key in DEPRECATED:
                warnings.warn(f"pass_config {key!r} is vLLM's old name; use {' and '.join(DEPRECATED[key])}",
                              DeprecationWarning, stacklevel=4)
                out.update({name: val for name in DEPRECATED[key] if name not in value})
            elif key in NOT_BUILT:
                raise ValueError(f"compilation_config.pass_config.{key}: vLLM's pass for {NOT_BUILT[key]}, which "
                                 f"this engine does not have; passes built: {sorted(known)}")
            elif key not in known:
                raise ValueError(f"compilation_config.pass_config has unknown key {key!r}; known: {sorted(known)}")
            else:
                out[key] = val
        return cls(**out)

    def enabled(self) -> list[str]:
        """The passes asked for, in the order they run."""
        return [f.name for f in fields(self) if getattr(self, f.name)]
