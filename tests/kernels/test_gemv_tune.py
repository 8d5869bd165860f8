"""The GEMV's block-size sources (shipped per GPU, MINIVLLM_GEMV_CONFIGS, autotune) and the search of
scripts/maint/gemv_tune.py, on a CPU: the file lookup with a faked GPU name, the coordinate descent against a
synthetic TPOT."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch

from minivllm.kernels import gemv_configs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "maint"))

import gemv_tune  # noqa: E402
from gemv_tune import parse_args  # noqa: E402

A = {"BLOCK_N": 2, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 2}
B = {"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 8, "num_stages": 2}
C = {"BLOCK_N": 1, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 2}


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A GPU named "NVIDIA H200" whose shipped configs live in tmp_path; the pins re-read afterwards."""
    monkeypatch.setattr(gemv_configs, "CONFIG_DIR", tmp_path / "configs" / "gemv")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.delenv(gemv_configs.ENV, raising=False)
    gemv_configs.set_pins(None)
    yield gemv_configs.CONFIG_DIR
    gemv_configs.set_pins(None)


def test_shipped_configs_are_used_on_their_gpu_and_can_be_switched_off(fake_gpu, tmp_path, monkeypatch):
    assert gemv_configs.pinned_configs() == {} and gemv_configs.source() == "autotune"  # nothing shipped yet
    fake_gpu.mkdir(parents=True)
    shipped = {"N=4096 K=1024 M_PAD=1 norm": A}
    (fake_gpu / "NVIDIA_H200.json").write_text(json.dumps({"gemv_configs": shipped, "provenance": {}}))
    gemv_configs.set_pins(None)
    assert gemv_configs.pinned_configs() == shipped
    assert gemv_configs.source() == "shipped configs/gemv/NVIDIA_H200.json"
    monkeypatch.setenv(gemv_configs.ENV, "autotune")  # every shape autotuned, the shipped file ignored
    gemv_configs.set_pins(None)
    assert gemv_configs.pinned_configs() == {} and gemv_configs.source() == "autotune"
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"N=1024 K=2048 M_PAD=1": B}))
    monkeypatch.setenv(gemv_configs.ENV, str(mine))  # an explicit file wins over the shipped one
    gemv_configs.set_pins(None)
    assert gemv_configs.pinned_configs() == {"N=1024 K=2048 M_PAD=1": B}
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100-SXM4-80GB")
    monkeypatch.delenv(gemv_configs.ENV)
    gemv_configs.set_pins(None)
    assert gemv_configs.pinned_configs() == {}  # another GPU: no file, autotune
    assert gemv_configs.device_config_path("NVIDIA A100-SXM4-80GB").name == "NVIDIA_A100-SXM4-80GB.json"


