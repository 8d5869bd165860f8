"""Lab 09: the kernel timeline's arithmetic (own time, gaps, PDL overlap, bytes per kernel), the views on a
record-shaped result, the graders and the numbers the options quote, the claims' rules, and the recorder's CPU
path on the tiny model."""

import json

import pytest
from minivllm_labs import lab09
from minivllm_labs import lab09_views as views
from minivllm_labs.common import REPO_ROOT, lab_model
from minivllm_labs.lab_info import resolve_key
from minivllm_labs.quiz import grade

GBPS = 4.0  # GB/s: 4000 bytes per us
WEIGHTS = [("l0.qkv", 8000), ("l0.o", 4000), ("l0.gate_up", 16000), ("l0.down", 8000), ("lm_head", 40000)]


def synthetic_step(t0: float) -> list[tuple[str, float, float]]:
    """One step: embedding, rms norm, qkv GEMV, rope, decode attention, o GEMV (launched early: PDL overlap),
    gate_up, down, lm_head (cuBLAS name), sampler."""
    return [("index_select_kernel", t0, 1.0), ("_rms_norm_kernel", t0 + 2, 1.0), ("_gemv_kernel", t0 + 3, 4.0),
            ("_rotary_kernel", t0 + 8, 1.0), ("_decode_kernel", t0 + 9, 2.0), ("_gemv_kernel", t0 + 10, 3.0),
            ("_gemv_kernel", t0 + 14, 5.0), ("_gemv_kernel", t0 + 19, 2.0), ("nvjet_tst_128x64", t0 + 22, 10.0),
            ("argmax_kernel", t0 + 33, 1.0)]


@pytest.fixture(scope="module")
def tl():
    kernels = synthetic_step(0.0) + synthetic_step(100.0)  # two steps: the last one is kept
    return lab09.timeline(kernels, 2, WEIGHTS, kv_bytes_per_layer=2000, gbps=GBPS)


def test_timeline_own_time_gaps_and_overlap(tl):
    ks = tl["kernels"]
    assert len(ks) == 10 and tl["bytes_matched"] and ks[0]["start_us"] == 0
    assert [k["bytes"] for k in ks] == [0, 0, 8000, 0, 2000, 4000, 16000, 8000, 40000, 0]
    o = ks[5]  # starts at 10 while the decode kernel runs to 11: 1 us overlap, own time 13 - 11 = 2
    assert (o["overlap_us"], o["own_us"], o["gap_us"]) == (1.0, 2.0, 0.0)
    assert ks[2]["gap_us"] == 0 and ks[3]["gap_us"] == 1.0  # qkv ends at 7, rope starts at 8
    assert ks[2]["pct_bw"] == pytest.approx(100 * 8000 / 4 / 4000)  # 8000 B in 4 us at 4000 B/us: 50%
    assert ks[8]["pct_bw"] == pytest.approx(100.0)  # 40000 B in 10 us


def test_where_it_goes_adds_up(tl):
    parts = sum(tl[p] for p, _, _ in views.PARTS)
    assert parts == pytest.approx(tl["span_us"]) and tl["span_us"] == pytest.approx(34.0) and tl["host_gaps_us"] == 0
    assert tl["floor_us"] == pytest.approx(78000 / 4000) and tl["overlap_us"] == 1.0
    assert tl["gap_share"] == pytest.approx(tl["gaps_us"] / tl["span_us"])


def test_gaps_around_the_host_copies_are_not_the_replays():
    ks = [("Memcpy HtoD (Pageable -> Device)", 0.0, 1.0), ("_rms_norm_kernel", 6.0, 1.0), ("_rotary_kernel", 8.0, 1.0)]
    t = lab09.timeline(ks, 1, [], 0, GBPS)
    assert (t["host_gaps_us"], t["gaps_us"], t["span_us"]) == (5.0, 1.0, 9.0)
    assert t["gap_share"] == pytest.approx(1 / 9)


