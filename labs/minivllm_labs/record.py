"""Record a lab's measurements without Jupyter, with provenance, for the notebooks to load.

    python -m minivllm_labs.record lab01                       # on a GPU: assets/results/h200/lab01.json
    python -m minivllm_labs.record lab01 --out /tmp/lab01.json # on a CPU (tests the same code path)
    python -m minivllm_labs.record lab01 --model DIR|default|qwen3-0.6b

Why a separate command: a GPU run should be one reproducible line (it is written into the file's
provenance), not "run the notebook on a GPU and copy numbers". A CPU run refuses to overwrite the GPU file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from minivllm_labs.common import REPO_ROOT, describe_model, lab_model
from minivllm_labs.recorded import check_provenance, make_provenance, results_path


def resolve_model(spec: str | None) -> str:
    """None: a random bf16 Qwen3-0.6B on CUDA (a real model's shape), the lab model on CPU.
    'default': the embedded model (or the random tiny one until it exists). A shape name: random weights of
    that shape. Anything else: a checkpoint directory."""
    from minivllm.tools.make_random_checkpoint import SHAPES

    if spec is None:
        return lab_model("qwen3-0.6b") if torch.cuda.is_available() else lab_model()
    if spec == "default":
        return lab_model()
    if spec in SHAPES:
        return lab_model(spec)
    if not (Path(spec) / "config.json").exists():
        raise SystemExit(f"--model {spec!r} is neither 'default', a shape ({', '.join(sorted(SHAPES))}) "
                         f"nor a checkpoint directory with a config.json")
    return spec


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.record", description=__doc__.splitlines()[0])
    from minivllm_labs.lab_info import lab_modules

    ap.add_argument("lab", choices=lab_modules())
    ap.add_argument("--out", help="output JSON (default: assets/results/h200/<lab>.json, CUDA only)")
    ap.add_argument("--model", help="'default', a shape such as qwen3-0.6b, or a checkpoint dir "
                                    "(default: random qwen3-0.6b on CUDA, the lab model on CPU)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (for tests)")
    args = ap.parse_args(argv)
    if args.out is None and not torch.cuda.is_available():
        ap.error(f"no CUDA GPU: refusing to write CPU numbers to "
                 f"{results_path(args.lab).relative_to(REPO_ROOT)}; "
                 f"give --out (e.g. --out /tmp/{args.lab}.json)")
    out = Path(args.out) if args.out else results_path(args.lab)
    model = resolve_model(args.model)
    t0 = time.perf_counter()
    import importlib

    results = importlib.import_module(f"minivllm_labs.lab{args.lab[3:]}").run_all(model, quick=args.quick)
    command = " ".join(["python -m minivllm_labs.record", *argv])
    data = {"lab": args.lab,
            "provenance": make_provenance(command, model=describe_model(model),
                                          seconds=round(time.perf_counter() - t0, 1)),
            **results}
    check_provenance(data, args.lab)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out} in {data['provenance']['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
