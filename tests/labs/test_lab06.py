"""Lab 06: the measurements on the engine's own block manager and scheduler (CPU, tiny model), the figures and
tables on those results, the graders, and the claims' rules."""

import pytest

from minivllm_labs import lab06, lab08
from minivllm_labs import lab06_views as views
from minivllm_labs.common import lab_model


@pytest.fixture(scope="module")
def quick():
    return lab06.run_all(lab_model(), quick=True)


def test_kv_bytes_per_token_counts_kv_heads():
    assert lab06.kv_bytes_per_token(28, 8, 128, 2) == 114688  # Qwen3-0.6B, bf16
    assert lab06.kv_bytes_per_token(28, 16, 128, 2) == 2 * 114688


def test_fragmentation_counts_empty_slots_of_the_last_block():
    f = lab06.fragmentation([1, 8, 9, 33], (8, 16))
    r8, r16 = f["rows"]
    assert (r8["blocks"], r8["slots"], r8["tokens"], r8["wasted_slots"]) == (9, 72, 51, 21)
    assert (r16["blocks"], r16["slots"], r16["wasted_slots"]) == (6, 96, 45)
    std = lab06.fragmentation(lab06.standard_lengths(lab06.STANDARD_WORKLOAD))
    waste = [r["waste_pct"] for r in std["rows"]]
    assert waste == sorted(waste) and all(r["wasted_per_seq"] < r["block_size"] for r in std["rows"])
    assert std["block32_minus_block16_waste_pct"] > 0


def test_capture_sizes_do_not_depend_on_block_size():
    sizes = {bs: lab06.capture_sizes_from_config(bs, 8192) for bs in (8, 16, 32, 64, 128)}
    assert len({tuple(s) for s in sizes.values()}) == 1
    assert lab06.capture_sizes_from_config(16, 512) == sizes[16]
    assert lab06.lookup_us(sizes[16], reps=2000) < 50


def test_run_all_quick(quick):
    kv = quick["kv"]
    assert kv["engine_bytes_per_token"] == kv["bytes_per_token"]
    bs = quick["trace"]["block_size"]
    for row in quick["trace"]["steps"][:-1]:
        assert len(row["blocks"]) == -(-row["tokens"] // bs) or len(row["blocks"]) == -(-row["computed"] // bs)
    assert quick["trace"]["steps"][-1]["blocks"] == []  # finished: freed
    p = quick["prefix"]
    assert len(p["shared_blocks"]) == p["shared_len"] // p["block_size"]
    assert all(p["ref_counts"][str(b)] == len(p["tables"]) for b in p["shared_blocks"])
    assert p["cached_tokens"] == [p["shared_len"]] * len(p["tables"])
    pre = quick["preemption"]
    assert pre["preemptions"] > 0 and pre["same_tokens"] == pre["requests"] == pre["finished"]
    assert pre["large_preemptions"] == 0
    rows = quick["workload"]["rows"]
    assert all(r["finished"] == quick["workload"]["spec"]["num_requests"] for r in rows)
    assert rows[0]["mean_batch_seqs"] == 1.0 and rows[1]["mean_batch_seqs"] > 1
    on, off = quick["chunked"]
    assert on["max_tokens_with_decodes"] <= on["budget"] < off["max_tokens_with_decodes"]
    g = quick["graphs"]["eager"]
    assert g["block_table_buffer_moved"] == 0 and 0 < g["kv_utilisation_pct"] <= 100
    assert quick["captures"]["block32_minus_block16"] == 0 == quick["captures"]["mnbt512_minus_8192"]


def test_views_on_results(quick):
    for plot in (views.plot_block_table, views.plot_fragmentation, views.plot_sweep, views.plot_chunked):
        assert plot(quick).data
    for table in (views.kv_table, views.trace_table, views.fragmentation_table, views.prefix_table,
                  views.preemption_table, views.sweep_table, views.chunked_table, views.graphs_table,
                  views.captures_table):
        assert table(quick)
    gpu = {**quick, "graphs": {"eager": quick["graphs"]["eager"], "graphs": {**quick["graphs"]["eager"],
                               "full_replays": 40, "replays_with_new_blocks": 3},
                               "kv_capacity_diff_pct": 0.4, "kv_utilisation_diff_pct": 0.0, "same_tokens": 4,
                               "requests": 4}}
    assert "graphs cost 0.40%" in views.graphs_table(gpu)
    assert "with a new block 3" in views.q_graph_evidence(gpu)


@pytest.mark.parametrize("q", [q for q in views.QUESTIONS if hasattr(q, "options")], ids=lambda q: q.qid)
def test_choice_graders(q, quick):
    letter = chr(65 + q.correct)
    for a in (letter, letter.lower(), f" {letter} ", chr(0xFF21 + q.correct), f"{letter}.", f"选{letter}",
              q.options[q.correct].text):
        assert lab08.grade_any(q, a, quick)[0], a
    for i, o in enumerate(q.options):
        if i != q.correct:
            ok, text = lab08.grade_any(q, chr(65 + i), quick)
            assert not ok and o.why in text
    for odd in ("", "ß", "ﬁ", "ŉ", "1", 1, None):
        lab08.grade_any(q, odd, quick)


def test_numeric_grader_edges():
    q = views.Q_KV
    assert lab08.grade_any(q, "114,688 B")[0] and lab08.grade_any(q, 114688 * 1.049)[0]
    assert not lab08.grade_any(q, 114688 * 1.051)[0] and not lab08.grade_any(q, 229376)[0]


def test_claim_rules():
    by = {c.cid: c for c in views.CLAIMS}
    assert by["article.block_size_32_more_fragmentation"].rule(0.7) == "right"
    assert by["article.mnbt_512_faster_graph_matching"].rule(0) == "wrong"
    assert by["article.paged_attention_conflicts_with_graphs"].rule(0) == "unverifiable"


def test_claim_keys_exist_in_what_the_recorder_writes(quick):
    """Every lab06 claim's key resolves in a run_all result, except the graph-only ones (GPU record)."""
    from minivllm_labs.catalog import resolve_key

    for c in views.CLAIMS:
        if c.evidence_key.startswith("graphs."):
            continue  # only a CUDA run has the graphs side
        assert c.rule(resolve_key(quick, c.evidence_key)) == c.verdict, c.cid