def test_gemms_get_no_bytes_when_the_counts_differ():
    t = lab09.timeline(synthetic_step(0.0), 1, WEIGHTS[:-1], 2000, GBPS)
    assert not t["bytes_matched"] and t["gemm_kernels"] == 5 and t["linear_weights"] == 4
    assert sum(k["bytes"] for k in t["kernels"]) == 2000  # the attention kernel's K/V only


def fake_record(tl) -> dict:
    def shape(step_ms: float, floor_ms: float) -> dict:
        return {"model": "x", "batch": 1, "context": 256, "copy_gbps": GBPS, "step_wall_ms": step_ms,
                "step_wall_ms_range": [step_ms - 0.01, step_ms + 0.01],
                "floor": {"weight_mb": 2471.6, "kv_mb": 9.4, "total_mb": 2481.0, "bytes_ms": floor_ms},
                "floor_share": floor_ms / step_ms, "kernels_per_step": 10.0,
                "sweep": [{"batch": b, "step_wall_ms": step_ms * f, "floor_ms": floor_ms}
                          for b, f in ((1, 1.0), (16, 1.1), (64, 1.3), (256, 2.0), (512, 3.5))],
                "timeline": tl, "profile": {"idle_us_per_step": 5.0},
                "pdl_off": {"step_wall_ms": step_ms + 0.05, "step_wall_ms_range": [step_ms + 0.005, step_ms + 0.06],
                            "idle_us_per_step": 9.0}}

    return {"lab": "lab09", "provenance": {"gpu": "NVIDIA H200"}, "copy_gbps": GBPS, "context": 256,
            "roofline": {"peak_bf16_flops": 989e12, "ridge_flops_per_byte": 989e12 / (GBPS * 1e9)},
            "shapes": {"qwen3-06b": shape(0.989, 0.290), "llama-32-1b": shape(1.139, 0.587)}}


def test_views_on_a_record(tl):
    rec = fake_record(tl)
    table = views.floor_table(rec)
    assert "Llama-3.2-1B" in table and "51.5%" in table and "0.587" in table
    fig = views.plot_timeline(rec)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 4 and len(bars[0].x) + len(bars[1].x) == 10 and fig.layout.coloraxis.cmax == 100
    assert list(bars[0].x)[2] == 2.0 and list(bars[0].base)[2] == 11.0  # the o GEMV, from the previous end
    assert list(bars[0].marker.color) == [k["pct_bw"] for k in tl["kernels"] if k["bytes"]]
    assert bars[1].marker.color == "#bdbdbd" and bars[1].showlegend and not bars[3].showlegend
    assert {t.y[0] for t in fig.data if t.type == "scatter"} == {"Qwen3-0.6B", "Llama-3.2-1B"}  # floor ticks
    assert fig.layout.meta["mv_i18n"]["zh"]["layout"]["title.text"]
    where = views.plot_where(rec)
    assert len(where.data) == len(views.PARTS) and sum(t.x[0] for t in where.data) == pytest.approx(tl["span_us"])
    table = views.kernel_table(rec)
    assert "_gemv_kernel (o)" in table and "nvjet_tst_128x64 (lm_head)" in table and "_decode_kernel" in table
    assert "+50 us (within noise" in views.pdl_table(rec)  # the ranges overlap
    assert "[0.979, 0.999]" in views.floor_table(rec)
    assert "256: " in views.sweep_table(rec) and "ridge point: 989 TFLOP/s" in views.sweep_table(rec)
    assert views.first_compute_batch(rec, "llama-32-1b") == 256
    assert len(views.plot_sweep(rec).data) == 2
    for ev in (views.ev_floor, views.ev_where, views.ev_sweep):
        assert ev(None) and "lab09.json" in ev(rec)


def test_views_without_kernels():
    cpu = {"copy_gbps": 8.0, "shapes": {"tiny": {"copy_gbps": 8.0, "step_wall_ms": 5.0, "floor_share": 0.3,
                                                 "floor": {"weight_mb": 13.1, "kv_mb": 1.0, "bytes_ms": 1.5},
                                                 "kernels_per_step": 0, "sweep": []}}}
    assert "minivllm-tiny" in views.floor_table(cpu)
    assert "CPU run" in views.kernel_table(cpu) and "CPU run" in views.where_table(cpu)
    assert "CUDA only" in views.pdl_table(cpu) and views.sweep_table(cpu) == "no measurements"
    assert views.floor_table(None) == "no measurements"


