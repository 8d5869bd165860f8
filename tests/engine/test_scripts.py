"""The GPU helper scripts' CPU-side parts: the A/B summary, the decode probe's table, the codegen comparison.

They run on the device machine where a mistake costs device time, so what can be checked here is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "maint"))

import ab_summary  # noqa: E402
import decode_kernel_probe  # noqa: E402


def _latency(path: Path, tpots: dict[int, float]) -> None:
    rows = [{"system": "FULL_AND_PIECEWISE", "batch": b, "tpot_s": t} for b, t in tpots.items()]
    path.write_text(json.dumps({"rows": rows + [{"system": "eager", "batch": 1, "tpot_s": 1.0}]}))


def test_ab_summary_medians_ratios_and_tolerance(tmp_path):
    _latency(tmp_path / "ab_latency_old_1.json", {1: 0.001, 64: 0.002})
    _latency(tmp_path / "ab_latency_old_2.json", {1: 0.0011, 64: 0.002})
    _latency(tmp_path / "ab_latency_new_1.json", {1: 0.00105, 64: 0.0021})
    for who, tok in (("old", 1000.0), ("new", 1030.0)):
        (tmp_path / f"ab_throughput_{who}_1.json").write_text(json.dumps({"minivllm": {"output_tok_s": tok}}))
    out = ab_summary.summarise(tmp_path, "a", "b")
    assert out["tpot_ms"]["1"]["new_over_old"] == pytest.approx(1.05 / 1.05)  # median of old: 1.05 ms
    assert out["tpot_ms"]["1"]["within_tolerance"]
    assert out["tpot_ms"]["64"]["new_over_old"] == pytest.approx(1.05) and not out["tpot_ms"]["64"]["within_tolerance"]
    assert out["throughput_tok_s"]["new_over_old"] == pytest.approx(1.03)
    assert not out["throughput_tok_s"]["within_tolerance"]


def test_probe_summary_orders_trees_and_marks_the_prefetch_rows(tmp_path, capsys):
    row = {"batch": 64, "context": 2048, "num_splits": 1, "ms": 0.18, "frac_of_copy": 0.72, "ms_graph": 0.18,
           "frac_of_copy_graph": 0.72, "host_us": 30.0}
    for c, extra in (("new", {"prefetch_metadata": True}), ("old", {})):
        (tmp_path / f"bisect_{c}.json").write_text(json.dumps(
            {"commit": c, "decode_kernel_sha256": "abc", "rows": [row, {**row, **extra}]}))
    (tmp_path / "commits.txt").write_text("bisect_old.json old\nbisect_new.json new\n")
    decode_kernel_probe.summary(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[1:]] == ["old", "old", "new", "new"]
    assert lines[-1].split()[2] == "y" and "y" not in lines[-2].split()[:3]


def test_codegen_compiles_this_trees_kernel_without_a_gpu(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "codegen.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "maint" / "decode_kernel_codegen.py"), str(ROOT),
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(out.read_text())["rows"][0]
    assert "error" not in row, row
    assert row["ld_global"] > 0 and row["mma"] > 0 and len(row["ptx_sha256"]) == 12
    assert row["registers_declared"]["pred"] > 0


def test_probe_and_bench_kernels_share_one_graph_replay_timer():
    """The probe loads this checkout's scripts/maint/kernel_bench.py by path (the tree it probes has its own
    minivllm), whose timers bench kernels uses, so a difference between trees is never the timer's; loading it
    imports nothing of minivllm."""
    pytest.importorskip("torch")
    import kernel_bench

    before = {m for m in sys.modules if m.startswith("minivllm")}
    gpu_ms, graph_replay_ms = decode_kernel_probe._timers()
    assert {m for m in sys.modules if m.startswith("minivllm")} == before
    assert gpu_ms.__code__.co_code == kernel_bench.gpu_ms.__code__.co_code
    assert graph_replay_ms.__code__.co_code == kernel_bench.graph_replay_ms.__code__.co_code
    assert kernel_bench._ms is kernel_bench.gpu_ms and kernel_bench._ms_graph is kernel_bench.graph_replay_ms


def test_attention_sweep_reuses_bench_kernels_and_needs_a_gpu():
    """scripts/maint/attention_sweep.py times the split and tile sweeps with bench kernels' cases and timers;
    the sweeps' first configs are the ones the engine runs (the default tile, the split count it picks)."""
    torch = pytest.importorskip("torch")
    import attention_sweep

    from minivllm.kernels.triton_prefill import prefill_tile_config

    assert attention_sweep.PREFILL_SWEEP[0] == prefill_tile_config(4096, 2, 128, torch.bfloat16)
    assert 1 in attention_sweep.SWEEP_SPLITS
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        attention_sweep.main(["--decode", "--prefill"])


