"""Work-arounds for the library versions minivllm runs on, kept apart so the kernels read as kernels.

Each one names the versions it is for, what goes wrong without it and when it can go.
"""

from __future__ import annotations

import os


def fix_interpreter() -> None:
    """TRITON_INTERPRET only (the CPU tests): two fixes to Triton 3.6's interpreter. Compiled GPU kernels are
    not affected. Idempotent; the kernel modules call it when they are imported.

    1. Let `range(start, end)` take device scalars again under NumPy >= 2.4: the interpreter converts a loop
       bound with int(ndarray of shape (1,)), which NumPy 2.4 rejects (triton-lang/triton#9171, fixed
       upstream after 3.6).
    2. An fp32 `tl.dot` sums in fp64, then rounds: the interpreter runs it as np.matmul, whose BLAS kernel may
       sum a row's products in an order that depends on the other rows of the tile (seen with OpenBLAS on
       an AVX2 AMD EPYC: a row of the batch-invariant matmul differed from itself alone). On the GPU one MMA
       instruction fixes the order; here the exact-then-rounded sum gives every row the same bits in any
       tile, so the CPU tests check what a kernel controls (its tiles and its loop over K). Goes when the
       interpreter's dot is row-independent by itself.
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy as np
    import triton.runtime.interpreter as interp

    original = interp._patch_lang_tensor
    if getattr(original, "_minivllm_fixed", False):
        return

    def patched(tensor, scope) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._minivllm_fixed = True
    interp._patch_lang_tensor = patched

    create_dot = interp.InterpreterBuilder.create_dot

    def dot_exact_then_rounded(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.dtype == b.data.dtype == d.data.dtype == np.float32:
            product = np.matmul(a.data.astype(np.float64), b.data.astype(np.float64)).astype(np.float32)
            return interp.TensorHandle(product + d.data, d.dtype.scalar)
        return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interp.InterpreterBuilder.create_dot = dot_exact_then_rounded