def test_claim_keys_exist_in_a_record_and_rules_decide(tl):
    rec = fake_record(tl)
    by = {c.cid: c for c in views.CLAIMS}
    for c in views.CLAIMS:
        if c.cid == "lab09.graph-launch":  # judged on Lab 01's record of one graph launch (verdicts.py)
            assert c.evidence_file.endswith("lab01.json")
            continue
        assert c.evidence_file == views.RESULTS and c.rule(resolve_key(rec, c.evidence_key)) == c.verdict, c.cid
    # a whole graph launched for the price of a few eager ops saves the launches; one costing as much does not
    launch = by["lab09.graph-launch"].rule
    assert launch(1.0) == "right" and launch(1e6) == "partly" and by["lab09.graph-ops"].rule(0.9) == "partly"


def _rec(file: str, key: str):
    return resolve_key(json.loads((REPO_ROOT / "assets/results/h200" / file).read_text()), key)


def test_the_options_quote_the_records():
    """Every number an option's feedback states is the one its cited record holds."""
    floor = _rec("profile_prefetch.json", "runs.0.floor.bytes_ms")
    step = _rec("profile_prefetch.json", "runs.0.step_wall_ms")
    assert round(floor, 3) == 0.289 and round(step, 3) == 0.981 and round(step / floor, 1) == 3.4
    assert round(_rec("profile_prefetch.json", "runs.0.floor.total_mb")) == 1225
    assert round(_rec("profile_prefetch.json", "copy_gbps")) == 4245
    assert _rec("profile_prefetch.json", "runs.0.kernels_per_step") == 239
    assert round(100 * _rec("kernels.json", "decode.0.frac_of_copy")) == 72
    rows = {1: 27, 2: 28, 16: 31, 256: 35}  # the cited rows of latency.json
    b = {n: _rec("latency.json", f"rows.{i}.decode_wall_ms_per_step") for n, i in rows.items()}
    assert [_rec("latency.json", f"rows.{i}")["batch"] for i in rows.values()] == list(rows)
    assert _rec("latency.json", "rows.27.system") == "FULL_AND_PIECEWISE"
    # q3 quotes the recorded steps (latency.json, and lab09.json's own sweep at a 16-token context), not a typed ratio
    q3 = views.Q_BATCH
    texts = [q3.model_answer, q3.model_answer_zh] + [t for o in q3.options for t in (o.text, o.why, o.text_zh, o.why_zh)]
    for ms in (b[1], b[2], b[16], b[256]):
        assert any(f"{ms:.2f} ms" in t for t in texts), ms
    sweep = _rec("lab09.json", "shapes.qwen3-06b.sweep")
    assert [r["batch"] for r in sweep[:5:4]] == [1, 256]
    assert f"{sweep[0]['step_wall_ms']:.2f} to {sweep[4]['step_wall_ms']:.2f} ms" in q3.model_answer
    ridge = 989e12 / (_rec("lab09.json", "copy_gbps") * 1e9)
    assert round(ridge) == round(_rec("lab09.json", "roofline.ridge_flops_per_byte"))
    assert f"About {ridge:.0f} on the H200" in q3.model_answer


def test_graders():
    assert grade(views.Q_ROOF, "B")[0] and not grade(views.Q_ROOF, "D")[0]
    assert grade(views.Q_WHY, "b")[0] and grade(views.Q_BATCH, "C")[0] and not grade(views.Q_BATCH, "d")[0]
    q = views.Q_FLOOR
    assert grade(q, 8.03e9 * 2 / 3.0e12 * 1e3)[0] and grade(q, "5.35 ms")[0] and grade(q, "5353 us")[0]
    assert not grade(q, "4.79 ms")[0]  # the datasheet's 3.35 TB/s is outside 5%
    ok, text = grade(q, "5 GB")
    assert not ok and "is a size but the answer is a time" in text


