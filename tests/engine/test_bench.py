"""The benchmarks run end to end on the CPU with a tiny random checkpoint and tiny settings.

The numbers mean nothing here; what is checked is that every bench runs, returns positive numbers, and
writes JSON carrying its provenance (GPU, versions, commit, date, command, model shape).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from minivllm.bench import latency, throughput
from minivllm.bench.cli import parse_args
from minivllm.tools.make_random_checkpoint import make_random_checkpoint


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> str:
    return str(make_random_checkpoint("tiny", tmp_path_factory.mktemp("bench") / "tiny", dtype="float32"))


def check_provenance(data: dict) -> None:
    p = data["provenance"]
    for key in ("date_utc", "command", "args", "gpu", "torch", "triton", "transformers", "git", "model"):
        assert key in p, key
    assert p["torch"] and p["transformers"] and "T" in p["date_utc"]
    assert set(p["git"]) == {"commit", "dirty"}
    assert p["model"]["num_hidden_layers"] == 2 and p["model"]["architecture"] == "Qwen3ForCausalLM"


def test_latency(ckpt, tmp_path, monkeypatch, capsys):
    picks = {"N=64 K=32 M_PAD=1": {"BLOCK_N": 2, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 2}}
    monkeypatch.setattr(latency, "_gemv_configs", lambda: picks)  # what a GPU run's autotuner would report
    out = tmp_path / "latency.json"
    args = parse_args(["latency", "--model", ckpt, "--batch-sizes", "1,2", "--input-len", "8", "--output-len",
                       "4", "--modes", "eager,eager+async", "--compare", "hf,hf-compile", "--hf-batch-sizes", "1",
                       "--json", str(out)])
    result = latency.main(args)
    data = json.loads(out.read_text())
    check_provenance(data)
    rows = {(r["system"], r["batch"]): r for r in data["rows"]}
    assert set(rows) == {("eager", 1), ("eager", 2), ("eager+async", 1), ("eager+async", 2), ("hf", 1),
                         ("hf-compile", 1)}
    for r in rows.values():
        assert r["ttft_s"] > 0 and r["tpot_s"] > 0 and r["output_tok_s"] > 0
    assert rows[("eager", 1)]["decode_wall_ms_per_step"] > 0
    assert result["modes"]["eager"]["cudagraph_mode"] == "NONE"
    assert result["modes"]["eager"]["async_scheduling"] is False  # off on a CPU by default
    assert result["modes"]["eager+async"]["async_scheduling"] is True
    assert set(data["comparison"]) >= {"batch1_graph_tpot_ms", "batch1_hf_compile_tpot_ms", "speedup_vs_hf_compile"}
    assert data["modes"]["eager"]["gemv_configs"] == picks  # recorded per engine, printed once
    printed = capsys.readouterr().out
    assert "GEMV block sizes in use (autotune" in printed and "N=64 K=32 M_PAD=1" in printed


def test_gemv_autotune_picks_are_listed_per_shape(monkeypatch):
    """What `bench latency` records as "gemv_configs": the autotuner's pick for every shape tuned in the
    process, named by the tuning key (N, K, rows padded, SiLU-and-mul, norm)."""
    import triton

    from minivllm.kernels import triton_gemv

    class FakeTuner:
        cache = {(4096, 1024, 1, False, True, "torch.bfloat16"): triton.Config({"BLOCK_N": 2, "BLOCK_K": 1024},
                                                                               num_warps=4, num_stages=2),
                 (1024, 3072, 2, True, False, "torch.bfloat16"): triton.Config({"BLOCK_N": 4, "BLOCK_K": 2048},
                                                                               num_warps=8, num_stages=2)}

    monkeypatch.setattr(triton_gemv, "_autotuned", FakeTuner())
    assert triton_gemv.autotuned_configs() == {
        "N=1024 K=3072 M_PAD=2 silu_mul": {"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 8, "num_stages": 2},
        "N=4096 K=1024 M_PAD=1 norm": {"BLOCK_N": 2, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 2}}
    monkeypatch.setattr(triton_gemv, "_autotuned", None)
    assert triton_gemv.autotuned_configs() == {} and latency._gemv_configs() == {}  # no autotuning here


def test_latency_on_cpu_labels_rows_by_what_ran(ckpt, capsys):
    """No CUDA: graph modes run eagerly, so they are labelled eager (with the reason) and the duplicates are
    skipped; no row, no "best" and no comparison names a graph mode that did not run."""
    result = latency.main(parse_args(["latency", "--model", ckpt, "--device", "cpu", "--batch-sizes", "1",
                                      "--input-len", "4", "--output-len", "3",
                                      "--modes", "FULL,eager,PIECEWISE,FULL_AND_PIECEWISE@L2+sync"]))
    assert [r["system"] for r in result["rows"]] == ["eager", "eager@L2+sync"]
    assert list(result["modes"]) == ["eager", "eager@L2+sync"] and result["modes"]["eager"]["asked"] == "FULL"
    assert [(n["asked"], n["ran"]) for n in result["not_run_as_asked"]] == [
        ("FULL", "eager"), ("PIECEWISE", "eager"), ("FULL_AND_PIECEWISE@L2+sync", "eager@L2+sync")]
    assert all("CUDA graphs are unavailable on cpu" in n["why"] for n in result["not_run_as_asked"])
    assert result["comparison"]["batch1_graph_mode"] is None
    out = capsys.readouterr().out
    tables = out[out.index("Latency per system"):]
    assert "FULL" not in tables and "PIECEWISE" not in tables and "Goal" not in out and "PASS" not in out
    assert "--modes FULL: runs as eager: CUDA graphs are unavailable on cpu" in out
    assert "--modes PIECEWISE: skipped, eager is measured already" in out


def test_latency_rejects_unknown_mode(ckpt):
    with pytest.raises(ValueError, match="unknown mode"):
        latency.main(parse_args(["latency", "--model", ckpt, "--modes", "eager,FAST"]))
    with pytest.raises(ValueError, match="unknown mode"):
        latency.main(parse_args(["latency", "--model", ckpt, "--modes", "FULL+fast"]))


def test_throughput(ckpt, tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "CHECK_REQUESTS", 2)  # the real check is 16 requests x 32 tokens
    monkeypatch.setattr(throughput, "CHECK_TOKENS", 4)
    out = tmp_path / "throughput.json"
    args = parse_args(["throughput", "--model", ckpt, "--num-requests", "4", "--input-len-range", "8,16",
                       "--output-len-range", "4,8", "--compare", "hf,sync", "--hf-time-cap", "60",
                       "--check-correctness", "--json", str(out)])
    throughput.main(args)
    data = json.loads(out.read_text())
    check_provenance(data)
    m = data["minivllm"]
    assert m["finished_requests"] == 4 and m["output_tokens"] >= 16 and m["output_tok_s"] > 0
    assert m["steps_per_s"] > 0 and m["mean_batch_seqs"] > 0 and m["prefill_steps"] >= 1
    assert 0 < m["prefill_time_frac"] < 1 and m["preemptions"] == 0
    assert all(v > 0 for v in m["ttft_s"].values()) and all(v > 0 for v in m["tpot_s"].values())
    assert data["correctness"]["matching"] == 2  # greedy, fp32: batched == one by one
    assert m["cpu_ms_per_step"] > 0 and set(m["cpu_ms_per_step_parts"]) == {"schedule", "prepare_and_launch",
                                                                           "process_tokens"}
    assert data["minivllm_sync"]["async_scheduling"] is False
    assert data["minivllm_sync"]["output_tokens"] == m["output_tokens"]
    cb = data["hf_continuous_batching"]
    assert cb["finished_requests"] == 4 and cb["output_tokens"] == m["output_tokens"] and not cb["errors"]
    assert data["hf_static_batch"]["output_tok_s"] > 0
    over = data["comparison"]["minivllm_over"]
    assert set(over) == {"hf_continuous_batching", "hf_static_batch", "minivllm_sync"}
    assert over["minivllm_sync"] == pytest.approx(m["output_tok_s"] / data["minivllm_sync"]["output_tok_s"])


def test_logprobs_cost_is_measured_beside_the_plain_run(ckpt, capsys):
    """--logprobs K: each latency batch again with logprobs=K on the same engine, the throughput workload too."""
    result = latency.main(parse_args(["latency", "--model", ckpt, "--batch-sizes", "1", "--input-len", "4",
                                      "--output-len", "3", "--modes", "eager", "--logprobs", "3"]))
    assert [r["system"] for r in result["rows"]] == ["eager", "eager+logprobs=3"]
    assert result["comparison"]["logprobs_tpot_ratio"]["eager"][1] > 0
    assert "eager: TPOT with logprobs=3 / without: batch 1" in capsys.readouterr().out
    data = throughput.main(parse_args(["throughput", "--model", ckpt, "--num-requests", "2", "--input-len-range",
                                       "4,8", "--output-len-range", "3,5", "--logprobs", "2"]))
    assert data["settings"]["logprobs"] == 2
    assert data["minivllm_logprobs"]["output_tokens"] == data["minivllm"]["output_tokens"]
    assert "minivllm, logprobs=2" in capsys.readouterr().out


def test_throughput_bf16_also_checks_in_fp32(ckpt, tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "CHECK_REQUESTS", 2)
    monkeypatch.setattr(throughput, "CHECK_TOKENS", 4)
    args = parse_args(["throughput", "--model", ckpt, "--dtype", "bfloat16", "--num-requests", "2",
                       "--input-len-range", "8,16", "--output-len-range", "4,8", "--check-correctness"])
    data = throughput.main(args)
    assert data["correctness"]["requests"] == 2
    assert data["correctness_fp32"]["matching"] == 2  # fp32: batched == one by one, exactly


def test_workload_matches_nano_vllm():
    """Same draws as nano-vllm's bench.py: random.seed(0), then randint for lengths, ids and max_tokens."""
    import random

    random.seed(0)
    want = [[random.randint(0, 10000) for _ in range(random.randint(100, 1024))] for _ in range(3)]
    want_max = [random.randint(100, 1024) for _ in range(3)]
    assert throughput.workload(3, [100, 1024], [100, 1024], 10000) == (want, want_max)


