"""Lab 08's interview bank: its size and topics, every citation resolving in the H200 records, the length rule
in both languages, the graders (every form of the right answer, every wrong option with its reason, numbers in
other units, full-width digits, odd input) in Python and in the page's JavaScript, the seeded mock interview
across topics, its per-topic score and what it says to revisit, and the catalog rows."""

import inspect
import json
import re
import shutil
import subprocess

import pytest
from minivllm_labs import catalog, lab06, lab08, lab08_views
from minivllm_labs.common import REPO_ROOT
from minivllm_labs.lab08_views import MOCK_JS, mock_html, page_data, score_values
from minivllm_labs.lab_info import resolve_key
from minivllm_labs.quiz import NumericQuestion, Question
from minivllm_labs.quiz_html import NUMERIC_JS
from minivllm_labs.recorded import load_recorded

from tests.labs import code_links, js_runner
from tests.labs.test_results_index import AWAITING_GPU

CHOICE = [q for q in lab08.QUESTIONS if isinstance(q, Question)]
NUMERIC = [q for q in lab08.QUESTIONS if isinstance(q, NumericQuestion)]
ODD = ["", "ß", "ﬁ", "ŉ", "1", 1, None, "   ", "Z", "选", 3.5, [], "B C", "0,28", "5 parsecs"]
NEW_TOPICS = {"kv-capacity", "roofline", "attention-kernels", "sampling", "quantization", "speculative-decoding",
              "parallelism", "moe", "disaggregated-prefill", "slo-tradeoffs"}


def forms(q):
    letter = chr(65 + q.correct)
    return [letter, letter.lower(), f" {letter} ", chr(0xFF21 + q.correct), f"{letter}.", f"{letter.lower()})",
            f"选{letter}", q.options[q.correct].text, q.labels()[q.correct], q.options[q.correct].text_zh]


# ---- the bank ---------------------------------------------------------------------------------------------
def test_bank_size_topics_kinds_and_handbook_questions_first():
    qs = lab08.QUESTIONS
    assert len(qs) >= 60 and len({q.topic for q in qs}) >= 14
    assert NEW_TOPICS <= {q.topic for q in qs}
    assert {q.topic for q in qs} == set(lab08.TOPICS) == set(lab08.TOPIC_INFO)
    assert [q.source for q in qs[:4]] == [f"handbook interview {i}" for i in range(1, 5)]
    assert len({q.qid for q in qs}) == len(qs)
    assert len(NUMERIC) * 4 >= len(qs)  # at least a quarter numeric
    for q in qs:
        assert q.prompt_zh and q.model_answer_zh, q.qid
        for o in getattr(q, "options", ()):
            assert o.text_zh and o.why_zh, (q.qid, o.text)


@pytest.mark.parametrize("e", lab08.BANK, ids=lambda e: e.qid)
def test_every_question_is_measured_or_says_why_not(e):
    """A measured question cites records that exist, by file and key; a reasoning one says why it is not
    measured, with its formula and a public source."""
    assert e.cites or e.not_measured, e.qid
    awaiting = any(path.rsplit("/", 1)[1] in AWAITING_GPU for path, *_ in e.cites)
    for path, key, label, label_zh in e.cites:
        p = REPO_ROOT / path
        assert path.startswith("assets/results/h200/") and label and label_zh, path
        if p.name in AWAITING_GPU and not p.exists():  # not recorded yet: the feedback says so
            continue
        assert p.exists(), path
        resolve_key(json.loads(p.read_text()), key)  # KeyError names the missing part
        assert label and label_zh
    if e.not_measured:
        assert e.not_measured_zh and e.formula and e.link.startswith("https://"), e.qid
    if e.formula:
        assert e.formula_zh, e.qid
    text = lab08.evidence_text(e)
    assert "missing key" not in text and ("not recorded" not in text or awaiting)
    assert ("Measured on the H200" in text) == bool(e.cites)
    assert ("Reasoning, not measured here" in text) == bool(e.not_measured)