def test_gpu_check_parses_and_modes_check_runs_on_a_cpu(tmp_path):
    """gpu_check.sh's `modes` stage: the script parses, and scripts/modes_check.py (one process per mode on
    the GPU) measures and compares with eager on a tiny checkpoint here (--tiny: seconds, not a measurement)."""
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")], check=True)
    sys.path.insert(0, str(ROOT / "scripts"))
    import modes_check

    from tests.helpers import tiny_checkpoint

    ckpt = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path)))
    for mode in ("eager", "PIECEWISE"):
        res = modes_check.main(["--model", ckpt, "--mode", mode, "--tiny", "--max-model-len", "128",
                                "--json", str(tmp_path / f"modes_{mode}.json")])
        assert set(res["tpot_ms"]) == {"1", "4"} and set(res["prefill_ms"]) == {"16"} and len(res["tokens"]) == 6
    cmp = modes_check.main(["--compare", str(tmp_path / "modes_eager.json"), str(tmp_path / "modes_eager.json"),
                            str(tmp_path / "modes_PIECEWISE.json"), "--json", str(tmp_path / "modes.json")])
    pw = cmp["modes"]["PIECEWISE"]
    assert list(cmp["modes"]) == ["PIECEWISE"] and pw["cudagraph_mode"] == "NONE"  # a CPU has no graphs
    assert pw["equal_to_eager"] == pw["prompts"] == 6 and pw["diverged_within_4"] == 0
    # rounds (MODES_ROUNDS): a second run of each mode gives medians, ranges and per-round ratios
    for mode, scale in (("eager", 1.0), ("PIECEWISE", 3.0), ("FULL_DECODE_ONLY", 1.0)):
        for i in (1, 2):
            r = json.loads((tmp_path / f"modes_{'PIECEWISE' if mode != 'eager' else 'eager'}.json").read_text())
            r["mode"] = mode
            r["tpot_ms"] = {b: v * scale * i for b, v in r["tpot_ms"].items()}  # round 2: a host twice as slow
            (tmp_path / f"modes_run_{mode}_{i}.json").write_text(json.dumps(r))
    runs = sorted(str(p) for p in tmp_path.glob("modes_run_*.json"))
    rounds = modes_check.main(["--compare", str(tmp_path / "modes_run_eager_1.json"), *runs, "--json",
                               str(tmp_path / "modes_rounds.json")])
    pw, fdo = rounds["modes"]["PIECEWISE"], rounds["modes"]["FULL_DECODE_ONLY"]
    assert pw["rounds"] == fdo["rounds"] == rounds["eager"]["rounds"] == 2 and pw["same_tokens_every_round"]
    assert pw["tpot_ms_range"]["1"][1] == pytest.approx(2 * pw["tpot_ms_range"]["1"][0], rel=1e-3)
    # the host drift cancels in each round's ratio, as it does not in the ratio of one run against another
    assert rounds["piecewise_over_full_tpot_per_round"]["1"] == [3.0, 3.0]
    # issue 42's order, every engine in this one process (a notebook's case): the same comparison
    seq = modes_check.main(["--model", ckpt, "--modes", "eager,PIECEWISE,PIECEWISE+ops", "--tiny", "--max-model-len",
                            "128", "--json", str(tmp_path / "modes_one_process.json")])
    assert seq["one_process"] and seq["order"] == ["eager", "PIECEWISE", "PIECEWISE+ops"]
    assert list(seq["modes"]) == ["PIECEWISE", "PIECEWISE+ops"] and seq["modes"]["PIECEWISE+ops"]["compile_mode"] == 3
    assert all(m["equal_to_eager"] == m["prompts"] == 6 for m in seq["modes"].values())
    # rounds of that one process (MODES_TOGETHER_ROUNDS): per-round ratios and their medians
    for i, ratio in enumerate((1.4, 1.2, 2.0)):
        round_i = {**seq, "piecewise_over_full_tpot": {"1": ratio}}
        (tmp_path / f"modes_together_{i}.json").write_text(json.dumps(round_i))
    together = modes_check.main(["--together", *sorted(str(p) for p in tmp_path.glob("modes_together_*.json")),
                                 "--json", str(tmp_path / "modes_together.json")])
    assert together["rounds"] == 3 and together["piecewise_over_full_tpot_per_round"] == {"1": [1.4, 1.2, 2.0]}
    assert together["piecewise_over_full_tpot"] == {"1": 1.4} and together["one_process"]
    pw_prefill = seq["modes"]["PIECEWISE"]["prefill_vs_eager"]["16"]
    assert together["prefill_vs_eager_per_round"]["PIECEWISE"]["16"] == [pw_prefill] * 3


