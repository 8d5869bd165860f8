"""One verdict per claim, computed: no seed sentence gets two verdicts across labs, and every verdict that names a
rule (minivllm_labs/verdicts.py, or a lab's own) is what the rule computes from the record."""

from __future__ import annotations

import re

from minivllm_labs import verdicts as V
from minivllm_labs.catalog import all_claims


def _sentence(text: str) -> str:
    """The seed's words with spaces and punctuation dropped, so "CUDA Graph仅改变…" and "CUDA Graph 仅改变…。" match."""
    return re.sub(r"[\s\W_]+", "", text.lower())


def test_one_sentence_one_verdict():
    """Two labs' claims whose seed sentences are the same (or one begins with the other: a lab quoting the next
    sentence too) carry one verdict. (One lab may judge the two halves of a sentence apart, as Lab 06 does
    with "--block-size 32: fewer captures, more fragmentation".)"""
    claims = [(c, _sentence(c.claim_zh)) for c in all_claims()]
    clashes = []
    for i, (a, sa) in enumerate(claims):
        for b, sb in claims[i + 1:]:
            short, long_ = sorted((sa, sb), key=len)
            if a.lab != b.lab and len(short) >= 12 and long_.startswith(short) and a.verdict != b.verdict:
                clashes.append(f"{a.lab}:{a.cid}={a.verdict} vs {b.lab}:{b.cid}={b.verdict}")
    assert not clashes, clashes


def test_every_rule_computes_its_verdict():
    """From the number in the record (the claim's evidence key), not from the figure typed beside it."""
    import json

    from minivllm_labs.common import REPO_ROOT
    from minivllm_labs.lab_info import resolve_key

    for c in all_claims():
        if c.rule is not None:
            value = resolve_key(json.loads((REPO_ROOT / c.evidence_file).read_text(encoding="utf-8")), c.evidence_key)
            assert c.rule(value) == c.verdict, (c.cid, c.rule(value), c.verdict)


def test_the_shared_and_the_reviewed_verdicts_come_from_the_one_rule_set():
    by = {(c.lab, c.cid): c for c in all_claims()}
    assert by[("lab07", "article.graphs_same_results")].rule is V.graphs_same_results
    assert by[("lab10", "article.graphs_do_not_change_results")].rule is V.graphs_same_results
    assert by[("lab07", "article.ttft_a100_13b")].rule is V.ttft_a100_13b
    assert by[("lab07", "article.gains_at_batch_8")].rule is V.gains_at_batch_8
    assert by[("lab09", "lab09.graph-launch")].rule is V.graph_launch_saves


def test_the_rules():
    assert V.beyond_spread((1.0, 1.2), (1.3, 1.4)) and not V.beyond_spread((1.0, 1.3), (1.2, 1.4))
    assert V.beyond_variation(0.7, [0.9, 1.1]) and not V.beyond_variation(0.1, [0.9, 1.1])
    assert V.impossible_below(21, 42.7) and not V.impossible_below(50, 42.7)
    assert (V.holds_in(3, 3), V.holds_in(1, 3), V.holds_in(0, 3)) == ("right", "partly", "wrong")
    assert round(V.prefill_floor_ms(13.0e9, 512, 312e12), 1) == 42.7