def test_statements_fixed_by_issue_28():
    """FULL captures prefill and mixed batches here too, FULL_DECODE_ONLY is decode-only (as in vLLM); the eager
    memory gain depends on the vLLM version; the prefix-cache token compare is this engine's; f1 names the mode and
    the max_num_seqs Lab 06's chunked-prefill record ran with, and why its steps with prompt tokens ran without
    graphs."""
    h3 = lab08.ENTRIES["lab08.h3"]
    assert "FULL_DECODE_ONLY" in h3.model_answer and "vLLM's FULL captures mixed batches" in h3.model_answer
    assert "this engine's FULL does the same through one unified attention kernel" in h3.model_answer
    assert not any("per layer would trace more" in w[1] for w in lab08.ENTRIES["lab08.h4"].wrong)
    assert "versions" in lab08.ENTRIES["lab08.s2"].model_answer
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS" in lab08.ENTRIES["lab08.s2"].model_answer
    assert "tokens compared" not in lab08.ENTRIES["lab08.x1"].right[0]
    assert "SHA-256" in lab08.ENTRIES["lab08.x1"].model_answer
    f1 = lab08.ENTRIES["lab08.f1"]
    chunked = load_recorded("lab06")["chunked"]
    max_num_seqs = inspect.signature(lab06.chunked_prefill).parameters["n_short"].default + 1
    for c in chunked:  # the mode and the max_num_seqs the record ran, and the capture size that follows from them
        assert c["cudagraph_mode"] in f1.model_answer and c["cudagraph_mode"] in f1.model_answer_zh
    assert f"max_num_seqs {max_num_seqs}" in f1.model_answer
    assert f"max_num_seqs 为 {max_num_seqs}" in f1.model_answer_zh
    assert f"largest capture size is {2 * max_num_seqs}" in f1.model_answer
    # "within the spread": the two settings' runs overlap, and the medians differ by less than either's spread
    (lo0, hi0), (lo1, hi1) = [(min(c["max_ms_runs"]), max(c["max_ms_runs"])) for c in chunked]
    assert max(lo0, lo1) <= min(hi0, hi1)
    assert abs(chunked[0]["max_ms_with_decodes"] - chunked[1]["max_ms_with_decodes"]) < min(hi0 - lo0, hi1 - lo1)
    assert "within the spread" in f1.model_answer
    for c in chunked:
        assert f"{c['max_ms_with_decodes']:.1f} ms" in f1.model_answer
    assert "cap" in lab08.ENTRIES["lab08.n3"].model_answer
    # one figure per fact: the pool of the 35 FULL graphs is read from the latest record, nowhere typed in
    c3 = lab08.ENTRIES["lab08.c3"]
    assert ("assets/results/h200/latency.json", "modes.FULL.graph_pool_mib") in [c[:2] for c in c3.cites]
    assert not any(re.search(r"\b58 MiB", t) for t in (c3.model_answer, c3.right[1]))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_length_gives_nothing_away(lang):
    """The right option is the longest in at most 1 question in 4, among the two longest in at most 55%."""
    def length(o):
        return len(o.text if lang == "en" else o.text_zh)

    longest = two = 0
    for q in CHOICE:
        right = length(q.options[q.correct])
        longer = sum(length(o) > right for o in q.options)
        longest += longer == 0
        two += longer < 2
    assert longest * 4 <= len(CHOICE), (lang, longest)
    assert two <= 0.55 * len(CHOICE), (lang, two)


def test_right_answers_spread_over_the_letters():
    letters = [q.correct for q in CHOICE]
    assert set(letters) == {0, 1, 2, 3} and max(letters.count(i) for i in range(4)) <= len(letters) // 3


# ---- grading ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", CHOICE, ids=lambda q: q.qid)
def test_right_answer_accepted_in_every_form(q):
    for a in forms(q):
        ok, text = lab08.grade_any(q, a)
        assert ok, (a, text)
        assert q.options[q.correct].why in text and q.model_answer in text
    ok, text = lab08.grade_any(q, chr(65 + q.correct), lang="zh")
    assert ok and q.options[q.correct].why_zh in text and q.model_answer_zh in text
    assert "Measured on" not in text and "Model answer" not in text  # Chinese feedback is Chinese


