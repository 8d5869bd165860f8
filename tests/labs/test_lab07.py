"""Lab 07: every claim's figure recomputed from its evidence file + key, its verdict from its rule; the seed's
words quoted verbatim; every claims.md row covered by at most one lab; the table's filter page."""

import json
import math
import re

import pytest

from minivllm_labs import catalog, lab06, lab07, lab07_views
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.recorded import load_recorded

CLAIMS = catalog.all_claims()


def seed(name: str) -> str:
    try:
        return lab07.seed_text(name)
    except FileNotFoundError as e:  # the seeds live next to the checkout (../shared/seeds), not in it
        pytest.skip(str(e))


@pytest.mark.parametrize("c", CLAIMS, ids=lambda c: c.cid)
def test_figure_and_verdict_agree_with_the_evidence_file(c):
    assert c.verdict in catalog.VERDICTS
    path = REPO_ROOT / c.evidence_file
    if not path.exists():
        assert c.figure is None, f"{c.cid}: a figure without its file {c.evidence_file}"
        pytest.skip(f"{c.cid}: {c.evidence_file} not recorded yet (python -m minivllm_labs.record {c.lab})")
    value = catalog.resolve_key(json.loads(path.read_text()), c.evidence_key)
    if c.figure is not None:
        same = (math.isclose(value, c.figure, rel_tol=1e-3) if isinstance(value, float) and isinstance(c.figure, float)
                else value == c.figure)  # a figure quoted to 4 digits cites the stored value
        assert same, f"{c.cid}: {c.evidence_key} is {value!r} in the file, the claim says {c.figure!r}"
    if c.rule is not None:
        assert c.rule(value) == c.verdict, f"{c.cid}: rule({value!r}) gives {c.rule(value)!r}, verdict {c.verdict!r}"


@pytest.mark.parametrize("c", lab06.LAB_INFO.claims + lab07.LAB_INFO.claims, ids=lambda c: c.cid)
def test_claims_quote_the_seed_and_find_their_row(c):
    text = re.sub(r"\s+", "", seed(c.seed))
    assert re.sub(r"\s+", "", c.claim_zh) in text, c.cid
    row = lab07.row_of(c)
    assert row is not None and row.lab == c.lab, (c.cid, row)


def test_coverage_is_matched_by_claim_id():
    """Every claim of every lab sits in exactly one checklist row, named by its id; no row names an unknown id;
    rows Lab 02 measures say so (they read "not measured yet" when matched by wording)."""
    ids = [i for r in lab07.CHECKLIST for i in r.claims]
    assert len(ids) == len(set(ids))
    assert set(ids) == {c.cid for c in CLAIMS}
    assert set(lab07.SOURCE_JUDGED) <= {r.title for r in lab07.CHECKLIST}
    cov = lab07_views.coverage()
    assert not [c["row"] for c in cov if c["status"].startswith("not measured")]
    for c in CLAIMS:
        assert lab07.row_of(c).lab == c.lab, c.cid
    by_row = {c["row"]: c for c in cov}
    for title in ("prefill is not graphed", "150 MB per graph, 1.5 GB for 10",
                  "one graph per sequence; --max-num-seqs = graphs", "replay reuses the capture's RNG seed"):
        assert by_row[title]["covered_by"] == ["lab02"], title


def test_the_measurable_claims_have_verdicts():
    by = {c.cid: c for c in CLAIMS}
    for cid in ("handbook.weight_loading", "handbook.chunk_size_fixed", "article.ttft_13b_h100", "article.ttft_70b",
                "article.ttft_a100_13b", "article.gains_by_model_size", "article.graphs_same_results",
                "article.eager_when_memory_is_tight"):
        c = by[cid]
        assert c.evidence_file.startswith("assets/results/h200/") and c.evidence_key, cid
        if c.verdict == "unverifiable":
            assert "Unverifiable here" in c.summary and "无法查证" in c.summary_zh, cid


def test_verbatim_marks_and_units():
    rows = {r["id"]: r for r in lab07_views.rows()}
    if all(r["verbatim"] is None for r in rows.values()):
        pytest.skip("the seeds are not next to this checkout")
    for c in lab07.LAB_INFO.claims + lab06.LAB_INFO.claims:
        assert rows[c.cid]["verbatim"] is True, c.cid
    page = lab07_views.claims_html(list(rows.values()))
    assert page.count("原文：") == sum(r["verbatim"] is True for r in rows.values())
    assert page.count("转述 · paraphrase：") == sum(r["verbatim"] is False for r in rows.values())
    for r in rows.values():  # every number has its unit
        if r["recorded"] and isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool):
            assert r["unit"], (r["id"], r["evidence"])


