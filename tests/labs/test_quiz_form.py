"""A quiz must need knowledge: no strategy that reads only the options' form may beat 35% over every choice
question of every lab and the interview bank, in English and in Chinese separately (chance is about 25%).

The strategies are the ones a test-wise reader uses: pick by length rank (the longest, the 2nd, the 3rd, the
shortest), or pick the option with the fewest absolute or causal words ("only", "always", "because", "so",
只, 总是, 因为, 所以 ...), since a distractor is often the over-sure or over-explained sentence. The reverse readings (the most such words) are
scored too, so that hedges cannot simply move onto the right option. Ties are split:
a strategy that leaves k options tied scores 1/k when the right one is among them. The scores are printed
(`pytest -s`), so a rewrite can see which form still leaks.
"""

from __future__ import annotations

import re

import pytest
from minivllm_labs.catalog import labs
from minivllm_labs.quiz import Question

#: The most a form-only strategy may score, over all choice questions of one language.
LIMIT = 0.35

#: Words that make a sentence over-sure (absolute) or over-explained (causal). Matched as whole words in
#: English and as substrings in Chinese.
MARKERS_EN = ("only", "always", "never", "every", "all", "none", "nothing", "must", "cannot", "because",
              "since", "so", "therefore", "thus", "hence", "whatever", "any")
MARKERS_ZH = ("只", "总是", "总会", "从不", "永远", "所有", "一切", "必须", "完全", "任何", "因为", "所以", "因此",
              "由于", "不管", "无论")
_EN = re.compile(r"\b(" + "|".join(MARKERS_EN) + r")\b", re.IGNORECASE)


def markers(text: str, lang: str) -> int:
    """How many absolute or causal words `text` holds."""
    if lang == "zh":
        return sum(text.count(w) for w in MARKERS_ZH)
    return len(_EN.findall(text))


def _text(q: Question, i: int, lang: str) -> str:
    return q.options[i].text_zh if lang == "zh" else q.options[i].text


def _pick(q: Question, lang: str, key) -> float:
    """The score of picking the options that minimise `key` (ties split evenly)."""
    values = [key(_text(q, i, lang)) for i in range(len(q.options))]
    best = min(values)
    tied = [i for i, v in enumerate(values) if v == best]
    return (q.correct in tied) / len(tied)


def _by_length_rank(rank: int):
    """Pick the option of the given length rank (0 = longest, -1 = shortest); options of equal length share it."""
    def score(q: Question, lang: str) -> float:
        lengths = [len(_text(q, i, lang)) for i in range(len(q.options))]
        target = sorted(lengths, reverse=True)[rank]
        tied = [i for i, n in enumerate(lengths) if n == target]
        return (q.correct in tied) / len(tied)
    return score


STRATEGIES = {
    "longest": _by_length_rank(0),
    "2nd longest": _by_length_rank(1),
    "3rd longest": _by_length_rank(2),
    "shortest": _by_length_rank(-1),
    "fewest absolute/causal words": lambda q, lang: _pick(q, lang, lambda t: markers(t, lang)),
    "fewest such words, then shortest": lambda q, lang: _pick(q, lang, lambda t: (markers(t, lang), len(t))),
    # the reverse reading, so that a rewrite cannot pass by moving every hedge onto the right option
    "most such words": lambda q, lang: _pick(q, lang, lambda t: -markers(t, lang)),
    "most such words, then longest": lambda q, lang: _pick(q, lang, lambda t: (-markers(t, lang), -len(t))),
}


def choice_questions() -> list[Question]:
    return [q for info in labs() for q in info.questions if isinstance(q, Question)]


def scores(lang: str, questions: list[Question] | None = None) -> dict[str, float]:
    """Each strategy's share of right answers over `questions` (every choice question by default)."""
    qs = choice_questions() if questions is None else questions
    return {name: sum(f(q, lang) for q in qs) / len(qs) for name, f in STRATEGIES.items()}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_form_only_strategy_beats_the_limit(lang):
    qs = choice_questions()
    got = scores(lang, qs)
    print(f"\nform-only strategies, {lang}, {len(qs)} choice questions:")
    for name, s in got.items():
        print(f"  {name:<34} {s:6.1%}")
    over = {name: f"{s:.1%}" for name, s in got.items() if s > LIMIT}
    assert not over, f"{lang}: form gives the answer away ({over}, limit {LIMIT:.0%})"


def test_the_strategies_score_what_they_should():
    """A quiz whose right option is always the shortest and the least hedged fails; a mixed one does not."""
    from minivllm_labs.quiz import Option

    def q(texts, correct):
        return Question("lab99.t", "?", tuple(Option(t, "", t, "") for t in texts), correct, "")

    leaky = [q(["short", "this is always longer", "because this is longer still", "only the longest one here"], 0)
             for _ in range(4)]
    s = scores("en", leaky)
    assert s["shortest"] == 1.0 and s["fewest absolute/causal words"] == 1.0 and s["longest"] == 0.0
    mixed = [q(["aa", "bbbb", "cccccc", "dddddddd"], i) for i in range(4)]
    s = scores("en", mixed)
    assert all(v == 0.25 for k, v in s.items() if "longest" in k or k == "shortest"), s
    assert s["fewest absolute/causal words"] == 0.25  # all tied: 1/4 each
    assert markers("只有因为所以", "zh") == 3 and markers("Solo, so only", "en") == 2


def test_right_answers_spread_over_the_letters():
    """No letter holds more than a third of the right answers (the bank shuffles; the labs place them by hand)."""
    from collections import Counter

    qs = choice_questions()
    letters = Counter("ABCD"[q.correct] for q in qs)
    assert max(letters.values()) <= len(qs) / 3, letters


def test_stems_do_not_name_the_source_under_test():
    """A stem that opens with "the handbook says ..." tells the reader the lab is about to refute it: it states
    the question, and the options carry the claims."""
    import re

    for q in choice_questions():
        assert not re.search(r"\b(handbook|article) says|手册说|文章说", q.prompt + q.prompt_zh), q.qid
