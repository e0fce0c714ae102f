"""A word a Chinese or Japanese question asks about that no retrieved unit writes (issue #40): its
bigrams count as unknown, as a missing word of a spaced language does; bigrams that only straddle two
known words still step aside."""

from __future__ import annotations

from typing import Any

from agentrag.answer_languages import answering_in, unknown_bigrams
from agentrag.evidence import units_of
from agentrag.extractive import gather
from agentrag.focus import focus
from tests.test_evidence import hit

ZH = [
    hit("# 年假\n\n每位全职员工每年享有二十五天带薪年假。\n", "chk_z1"),
    hit("# 育儿假\n\n生育父母享有二十周全薪育儿假。\n", "chk_z2"),
]
JA = [
    hit("# 育児休業\n\n出産した親は、全額給与で20週間の育児休業を取得できます。\n", "chk_j1"),
    hit("# 研修\n\n従業員一人あたり年間1,500ユーロの研修予算があります。\n", "chk_j2"),
]


def _focus(language: str, hits: list[Any], question: str) -> tuple[Any, tuple[float, float]]:
    with answering_in(language):
        answer = gather([question], hits)
        return answer, focus(question, answer.ranked[0][0].unit, units_of(hits))


def test_the_inside_of_a_word_no_unit_writes_stays_and_a_straddling_bigram_steps_aside() -> None:
    held = {"育儿": 1, "儿假": 1}
    asked = ["实习", "习生", "生有", "几周", "周育", "育儿", "儿假"]
    # 实, 习 and 生 are in no held bigram: "实习", "习生" are the inside of a word the units lack;
    # "生有" straddles it and the question word 有; "几周" and "周育" hold the question word 几 or a
    # held character
    assert unknown_bigrams(asked, held, "zh") == ["实习", "习生", "育儿", "儿假"]
    # a language without question words (Thai, Korean) cannot tell a straddle from a word: only the
    # held bigrams stay, as before
    assert unknown_bigrams(asked, held, "th") == ["育儿", "儿假"]


def test_a_chinese_near_miss_names_what_the_units_lack() -> None:
    covered_question, (_, unknown_covered) = _focus("zh", ZH, "生育父母有几周育儿假？")
    near, (_, unknown_near) = _focus("zh", ZH, "实习生有几周育儿假？")
    assert unknown_covered == 0.0
    # before: every bigram no unit holds stepped aside, so the interns said nothing (0.0)
    assert unknown_near > 0.0
    assert near.confidence < covered_question.confidence


def test_a_japanese_near_miss_names_what_the_units_lack() -> None:
    covered_question, (_, unknown_covered) = _focus(
        "ja", JA, "出産した親は何週間の育児休業を取得できますか？"
    )
    near, (_, unknown_near) = _focus("ja", JA, "インターンは何週間の育児休業を取得できますか？")
    assert unknown_covered == 0.0
    assert unknown_near > 0.0
    assert near.confidence < covered_question.confidence