def test_host_profile_counts_each_step_of_the_embedded_model(tmp_path):
    """scripts/maint/host_profile.py (gpu_check's MODES_PROFILE) on a CPU: every profiled step runs the model
    once, and the JSON names the functions with their per-step times."""
    pytest.importorskip("torch")
    import host_profile

    out = tmp_path / "host.json"
    result = host_profile.run(host_profile.parse_args(["--mode", "eager", "--steps", "2", "--context", "8",
                                                       "--json", str(out)]))
    host = json.loads(out.read_text())["host"]
    assert result["batch"] == 1 and host["step_ms_under_cprofile"] > 0
    steps = [r for r in host["top_cum"] if r["function"].endswith(":step")]
    assert steps and all(r["calls_per_step"] >= 1 for r in steps)
    assert all(r["own_us"] <= r["cum_us"] + 1e-6 for r in host["top_own"])


def test_host_time_times_each_path_and_stands_in_for_graphs_on_a_cpu(tmp_path):
    """scripts/maint/host_time.py (gpu_check's host-time) on a CPU: a prefill and a decode per path, the
    PIECEWISE path replaying its stand-in graphs (its outputs are those of the capture: only host time counts)."""
    import host_time

    from tests.helpers import tiny_checkpoint

    ckpt = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path)))
    out = tmp_path / "host_time.json"
    host_time.run(host_time.parse_args(["--model", ckpt, "--paths", "eager,piecewise,full", "--prefill", "16",
                                        "--max-model-len", "128", "--repeats", "2", "--profile", "piecewise",
                                        "--compilation-config", '{"backend": "eager"}',  # seconds, not Inductor's
                                        "--cache-dir", str(tmp_path / "cc"), "--json", str(out)]))
    rows = {r["path"]: r for r in json.loads(out.read_text())["paths"]}
    assert list(rows) == ["eager", "piecewise"]  # FULL needs CUDA graphs: left out on a CPU
    assert rows["eager"]["prefill"]["tokens"] == 16 and rows["eager"]["decode"]["tokens"] == 1
    assert rows["piecewise"]["compile_mode"] == 3 and rows["piecewise"]["decode"]["padded_tokens"] == 2
    assert rows["piecewise"]["decode"]["graph_mode"] == "PIECEWISE"
    assert 0 < rows["piecewise"]["prefill"]["host_ms_outside_attention"] < rows["piecewise"]["prefill"]["host_ms"]
    assert any("cuda_graph.py" in w["function"] for w in rows["piecewise"]["prefill"]["profile"]["watched"])