def test_a_constant_is_not_presented_as_measured():
    r = next(r for r in lab07_views.rows() if r["id"] == "article.pascal_no_graphs")
    assert r["kind"] == "constant" and "not measured" in lab07_views._value(r)
    assert "6.1" in lab07_views._value(r)
    r = next(r for r in lab07_views.rows() if r["id"] == "article.a100_13b_tpot")
    assert r["kind"] == "computed" and "ms" in lab07_views._value(r)


def test_claimed_against_measured_figure():
    pts = lab07_views.versus()
    assert len(pts) == len(lab07_views.VERSUS) and len({p["id"] for p in pts}) == len(pts)
    fig = lab07_views.plot_versus(pts)
    marks = [tr for tr in fig.data if tr.mode == "markers"]
    assert len(marks) == len(pts)  # one mark per claim
    for tr, p in zip(marks, pts):
        assert [y for y in tr.y if y is not None] == [p["measured"]]
    assert "measured = claimed" == fig.data[-1].name
    by = {p["id"]: p for p in pts}
    assert by["lab04.profile"]["measured"] < 1 < by["lab04.profile"]["claimed"]
    assert by["article.graphs_same_results"]["measured"] == 16


def test_self_test():
    from minivllm_labs.quiz import grade

    assert grade(lab07.Q1, "12.75 ms")[0] and not grade(lab07.Q1, "9 ms")[0]
    ok, text = grade(lab07.Q2, "B")
    eager_tokens = load_recorded("lab05")["oom"]["eager"]["kv_cache_tokens"]  # the feedback quotes the record
    assert ok and f"{eager_tokens:,}" in text and "oom.freed_fraction_of_kv" in text
    assert not grade(lab07.Q2, "A")[0]


def test_no_row_is_measured_by_two_labs():
    twice = [(c["row"], c["covered_by"]) for c in lab07_views.coverage() if len(c["covered_by"]) > 1]
    assert not twice, f"claims.md rows measured in more than one lab: {twice}"


def test_rules_on_edge_values():
    by = {c.cid: c for c in CLAIMS}
    assert by["article.a100_13b_tpot"].rule(12.75) == "wrong"
    assert by["article.a100_13b_requests_per_s"].rule(0.86) == "wrong"
    kv = by["article.graphs_lower_kv_utilisation"].rule
    assert (kv(0.0), kv(6.0), kv(3.0)) == ("wrong", "right", "partly")
    assert by["article.block_size_32_fewer_captures"].rule(0) == "wrong"
    assert by["article.paged_attention_conflicts_with_graphs"].rule(12) == "wrong"


def test_physics():
    p = lab07.physics()
    assert p["a100_13b"]["floor_ms"] == pytest.approx(13.0e9 * 2 / 2039e9 * 1e3, rel=1e-3)
    assert p["a100_req_s_ceiling"] == pytest.approx(1e3 / (21 + 127 * 9), rel=1e-3)
    assert lab07.tpot_floor_ms(0.596e9, 4.2e12) == pytest.approx(0.2838, rel=1e-3)


def test_run_all_quick_on_cpu():
    out = lab07.run_all("", quick=True)
    assert out["copy_bandwidth"]["bytes_per_s"] > 0
    assert out["physics"]["measured_copy_bytes_per_s"] == out["copy_bandwidth"]["bytes_per_s"]


def test_table_and_filter_page():
    rows = lab07_views.rows()
    assert len(rows) == len(CLAIMS)
    page = lab07_views.claims_html(rows)
    assert page.count("<tr data-seed=") == len(rows)
    assert 'select name="seed"' in page and 'select name="verdict"' in page and "http" not in page
    md = lab07_views.claims_markdown(lab07.LAB_INFO.claims)
    assert md.count("\n") == len(lab07.LAB_INFO.claims) + 1
    assert "not measured yet" in lab07_views.coverage_table(lab07_views.coverage()) or all(
        c["covered_by"] or c["status"].startswith("judged") for c in lab07_views.coverage())
    lab07_views.plot_floors(lab07.physics())
    assert "LLaMA-2-13B" in lab07_views.floors_table(lab07.physics(4.2e12))


def test_recorder_writes_lab07_with_provenance(tmp_path):
    from minivllm_labs import record
    from minivllm_labs.recorded import load_recorded

    out = tmp_path / "lab07.json"
    assert record.main(["lab07", "--quick", "--out", str(out), "--model", "default"]) == 0
    data = load_recorded("lab07", out)
    assert catalog.resolve_key(data, "physics.a100_13b.floor_ms") > 9
    for c in lab07.LAB_INFO.claims:  # every key lab07's own claims cite exists in what the recorder writes
        if c.evidence_file.endswith("lab07.json"):
            assert c.rule(catalog.resolve_key(data, c.evidence_key)) == c.verdict
