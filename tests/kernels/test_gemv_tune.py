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

import gemv_tune
from gemv_tune import parse_args

A = {"BLOCK_N": 2, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 2}
B = {"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 8, "num_stages": 2}
C = {"BLOCK_N": 1, "BLOCK_K": 2048, "num_warps": 4, "num_stages": 2}
P = {"BLOCK_N": 8, "BLOCK_K": 256, "LOOP_STAGES": 3, "num_warps": 4, "num_stages": 3}  # loads pipelined


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
    assert gemv_configs.pinned_configs() == {} and gemv_configs.source() == "rule"  # nothing shipped yet
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
    assert gemv_configs.pinned_configs() == {} and gemv_configs.source() == "rule"  # another GPU: no file
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
    return [A, B, C, P].index(cfg)


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
    monkeypatch.setattr(gemv_tune, "_step_floor", lambda llm, context: None)
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
        self.kwargs = {k: v for k, v in d.items() if k.isupper()}
        self.num_warps, self.num_stages = d["num_warps"], d["num_stages"]


def test_before_after_run_ab_the_start_the_tuned_set_and_the_tuned_set_without_pipelining(fake_gpu, tmp_path,
                                                                                        monkeypatch, capsys):
    """--start shipped: the shipped picks are the "before"; the qkv shape's fastest config is the pipelined
    P, so the A/B has a third set where P is replaced by the best plain config of the scan (B). Here P wins
    over B by 0.01 ms: "tuned" is kept, and --summary prints the before/after row with the byte floor."""
    from minivllm.bench import latency
    from minivllm.kernels import triton_gemv

    qkv = "N=4096 K=1024 M_PAD=1 norm"
    costs = {qkv: {0: 0.05, 1: 0.02, 2: 0.04, 3: 0.01}, "N=1024 K=2048 M_PAD=1": {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}}
    monkeypatch.setattr(latency, "engine_for_mode", lambda args, mode, **kw: object())
    monkeypatch.setattr(triton_gemv, "autotuned_configs", lambda: {s: A for s in costs})
    monkeypatch.setattr(triton_gemv, "_configs", lambda: [_Cfg(c) for c in (A, B, C, P)])
    monkeypatch.setattr(gemv_tune, "_engine_measure", lambda llm, i, o: _synthetic(costs)[0])
    floor = {"weight_mb": 1000.0, "kv_mb": 10.0, "total_mb": 1010.0, "bytes_ms": 0.5, "copy_gbps": 2020.0}
    monkeypatch.setattr(gemv_tune, "_step_floor", lambda llm, context: floor)
    warmed = []
    monkeypatch.setattr(gemv_tune, "warm", lambda shapes, cands, dtype, workers: warmed.append(
        (set(shapes), len(cands), workers)) or [])
    out = tmp_path / "tune.json"
    argv = ["--start", "shipped", "--batch-sizes", "1", "--ab-repeats", "2", "--warm-workers", "3", "--json", str(out)]
    rec = gemv_tune.tune(parse_args(argv))
    assert len(warmed) == 1 and warmed[0][1:] == (4, 3) and len(warmed[0][0]) == 4  # 4 shapes x 4 configs
    assert rec["tuned_configs"][qkv] == P and rec["plain_configs"][qkv] == B
    assert rec["median_tpot_ms"]["1"] == {"shipped": pytest.approx(1.05), "tuned": pytest.approx(1.01),
                                          gemv_tune.PLAIN: pytest.approx(1.02)}
    assert rec["kept"] == "tuned" and rec["gemv_configs"][qkv] == P
    assert rec["floor"] == floor
    assert "% of copy bandwidth: shipped 47.6%, tuned 49.5%" in capsys.readouterr().out
    # a config failing against F.linear is left out of the search (and of the plain set's scan)
    monkeypatch.setattr(gemv_tune, "warm", lambda *a: [(P, "N=40 K=64 M_PAD=1 {...}: relative error 0.5"),
                                                       (C, "N=40 ...: relative error 0.7")])
    bad = gemv_tune.tune(parse_args(argv[:-1] + [str(tmp_path / "bad.json")]))
    assert bad["failed_configs"] == [P, C] and bad["tuned_configs"][qkv] == B
    assert gemv_tune.PLAIN not in bad["median_tpot_ms"]["1"] and "FAILS" in capsys.readouterr().out
    capsys.readouterr()
    rows = gemv_tune.summarize([str(out)])
    verdict = capsys.readouterr().out
    assert "LOOP_STAGES: in 1 of the 2 kept configs -> keep" in verdict
    gemv_tune.summarize([str(tmp_path / "bad.json")])  # the run where P failed: no pipelined config kept
    verdict = capsys.readouterr().out
    assert "FAILED against F.linear" in verdict and verdict.count("can go (measured, not faster)") == 1
    name = Path(rec["provenance"]["args"]["model"] or "default").name
    assert rows == [[name, "1.050", "1.010", "1.020", "0.500", "47.6%", "49.5%", "1/2", "tuned"]]


def test_legacy_autotune_leaves_the_pipelined_configs_out_unless_pinned(monkeypatch):
    from minivllm.kernels import triton_gemv

    monkeypatch.setattr(triton_gemv, "_autotuned", None)
    monkeypatch.setattr(gemv_configs, "use_pinned", gemv_configs.use_pinned)  # restored after the test
    configs = triton_gemv._configs()
    gemv_tune._autotune_without_loop_stages()
    meta = {"M_PAD": 1, "SILU_MUL": False, "HAS_NORM": True}
    try:
        gemv_configs.set_pins({}, label="autotune")
        kept = gemv_configs.use_pinned(configs, {"N": 4096, "K": 1024}, **meta)
        assert kept and len(kept) < len(configs) and all("LOOP_STAGES" not in c.kwargs for c in kept)
        pipelined = next(gemv_configs.config_dict(c) for c in configs if "LOOP_STAGES" in c.kwargs)
        gemv_configs.set_pins({"N=4096 K=1024 M_PAD=1 norm": pipelined})
        assert [gemv_configs.config_dict(c) for c in gemv_configs.use_pinned(configs, {"N": 4096, "K": 1024},
                                                                              **meta)] == [pipelined]
    finally:
        gemv_configs.set_pins(None)


def test_coordinate_descent_past_its_budget_keeps_the_start_of_the_shapes_not_reached():
    costs = {"N=4096 K=1024 M_PAD=1 norm": {0: 0.03, 1: 0.01, 2: 0.05},
             "N=1024 K=2048 M_PAD=1": {0: 0.02, 1: 0.04, 2: 0.0}}
    start = {s: A for s in costs}
    tuned, trials = gemv_tune.coordinate_descent(start, [A, B, C], _synthetic(costs)[0], finalists=1, repeats=1,
                                                 budget_s=0.0)  # the first shape always runs
    assert tuned == {"N=4096 K=1024 M_PAD=1 norm": B, "N=1024 K=2048 M_PAD=1": A}
    assert trials[-1] == {"shape": "N=1024 K=2048 M_PAD=1", "batch": 1, "config": A, "round": "skipped"}
    assert gemv_tune.weight_elements("N=4096 K=1024 M_PAD=1 norm") == 4096 * 1024


def test_decode_gemv_shapes_are_the_shipped_h200_shapes_for_qwen3_0_6b():
    """The shapes the warm-up compiles before tuning are the ones the engine runs: for Qwen3-0.6B at batch
    1-2, exactly the shapes of the shipped H200 file (tuned from a real engine's picks)."""
    from minivllm.models.config import ModelConfig
    from minivllm.tools.make_random_checkpoint import make_config

    d = make_config("qwen3-0.6b", "bfloat16").to_dict()
    cfg = ModelConfig.from_dict({**d, "architectures": ["Qwen3ForCausalLM"]})
    shapes = gemv_tune.decode_gemv_shapes(cfg, [1, 2])
    shipped = gemv_configs.read_config_file(gemv_configs.CONFIG_DIR / "NVIDIA_H200.json")
    assert set(shapes) == set(shipped) and not any(shapes.values())  # Qwen3: no biases
    d = make_config("llama-3.2-1b", "bfloat16").to_dict()
    llama = gemv_tune.decode_gemv_shapes(ModelConfig.from_dict({**d, "architectures": ["LlamaForCausalLM"]}), [1])
    assert set(llama) == {"N=3072 K=2048 M_PAD=1 norm", "N=2048 K=2048 M_PAD=1", "N=16384 K=2048 M_PAD=1 norm",
                          "N=2048 K=8192 M_PAD=1 silu_mul"}


@pytest.mark.parametrize("shape", ["N=40 K=96 M_PAD=1 norm", "N=40 K=96 M_PAD=2 silu_mul", "N=40 K=96 M_PAD=1"])
def test_warm_one_runs_a_pinned_config_and_checks_it(shape):
    """warm_one (the warm-up's job) runs the pinned config and compares with F.linear; on the CPU through
    the interpreter. A config the kernel cannot run comes back as an error text, not an exception."""
    try:
        assert gemv_tune.warm_one((shape, True, P, "float32")) == ""
        bad = {**P, "BLOCK_N": 3}  # not a power of 2: Triton refuses the arange
        assert "N=40 K=96" in gemv_tune.warm_one((shape, False, bad, "float32"))
    finally:
        gemv_configs.set_pins(None)


def test_a_pin_selects_its_autotune_config_and_nothing_else(fake_gpu):
    """A pinned config is one of the autotune configs, handed back as is; a pin with a key no autotune
    config has (a switch the kernel does not have) is refused, not dropped silently."""
    from minivllm.kernels import triton_gemv

    configs = triton_gemv._configs()
    base = gemv_configs.config_dict(configs[0])
    gemv_configs.set_pins({"N=1024 K=2048 M_PAD=1": base})
    meta = {"M_PAD": 1, "SILU_MUL": False, "HAS_NORM": False}
    assert gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, **meta) == [configs[0]]
    gemv_configs.set_pins({"N=1024 K=2048 M_PAD=1": {**base, "UNKNOWN_SWITCH": 1}})
    with pytest.raises(ValueError, match="not one of the GEMV's autotune configs"):
        gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, **meta)


