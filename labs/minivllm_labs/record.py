"""Record a lab's measurements without Jupyter, with provenance, for the notebooks to load.

    python -m minivllm_labs.record all                         # on any CUDA GPU: every lab, into
                                                               # assets/results/<gpu>/labNN.json (make labs-record)
    python -m minivllm_labs.record lab01                       # one lab
    python -m minivllm_labs.record lab01 --out /tmp/lab01.json # on a CPU (tests the same code path)
    python -m minivllm_labs.record all --out-dir /tmp/rec --quick
    python -m minivllm_labs.record lab01 --model DIR|default|qwen3-0.6b
    python -m minivllm_labs.record index --out-dir assets/results/h200   # its index.yaml after copying records in

Why a separate command: a GPU run should be one reproducible line (it is written into the file's
provenance), not "run the notebook on a GPU and copy numbers". <gpu> is the device's name as a folder
(`devices.gpu_slug(torch.cuda.get_device_name())`: 'NVIDIA H200' -> h200, the reference), so a GPU the labs
have never seen records beside the H200 without a code change. A CPU run refuses to write there.
`all` runs each lab in its own process (a lab that fails, even with a CUDA error, cannot take the others
down), carries on past a failure, prints a summary naming each failed lab and why, and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from minivllm_labs.common import REPO_ROOT, describe_model, lab_model
from minivllm_labs.devices import results_root, this_gpu_slug
from minivllm_labs.recorded import check_provenance, make_provenance


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


def default_dir() -> Path:
    """assets/results/<this GPU>/ (under $MINIVLLM_RESULTS_ROOT if set)."""
    return results_root() / this_gpu_slug()


def _shown(p: Path) -> str:
    return str(p.relative_to(REPO_ROOT)) if p.is_absolute() and p.is_relative_to(REPO_ROOT) else str(p)


def record_one(lab: str, out: Path, model_spec: str | None, quick: bool, argv: list[str]) -> Path:
    import importlib

    model = resolve_model(model_spec)
    t0 = time.perf_counter()
    results = importlib.import_module(f"minivllm_labs.lab{lab[3:]}").run_all(model, quick=quick)
    command = " ".join(["python -m minivllm_labs.record", *argv])
    data = {"lab": lab,
            "provenance": make_provenance(command, model=describe_model(model),
                                          seconds=round(time.perf_counter() - t0, 1)),
            **results}
    check_provenance(data, lab)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {_shown(out)} in {data['provenance']['seconds']} s")
    return out


def _why(stderr: str) -> str:
    """The line of a failed lab's output that says why: its last exception line, else its last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.split(":")[0].split(".")[-1].endswith(("Error", "Exception", "Exit", "Interrupt")):
            return ln[:300]
    return (lines[-1][:300] if lines else "no output")


def record_all(labs: list[str], out_dir: Path, model: str | None, quick: bool, timeout_s: float) -> int:
    """Every lab in its own process, one after the other; a summary at the end; 1 if any failed."""
    done = []
    for lab in labs:
        cmd = [sys.executable, "-m", "minivllm_labs.record", lab, "--out", str(out_dir / f"{lab}.json")]
        cmd += ["--model", model] if model else []
        cmd += ["--quick"] if quick else []
        print(f"=== {lab}", flush=True)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
            rc, why = p.returncode, "" if p.returncode == 0 else _why(p.stderr or p.stdout)
            sys.stdout.write(p.stdout[-2000:])
        except subprocess.TimeoutExpired:
            rc, why = 124, f"timed out after {timeout_s:.0f} s"
        done.append((lab, rc, round(time.perf_counter() - t0, 1), why))
        if rc:
            print(f"{lab} FAILED ({why}); carrying on", flush=True)
    failed = [d for d in done if d[1]]
    print(f"\nrecorded {len(done) - len(failed)} of {len(done)} labs into {_shown(out_dir)}")
    for lab, rc, secs, why in done:
        print(f"  {lab}  {'ok    ' if rc == 0 else 'FAILED'}  {secs:7.1f} s  {why}")
    update_index(out_dir, [out_dir / f"{lab}.json" for lab, rc, _, _ in done if rc == 0])
    return 1 if failed else 0


def update_index(folder: Path, written: list[Path]) -> None:
    """Keep a folder's index.yaml (the reference's has one) true to the records just written: each lab file's
    command, commit and date as its provenance says; a new file gets an entry naming its lab."""
    index_file = folder / "index.yaml"
    if not index_file.exists() or not written:
        return
    import yaml

    from minivllm_labs.catalog import labs

    titles = {i.lab: i.title for i in labs()}
    text = index_file.read_text()
    header = "".join(ln + "\n" for ln in text.splitlines() if ln.startswith("#"))
    index = yaml.safe_load(text)
    entries = {e["file"]: e for e in index["files"]}
    for path in written:
        prov = json.loads(path.read_text())["provenance"]
        lab = path.stem
        e = entries.get(path.name) or {"file": path.name, "what": f"Lab {lab[3:]}'s recorder: {titles.get(lab, lab)}"}
        e.update(command=prov["command"], commit=prov["commit"] + (" (dirty)" if prov.get("dirty") else ""),
                 date=prov["date"][:10], gpu=prov["gpu"])
        if path.name not in entries:
            index["files"].append(e)
    index["files"].sort(key=lambda e: e["file"])
    index_file.write_text(header + yaml.safe_dump(index, sort_keys=False, allow_unicode=True, width=116))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m minivllm_labs.record", description=__doc__.splitlines()[0])
    from minivllm_labs.lab_info import lab_modules

    ap.add_argument("lab", choices=["all", "index", *lab_modules()])
    ap.add_argument("--out", help="output JSON of one lab (default: assets/results/<gpu>/<lab>.json, CUDA only)")
    ap.add_argument("--out-dir", help="output folder of `all` (default: assets/results/<gpu>/, CUDA only)")
    ap.add_argument("--model", help="'default', a shape such as qwen3-0.6b, or a checkpoint dir "
                                    "(default: random qwen3-0.6b on CUDA, the lab model on CPU)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (for tests)")
    ap.add_argument("--only", help="`all` over these labs only, comma-separated (e.g. lab01,lab07)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a lab may take under `all` (900)")
    args = ap.parse_args(argv)
    if args.lab == "index":
        folder = Path(args.out_dir or results_root() / "h200")
        update_index(folder, sorted(folder.glob("lab[0-9][0-9].json")))
        print(f"updated {_shown(folder / 'index.yaml')}")
        return 0
    given = args.out_dir if args.lab == "all" else args.out
    if args.lab == "all" and args.out:
        ap.error("`all` writes one file per lab: give --out-dir, not --out")
    if given is None and not torch.cuda.is_available():
        ap.error("no CUDA GPU: refusing to write CPU numbers beside the GPU records in "
                 f"{_shown(results_root())}/; give " + ("--out-dir (e.g. --out-dir /tmp/records)" if args.lab == "all"
                                                         else f"--out (e.g. --out /tmp/{args.lab}.json)"))
    if args.lab == "all":
        out_dir = Path(args.out_dir) if args.out_dir else default_dir()
        out_dir.mkdir(parents=True, exist_ok=True)
        labs = args.only.split(",") if args.only else lab_modules()
        unknown = sorted(set(labs) - set(lab_modules()))
        if unknown:
            ap.error(f"--only: no such lab {', '.join(unknown)} (labs: {', '.join(lab_modules())})")
        return record_all(labs, out_dir, args.model, args.quick, args.timeout)
    record_one(args.lab, Path(args.out) if args.out else default_dir() / f"{args.lab}.json", args.model, args.quick,
               argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
