"""Reading a number a learner typed, with its unit, in Python and in the static quiz's JavaScript.

Why its own file: a numeric answer is right only in the question's unit, and learners write units ("284 us" to
a question in ms, "32 KiB" to one in bytes, "0,28" with a comma decimal, "１２" in full width). Ignoring the
unit grades "284 us" as 284 ms; so the unit is read and converted, and a unit that cannot be converted (a size
given to a time question, or a word we do not know) is refused with a hint, in English and Chinese (AnswerError),
instead of guessed. The static quiz
grades in the browser with NUMBER_JS, the same steps written in JavaScript over the same UNITS table (a test
runs both on one table of answers and compares the verdicts).

Steps, in both languages: NFKC (full-width digits and letters become ASCII, "µ" becomes "μ"), lower case, ASCII
whitespace collapsed; a leading word or sign of approximation dropped ("about", "approx.", "~", "≈", "约"); the
number (thousands commas "1,000", or one decimal comma "0,28"; "_" ignored; an exponent "3e1"); then the unit,
where a count may carry a scale ("262k tokens", "1.05M", "6.5万", "约 3.36 个"), and a ratio may be "2.7倍".
"""

from __future__ import annotations

import json
import math
import re
import unicodedata

#: unit as typed (after NFKC, lower case, spaces removed) -> (name shown, dimension, factor to the base unit).
UNITS: dict[str, tuple[str, str, float]] = {}


def _add(name: str, dim: str, factor: float, *aliases: str) -> None:
    for a in (name.lower(), *aliases):
        UNITS[a] = (name, dim, factor)


_add("s", "time", 1.0, "sec", "secs", "second", "seconds", "秒")
_add("ms", "time", 1e-3, "msec", "millisecond", "milliseconds", "毫秒")
_add("us", "time", 1e-6, "μs", "usec", "microsecond", "microseconds", "微秒")
_add("ns", "time", 1e-9, "nanosecond", "nanoseconds", "纳秒")
_add("bytes", "size", 1.0, "b", "byte", "字节")
_add("KB", "size", 1e3)
_add("KiB", "size", 2.0 ** 10)
_add("MB", "size", 1e6)
_add("MiB", "size", 2.0 ** 20)
_add("GB", "size", 1e9)
_add("GiB", "size", 2.0 ** 30)
_add("TB", "size", 1e12)
_add("TiB", "size", 2.0 ** 40)
_add("tok/s", "throughput", 1.0, "tokens/s", "token/s", "tok/sec", "tokens/sec", "tps")
_add("ktok/s", "throughput", 1e3, "ktokens/s")
_add("tokens", "count", 1.0, "token", "tok", "个token")
_add("requests", "count", 1.0, "request", "req", "reqs", "个请求", "请求")
_add("rows", "count", 1.0, "row", "行")
_add("个", "count", 1.0)  # "约 3.36 个"
_add("k", "count", 1e3, "thousand", "千")  # a scale alone: "262k" tokens
_add("M", "count", 1e6, "million", "百万")
_add("万", "count", 1e4)
_add("%", "percent", 1.0, "percent", "pct")
_add("x", "ratio", 1.0, "×", "times", "倍")

#: each dimension's name in the Chinese hints
DIMS_ZH: dict[str, str] = {"time": "时间", "size": "数据量", "throughput": "吞吐", "count": "个数", "percent": "百分比",
                           "ratio": "倍数"}


class AnswerError(ValueError):
    """Why an answer cannot be graded, as a hint to the learner: str(e) in English, e.zh in Chinese."""

    def __init__(self, en: str, zh: str) -> None:
        super().__init__(en)
        self.zh = zh


#: a scale written before a count's unit: "262k tokens", "1.05M requests", "6.5万 tokens"
SCALES: dict[str, float] = {"k": 1e3, "m": 1e6, "万": 1e4}

_SPACE = re.compile(r"[ \t\n\r\f\v]+")
_LEAD = re.compile(r"^(?:[^0-9.+-]|\.(?![0-9]))+")  # "about", "approx.", "~", "≈", "约"
_QUANTITY = re.compile(r"^([+-]?(?:[0-9][0-9,_]*(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?)(.*)$")
_THOUSANDS = re.compile(r"^[+-]?[1-9][0-9]{0,2}(,[0-9]{3})+(\.[0-9]*)?(e[+-]?[0-9]+)?$")


#: Digits grouped by spaces ("114 688", "1 000 000"; NFKC makes a thin space a space): one number.
_GROUPS = re.compile(r"^([+-]?[0-9]{1,3})((?: [0-9]{3})+)(?![0-9])")


