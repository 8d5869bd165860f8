"""Numeric answers: units are converted, not ignored ("284 us" to a question in ms, "32 KiB" to one in bytes),
a decimal comma is read, full-width input is read, and the static quiz's JavaScript grades every answer of one
table exactly as the Python grader does (run with node and in headless Chromium, whichever is installed)."""

from __future__ import annotations

import json
import shutil

import pytest
from minivllm_labs.catalog import all_questions
from minivllm_labs.quiz import UNITS, NumericQuestion, grade
from minivllm_labs.quiz_html import NUMERIC_JS
from minivllm_labs.quiz_numbers import convert, parse_number, parse_quantity

from tests.labs import js_runner

MS = NumericQuestion(qid="lab99.ms", prompt="TPOT floor?", answer=0.284, rel_tol=0.1, unit="ms", model_answer="0.284")
BYTES = NumericQuestion(qid="lab99.b", prompt="KV per token?", answer=32768, rel_tol=0.05, unit="bytes",
                        model_answer="32 KiB")
TPS = NumericQuestion(qid="lab99.t", prompt="Throughput?", answer=12040, rel_tol=0.1, unit="tok/s", model_answer="12k")
PCT = NumericQuestion(qid="lab99.p", prompt="Share?", answer=28, rel_tol=0.1, unit="%", model_answer="28%")
RATIO = NumericQuestion(qid="lab99.x", prompt="Speed-up?", answer=1.7, rel_tol=0.1, unit="x", model_answer="1.7x")
US = NumericQuestion(qid="lab99.us", prompt="One op?", answer=9.1, rel_tol=0.5, unit="us", model_answer="9.1 us")
SECONDS = NumericQuestion(qid="lab99.s", prompt="Capture?", answer=2.4, rel_tol=0.2, unit="s", model_answer="2.4 s")
TOKENS = NumericQuestion(qid="lab99.n", prompt="KV capacity?", answer=262144, rel_tol=0.05, unit="tokens",
                         model_answer="262,144 tokens")
FEW = NumericQuestion(qid="lab99.f", prompt="Accepted per step?", answer=3.36, rel_tol=0.05, unit="tokens",
                      model_answer="3.36")
REQUESTS = NumericQuestion(qid="lab99.r", prompt="Concurrency?", answer=60, rel_tol=0.05, unit="requests",
                           model_answer="60")


@pytest.mark.parametrize("q,answer", [
    (MS, "284 us"), (MS, "284 µs"), (MS, "284 μs"), (MS, "284us"), (MS, "0.284 ms"), (MS, "0,28"), (MS, "0,28 ms"),
    (MS, "０.２８４"), (MS, "２８４ ｕｓ"), (MS, "0.000284 s"), (MS, "284000 ns"), (MS, "约 0.28 毫秒"), (MS, "~0.3"),
    (MS, 0.28), (BYTES, "32 KiB"), (BYTES, "32KiB"), (BYTES, "32 kib"), (BYTES, "32768"), (BYTES, "32,768 B"),
    (BYTES, "32768 bytes"), (BYTES, "0.03125 MiB"), (BYTES, "33 KB"), (BYTES, "32 ＫｉＢ"),
    (TPS, "12,040 tok/s"), (TPS, "12 ktok/s"), (TPS, "12040 tokens/s"), (PCT, "28%"), (PCT, "28 %"), (PCT, "２８％"),
    (RATIO, "1.7x"), (RATIO, "1.7 ×"), (RATIO, "1,7x"), (US, "9 us"), (US, "0.009 ms"), (SECONDS, "2400 ms"),
    (RATIO, "1.7倍"), (RATIO, "约 1.7 倍"), (MS, "approx. 0.28 ms"), (MS, "大约 0.28"), (TOKENS, "262k tokens"),
    (TOKENS, "262 k"), (TOKENS, "0.262M"), (TOKENS, "26万 tokens"), (TOKENS, "262,144 个token"), (FEW, "约 3.36"),
    (FEW, "约 3.36 个"), (REQUESTS, "~60 requests"), (REQUESTS, "60 个请求"),
])
def test_right_answers_in_any_unit(q, answer):
    ok, text = grade(q, answer, None)
    assert ok, (answer, text)


@pytest.mark.parametrize("q,answer", [
    (MS, "284"),  # 284 ms, not 284 us: a bare number is in the question's unit
    (MS, "284 ms"), (BYTES, "32"), (BYTES, "32 MiB"), (BYTES, "32 GB"), (TPS, "12 tok/s"), (SECONDS, "2.4 ms"),
])
def test_wrong_magnitudes_are_graded_wrong_not_ignored(q, answer):
    ok, text = grade(q, answer, None)
    assert not ok and text.startswith("Not quite"), (answer, text)


@pytest.mark.parametrize("q,answer,hint", [
    (MS, "32 KiB", "KiB is a size but the answer is a time in ms"),
    (BYTES, "3 ms", "ms is a time but the answer is a size in bytes"),
    (MS, "3 parsecs", "unknown unit 'parsecs'"),
    (MS, "", "type a number first"), (MS, "   ", "type a number first"), (MS, "\u3000", "type a number first"),
    (MS, None, "type a number first"), (MS, "ms", "answer with a number"), (MS, "1,2,3", "cannot read the number"),
    (MS, "1,234,5", "cannot read the number"), (MS, "nan", "answer with a number"), (MS, "1e400", "answer with"),
    (MS, True, "answer with a number"), (MS, "٣", "answer with a number"),
    (BYTES, "5 ms", "ms is a time but the answer is a size in bytes"), (MS, "262k", "k is a count but the answer"),
    (REQUESTS, "60 parsecs", "unknown unit 'parsecs'"), (BYTES, "1.05M", "M is a count but the answer is a size"),
    (TOKENS, "3 kparsecs", "unknown unit 'kparsecs'"), (TOKENS, "2 ms", "ms is a time but the answer is a count"),
])
def test_unconvertible_or_empty_answers_get_a_hint(q, answer, hint):
    ok, text = grade(q, answer, None)
    assert not ok and text.startswith("No answer graded") and hint in text, (answer, text)


@pytest.mark.parametrize("q,answer,hint_zh", [
    (BYTES, "3 ms", "ms 是时间单位，本题答案是数据量，单位 bytes"),
    (MS, "3 parsecs", "不认识 '3 parsecs' 里的单位 'parsecs'"), (MS, "", "请先填一个数"),
    (MS, "ms", "请填一个数，收到的是 'ms'"), (MS, "1,2,3", "读不出 '1,2,3' 里的数：请写成 1234.5 这样"),
    (TOKENS, "2 ms", "ms 是时间单位，本题答案是个数，单位 tokens"),
])
def test_hints_are_written_in_chinese_too(q, answer, hint_zh):
    ok, text = grade(q, answer, None, lang="zh")
    assert not ok and text == f"未评分：{hint_zh}。", (answer, text)


def test_choice_hints_are_written_in_chinese_too():
    from minivllm_labs.quiz import Option, Question

    q = Question("lab99.c", "?", (Option("yes", "why yes"), Option("no", "why no")), 0, "")
    assert grade(q, "", None, lang="zh")[1] == "未评分：请先选一个选项。"
    assert grade(q, "Z", None, lang="zh")[1] == "未评分：没有选项 Z：选项是 A-B。"
    assert grade(q, "1", None, lang="zh")[1] == "未评分：'1' 是数字；选项用字母 A-B 标记（第一个是 A）。"


@pytest.mark.parametrize("answer,value,unit", [
    ("0,28", 0.28, None), ("1,000", 1000, None), ("1,000,000.5", 1000000.5, None), ("12,5 ms", 12.5, "ms"),
    ("0,280", 0.28, None), ("１２", 12, None), ("ＭｉＢ".join(["3", ""]), 3, "MiB"), ("32 KB", 32, "KB"),
    ("about 30 s", 30, "s"), ("≈ 5 秒", 5, "s"), ("1_000", 1000, None), ("3e1 us", 30, "us"), ("-1", -1, None),
    ("262k tokens", 262000, "tokens"), ("1.05M", 1.05, "M"), ("6.5万 tokens", 65000, "tokens"), ("2.7倍", 2.7, "x"),
    ("约 3.36 个", 3.36, "个"), ("approx. 3.36", 3.36, None), ("60 requests", 60, "requests"), ("3 rows", 3, "rows"),
    ("114 688", 114688, None), ("114 688 bytes", 114688, "bytes"), ("1 000 000", 1e6, None), ("12 ms", 12, "ms"),
])
def test_parse_quantity(answer, value, unit):
    assert parse_quantity(answer) == (value, unit)


def test_conversions():
    assert parse_number("284 us", "ms") == pytest.approx(0.284)
    assert parse_number("32 KiB", "bytes") == 32768 and parse_number("32 KB", "bytes") == 32000
    assert parse_number("1 GiB", "MiB") == 1024 and convert(2, "s", "ms") == 2000
    assert parse_number("5 ms") == 5  # no target: read, not converted
    with pytest.raises(ValueError, match="size"):
        convert(1, "MiB", "ms")


def test_a_numeric_question_needs_a_unit_the_grader_converts():
    with pytest.raises(ValueError, match="not one the grader converts"):
        NumericQuestion(qid="lab99.bad", prompt="?", answer=1, rel_tol=0.1, unit="furlongs", model_answer="1")
    for q in all_questions():
        if isinstance(q, NumericQuestion) and q.unit:
            assert q.unit.lower().replace(" ", "") in UNITS, q.qid


TABLE = [(q, a) for q in (MS, BYTES, TPS, PCT, RATIO, US, SECONDS, TOKENS, FEW, REQUESTS) for a in (
    "284 us", "284 µs", "0,28", "0.284", "284", "２８４ ｕｓ", "32 KiB", "32 kb", "32768", "32 768", "0.03125 MiB",
    "12,040 tok/s", "12 ktok/s", "28%", "２８％", "1.7x", "1,7 ×", "9 us", "0.009 ms", "2400 ms", "2.4", "约 2.4 秒",
    "", "  ", "\u3000", "x", "ms", "3 parsecs", "1,2,3", "1.2.3", "nan", "1e400", "٣", "-1", ".5", "5.", "+3e0 s",
    "Ｂ", "ß", "ﬁ 2", "12.5ms", "1,000", "1,000,000.5", "0,280", "262k tokens", "262 K", "0.262M", "26万 tokens",
    "1.05M", "6.5万", "约 3.36", "约 3.36 个", "approx. 3.36", "approx.", "2.7倍", "5 ms", "~60 requests",
    "60 个请求", "3 rows", "k", "3 kk", "3 kparsecs", "262,144 个token", "1.7 倍")]


@pytest.mark.skipif(not js_runner.available(), reason="needs node or chromium to run the quiz's JavaScript")
@pytest.mark.parametrize("engine", ["node", "chromium"])
def test_javascript_grades_every_answer_like_python(engine):
    """The page runs in browsers, so Chromium's JavaScript engine is checked too when it is installed."""
    if engine == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    if engine == "chromium" and not js_runner._chromium():
        pytest.skip("chromium is not installed")
    cases = [{"raw": a, "answer": q.answer, "tol": q.rel_tol, "unit": q.unit} for q, a in TABLE]
    got = js_runner.run_js(NUMERIC_JS, f"{json.dumps(cases)}.map(function (c) {{"
                           " return mvGradeNumber(c.raw, c.answer, c.tol, c.unit); })", prefer=engine)
    assert len(got) == len(TABLE)
    for (q, a), js in zip(TABLE, got):
        ok, en = grade(q, a, None)
        assert js["ok"] == ok, (q.unit, a, en, js)
        assert en.split("\n")[0] == js["en"], (q.unit, a)
        assert grade(q, a, None, lang="zh")[1].split("\n")[0] == js["zh"], (q.unit, a)


def test_score_names_an_unknown_id_instead_of_a_key_error():
    from minivllm_labs import lab08

    first = lab08.QUESTIONS[0].qid
    with pytest.raises(ValueError, match=r"unknown question id\(s\) \['lab08.nope'\]"):
        lab08.score([first, "lab08.nope"], {})
    assert lab08.score([first], {"lab08.nope": "A"}).total == 1  # an answer to a question not asked is ignored


@pytest.mark.skipif(not js_runner.available(), reason="needs node or chromium to run the quiz's JavaScript")
def test_numbers_are_written_as_javascript_writes_them():
    from minivllm_labs.quiz import _num

    xs = [0, 9e-6, 1.23456e-7, 0.284, 1, 1000, 12040, 114688, 1e16, 1.5e21, 2.5e22, -0.5, 123456789, 1e-4]
    got = js_runner.run_js("", f"{json.dumps(xs)}.map(function (x) {{"
                           " return String(Number(Number(x).toPrecision(4))); })")
    assert [_num(x) for x in xs] == got