@pytest.mark.parametrize("q", CHOICE, ids=lambda q: q.qid)
def test_every_wrong_option_refused_with_its_reason(q):
    for i, o in enumerate(q.options):
        if i == q.correct:
            continue
        for a in (chr(65 + i), o.text):
            ok, text = lab08.grade_any(q, a)
            assert not ok and o.why in text, (a, text)
        ok, text = lab08.grade_any(q, o.text_zh, lang="zh")
        assert not ok and o.why_zh in text


@pytest.mark.parametrize("q", CHOICE + NUMERIC, ids=lambda q: q.qid)
def test_odd_input_never_raises(q):
    for a in ODD:
        for lang in ("en", "zh"):
            ok, text = lab08.grade_any(q, a, lang=lang)
            assert isinstance(ok, bool) and isinstance(text, str) and text
    assert not lab08.grade_any(q, "")[0] and not lab08.grade_any(q, None)[0]


@pytest.mark.parametrize("q", NUMERIC, ids=lambda q: q.qid)
def test_numeric_tolerance_edges_and_forms(q):
    inside = [q.answer, q.answer * (1 + 0.99 * q.rel_tol), q.answer * (1 - 0.99 * q.rel_tol)]
    outside = [q.answer * (1 + 1.01 * q.rel_tol), q.answer * (1 - 1.01 * q.rel_tol), -q.answer, 0]
    for v in inside:
        assert lab08.grade_any(q, v)[0], v
        assert lab08.grade_any(q, f"{v:.6g} {q.unit}")[0], v
        assert lab08.grade_any(q, f"约 {v:.6g}{q.unit}", lang="zh")[0], v
    wide = "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in f"{q.answer:g}")  # full-width digits
    assert lab08.grade_any(q, wide)[0], wide
    for v in outside:
        ok, text = lab08.grade_any(q, v)
        assert not ok and "Not quite" in text, v
    assert not lab08.grade_any(q, "no idea")[0]


