"""Work-arounds for the library versions minivllm runs on, kept apart so the kernels read as kernels.

Each one names the versions it is for, what goes wrong without it and when it can go.
"""

from __future__ import annotations

import os


def fix_interpreter_for_numpy_2_4() -> None:
    """TRITON_INTERPRET only: let `range(start, end)` take device scalars again under NumPy >= 2.4.

    Triton 3.6's interpreter converts a loop bound with int(ndarray of shape (1,)), which NumPy 2.4 rejects
    (triton-lang/triton#9171, fixed upstream after 3.6). Compiled GPU kernels are not affected. Idempotent;
    the kernel modules whose loops have bounds read on the device call it when they are imported.
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.runtime.interpreter as interp

    original = interp._patch_lang_tensor
    if getattr(original, "_minivllm_fixed", False):
        return

    def patched(tensor, scope) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._minivllm_fixed = True
    interp._patch_lang_tensor = patched
