"""CustomOp: a layer with a plain-PyTorch forward and, optionally, a hand-written kernel.

Like vLLM's CustomOp, the choice is made per op name from `compilation_config.custom_ops`: "+rms_norm"
forces the hand-written version, "-rms_norm" the native one (which Inductor can fuse with its neighbours),
"all"/"none" set the default. The hand-written kernels live in minivllm/kernels and are registered with
torch.library, so torch.compile sees each as one opaque op.
"""

from __future__ import annotations

from torch import nn

_enabled: dict[str, bool] = {}
_default = False
# Kernels that "all" does not turn on: only "+name" does (new fusions, until a GPU measurement makes them
# the default). rope_kv_store: the RoPE kernel also writes K/V into the paged cache, so attention skips its
# own store. (qk_norm_rope, Qwen3's q_norm + k_norm + RoPE in one launch instead of three, graduated: on the
# H200 it took batch-1 TPOT from 1.55 to 1.42 ms; "-qk_norm_rope" turns it off.)
# (gemv, Triton matrix-vector products for 1-2 rows with SiLU-and-mul fused into the down projection's,
# graduated too: batch-1 TPOT 1.41 -> 1.22 ms on the H200; "-gemv" turns it off.)
# gemv_norm, the residual add + RMSNorm inside the prologue of the GEMV after it (batch 1; at 2 rows the norm
# kernel, then the GEMV), and pdl, programmatic dependent launch of every Triton kernel (not a kernel: a way to
# launch one), graduated together: H200 TPOT at batch 1 / 2 / 8 / 64, 1.220 / 1.368 / 1.359 / 1.877 ms ->
# 1.132 / 1.174 / 1.317 / 1.845 ms in one run.
# decode_prefetch (default): the decode attention kernel reads seq_lens and its first block ids before the
# PDL wait (host copies made before the step's first kernel write them, never a kernel). H200, FULL graphs,
# batch 1 / 2 / 8 / 64, one run: 0.966 / 1.047 / 1.317 / 1.944 -> 0.963 / 1.043 / 1.312 / 1.920 ms.
# Measured and dropped: the GEMV's first weight tile requested before the wait (batch 1: 0.943 ms, against
# 0.923 ms with the decode prefetch instead, same run), and the split-KV merge done by the last split to
# finish inside the decode kernel, no merge kernel (batch 1: 0.966 -> 1.006 ms, same run).
# rope_attention: a pure-decode batch's q/k norm, RoPE and KV store done inside the decode attention kernel
# (no RoPE or store launch). Slower on the H200 (FULL, batch 1 / 2 / 8 / 64: 0.970 / 1.081 / 1.315 / 1.924 ->
# 0.981 / 1.073 / 1.330 / 1.992 ms): the prologue sits on every attention program's critical path.
OPT_IN = {"rope_kv_store", "rope_attention"}


def configure_custom_ops(spec: list[str], has_kernels: bool) -> None:
    """Apply a custom_ops list such as ["all", "-silu_and_mul"] (kernels only exist where Triton runs)."""
    global _default
    _enabled.clear()
    _default = False
    for item in spec:
        if item == "all":
            _default = True
        elif item == "none":
            _default = False
        elif item[:1] in "+-" and len(item) > 1:
            _enabled[item[1:]] = item[0] == "+"
        else:
            raise ValueError(f"compilation_config.custom_ops entries must be 'all', 'none', '+name' or '-name', "
                             f"got {item!r}")
    if not has_kernels:
        _default = False
        for k in _enabled:
            _enabled[k] = False


def custom_op_enabled(name: str) -> bool:
    return _enabled.get(name, _default and name not in OPT_IN)


class CustomOp(nn.Module):
    name = "custom_op"

    def forward(self, *args, **kwargs):
        if custom_op_enabled(self.name) and hasattr(self, "forward_custom"):
            return self.forward_custom(*args, **kwargs)
        return self.forward_native(*args, **kwargs)

    def forward_native(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError
