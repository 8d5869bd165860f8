"""Lab 08's interview bank: the graders (every form of the right answer, every wrong option with its reason,
numeric tolerance edges, odd input), the seeded shuffle and mock interview, and the page's JS twin."""

import json
import re
import shutil
import subprocess

import pytest

from minivllm_labs import catalog, lab08, lab08_views
from minivllm_labs.lab08_views import MOCK_JS, mock_html, page_data, score_values
from minivllm_labs.quiz import NumericQuestion, Question

CHOICE = [q for q in lab08.QUESTIONS if isinstance(q, Question)]
NUMERIC = [q for q in lab08.QUESTIONS if isinstance(q, NumericQuestion)]
ODD = ["", "ß", "ﬁ", "ŉ", "1", 1, None, "   ", "Z", "选", 3.5, [], "B C"]


def forms(q):
    letter = chr(65 + q.correct)
    return [letter, letter.lower(), f" {letter} ", chr(0xFF21 + q.correct), f"{letter}.", f"{letter.lower()})",
            f"选{letter}", q.options[q.correct].text, q.labels()[q.correct]]


def test_bank_size_topics_and_handbook_questions_first():
    assert len(lab08.QUESTIONS) >= 24
    assert [q.source for q in lab08.QUESTIONS[:4]] == [f"handbook interview {i}" for i in range(1, 5)]
    assert {q.topic for q in lab08.QUESTIONS} == set(lab08.TOPICS)
    assert len({q.qid for q in lab08.QUESTIONS}) == len(lab08.QUESTIONS)
    assert len(NUMERIC) >= 3


@pytest.mark.parametrize("q", CHOICE, ids=lambda q: q.qid)
def test_right_answer_accepted_in_every_form(q):
    for a in forms(q):
        ok, text = lab08.grade_any(q, a)
        assert ok, (a, text)
        assert q.options[q.correct].why in text and q.model_answer in text


@pytest.mark.parametrize("q", CHOICE, ids=lambda q: q.qid)
def test_every_wrong_option_refused_with_its_reason(q):
    for i, o in enumerate(q.options):
        if i == q.correct:
            continue
        for a in (chr(65 + i), o.text):
            ok, text = lab08.grade_any(q, a)
            assert not ok and o.why in text, (a, text)


@pytest.mark.parametrize("q", CHOICE + NUMERIC, ids=lambda q: q.qid)
def test_odd_input_never_raises(q):
    for a in ODD:
        ok, text = lab08.grade_any(q, a)
        assert isinstance(ok, bool) and isinstance(text, str) and text
    assert not lab08.grade_any(q, "")[0] and not lab08.grade_any(q, None)[0]


@pytest.mark.parametrize("q", NUMERIC, ids=lambda q: q.qid)
def test_numeric_tolerance_edges(q):
    inside = [q.answer, q.answer * (1 + 0.99 * q.rel_tol), q.answer * (1 - 0.99 * q.rel_tol)]
    outside = [q.answer * (1 + 1.01 * q.rel_tol), q.answer * (1 - 1.01 * q.rel_tol), -q.answer, 0]
    for v in inside:
        assert lab08.grade_any(q, v)[0], v
        assert lab08.grade_any(q, f"{v:.6g} {q.unit}")[0], v
    for v in outside:
        ok, text = lab08.grade_any(q, v)
        assert not ok and text.startswith("Not quite"), v
    assert not lab08.grade_any(q, "no idea")[0]


def test_parse_number_forms():
    assert lab08.parse_number("114,688 B") == 114688
    assert lab08.parse_number("1.1e5") == 110000
    assert lab08.parse_number("３２７６８") == 32768
    assert lab08.parse_number("0.28 ms") == 0.28
    assert lab08.parse_number("ms") is None and lab08.parse_number(True) is None


def test_known_numeric_answers():
    assert lab08.grade_any(lab08.BY_ID["lab08.n1"], "0.28")[0]  # 0.596e9 x 2 B / 4.2 TB/s
    assert lab08.grade_any(lab08.BY_ID["lab08.n2"], 2 * 16 * 8 * 64 * 2)[0]
    assert lab08.grade_any(lab08.BY_ID["lab08.n3"], (28 << 30) // (112 << 10))[0]


def test_shuffle_is_seeded_and_spreads_the_letters():
    again = [lab08.build(e) for e in lab08.BANK]
    assert [getattr(q, "correct", None) for q in again] == [getattr(q, "correct", None) for q in lab08.QUESTIONS]
    letters = [q.correct for q in CHOICE]
    assert len(set(letters)) == 4 and max(letters.count(i) for i in range(4)) <= len(letters) // 2
    longest = sum(max(range(len(q.options)), key=lambda i: len(q.options[i].text)) == q.correct for q in CHOICE)
    assert longest <= len(CHOICE) // 3  # the right answer is not given away by its length


def test_mock_interview_is_seeded_distinct_and_checked():
    a, b = lab08.mock_interview(8, 0), lab08.mock_interview(8, 0)
    assert a == b and len(set(a)) == 8 and lab08.mock_interview(8, 1) != a
    assert sorted(lab08.mock_interview(len(lab08.QUESTIONS), 5)) == sorted(q.qid for q in lab08.QUESTIONS)
    for bad in (0, len(lab08.QUESTIONS) + 1, "3", True):
        with pytest.raises(ValueError):
            lab08.mock_interview(bad, 0)


def right_answer(q):
    return q.answer if isinstance(q, NumericQuestion) else chr(65 + q.correct)


def test_mock_scoring_and_weak_topics():
    qids = lab08.mock_interview(10, 7)
    all_right = lab08.score(qids, {i: right_answer(lab08.BY_ID[i]) for i in qids})
    assert (all_right.correct, all_right.total, all_right.weak_topics) == (10, 10, [])
    miss = qids[0]
    res = lab08.score(qids, {i: right_answer(lab08.BY_ID[i]) for i in qids[1:]})  # first left unanswered
    assert res.correct == 9 and lab08.BY_ID[miss].topic in res.weak_topics
    assert "score 9/10" in str(res)
    none = lab08.score(qids, {})
    assert none.correct == 0 and set(none.weak_topics) == {lab08.BY_ID[i].topic for i in qids}
    text, r = score_values(qids, [None] * len(qids))
    assert r.correct == 0 and "score 0/10" in text


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_page_sampler_matches_python():
    src = MOCK_JS[MOCK_JS.index("function mulberry32"):MOCK_JS.index("function byId")]
    ids = [q.qid for q in lab08.QUESTIONS]
    js = (f"var bank = {json.dumps([{'id': i} for i in ids])};\n{src}\n"
          "console.log(JSON.stringify([draw(8, 0), draw(5, 3), draw(30, 123456)]));")
    out = json.loads(subprocess.run(["node", "-e", js], capture_output=True, text=True, check=True).stdout)
    assert out == [lab08.mock_interview(8, 0), lab08.mock_interview(5, 3), lab08.mock_interview(30, 123456)]


def test_page_embeds_the_python_feedback():
    data = page_data()
    assert len(data) == len(lab08.QUESTIONS)
    q = CHOICE[0]
    d = next(x for x in data if x["id"] == q.qid)
    assert d["feedback"][q.correct] == lab08.grade_any(q, chr(65 + q.correct))[1]
    page = mock_html(6, 2)
    assert 'id="lab08-mock-6-2"' in page and "http" not in page.split("<script>")[-1]
    assert "</script>" not in page[page.index('application/json">'):page.index("</div>")].replace("</script><script", "")


def test_every_citation_resolves_or_is_not_recorded_yet():
    for q in lab08.QUESTIONS:
        for line in lab08.cite_lines(lab08.ENTRIES[q.qid].cites):
            assert "missing key" not in line, (q.qid, line)
            if "not recorded yet" in line:
                assert "lab06.json" in line, line  # only files the lead records later
        ev = q.evidence(None)
        assert lab08.ENTRIES[q.qid].lab in ev


def test_catalog_lists_every_question_with_its_answer():
    qs = {q["id"]: q for info in catalog.labs() for q in info.as_dict()["questions"]}
    for q in lab08.QUESTIONS:
        d = qs[q.qid]
        if isinstance(q, NumericQuestion):
            assert d["answer"] == q.answer and d["kind"] == "numeric"
        else:
            assert d["correct"] == chr(65 + q.correct)


def test_widget_builds():
    pytest.importorskip("ipywidgets")
    box = lab08_views.mock_widget(3, 0)
    assert len(box.children) == 2 * 3 + 2
    assert re.search(r"\d+ questions", lab08.bank_table())
    assert lab08.answer_key().count("\n") == len(lab08.QUESTIONS) - 1


CLICK_ALL_RIGHT = """<script>setTimeout(function () {
  var root = document.querySelector(".lab08-mock");
  var bank = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  root.querySelectorAll(".q").forEach(function (div) {
    var inp = div.querySelector("input"), q = bank.filter(function (b) { return b.id === inp.name; })[0];
    if (q.kind === "numeric") { inp.value = q.answer + " " + q.unit; } else { div.querySelectorAll("input")[q.correct].checked = true; }
  });
  root.querySelector("button.score").click();
  document.title = root.querySelector(".result").textContent;
}, 50);</script>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_static_page_grades_in_a_browser(tmp_path):
    page = tmp_path / "mock.html"
    page.write_text(f"<html><head><title>-</title></head><body>{mock_html(12, 4)}{CLICK_ALL_RIGHT}</body></html>")
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--virtual-time-budget=2000", "--dump-dom",
                          page.as_uri()], check=False, capture_output=True, text=True, timeout=120).stdout
    assert "<title>score 12/12; weak topics: none</title>" in dom


def test_recorder_runs_lab08(tmp_path):
    from minivllm_labs import record

    out = tmp_path / "lab08.json"
    assert record.main(["lab08", "--out", str(out), "--model", "default"]) == 0
    assert json.loads(out.read_text())["questions"] == len(lab08.QUESTIONS)


@pytest.mark.parametrize("e", [e for e in lab08.BANK if e.code], ids=lambda e: e.qid)
def test_code_links_name_engine_code_that_exists(e):
    """Each question links into the engine: the file exists and defines the named class / function."""
    import ast

    from minivllm_labs.common import REPO_ROOT

    path, _, name = e.code.partition("::")
    src = REPO_ROOT / path
    assert src.exists(), e.code
    if name:
        top = name.split(".")[0]
        tree = ast.parse(src.read_text())
        assert any(getattr(n, "name", None) == top for n in tree.body), e.code