def test_a_bad_config_file_is_a_clear_error(fake_gpu, tmp_path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    monkeypatch.setenv(gemv_configs.ENV, str(bad))
    with pytest.raises(ValueError, match="not a JSON object of GEMV configs"):
        gemv_configs.pinned_configs()
    bad.write_text(json.dumps({"N=4096 K=1024 M_PAD=1 norm": {**A, "BLOCK_N": 3}}))
    gemv_configs.set_pins(None)
    from minivllm.kernels import triton_gemv

    with pytest.raises(ValueError, match=r"bad.json\): N=4096 K=1024 M_PAD=1 norm: .* not one of"):
        gemv_configs.use_pinned(triton_gemv._configs(), {"N": 4096, "K": 1024}, M_PAD=1, SILU_MUL=False,
                                HAS_NORM=True)


def test_the_shipped_h200_file_names_only_autotune_configs():
    """Every config a shipped file names must be one the kernel can run (use_pinned would raise at launch)."""
    from minivllm.kernels import triton_gemv

    known = [gemv_configs.config_dict(c) for c in triton_gemv._configs()]
    files = sorted(gemv_configs.CONFIG_DIR.glob("*.json"))
    for f in files:
        picks = gemv_configs.read_config_file(f)
        assert picks, f
        for shape, cfg in picks.items():
            assert cfg in known, (f.name, shape, cfg)
            assert gemv_tune.rows_of(shape) in (1, 2), shape


def _synthetic(costs: dict[str, dict[int, float]], noise: float = 0.0, seed: int = 0):
    """TPOT = base + each shape's cost of its config (+ uniform noise), recording what was measured."""
    rng = random.Random(seed)
    seen = []

    def measure(pins: dict, batch: int) -> float:
        seen.append((dict(pins), batch))
        t = 1.0 + sum(costs[s][id_of(c)] for s, c in pins.items() if gemv_tune.rows_of(s) == batch)
        return t + rng.uniform(-noise, noise)

    return measure, seen


def id_of(cfg: dict) -> int:
    return [A, B, C].index(cfg)


def test_coordinate_descent_finds_each_shapes_fastest_config_in_the_step():
    costs = {"N=4096 K=1024 M_PAD=1 norm": {0: 0.03, 1: 0.01, 2: 0.05},
             "N=1024 K=2048 M_PAD=1": {0: 0.02, 1: 0.04, 2: 0.00},
             "N=1024 K=2048 M_PAD=2": {0: 0.00, 1: 0.02, 2: 0.03}}
    start = {s: A for s in costs}
    measure, seen = _synthetic(costs, noise=0.002)
    tuned, trials = gemv_tune.coordinate_descent(start, [A, B, C], measure, finalists=2, repeats=2)
    assert tuned == {"N=4096 K=1024 M_PAD=1 norm": B, "N=1024 K=2048 M_PAD=1": C, "N=1024 K=2048 M_PAD=2": A}
    assert {b for _, b in seen} == {1, 2}  # each shape timed at the batch that runs it
    assert all(b == 2 for p, b in seen if p["N=1024 K=2048 M_PAD=2"] != A)  # only its own batch probes it
    scans = [t for t in trials if t["round"] == "scan"]
    # the 2 finalists (here the incumbent is one of them) re-measured twice each
    assert len(scans) == 3 * 3 and len(trials) == 9 + 3 * 2 * 2
    assert all(p["N=4096 K=1024 M_PAD=1 norm"] == B for p, _ in seen[7:])  # decided, it stays at its best


def test_coordinate_descent_keeps_the_incumbent_unless_a_finalist_beats_it_again():
    start = {"N=4096 K=1024 M_PAD=1 norm": C}
    readings = {0: iter([1.00, 1.01, 1.03]), 1: iter([0.99, 1.01, 1.02]),  # scan: B looks best once ...
                2: iter([1.01, 1.00, 1.00])}  # ... but re-measured, C (the incumbent) is lowest
    tuned, _ = gemv_tune.coordinate_descent(start, [A, B, C], lambda p, b: next(readings[id_of(p[
        "N=4096 K=1024 M_PAD=1 norm"])]), finalists=2, repeats=2)
    assert tuned == start
    flat = {0: iter([1.0] * 3), 1: iter([1.0] * 3), 2: iter([1.0] * 3)}  # all tied: the incumbent stays
    tuned, _ = gemv_tune.coordinate_descent(start, [A, B, C], lambda p, b: next(flat[id_of(p[
        "N=4096 K=1024 M_PAD=1 norm"])]), finalists=2, repeats=2)
    assert tuned == start
    better = {0: iter([1.0] * 3), 1: iter([0.98, 0.98, 0.99]), 2: iter([1.0] * 3)}
    tuned, _ = gemv_tune.coordinate_descent(start, [A, B, C], lambda p, b: next(better[id_of(p[
        "N=4096 K=1024 M_PAD=1 norm"])]), finalists=2, repeats=2)
    assert tuned == {"N=4096 K=1024 M_PAD=1 norm": B}


def test_interleaved_ab_alternates_the_sets():
    order = []
    out = gemv_tune.interleaved_ab({"autotune": {"s": A}, "tuned": {"s": B}}, [1, 2],
                                   lambda p, b: order.append((id_of(p["s"]), b)) or 1.0, repeats=2)
    assert order == [(0, 1), (1, 1), (0, 2), (1, 2)] * 2
    assert out == {"autotune": {1: [1.0, 1.0], 2: [1.0, 1.0]}, "tuned": {1: [1.0, 1.0], 2: [1.0, 1.0]}}


def test_gemv_tune_cli_needs_a_gpu():
    args = parse_args(["--model", "unused", "--save"])
    assert args.batch_sizes == "1,2" and args.save and args.ab_repeats == 5
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        gemv_tune.tune(args)


def test_gemv_tune_main_writes_its_record_and_ships_the_faster_set(fake_gpu, tmp_path, monkeypatch):
    """main() end to end around a fake engine: the autotuner's picks are the start, the synthetic step is
    fastest with B for the qkv shape, the JSON records both sets and the A/B, and --save ships the tuned set
    as configs/gemv/NVIDIA_H200.json, which the next engine then reads; a second --save keeps the shapes of
    another model already in that file."""
    from minivllm.bench import latency
    from minivllm.kernels import triton_gemv

    costs = {"N=4096 K=1024 M_PAD=1 norm": {0: 0.03, 1: 0.00, 2: 0.05}, "N=1024 K=2048 M_PAD=2": {0: 0, 1: 0, 2: 0}}
    monkeypatch.setattr(latency, "engine_for_mode", lambda args, mode, **kw: object())
    monkeypatch.setattr(triton_gemv, "autotuned_configs", lambda: {s: A for s in costs})
    monkeypatch.setattr(triton_gemv, "_configs", lambda: [_Cfg(A), _Cfg(B), _Cfg(C)])
    monkeypatch.setattr(gemv_tune, "_engine_measure", lambda llm, i, o: _synthetic(costs)[0])
    out = tmp_path / "tune.json"
    args = parse_args(["--save", "--ab-repeats", "2", "--json", str(out)])
    result = gemv_tune.tune(args)
    rec = json.loads(out.read_text())
    assert rec["autotune_configs"]["N=4096 K=1024 M_PAD=1 norm"] == A
    assert rec["tuned_configs"]["N=4096 K=1024 M_PAD=1 norm"] == B and rec["kept"] == "tuned"
    assert rec["median_tpot_ms"]["1"] == {"autotune": pytest.approx(1.03), "tuned": pytest.approx(1.0)}
    assert rec["device"] == "NVIDIA H200" and rec["provenance"]["command"]
    shipped = fake_gpu / "NVIDIA_H200.json"
    assert gemv_configs.read_config_file(shipped) == rec["tuned_configs"]  # the first --save made the file
    other_model = {"N=2048 K=2048 M_PAD=1": C}  # tuned earlier for another model: kept by the next --save
    shipped.write_text(json.dumps({"gemv_configs": {**other_model, "N=4096 K=1024 M_PAD=1 norm": C}}))
    result = gemv_tune.tune(args)
    rec = json.loads(out.read_text())
    assert result["saved_to"] == str(shipped)
    assert gemv_configs.read_config_file(shipped) == {**other_model, **rec["tuned_configs"]}
    assert gemv_configs.pinned_configs() == {**other_model, **rec["tuned_configs"]}  # pins reset: file re-read
    with pytest.raises(ValueError, match="GEMV runs batches of 1..2 rows"):
        gemv_tune.tune(parse_args(["--model", "unused", "--batch-sizes", "1,4"]))


class _Cfg:
    """Stands in for triton.Config in config_dict()."""

    def __init__(self, d: dict) -> None:
        self.kwargs = {k: d[k] for k in ("BLOCK_N", "BLOCK_K")}
        self.num_warps, self.num_stages = d["num_warps"], d["num_stages"]


def test_recapture_full_refuses_a_size_never_captured():
    from types import SimpleNamespace

    from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher

    d = CudagraphDispatcher(capture_sizes=[1, 2], mode="FULL_DECODE_ONLY")
    runner = SimpleNamespace(cudagraph_dispatcher=d, full_step=None, graph_pool=None)
    with pytest.raises(ValueError, match="no FULL CUDA graph of batch size 4"):  # nothing to re-capture with
        gemv_tune.recapture_full(runner, 4)