def test_recapture_full_refuses_a_size_never_captured():
    from types import SimpleNamespace

    from minivllm.worker.cudagraph_dispatcher import CudagraphDispatcher

    d = CudagraphDispatcher(full_graphs_by_tokens=False)
    runner = SimpleNamespace(cudagraph_dispatcher=d, full_graph=None, graph_pool=None)
    with pytest.raises(ValueError, match="no FULL CUDA graph of batch size 4"):  # nothing to re-capture with
        gemv_tune.recapture_full(runner, 4)


def test_the_rule_keeps_every_shipped_pick_and_few_configs():
    """An unshipped shape is autotuned over the rule's candidates only (each config timed is compiled first,
    which made a first start on an unshipped shape 3x a shipped one). The rule must keep every config the
    H200 tuning (ranked inside the graph) picked, at the H200's 132 SMs, and time at most 7 of the 26
    configs for the shapes of the Qwen3-0.6B and Llama-3.2-1B models, and something for a tiny model."""
    from minivllm.kernels import triton_gemv

    configs = triton_gemv._configs()
    shipped = gemv_configs.read_config_file(gemv_configs.CONFIG_DIR / "NVIDIA_H200.json")
    for name, pick in shipped.items():
        n, k = (int(part.split("=")[1]) for part in name.split()[:2])
        kept = [gemv_configs.config_dict(c) for c in gemv_configs.rule_candidates(configs, n, k, 132)]
        assert pick in kept, (name, pick, kept)
    llama = [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192)]
    qwen3 = [(6144, 1024), (1024, 2048), (6144, 1024), (1024, 3072)]
    for n, k in llama + qwen3 + [(2048, 1536), (96, 64), (64, 256), (512, 512)]:
        kept = gemv_configs.rule_candidates(configs, n, k, 132)
        assert 1 <= len(kept) <= 7 and len(kept) < len(configs), (n, k, len(kept))
    # fewer SMs (a T4 has 40) keep wider tiles for a narrow weight; more never drops below one config
    assert len(gemv_configs.rule_candidates(configs, 1024, 2048, 40)) >= 6
    assert gemv_configs.rule_candidates(configs, 64, 2048, 132)