def _clean(s: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", s).lower()).strip(" ")


def parse_quantity(answer: str | int | float) -> tuple[float, str | None]:
    """(number, unit name from UNITS or None) of what a learner typed. Raises ValueError with a hint."""
    no_number = AnswerError(f"answer with a number, got {answer!r}", f"请填一个数，收到的是 {answer!r}")
    if isinstance(answer, bool) or not isinstance(answer, (int, float, str)):
        raise no_number
    if not isinstance(answer, str):
        x = float(answer)
        if not math.isfinite(x):
            raise no_number
        return x, None
    m = _QUANTITY.match(_GROUPS.sub(lambda g: g.group(1) + g.group(2).replace(" ", ""), _LEAD.sub("", _clean(answer))))
    if not m:
        raise no_number
    num, unit = m.group(1).replace("_", ""), m.group(2).replace(" ", "").rstrip(".。")
    if "," in num:
        if _THOUSANDS.match(num):
            num = num.replace(",", "")
        elif num.count(",") == 1 and "." not in num:
            num = num.replace(",", ".")  # a decimal comma: "0,28"
        else:
            raise AnswerError(f"cannot read the number in {answer!r}: write it as 1234.5",
                              f"读不出 {answer!r} 里的数：请写成 1234.5 这样")
    x = float(num)
    if not math.isfinite(x):
        raise no_number
    if not unit:
        return x, None
    if unit not in UNITS and unit[:1] in SCALES and UNITS.get(unit[1:], ("", "", 0.0))[1:] == ("count", 1.0):
        x, unit = x * SCALES[unit[:1]], unit[1:]  # "262k tokens": 262000 tokens
    if unit not in UNITS:
        raise AnswerError(f"unknown unit {unit!r} in {answer!r}", f"不认识 {answer!r} 里的单位 {unit!r}")
    return x, UNITS[unit][0]


def convert(x: float, unit: str | None, target: str) -> float:
    """x in `unit` expressed in `target` (a question's unit); no unit means the question's own. ValueError when
    the two cannot be converted (a size given to a time question)."""
    if unit is None:
        return x
    want = UNITS.get(target.lower().replace(" ", ""))
    have = UNITS[unit.lower()]
    if want is None:
        raise AnswerError(f"give the number in {target}, without another unit", f"请按 {target} 填数，不要带别的单位")
    if have[1] != want[1]:
        raise AnswerError(f"{unit} is a {have[1]} but the answer is a {want[1]} in {target}",
                          f"{unit} 是{DIMS_ZH[have[1]]}单位，本题答案是{DIMS_ZH[want[1]]}，单位 {target}")
    return x * have[2] / want[2]


def parse_number(answer: str | int | float, target: str = "") -> float:
    """The number a learner means, in the unit `target` (the question's): "284 us" -> 0.284 for ms, "32 KiB" ->
    32768 for bytes, "0,28" -> 0.28, "１２" -> 12. Without `target`, a unit is read but not converted."""
    x, unit = parse_quantity(answer)
    return convert(x, unit, target) if target and unit else x


#: The same steps in JavaScript (mvParseNumber(raw, target) -> {x} or {error, error_zh}); quiz_html embeds it.
NUMBER_JS = r"""var MV_UNITS = %s, MV_SCALES = %s, MV_DIMS_ZH = %s;
function mvParseNumber(raw, target) {
  var s = String(raw).normalize("NFKC").toLowerCase().replace(/[ \t\n\r\f\v]+/g, " ").replace(/^ +| +$/g, "");
  var shown = "'" + String(raw) + "'";
  var m = s.replace(/^(?:[^0-9.+-]|\.(?![0-9]))+/, "")
    .replace(/^([+-]?[0-9]{1,3})((?: [0-9]{3})+)(?![0-9])/, function (g, a, b) { return a + b.replace(/ /g, ""); })
    .match(/^([+-]?(?:[0-9][0-9,_]*(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?)(.*)$/);
  var noNumber = {error: "answer with a number, got " + shown, error_zh: "请填一个数，收到的是 " + shown};
  if (!m) return noNumber;
  var num = m[1].replace(/_/g, ""), unit = m[2].replace(/ /g, "").replace(/[.。]+$/, "");
  if (num.indexOf(",") >= 0) {
    if (/^[+-]?[1-9][0-9]{0,2}(,[0-9]{3})+(\.[0-9]*)?(e[+-]?[0-9]+)?$/.test(num)) num = num.replace(/,/g, "");
    else if (num.split(",").length === 2 && num.indexOf(".") < 0) num = num.replace(",", ".");
    else return {error: "cannot read the number in " + shown + ": write it as 1234.5",
      error_zh: "读不出 " + shown + " 里的数：请写成 1234.5 这样"};
  }
  var x = parseFloat(num), has = function (u) { return Object.prototype.hasOwnProperty.call(MV_UNITS, u); };
  if (!isFinite(x)) return noNumber;
  var scale = unit.charAt(0), base = unit.slice(1);
  if (unit && !has(unit) && Object.prototype.hasOwnProperty.call(MV_SCALES, scale) && has(base) &&
      MV_UNITS[base][1] === "count" && MV_UNITS[base][2] === 1) {
    x = x * MV_SCALES[scale]; unit = base;  // "262k tokens": 262000 tokens
  }
  if (unit && !has(unit))
    return {error: "unknown unit '" + unit + "' in " + shown, error_zh: "不认识 " + shown + " 里的单位 '" + unit + "'"};
  if (!unit || !target) return {x: x};
  var have = MV_UNITS[unit], key = target.toLowerCase().replace(/ /g, "");
  if (!has(key))
    return {error: "give the number in " + target + ", without another unit",
      error_zh: "请按 " + target + " 填数，不要带别的单位"};
  var want = MV_UNITS[key];
  if (have[1] !== want[1])
    return {error: have[0] + " is a " + have[1] + " but the answer is a " + want[1] + " in " + target,
      error_zh: have[0] + " 是" + MV_DIMS_ZH[have[1]] + "单位，本题答案是" + MV_DIMS_ZH[want[1]] + "，单位 " + target};
  return {x: x * have[2] / want[2]};
}""" % tuple(json.dumps(t, ensure_ascii=False) for t in (UNITS, SCALES, DIMS_ZH))
