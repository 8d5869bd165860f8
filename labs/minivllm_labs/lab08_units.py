"""Numeric answers with their units, for Lab 08's bank: "284 us" to a question in ms is 0.284, "56 KiB" to a
question in bytes is 57,344, "１１２ GiB" is 112 GiB, "0,28" is refused (a decimal comma or a thousands comma?),
and so is "5 parsecs" to a question in ms; counts (tokens, requests) take any word and a scale ("262k tokens").

Why its own file: the mock-interview page grades in JavaScript with no kernel, and UNITS_JS here is the twin
of `to_unit`, built from the same tables; a test runs both on the same answers. A unit of another kind than the
question's ("5 ms" to a question in bytes) is refused with a hint instead of being ignored.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

# unit (lower case, after NFKC) -> (kind, factor to the kind's base unit)
UNITS: dict[str, tuple[str, float]] = {
    **{u: ("time", f) for u, f in (("s", 1.0), ("sec", 1.0), ("秒", 1.0), ("ms", 1e-3), ("毫秒", 1e-3),
                                   ("us", 1e-6), ("μs", 1e-6), ("微秒", 1e-6), ("ns", 1e-9), ("纳秒", 1e-9))},
    **{u: ("bytes", f) for u, f in (("b", 1.0), ("byte", 1.0), ("bytes", 1.0), ("字节", 1.0),
                                    ("kb", 1e3), ("kib", 2.0 ** 10), ("mb", 1e6), ("mib", 2.0 ** 20),
                                    ("gb", 1e9), ("gib", 2.0 ** 30), ("tb", 1e12), ("tib", 2.0 ** 40))},
    **{u: ("ratio", 1.0) for u in ("x", "×", "倍")},
    "%": ("percent", 1.0), "percent": ("percent", 1.0),
}
# counts (tokens, requests, rows, ...) take a scale word: "262k tokens", "1.05M", "6.5万"
COUNT_SCALES: dict[str, float] = {"k": 1e3, "m": 1e6, "万": 1e4}
_PREFIX = re.compile(r"^(about|approx\.?|approximately|around|roughly|~|≈|约|大约|大概)\s*", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?", re.ASCII)
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", re.ASCII)


def _unit_at(rest: str, table) -> str | None:
    """The longest key of `table` that starts `rest` and ends at a word boundary."""
    for key in sorted(table, key=len, reverse=True):
        if rest.startswith(key):
            nxt = rest[len(key):len(key) + 1]
            if not (key.isascii() and key.isalpha() and nxt.isascii() and nxt.isalpha()):
                return key
    return None


def to_unit(answer: Any, unit: str) -> tuple[float | None, tuple[str, str] | None]:
    """(the answer in `unit`, None) or (None, (hint in English, hint in Chinese)). Never raises."""
    if isinstance(answer, bool) or answer is None:
        return None, ("type a number", "请填一个数")
    if isinstance(answer, (int, float)):
        return (float(answer), None) if math.isfinite(answer) else (None, ("type a finite number", "请填有限的数"))
    if not isinstance(answer, str):
        return None, ("type a number", "请填一个数")
    s = _PREFIX.sub("", unicodedata.normalize("NFKC", answer).strip())
    m = _NUMBER.match(s)
    if not m:
        return None, ("type a number", "请填一个数") if not s else (f"no number in {answer!r}", f"{answer!r} 里没有数")
    num = m.group(0)
    if "," in num and not _THOUSANDS.fullmatch(num):
        return None, (f"{num!r}: write decimals with a point (0.28), thousands with commas (114,688)",
                      f"{num!r}：小数用小数点（0.28），千位用逗号（114,688）")
    x = float(num.replace(",", ""))
    rest = s[m.end():].strip().lower().rstrip(".。")
    q_kind, q_factor = UNITS.get(unicodedata.normalize("NFKC", unit).lower(), ("count", 1.0))
    key = _unit_at(rest, UNITS)
    if key is not None:
        kind, factor = UNITS[key]
        if kind != q_kind:
            return None, (f"{answer!r} is in {key}; this answer is in {unit}", f"{answer!r} 的单位是 {key}；本题单位是 {unit}")
        return x * factor / q_factor, None
    if q_kind != "count" and rest:  # a word where a unit of time, bytes, ... belongs: refuse, never ignore
        return None, (f"unknown unit {rest!r}; this answer is in {unit}", f"不认识的单位 {rest!r}；本题单位是 {unit}")
    scale = _unit_at(rest, COUNT_SCALES) if q_kind == "count" else None
    return x * (COUNT_SCALES[scale] if scale else 1.0), None


UNITS_JS = r"""
var UNITS = @UNITS@, COUNT_SCALES = @SCALES@;
function unitAt(rest, table) {
  var keys = Object.keys(table).sort(function (a, b) { return b.length - a.length; });
  for (var i = 0; i < keys.length; i++) {
    var k = keys[i];
    if (rest.indexOf(k) === 0) {
      var nxt = rest.substr(k.length, 1);
      if (!(/^[a-z]+$/i.test(k) && /^[a-z]$/i.test(nxt))) { return k; }
    }
  }
  return null;
}
function toUnit(answer, unit) {
  if (answer === null || answer === undefined || typeof answer === "boolean") {
    return [null, ["type a number", "请填一个数"]];
  }
  if (typeof answer === "number") {
    return isFinite(answer) ? [answer, null] : [null, ["type a finite number", "请填有限的数"]];
  }
  var s = String(answer).normalize("NFKC").trim()
    .replace(/^(about|approx\.?|approximately|around|roughly|~|≈|约|大约|大概)\s*/i, "");
  var m = s.match(/^[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?/);
  if (!m) {
    return [null, s ? ["no number in '" + answer + "'", "'" + answer + "' 里没有数"] : ["type a number", "请填一个数"]];
  }
  var num = m[0];
  if (num.indexOf(",") >= 0 && !/^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$/.test(num)) {
    return [null, ["'" + num + "': write decimals with a point (0.28), thousands with commas (114,688)",
                   "'" + num + "'：小数用小数点（0.28），千位用逗号（114,688）"]];
  }
  var x = parseFloat(num.replace(/,/g, ""));
  var rest = s.slice(num.length).trim().toLowerCase().replace(/[.。]+$/, "");
  var q = UNITS[unit.normalize("NFKC").toLowerCase()] || ["count", 1.0];
  var key = unitAt(rest, UNITS);
  if (key !== null) {
    if (UNITS[key][0] !== q[0]) {
      return [null, ["'" + answer + "' is in " + key + "; this answer is in " + unit,
                     "'" + answer + "' 的单位是 " + key + "；本题单位是 " + unit]];
    }
    return [x * UNITS[key][1] / q[1], null];
  }
  if (q[0] !== "count" && rest) {
    return [null, ["unknown unit '" + rest + "'; this answer is in " + unit, "不认识的单位 '" + rest + "'；本题单位是 " + unit]];
  }
  var scale = q[0] === "count" ? unitAt(rest, COUNT_SCALES) : null;
  return [x * (scale ? COUNT_SCALES[scale] : 1.0), null];
}
""".replace("@UNITS@", json.dumps({k: list(v) for k, v in UNITS.items()}, ensure_ascii=False)).replace(
    "@SCALES@", json.dumps(COUNT_SCALES, ensure_ascii=False))