def test_the_full_search_is_on_request_and_tuning_time_is_counted(fake_gpu, monkeypatch):
    from minivllm.kernels import triton_gemv

    configs = triton_gemv._configs()
    meta = dict(M_PAD=1, SILU_MUL=False, HAS_NORM=False)
    assert len(gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, **meta)) < len(configs)
    monkeypatch.setenv(gemv_configs.ENV, "autotune")
    gemv_configs.set_pins(None)
    assert gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, **meta) == configs
    recorded = []
    monkeypatch.setattr(gemv_configs, "record_tuning", recorded.append)
    assert triton_gemv._short_bench.__doc__  # the bench function the autotuner calls records its time
    monkeypatch.setattr(triton_gemv.triton.testing, "do_bench", lambda fn, **kw: (fn(), 0.5)[1])
    assert triton_gemv._short_bench(lambda: None) == 0.5
    assert len(recorded) == 1 and recorded[0] >= 0


def test_the_startup_report_shows_autotune_as_its_own_phase():
    """Time the autotuner spends inside a startup phase is moved to a "gemv_autotune" phase (bench startup
    and the startup log show it), so the phases still add up to the wall time."""
    import time

    from minivllm.worker.startup import StartupReport

    rep = StartupReport()
    with rep.phase("cudagraph_capture", torch.device("cpu")):
        time.sleep(0.05)
        gemv_configs.record_tuning(0.03)
    assert rep.phases["gemv_autotune"] == pytest.approx(0.03)
    assert 0.01 < rep.phases["cudagraph_capture"] < 0.05
    with rep.phase("profile_run", torch.device("cpu")):
        pass
    assert rep.phases["gemv_autotune"] == pytest.approx(0.03)  # nothing tuned: unchanged
