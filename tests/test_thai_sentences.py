"""Thai sentences (issue #40): Thai writes no full stop; a space between Thai letters ends a sentence
or clause. Other scripts split exactly as before."""

from __future__ import annotations

import re
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag import sentences as sentences_module
from agentrag.sentences import THAI_MIN_CHARS, sentences

# A Thai paragraph of XQuAD-dev ("Construction"): clauses parted by spaces, no full stop.
CLAUSE_A = "การก่อสร้างคือกระบวนการก่อสร้างอาคารหรือโครงสร้างพื้นฐานซึ่งแตกต่างจากการผลิตสิ่งของเหมือน ๆ กันจำนวนมาก"
CLAUSE_B = "โดยไม่มีผู้ซื้อที่กำหนดไว้ในขณะที่การก่อสร้างนั้นตามปกติแล้วจะเกิดขึ้นบนพื้นที่เพื่อลูกค้าซึ่งเป็นที่ทราบแล้ว"
CLAUSE_C = "อุตสาหกรรมการก่อสร้างมีสัดส่วนหกถึงเก้าเปอร์เซ็นต์ของผลิตภัณฑ์มวลรวมภายในประเทศในปี 2010 ตามรายงาน OECD ฉบับล่าสุด"


def test_a_space_between_thai_letters_ends_a_sentence_once_it_is_long_enough() -> None:
    text = " ".join([CLAUSE_A + " " + CLAUSE_B, CLAUSE_C + " " + CLAUSE_A])
    found = sentences(text, language="th", cut_at_end=True)
    first = CLAUSE_A + " " + CLAUSE_B
    assert len(CLAUSE_A) < THAI_MIN_CHARS <= len(first)
    assert [s.text for s in found] == [first, CLAUSE_C + " " + CLAUSE_A]
    # ends in a Thai letter: a whole sentence (the chunker cuts Thai text at spaces)
    assert all(s.complete for s in found)
    assert text[found[1].start : found[1].end] == found[1].text


def test_numbers_latin_runs_and_the_repetition_mark_stay_inside() -> None:
    text = " ".join([CLAUSE_C] * 3)
    texts = [s.text for s in sentences(text, language="th")]
    assert all("ในปี 2010 ตามรายงาน OECD ฉบับล่าสุด" in t for t in texts)
    assert "เหมือน ๆ กัน" in sentences(CLAUSE_A * 3, language="th")[0].text


def test_english_mode_leaves_thai_text_whole() -> None:
    text = " ".join([CLAUSE_A, CLAUSE_B, CLAUSE_C, CLAUSE_A])
    assert len(sentences(text)) == 1


_OTHER_SCRIPTS = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019 .!?,:;-\n\"'()*`")
        + list("äöüßÄ中文字。！？日本語한국어")
        + list("हिन्दी।॥")
        + list("ๆ๑๒๓")  # Thai's repetition mark and digits: not letters, no cut
    ),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(text=_OTHER_SCRIPTS, language=st.sampled_from(["de", "zh", "hi", "th", None]))
def test_text_without_thai_letters_splits_exactly_as_before(text: str, language: str | None) -> None:
    found = sentences(text, language=language)
    # the rules before Thai sentences: no Thai cut, no Thai end
    before_end = re.compile(sentences_module._ENDS_WELL_ANY.pattern.rsplit("|", 1)[0])
    with (
        patch.object(sentences_module, "_THAI_SPACE", re.compile(r"(?!)")),
        patch.object(sentences_module, "_ENDS_WELL_ANY", before_end),
    ):
        assert found == sentences(text, language=language)