def test_host_time_paired_alternates_live_engines_and_gives_each_round_its_ratio(tmp_path):
    """host_time.py --paired: every path's engine alive at once, the prefill forwards timed in turn, and the
    ratio to the first path taken within each round (the base's own ratio is 1 in every round)."""
    import host_time

    from tests.helpers import tiny_checkpoint

    ckpt = str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path)))
    out = tmp_path / "paired.json"
    host_time.run(host_time.parse_args(["--model", ckpt, "--paths", "eager,compiled", "--paired", "--prefill", "16",
                                        "--max-model-len", "128", "--repeats", "3",
                                        "--compilation-config", '{"backend": "eager"}',
                                        "--cache-dir", str(tmp_path / "cc"), "--json", str(out)]))
    r = json.loads(out.read_text())
    assert r["bench"] == "host_time_paired" and r["base"] == "eager" and r["rounds"] == 3
    assert r["paths"]["eager"]["over_base"] == 1.0 and r["paths"]["eager"]["rounds_at_or_below_base"] == 3
    compiled = r["paths"]["compiled"]
    assert compiled["host_ms"] > 0 and compiled["over_base_q1_q3"][0] <= compiled["over_base"] <= compiled["over_base_q1_q3"][1]


def test_piecewise_host_replays_every_piece_and_calls_attention_once_a_layer(tmp_path):
    """scripts/piecewise_host.py (the CPU proxy of a PIECEWISE decode step's host time) on the engine it
    builds: one replay per piece (layers + 1) and one attention call per layer each step, attention's
    launches repeated from a plan built by an earlier step, bound to each layer's addresses (kernels/launch.py),
    none through Triton's JIT path.
    A subprocess: the script patches Triton and torch.cuda for its whole process."""
    out = tmp_path / "host.json"
    script = [sys.executable, str(ROOT / "scripts" / "piecewise_host.py")]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's compiled-kernel path
    proc = subprocess.run([*script, "--layers", "4", "--steps", "5", "--context", "20", "--json", str(out)],
                          check=False, cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["pieces"] == 5 and r["padded_tokens"] == 2
    assert r["replays_per_step"] == 5 and r["attention_calls_per_step"] == 4
    assert r["jit_launches_per_step"] == 0 and r["direct_launches_per_step"] == 4  # decode, which stores the K/V
    assert r["plan_builds_per_step"] == 0  # the plans of the first steps serve the later ones
    assert r["bound_plan_runs_per_step"] == 4  # each layer's own addresses written in (attention/layer.py)
    assert 0 < r["prepare_us_per_step"] < r["wall_us_per_step"] and 0 < r["cpu_us_per_step"]
    assert 100 < r["python_calls_per_step"] < 2000
    assert any("cuda_graph.py" in f["function"] for f in r["top_own_us"] + r["top_cum_us"])


def test_engine_leak_library_phases_run_the_engines_library_calls_without_an_engine():
    """scripts/maint/engine_leak.py --warm-libraries: the cuBLAS and sampler calls run with no engine, each phase
    followed by the memory figures (None on a CPU, where there is no device memory to read)."""
    import engine_leak
    import torch

    rows = engine_leak.library_phases(torch.device("cpu"), vocab=1000, hidden=32)
    assert [r["phase"] for r in rows] == ["context", "cublas matmuls", "sampler ops"]
    assert all(r["free_gib"] is None and r["outside_allocator_gib"] is None for r in rows)
    engine_leak.load_triton_modules(torch.device("cpu"), 3)  # the CUDA-only phase's kernels, in the interpreter