def test_shape_of_and_weights_in_order(tmp_path):
    from minivllm.tools.make_random_checkpoint import make_config

    make_config("llama-3.2-1b").to_json_file(tmp_path / "config.json")
    assert lab09.shape_of(str(tmp_path)) == "llama-32-1b"
    assert lab09.shape_of(lab_model()) == "tiny"


def test_run_all_quick_on_the_cpu():
    """The recorder's CPU path: the floor, the step and a short sweep on the tiny model (no kernels here)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the CUDA path is recorded on the GPU")
    res = lab09.run_all(lab_model(), quick=True)
    s = res["shapes"]["tiny"]
    assert s["floor"]["weight_mb"] > 0 and s["floor"]["kv_mb"] > 0 and s["step_wall_ms"] > 0
    assert s["floor_share"] == pytest.approx(s["floor"]["bytes_ms"] / s["step_wall_ms"], rel=1e-2)
    assert [r["batch"] for r in s["sweep"]] == [1, 2] and "timeline" not in s and s["repeats"] == 2
    lo, hi = s["step_wall_ms_range"]
    assert lo <= s["step_wall_ms"] <= hi
    assert "tiny" in views.floor_table(res)
    from minivllm import LLM

    llm = LLM(lab_model(), max_model_len=128)
    try:
        names = [n for n, _ in lab09.weights_in_order(llm.model_runner.model)]
    finally:
        llm.shutdown()
    layers = sum(n.endswith("qkv_proj") for n in names)
    assert names[:4] == ["model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
                         "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj"]
    assert names[-1] == "lm_head" and len(names) == 4 * layers + 1


# ---- what the engine changed: the rows on the recorded archive, checked against the engine's code ---------
@pytest.fixture(scope="module")
def change_rows():
    from minivllm_labs.recorded import archive_members, load_recorded

    archive = archive_members()
    assert archive, "assets/results/h200/archive.json has no members"
    return archive, views.change_rows(archive, load_recorded("lab09"))


def _tpot(archive: dict, src: str, batch: int) -> list[float]:
    """Every run of one side, read here without the views' helpers."""
    name, _, side = src.partition("#")
    name, _, mode = name.partition("@")
    m = archive[name]
    if side:
        return m["ab_tpot_ms"][side][str(batch)]
    return [1e3 * r["tpot_s"] for r in m["rows"] if r["system"] == (mode or "FULL") and r["batch"] == batch]


def _gemv_has_prefetch_switch() -> bool:
    """Whether the Triton GEMV can still load its first weight tile before the PDL wait: the kernel names the
    PREFETCH_W switch, or a pinned config may set it on top of an autotune config (gemv_configs.use_pinned)."""
    import inspect

    from minivllm.kernels import gemv_configs, triton_gemv

    if "PREFETCH_W" in inspect.getsource(triton_gemv):
        return True
    configs, before = triton_gemv._configs(), (gemv_configs._pins, gemv_configs._source)
    gemv_configs.set_pins({"N=1024 K=2048 M_PAD=1": {**gemv_configs.config_dict(configs[0]), "PREFETCH_W": 1}},
                          label="test_lab09")
    try:
        gemv_configs.use_pinned(configs, {"N": 1024, "K": 2048}, M_PAD=1, SILU_MUL=False, HAS_NORM=False)
        return True
    except ValueError:  # "... is not one of the GEMV's autotune configs"
        return False
    finally:
        gemv_configs._pins, gemv_configs._source = before