def test_graph_pool_reading_prefers_the_allocators_segments():
    """The latency bench's "graph pool MiB": the pool's allocator segments after the last capture (FULL and
    PIECEWISE share one pool, so the larger reading is the total), else the free-memory drops summed."""
    from minivllm.bench.latency import _free_memory_drop_mib, _graph_pool_mib

    both = {"FULL": {"total_mib": 232.0, "pool_mib": 180.0}, "PIECEWISE": {"total_mib": 188.0, "pool_mib": 205.0}}
    assert _graph_pool_mib(both) == 205.0 and _free_memory_drop_mib(both) == 420.0
    unknown = {"FULL": {"total_mib": 232.0, "pool_mib": None}}
    assert _graph_pool_mib(unknown) == 232.0
    assert _graph_pool_mib({"FULL": {"total_mib": 232.0, "pool_mib": 0.0}}) == 232.0  # pool id not matched
    assert _graph_pool_mib({}) is None


def test_startup_via_cli(ckpt, tmp_path):
    """Two child processes (cold, warm); also checks the `minivllm bench` wiring."""
    from minivllm.cli import main

    out = tmp_path / "startup.json"
    assert main(["bench", "startup", "--model", ckpt, "--enforce-eager", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    check_provenance(data)
    for kind in ("cold", "warm"):
        phases = data[kind]["phases_s"]
        assert phases["total"] > 0 and phases["load_weights"] > 0 and phases["process_wall"] > phases["total"]
    assert data["ratio_warm_over_cold"]["total"] > 0
    assert data["warm_tokens_equal_cold"] is True and [len(t) for t in data["cold"]["greedy_tokens"]] == [16] * 4


def test_backends_bench_triton_matches_torch_end_to_end(tmp_path):
    """Issue 4 end to end: the Triton kernels (interpreted on a CPU) give the reference's greedy tokens."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "maint"))
    import backends_check

    out = tmp_path / "backends.json"
    backends_check.main(backends_check.parse_args(["--dtype", "float32", "--num-prompts", "3", "--num-tokens",
                                                   "5", "--json", str(out)]))
    result = json.loads(out.read_text())
    assert result["identical"] == result["prompts"] == 3


def test_generate_cli_with_engine_flags(capsys):
    """`minivllm generate` reaches the engine knobs, async scheduling included, and prints JSON lines."""
    from minivllm.cli import main as cli_main

    assert cli_main(["generate", "--prompt", "Q: 17+96= A:", "--temperature", "0", "--max-tokens", "8",
                     "--async-scheduling", "--max-model-len", "64", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["text"].strip() == "113" and line["finish_reason"] == "stop"


def test_profile_categories_and_busy_time():
    from minivllm.bench.common import maint_script

    categorize, short_name, summarize = (getattr(maint_script("gpu_profile"), n)
                                         for n in ("categorize", "short_name", "summarize"))

    assert categorize("nvjet_tst_64x8_64x16_4x1_v_bz_TNT") == "gemm"
    assert categorize("void gemv2T_kernel_val<int, int, __nv_bfloat16, float>(...)") == "gemm"
    assert categorize("_decode_kernel") == "attention" and categorize("_merge_splits_kernel") == "attention"
    assert categorize("_store_kv_kernel") == "kv store" and categorize("_rotary_kernel") == "rope (+q/k norm)"
    assert categorize("triton_red_fused_add_mean_mul_pow_rsqrt_0") == "inductor fused"
    assert categorize("void at::native::reduce_kernel<512, 1, ArgMaxOps<float>>") == "sampler"
    assert categorize("void at::native::vectorized_elementwise_kernel<4, AUnaryFunctor<>>") == "other"
    assert short_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(x)") == \
        "at::native::reduce_kernel"
    # two steps; kernels a and b overlap (another stream), then a 5 us gap before c
    s = summarize([("gemv_x", 0.0, 10.0), ("_rms_norm_kernel", 4.0, 8.0), ("gemv_x", 17.0, 3.0)], steps=2)
    assert s["kernels_per_step"] == 1.5 and s["kernel_us_per_step"] == 10.5
    assert s["busy_us_per_step"] == 7.5 and s["window_us_per_step"] == 10.0 and s["idle_us_per_step"] == 2.5
    assert s["categories"]["gemm"] == {"kernels": 1.0, "us": 6.5, "share": 13 / 21, "us_per_kernel": 6.5}
    assert s["top_kernels"][0]["name"] == "gemv_x"


def test_profile_bench_runs_on_cpu(ckpt, tmp_path):
    from minivllm.bench.common import maint_script

    profile = maint_script("gpu_profile")

    out = tmp_path / "profile.json"
    result = profile.main(parse_args(["profile", "--model", ckpt, "--batch-sizes", "1,3", "--context", "20",
                                      "--steps", "2", "--modes", "eager", "--json", str(out)]))
    data = json.loads(out.read_text())
    check_provenance(data)
    assert [r["batch"] for r in result["runs"]] == [1, 3]
    for r in result["runs"]:
        assert r["step_wall_ms"] > 0 and r["all_steps_decode"]
        assert r["floor"]["weight_mb"] > 0 and r["floor"]["kv_mb"] > 0
    assert result["runs"][1]["floor"]["kv_mb"] == 3 * result["runs"][0]["floor"]["kv_mb"]
    cfg = json.loads((Path(ckpt) / "config.json").read_text())  # K and V, every layer, per context token
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg.get(
        "head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]) * 4  # fp32 on the CPU
    assert result["runs"][0]["floor"]["kv_mb"] * 1e6 == pytest.approx((20 + 4 * 2) * per_token)  # + timed steps


def test_mode_level_keeps_the_command_line_compilation_config():
    assert latency.with_level('{"custom_ops": ["all", "+rope_kv_store"]}', 2) == \
        {"custom_ops": ["all", "+rope_kv_store"], "mode": 2}
    cc = '{"compile_sizes": [64], "inductor_compile_config": {"max_autotune": true}}'  # level-3 / Inductor only
    assert latency.with_level(cc, 3) == {"compile_sizes": [64], "inductor_compile_config": {"max_autotune": True},
                                         "mode": 3}
    assert latency.with_level(cc, 2) == {"inductor_compile_config": {"max_autotune": True}, "mode": 2}
    assert latency.with_level(cc, 0) == {"mode": 0}
    assert latency.with_level(None, 3) == {"mode": 3}


def test_gemv_configs_can_be_pinned_from_a_latency_json(tmp_path, monkeypatch):
    """MINIVLLM_GEMV_CONFIGS replays recorded picks: for a pinned shape the autotuner sees only that config;
    other shapes keep every config; a config outside the autotune set is a clear error."""
    from minivllm.kernels import gemv_configs, triton_gemv

    pick = {"BLOCK_N": 2, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 2}
    recorded = {"modes": {"FULL": {"gemv_configs": {"N=4096 K=1024 M_PAD=1 norm": pick}}}}
    path = tmp_path / "latency.json"
    path.write_text(json.dumps(recorded))
    monkeypatch.setenv("MINIVLLM_GEMV_CONFIGS", str(path))
    monkeypatch.setattr(gemv_configs, "_pins", None)
    configs = triton_gemv._configs()
    meta = dict(M_PAD=1, SILU_MUL=False, HAS_NORM=True)
    chosen = gemv_configs.use_pinned(configs, {"N": 4096, "K": 1024}, **meta)
    assert [(c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages) for c in chosen] == [(2, 1024, 4, 2)]
    unpinned = gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, **meta)  # the rule's candidates
    assert unpinned == gemv_configs.rule_candidates(configs, 1024, 2048, 132) and len(unpinned) < len(configs)
    assert gemv_configs.source() == f"MINIVLLM_GEMV_CONFIGS={path}"
    path.write_text(json.dumps({"gemv_configs": {"N=4096 K=1024 M_PAD=1 norm": pick}, "provenance": {}}))
    monkeypatch.setattr(gemv_configs, "_pins", None)
    assert len(gemv_configs.use_pinned(configs, {"N": 4096, "K": 1024}, **meta)) == 1
    path.write_text(json.dumps({"N=4096 K=1024 M_PAD=1 norm": {**pick, "BLOCK_N": 3}}))  # a plain mapping
    monkeypatch.setattr(gemv_configs, "_pins", None)
    with pytest.raises(ValueError, match="not one of the GEMV's autotune configs"):
        gemv_configs.use_pinned(configs, {"N": 4096, "K": 1024}, **meta)
    monkeypatch.setattr(gemv_configs, "_pins", None)