def test_units_are_converted_never_ignored():
    n1, n2, a2 = lab08.BY_ID["lab08.n1"], lab08.BY_ID["lab08.n2"], lab08.BY_ID["lab08.pp1"]
    assert lab08.grade_any(n1, "284 us")[0] and lab08.grade_any(n1, "284 µs")[0]  # 0.284 ms
    assert not lab08.grade_any(n1, "284 ms")[0]
    assert lab08.grade_any(n1, "0.000284 s")[0] and lab08.grade_any(n1, "0.28毫秒")[0]
    assert lab08.grade_any(n2, "32 KiB")[0] and lab08.grade_any(n2, "32,768 B")[0]  # the model answer's unit
    assert not lab08.grade_any(n2, "32 KB")[0] or abs(32e3 - 32768) <= 0.05 * 32768  # 32,000 B: within 5%
    assert lab08.grade_any(a2, "0.29 ms")[0]  # a question in us answered in ms
    ok, text = lab08.grade_any(n2, "5 ms")
    assert not ok and "ms is a time but the answer is a size in bytes" in text
    assert lab08.grade_any(n2, "5 ms", lang="zh")[1] == "未评分：ms 是时间单位，本题答案是数据量，单位 bytes。"
    assert lab08.grade_any(n1, "0,28")[0]  # one comma, no point: a decimal comma (quiz_numbers)
    ok, text = lab08.grade_any(n1, "1,2,3")
    assert not ok and "cannot read the number" in text
    assert lab08.grade_any(lab08.BY_ID["lab08.k1"], "0.109 TiB")[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.n3"], "262k tokens")[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.dp2"], "0.5 GiB")[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.a2"], "2.7倍")[0]
    assert lab08.grade_any(n1, "approx. 0.28 ms")[0] and lab08.grade_any(n1, "约 0.28")[0]
    ok, text = lab08.grade_any(n1, "5 parsecs")  # a word where a unit belongs is refused, never ignored
    assert not ok and "unknown unit 'parsecs'" in text


def test_known_numeric_answers():
    assert lab08.grade_any(lab08.BY_ID["lab08.n1"], "0.28")[0]  # 0.596e9 x 2 B / 4.2 TB/s
    assert lab08.grade_any(lab08.BY_ID["lab08.n2"], 2 * 16 * 8 * 64 * 2)[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.n3"], (28 << 30) // (112 << 10))[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.k2"], (60 << 30) // (8192 * 2 * 32 * 8 * 128 * 2))[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.sd1"], (1 - 0.8 ** 5) / 0.2)[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.pp1"], 2 * 7 / 8 * 64 * 2 ** 20 / 400e9 * 1e6)[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.e2"], 100 * (1 - (120 / 128) ** 64))[0]


def test_numbers_the_questions_state_are_the_records():
    """The figures typed into prompts and feedback are the recorded ones (so a re-recording that changes them
    fails here, not silently in the notebook)."""
    def rec(name, key):
        return resolve_key(json.loads((REPO_ROOT / "assets/results/h200" / name).read_text()), key)

    assert rec("lab06.json", "kv_default.kv_cache_tokens") == 2 * 256 * 2048  # the engine's cap, k1 and k4
    assert rec("lab06.json", "kv_default.kv_cache_gib") == lab08.BY_ID["lab08.k1"].answer
    assert rec("lab06.json", "kv.bytes_per_token") == 2 * lab08.BY_ID["lab08.q2"].answer
    assert rec("latency.json", "modes.eager.startup.kv_cache_tokens") == 2 * 256 * rec("latency.json",
                                                                                        "settings.max_model_len")
    # the engine's pick at batch 64 x 2,048 is 3 splits (decode_splits_sweep.json row 26, marked "auto")
    assert rec("decode_splits_sweep.json", "decode.26.auto") and rec("decode_splits_sweep.json", "decode.26.num_splits") == 3
    assert round(rec("decode_splits_sweep.json", "decode.26.frac_of_copy") * 100, 1) == lab08.BY_ID["lab08.r4"].answer
    assert lab08.grade_any(lab08.BY_ID["lab08.a2"], rec("kernels.json", "decode.3.ms") /
                           rec("kernels.json", "decode.4.ms"))[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.r1"], 989e12 / rec("lab07.json", "copy_bandwidth.bytes_per_s"))[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.e1"], 3.3e9 * 2 / rec("lab07.json", "copy_bandwidth.bytes_per_s")
                           * 1e3)[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.q1"], rec("lab07.json", "physics.floors_ms.LLaMA-2-70B.H200") / 2)[0]
    # e1's result is typed (a declared constant, lab08_answer_moe_floor) over the rendered bandwidth: it must be the record's
    e1_ms = 3.3e9 * 2 / rec("lab07.json", "copy_bandwidth.bytes_per_s") * 1e3
    assert all(f"= {e1_ms:.2f} ms" in t for t in (lab08.ENTRIES["lab08.e1"].model_answer, lab08.ENTRIES["lab08.e1"].model_answer_zh))
    # a2 and slo2 type their quotient after the two rendered figures: it must be the records' quotient
    a2 = rec("kernels.json", "decode.3.ms") / rec("kernels.json", "decode.4.ms")
    slo2 = rec("lab06.json", "workload.rows.0.ttft_ms.p50") / rec("lab06.json", "workload.rows.2.ttft_ms.p50")
    for qid, quotient in (("lab08.a2", f"= {a2:.1f}"), ("lab08.slo2", f"= {slo2:.0f}")):
        assert all(quotient in t for t in (lab08.ENTRIES[qid].model_answer, lab08.ENTRIES[qid].model_answer_zh)), qid
    assert lab08.grade_any(lab08.BY_ID["lab08.slo2"], rec("lab06.json", "workload.rows.0.ttft_ms.p50") /
                           rec("lab06.json", "workload.rows.2.ttft_ms.p50"))[0]
    tpot = [rec("latency.json", f"rows.{i}.tpot_s") for i in (27, 31)]  # r2: batch 1 and 16, default graphs
    assert round(tpot[1] / tpot[0], 1) == 1.6
    assert round(rec("latency.json", "rows.31.output_tok_s") / rec("latency.json", "rows.27.output_tok_s")) == 9
    assert rec("lab06.json", "graphs.kv_capacity_diff_pct") < 1  # s2: "about 0.3%"
    assert round(rec("lab01.json", "launch_overhead.eager_us_per_op"), 1) == lab08.BY_ID["lab08.n4"].answer

    # slo3: the SLO in its prompt is met by exactly one recorded setting, the one its right option names
    slo3 = lab08.BY_ID["lab08.slo3"]
    ttft, tpot = map(float, re.search(r"p99 TTFT under (\d+) ms and p99 TPOT under (\d+) ms", slo3.prompt).groups())
    rows = rec("lab06.json", "workload.rows")
    meet = [r for r in rows if r["ttft_ms"]["p99"] < ttft and r["tpot_ms"]["p99"] < tpot]
    assert len(meet) == 1, [(r["max_num_seqs"], r["max_num_batched_tokens"]) for r in meet]
    right = slo3.options[slo3.correct].text
    assert f"max_num_seqs {meet[0]['max_num_seqs']} " in right and f"{meet[0]['max_num_batched_tokens']:,}" in right
    for o in slo3.options:  # every wrong option names a recorded setting that misses one of the two
        named = [r for r in rows if f"max_num_seqs {r['max_num_seqs']}," in o.text + "," or
                 (f"max_num_seqs {r['max_num_seqs']} " in o.text and f"{r['max_num_batched_tokens']:,}" in o.text)]
        assert named and (o is slo3.options[slo3.correct]) == (named[0] is meet[0]), o.text

    # the figures typed into the Lab 06 questions' text are the record's, as rounded there
    def quoted(qid, *figures):
        e = lab08.ENTRIES[qid]
        options = (e.right,) * bool(e.right) + e.wrong
        texts = [e.prompt, e.model_answer] + [o[1] for o in options]
        texts_zh = [e.prompt_zh, e.model_answer_zh] + [o[3] for o in options]
        for f in figures:
            assert any(f in s for s in texts) and any(f in s for s in texts_zh), (qid, f)

    def row(i, key):
        return rec("lab06.json", f"workload.rows.{i}.{key}")

    quoted("lab08.slo1", f"{row(0, 'tpot_ms.p50'):.2f} ms", f"{row(2, 'tpot_ms.p50'):.2f}",
           f"{row(0, 'output_tok_s'):,.0f}", f"{row(2, 'output_tok_s'):,.0f}",
           f"{row(0, 'ttft_ms.p50') / 1e3:.2f} s", f"{row(2, 'ttft_ms.p50') / 1e3:.2f} s")
    quoted("lab08.slo2", f"{row(0, 'ttft_ms.p50'):,.0f} ms", f"{row(2, 'ttft_ms.p50'):,.1f} ms")
    quoted("lab08.slo3", f"{row(2, 'ttft_ms.p99'):.0f} ms", f"{row(2, 'tpot_ms.p99'):.2f} ms",
           f"{row(0, 'tpot_ms.p99'):.2f} ms", f"{row(0, 'ttft_ms.p99') / 1e3:.1f} s",
           f"{row(1, 'ttft_ms.p99') / 1e3:.1f} s", f"{row(4, 'ttft_ms.p99'):.0f} ms", f"{row(4, 'tpot_ms.p99'):.2f} ms")
    quoted("lab08.slo4", f"{row(1, 'output_tok_s'):,.0f}", f"{row(1, 'ttft_ms.p99') / 1e3:.1f} s")
    quoted("lab08.dp1", *(f"{rec('lab06.json', f'chunked.{i}.max_ms_with_decodes'):.1f} ms" for i in (0, 1)))
    quoted("lab08.s2", *(f"{rec('lab06.json', f'graphs.{k}.kv_cache_gib'):.2f} GiB" for k in ("eager", "graphs")),
           *(f"{rec('lab05.json', f'oom.{k}.kv_cache_tokens'):,}" for k in ("eager", "graphs")))
    assert rec("throughput.json", "correctness.matching") == 10 and rec("throughput.json",
                                                                          "correctness_fp32.matching") == 16


def test_top_p_answer_is_what_this_engines_sampler_keeps():
    """g2 is graded against this engine's own Sampler: with top_p 0.75, tokens of probability 0.5, 0.3, 0.15,
    0.05 leave 2 that can be drawn."""
    import torch

    from minivllm.layers.sampler import Sampler
    from minivllm.sampling_params import SamplingParams

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = Sampler(torch.device("cpu"))._top_k_top_p(logits, [SamplingParams(temperature=1.0, top_p=0.75)])
    assert int(torch.isfinite(kept).sum()) == lab08.BY_ID["lab08.g2"].answer


# ---- mock interview ----------------------------------------------------------------------------------------
def test_mock_interview_is_seeded_distinct_and_across_topics():
    a, b = lab08.mock_interview(8, 0), lab08.mock_interview(8, 0)
    assert a == b and len(set(a)) == 8 and lab08.mock_interview(8, 1) != a
    n_topics = len(lab08.TOPICS)
    first = lab08.mock_interview(n_topics, 3)
    assert len({lab08.BY_ID[i].topic for i in first}) == n_topics  # one of each topic before any repeat
    assert sorted(lab08.mock_interview(len(lab08.QUESTIONS), 5)) == sorted(q.qid for q in lab08.QUESTIONS)
    for bad in (0, len(lab08.QUESTIONS) + 1, "3", True):
        with pytest.raises(ValueError):
            lab08.mock_interview(bad, 0)


def right_answer(q):
    return q.answer if isinstance(q, NumericQuestion) else chr(65 + q.correct)


def test_mock_scoring_per_topic_and_what_to_revisit():
    qids = lab08.mock_interview(10, 7)
    all_right = lab08.score(qids, {i: right_answer(lab08.BY_ID[i]) for i in qids})
    assert (all_right.correct, all_right.total, all_right.weak_topics) == (10, 10, [])
    assert sum(n for _, n in all_right.by_topic.values()) == 10
    miss = qids[0]
    res = lab08.score(qids, {i: right_answer(lab08.BY_ID[i]) for i in qids[1:]})  # first left unanswered
    topic = lab08.BY_ID[miss].topic
    assert res.correct == 9 and res.weak_topics == [topic] and res.by_topic[topic][0] < res.by_topic[topic][1]
    title, title_zh, _lab, read, read_zh = lab08.TOPIC_INFO[topic]
    assert "score 9/10" in str(res) and f"revisit {title}" in res.text() and read in res.text()
    assert "得分 9/10" in res.text("zh") and f"复习 {title_zh}" in res.text("zh") and read_zh in res.text("zh")
    assert res.text("zh").splitlines()[0] == f"得分 9/10；薄弱主题：{title_zh}"  # names, not ids, in Chinese
    none = lab08.score(qids, {})
    assert none.correct == 0 and set(none.weak_topics) == {lab08.BY_ID[i].topic for i in qids}
    text, r = score_values(qids, [None] * len(qids))
    assert r.correct == 0 and "score 0/10" in text
    with pytest.raises(ValueError, match="lab08.nope"):
        lab08.score(["lab08.nope"], {})


def test_every_topic_says_where_to_revisit():
    for t, (title, title_zh, lab, read, read_zh) in lab08.TOPIC_INFO.items():
        assert title and title_zh and read and read_zh, t
        assert not lab or (REPO_ROOT / "labs/src" / lab.split("/")[-1].replace(".ipynb", ".py")).exists(), lab


# ---- the page and its JavaScript ---------------------------------------------------------------------------
@pytest.mark.skipif(not js_runner.available(), reason="needs node or chromium to run the page's JavaScript")
def test_page_sampler_matches_python():
    src = MOCK_JS[MOCK_JS.index("function mulberry32"):MOCK_JS.index("function esc")]
    bank = [{"id": q.qid, "topic": q.topic} for q in lab08.QUESTIONS]
    got = js_runner.run_js(f"var bank = {json.dumps(bank)};\n{src}", "[draw(8, 0), draw(5, 3), draw(30, 123456)]")
    assert got == [lab08.mock_interview(8, 0), lab08.mock_interview(5, 3), lab08.mock_interview(30, 123456)]


UNIT_CASES = ["284 us", "284 µs", "0.284", "0.284 ms", "0,28", "１１２ GiB", "112GiB", "0.109 TiB", "32 KiB",
              "32,768 B", "114,688 bytes", "5 ms", "262k tokens", "1.05M", "2.7x", "2.7 倍", "约 3.36 个", "",
              "   ", "abc", "~60 requests", "71.9%", "0.5 GiB", "512 MiB", "1.1e5", "-3 ms", "0.28 毫秒",
              "approx. 3.36", "6.5万", "3 parsecs", "114 688", "114 688 bytes"]
js = pytest.mark.skipif(not js_runner.available(), reason="needs node or chromium to run the page's JavaScript")


def _page_grades(cases):
    """The page's grader (quiz_html.NUMERIC_JS, which MOCK_JS embeds) on (answer, question) pairs."""
    data = [{"a": a, "unit": q.unit, "answer": q.answer, "tol": q.rel_tol} for a, q in cases]
    return js_runner.run_js(NUMERIC_JS, f"{json.dumps(data, ensure_ascii=False)}.map(function (c) {{"
                            " return mvGradeNumber(c.a, c.answer, c.tol, c.unit); })")


@js
def test_page_reads_units_like_python():
    """The page converts and refuses every unit case exactly as quiz.grade does, verdict and hint alike, in
    English and Chinese."""
    cases = [(a, q) for a in UNIT_CASES for q in NUMERIC]
    for (a, q), got in zip(cases, _page_grades(cases)):
        ok, en = lab08.grade_any(q, a)
        assert got["ok"] == ok and got["en"] == en.split("\n")[0], (a, q.qid, en, got)
        assert got["zh"] == lab08.grade_any(q, a, lang="zh")[1].split("\n")[0], (a, q.qid)


@js
def test_page_grades_numbers_like_python():
    """Right, wrong and odd answers to every numeric question: the page gives the grade Python gives."""
    answers = [lambda q: q.answer, lambda q: f"{q.answer:g} {q.unit}", lambda q: q.answer * (1 + 2 * q.rel_tol),
               lambda q: "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in f"{q.answer:g}"),
               lambda q: "", lambda q: "1,2,3", lambda q: "n/a", lambda q: f"{q.answer:g} parsecs"]
    cases = [(f(q), q) for q in NUMERIC for f in answers]
    got = [g["ok"] for g in _page_grades(cases)]
    want = [lab08.grade_any(q, a)[0] for a, q in cases]
    assert got == want
    assert sum(want) == 3 * len(NUMERIC)  # the answer, with its unit, in full-width digits; an unknown word is refused


def test_page_embeds_the_python_feedback_in_both_languages():
    data = page_data()
    assert len(data) == len(lab08.QUESTIONS)
    for q in CHOICE[:5]:
        d = next(x for x in data if x["id"] == q.qid)
        assert d["feedback"][q.correct] == [lab08.grade_any(q, chr(65 + q.correct), lang=lang)[1]
                                            for lang in ("en", "zh")]
    page = mock_html(6, 2)
    assert 'id="lab08-mock-6-2"' in page and "http" not in page.split("<script>")[-1]
    assert page.count('class="lang-en"') == page.count('class="lang-zh"')
    start = page.index('class="bank">') + len('class="bank">')
    assert json.loads(page[start:page.index("</script>", start)]) == json.loads(json.dumps(page_data(None, None)))


def test_page_shows_the_questions_without_javascript():
    """The questions and their options are in the HTML itself and in text/plain, not only built by the script."""
    qids = lab08.mock_interview(6, 2)
    page = mock_html(6, 2)
    static = page[:page.index("<script")]
    text = lab08_views.mock_text(qids)
    for qid in qids:
        q = lab08.BY_ID[qid]
        assert lab08_views.html.escape(q.prompt) in static and lab08_views.html.escape(q.prompt_zh) in static
        assert q.prompt in text
        for o in getattr(q, "options", ()):
            assert lab08_views.html.escape(o.text) in static and o.text in text


def test_catalog_lists_every_question_with_topic_options_zh_and_evidence(capsys):
    qs = {q["id"]: q for info in catalog.labs() for q in info.as_dict()["questions"]}
    for q in lab08.QUESTIONS:
        d = qs[q.qid]
        assert d["topic"] == q.topic
        assert d.get("evidence") or d.get("not_measured"), q.qid
        if isinstance(q, NumericQuestion):
            assert d["answer"] == q.answer and d["kind"] == "numeric"
        else:
            assert d["correct"] == chr(65 + q.correct) and d["options_zh"] == [o.text_zh for o in q.options]
    assert catalog.main(["--json"]) == 0
    rows = {q["id"]: q for lab in json.loads(capsys.readouterr().out)["labs"] for q in lab["questions"]}
    assert rows["lab08.slo4"]["evidence"][0]["key"] == "workload.rows.1.output_tok_s"
    assert rows["lab08.pp2"]["not_measured"] and rows["lab08.pp2"]["link"].startswith("https://arxiv.org/")
    sd1 = rows["lab08.sd1"]  # measured by Lab 11 since the engine speculates: cites, no not_measured
    assert "not_measured" not in sd1 and sd1["evidence"][0]["file"] == "assets/results/h200/lab11.json"


def test_widget_builds():
    pytest.importorskip("ipywidgets")
    box = lab08_views.mock_widget(3, 0)
    assert len(box.children) == 2 * 3 + 2
    assert re.search(r"\d+ questions over \d+ topics", lab08.bank_table())
    assert lab08.answer_key().count("\n") == len(lab08.QUESTIONS) - 1


CLICK_ALL_RIGHT = """<script>setTimeout(function () {
  var root = document.querySelector(".lab08-mock");
  var bank = JSON.parse(root.querySelector("script.bank").textContent);
  root.querySelectorAll(".q").forEach(function (div) {
    var id = div.getAttribute("data-id"), q = bank.filter(function (b) { return b.id === id; })[0];
    if (q.kind === "numeric") {  // in microseconds: the page converts, as Python does
      div.querySelector("input").value = q.unit === "ms" ? (q.answer * 1000) + " us" : q.answer + " " + q.unit; }
    else { div.querySelectorAll("input")[q.correct].checked = true; }
  });
  root.querySelector("button.score").click();
  document.title = root.querySelector(".result b .lang-en").textContent + " | " +
    root.querySelector(".result b .lang-zh").textContent;
}, 50);</script>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_static_page_grades_in_a_browser(tmp_path):
    page = tmp_path / "mock.html"
    qids = [q.qid for q in NUMERIC if q.unit == "ms"][:3] + [q.qid for q in CHOICE[:3]]
    page.write_text(f"<html><head><title>-</title></head><body>{mock_html(qids=qids)}{CLICK_ALL_RIGHT}</body>"
                    "</html>", encoding="utf-8")
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--virtual-time-budget=2000", "--dump-dom",
                          page.as_uri()], check=False, capture_output=True, text=True, timeout=120).stdout
    assert "<title>score 6/6; weak topics: none | 得分 6/6；薄弱主题：无</title>" in dom


def test_recorder_runs_lab08(tmp_path):
    from minivllm_labs import record

    out = tmp_path / "lab08.json"
    assert record.main(["lab08", "--out", str(out), "--model", "default"]) == 0
    assert json.loads(out.read_text())["questions"] == len(lab08.QUESTIONS)


@pytest.mark.parametrize("e", [e for e in lab08.BANK if e.code], ids=lambda e: e.qid)
def test_code_links_name_engine_code_that_exists(e):
    """Each question links into the engine: the file exists and defines the named class / function (the check
    shared by every lab, tests/labs/code_links.py)."""
    path, _, name = e.code.partition("::")
    assert code_links.missing(path, name) is None, (e.code, code_links.missing(path, name))