def _engine_agrees(key: str, kept: bool) -> bool:
    """The claim kept / dropped against the engine's code today: custom_ops defaults, the GEMV's row limits,
    its autotune set and its shipped configs."""
    from minivllm.config import CompilationConfig
    from minivllm.kernels import gemv_configs, triton_gemv
    from minivllm.layers.custom_op import KNOWN_OPS, CustomOpSelection

    default = CustomOpSelection.from_spec(CompilationConfig().resolved_custom_ops(), has_kernels=True).enabled
    kind, _, name = key.partition(":")
    if kind == "op":  # kept: on by default
        return (name in default) == kept
    if kind == "gone":  # dropped: custom_ops no longer accepts it (gemv_prefetch: nor has the GEMV the switch)
        return (name in KNOWN_OPS or (name == "gemv_prefetch" and _gemv_has_prefetch_switch())) == kept
    if key == "gemv_rows":  # the GEMV serves 1-2 rows; 4 and 8 go to cuBLAS
        return (triton_gemv.DISPATCH_MAX_M >= 4) == kept
    if key == "norm_rows":  # the fused norm serves 1 row
        return (triton_gemv.NORM_MAX_M >= 2) == kept
    if key == "gemv_norm_epilogue":  # today's design: add and norm both in the prologue
        return ("prologue" in KNOWN_OPS["gemv_norm"] and "epilogue" not in KNOWN_OPS["gemv_norm"]) != kept
    if key == "narrow_tiles":
        narrow = [c for c in triton_gemv._configs() if c.kwargs["BLOCK_N"] <= 4 and c.kwargs["BLOCK_K"] >= 1024]
        return bool(narrow) == kept
    if key == "shipped_configs":
        return gemv_configs.device_config_path("NVIDIA H200").exists() == kept
    raise AssertionError(f"no engine check for {key!r}")


def test_every_change_has_a_row_and_its_verdict_is_the_engines(change_rows):
    archive, rows = change_rows
    assert [r["change"] for r in rows] == list(views.CHANGES)
    for r in rows:
        c = r["change"]
        assert _engine_agrees(c.engine, c.kept), c.name
        assert r["verdict"].startswith("kept in main" if c.kept else "dropped")
        assert all(name in archive or (REPO_ROOT / "assets/results/h200" / name).exists()
                   for name in r["records"]), r["records"]


def test_the_engine_check_can_fail(monkeypatch):
    assert not _engine_agrees("op:pdl", False) and not _engine_agrees("gone:decode_merge", True)
    assert not _engine_agrees("gemv_rows", True) and not _engine_agrees("narrow_tiles", False)
    assert not _engine_agrees("gone:gemv_prefetch", True)
    from minivllm.kernels import gemv_configs

    # a pin filter that let a PREFETCH_W pin through (as gemv_configs.PIN_ONLY did) brings the switch back
    monkeypatch.setattr(gemv_configs, "use_pinned", lambda configs, named_args, **kw: configs[:1])
    assert _gemv_has_prefetch_switch() and not _engine_agrees("gone:gemv_prefetch", False)


def test_every_ratio_is_after_over_before_from_the_files(change_rows):
    archive, rows = change_rows
    for r in rows:
        c = r["change"]
        assert r["cells"], c.name
        for cell in r["cells"]:
            if c.before[0].startswith("lab09:"):
                continue  # checked below
            b = [v for s in c.before for v in _tpot(archive, s, cell["batch"])]
            a = [v for s in c.after for v in _tpot(archive, s, cell["batch"])]
            assert cell["before"]["lo"] == min(b) and cell["before"]["hi"] == max(b)
            assert cell["after"]["lo"] == min(a) and cell["after"]["hi"] == max(a)
            if r["paired"]:
                assert cell["ratio"] == pytest.approx(cell["after"]["median"] / cell["before"]["median"])
                if len(b) == 1 and len(a) == 1:
                    assert cell["ratio"] == pytest.approx(a[0] / b[0]) and cell["measured"] == "one run each"
            else:
                assert cell["ratio"] is None and cell["measured"] == "not paired"


def test_pairs_not_measured_in_one_run_get_no_ratio(change_rows):
    archive, rows = change_rows
    for r in rows:
        commits = {str((archive[s.split("#")[0].split("@")[0]]["provenance"].get("git") or {}).get("commit"))[:7]
                   for s in (*r["change"].before, *r["change"].after) if not s.startswith("lab09:")}
        if len(commits) > 1:
            assert not r["paired"] and "not one run" in r["how"], r["name"]
    unpaired = [r["name"] for r in rows if not r["paired"]]
    assert len(unpaired) == 2 and any("rope_kv_store" in n for n in unpaired)
    text = views.changes_table(rows)
    assert text.count(": no ratio") == sum(len(r["cells"]) for r in rows if not r["paired"])


