"""Compile one tree's paged decode attention kernel for the H200 (sm_90) on any machine, GPU or not, and count
what the generated code does, so that two trees' kernels can be told apart without timing them.

    python scripts/maint/decode_kernel_codegen.py TREE_DIR [TREE_DIR ...] [--json out.json]

Why: a kernel that got slower between two commits either generates different code or runs the same code
differently. Triton compiles for a named target without a device (ptxas ships with it), so this answers the
first question on a CPU. The shape is the one `bench kernels` reports: Qwen3-0.6B's attention (16 query heads,
8 KV heads, head dim 128), bf16, block size 16, unsplit (batch 64 x 2048 tokens), the engine's tile config,
every opt-in variant a tree carried turned off (its default path).
Counted per tree: global loads in the PTX, predicate / 32-bit / 64-bit registers declared, async copies and
MMAs, shared memory, and a hash of the PTX without its debug info (equal hash: the same machine code input).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, re, sys, hashlib
tree = sys.argv[1]
sys.path.insert(0, tree)
import torch, triton
from triton.backends.compiler import GPUTarget
import minivllm.kernels.triton_decode as td
assert td.__file__.startswith(tree), td.__file__
kern = td._decode_kernel
tile_n, num_warps = td.decode_tile_config(128, torch.bfloat16)
const = dict(GROUP=2, GROUP_PAD=16, HEAD_DIM=128, BLOCK_SIZE=16, TILE_N=tile_n, NUM_SPLITS=1, PRECISION="tf32",
             PREFETCH_METADATA=False, USE_PDL=False, ROPE=False, NORM=False, MERGE_IN_KERNEL=False, SPLITS_PAD=1,
             HAS_NEW_KV=False)
types = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "bt_ptr": "*i32", "seq_lens_ptr": "*i32",
         "out_ptr": "*bf16", "part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32", "scale_log2": "fp32",
         # arguments of opt-in variants some trees carried (RoPE inside the kernel, merge in the kernel): off
         "pos_ptr": "*i32", "slot_ptr": "*i64", "counter_ptr": "*i32", "cos_sin_ptr": "*fp32", "qw_ptr": "*bf16",
         "kw_ptr": "*bf16", "knew_ptr": "*bf16", "vnew_ptr": "*bf16", "eps": "fp32"}
unknown = [p for p in kern.arg_names if p not in const and p not in types and "stride" not in p]
if unknown:
    print(json.dumps({"error": f"the kernel takes arguments this script does not model: {unknown}"}))
    sys.exit(0)
sig = {p: "constexpr" if p in const else types.get(p, "i32") for p in kern.arg_names}
src = triton.compiler.ASTSource(fn=kern, signature=sig, constexprs={k: v for k, v in const.items() if k in sig})
c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": 2})
ptx = c.asm["ptx"]
code = "\n".join(ln for ln in ptx.splitlines() if not ln.lstrip().startswith((".loc", ".file", ".b8", ".b32", ".b64"))
                 and "debug" not in ln)
regs = {kind: int(n) for kind, n in re.findall(r"\.reg \.(\w+)\s+%\w+<(\d+)>", ptx)}
print(json.dumps({"triton": triton.__version__, "tile_n": tile_n, "num_warps": num_warps, "shared_bytes": c.metadata.shared,
                  "ld_global": len(re.findall(r"\bld\.global", ptx)), "cp_async": len(re.findall(r"cp\.async", ptx)),
                  "mma": len(re.findall(r"\bmma\.|wgmma", ptx)), "registers_declared": regs,
                  "ptx_sha256": hashlib.sha256(code.encode()).hexdigest()[:12]}))
"""


def codegen(tree: Path) -> dict:
    """Compile in a child process: each tree imports its own minivllm (and under the interpreter, which
    TRITON_INTERPRET=1 would select, nothing is compiled)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tree.resolve())], capture_output=True, text=True,
                          timeout=600, env=env)
    line = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode or not line.startswith("{"):
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(line)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    print(f"{'tree':<28}{'ptx hash':<14}{'ld.global':>10}{'pred regs':>10}{'b32 regs':>9}{'cp.async':>9}{'shared':>8}")
    for tree in a.trees:
        r = {"tree": tree.name, **codegen(tree)}
        rows.append(r)
        if "error" in r:
            print(f"{tree.name:<28}{r['error']}")
            continue
        regs = r["registers_declared"]
        print(f"{tree.name:<28}{r['ptx_sha256']:<14}{r['ld_global']:>10}{regs.get('pred', 0):>10}"
              f"{regs.get('b32', 0):>9}{r['cp_async']:>9}{r['shared_bytes']:>8}")
    if a.json:
        Path(a.json).write_text(json.dumps({"target": "cuda sm_90 (H200), compiled without a GPU", "rows": rows},
                                           indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