def test_the_spread_decides_faster_and_slower(change_rows):
    _, rows = change_rows
    for r in rows:
        for cell in r["cells"]:
            b, a, m = cell["before"], cell["after"], cell["measured"]
            if m == "faster":
                assert a["hi"] < b["lo"]
            elif m == "slower":
                assert a["lo"] > b["hi"]
            elif m == "within the spread":
                assert a["lo"] <= b["hi"] and b["lo"] <= a["hi"]
    # a dropped change is never a clean win, and what main keeps was measured faster beyond the spread somewhere
    for r in rows:
        if not r["kept"]:
            assert not all(x["measured"] == "faster" for x in r["cells"]), r["name"]
    by_op = {}
    for r in rows:
        if r["kept"] and (r["change"].engine.startswith("op:") or r["change"].engine in ("narrow_tiles", "shipped_configs")):
            by_op.setdefault(r["change"].engine, []).append(r)
    for engine, rs in by_op.items():
        assert any(x["ratio"] and x["ratio"] < 1 for r in rs for x in r["cells"] if x["batch"] == 1), engine
    pdl = [r for r in rows if r["records"] == ["lab09.json"]]
    assert len(pdl) == 2 and all(r["cells"][0]["measured"] == "faster" for r in pdl)


def test_spread_and_pairing_rules():
    one = {"median": 1.0, "lo": 1.0, "hi": 1.0, "n": 1}
    assert views._measured(one, {**one, "median": 0.5, "lo": 0.5, "hi": 0.5}) == "one run each"
    b = {"median": 1.0, "lo": 0.99, "hi": 1.01, "n": 2}
    assert views._measured(b, {"median": 0.98, "lo": 0.97, "hi": 0.985, "n": 2}) == "faster"
    assert views._measured(b, {"median": 1.0, "lo": 0.995, "hi": 1.02, "n": 2}) == "within the spread"
    assert views._measured(b, {"median": 1.03, "lo": 1.02, "hi": 1.04, "n": 1}) == "slower"
    run = {"commit": "abc1234", "date": "2026-11-30T05:00:00+00:00", "call": None}
    assert views._pairing([run], [{**run, "date": "2026-11-30T05:01:00+00:00"}])[0]
    assert not views._pairing([run], [{**run, "date": "2026-11-30T07:00:00+00:00"}])[0]
    assert not views._pairing([run], [{**run, "commit": "def5678"}])[0]
    assert views.changes_table([]).startswith("no archived") and views.change_rows(None) == []


def test_goals_read_the_record(tl):
    from minivllm_labs.recorded import load_recorded

    rec = load_recorded("lab09")
    rows = {r["model"]: r for r in views.goal_rows(rec)}
    q, llama = rows["Qwen3-0.6B"], rows["Llama-3.2-1B"]
    s = rec["shapes"]
    assert q["value"] == s["qwen3-06b"]["step_wall_ms"] and q["over"] == pytest.approx(q["value"] / 0.80 - 1)
    assert llama["value"] == s["llama-32-1b"]["floor_share"] and llama["of_goal"] == pytest.approx(llama["value"] / 0.70)
    for key, r in (("qwen3-06b", q), ("llama-32-1b", llama)):
        gemm = [k for k in s[key]["timeline"]["kernels"] if k["category"] == "gemm"]
        assert r["gemm_kernels"] == len(gemm) == s[key]["timeline"]["gemm_kernels"]
        assert r["gemm_ms"] == pytest.approx(sum(k["own_us"] for k in gemm) / 1e3)
        assert r["pdl_off_ms"] == s[key]["pdl_off"]["step_wall_ms"]
    assert llama["cap_share"] < 0.70  # the measured bound: these GEMMs alone cannot reach the goal
    text = views.goals_table(rec)
    assert f"{100 * q['over']:.0f}% over" in text and "below the goal" in text and "PDL off" in text
    assert views.goals_table(fake_record(tl)) and "no kernel timeline" in views.goals_table(None)
