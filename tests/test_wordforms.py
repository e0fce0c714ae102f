"""A question's word the evidence writes in another form (agentrag.wordforms, session 22): an acronym
and its words, a decade and a year in it, a number word and its digits, a British and an American
spelling count as held by the best unit, and are recorded; a name, another number, another degree or
another language's question are not. Also two phrasings the abstention reads as phrasing, not as a
missing qualifier: "What does X *mean*?" (the meaning asked for) and "I *am*" (a form of be)."""

from __future__ import annotations

from typing import Any

import pytest

from agentrag.abstain import found_share
from agentrag.answer_languages import ANSWER_LANGUAGE
from agentrag.evidence import units_of
from agentrag.extractive import gather
from agentrag.focus import category_terms, focus
from agentrag.steps._common import terms
from agentrag.verbs import said_otherwise
from agentrag.wordforms import root, written_otherwise
from tests.test_evidence import hit


def _unit(text: str) -> Any:
    return units_of([hit(text)])[0]


def _written(question: str, text: str) -> dict[str, str]:
    held = set(terms(text))
    return written_otherwise(question, _unit(text), [t for t in terms(question) if t not in held])


@pytest.mark.parametrize(
    ("question", "text", "term", "word"),
    [
        (
            "What was the Rhine in WWII?",
            "In World War II, the Rhine was an obstacle.",
            "wwii",
            "World War II",
        ),
        (
            "Which EU treaties protect rights?",
            "Treaties of the European Union protect rights.",
            "eu",
            "European Union",
        ),
        ("What drama debuted on ABC in the 80s?", "Dynasty debuted on ABC in 1981.", "80s", "1981"),
        ("Which city grew in the 1100s?", "Caen grew quickly after 1130.", "1100s", "1130"),
        ("Who finished fourth?", "Smith finished 4th after a fall.", "fourth", "4th"),
        ("Who had five sacks?", "Ware had 5 sacks in the game.", "five", "5"),
        ("What colour is the flag?", "The flag's color is red.", "colour", "color"),
        ("Who utilized the church?", "The church was utilised by the dukes.", "util", "utilised"),
        (
            "What platform was Sentanta Sports planning on launching on?",
            "Setanta Sports confirmed that it would launch on the digital terrestrial platform.",
            "sentanta",
            "Setanta",
        ),
        (
            "What were the origins of the Raouliii family?",
            "The Raoulii were descended from an Italo-Norman named Raoul.",
            "raouliii",
            "Raoulii",
        ),
        (
            "What party is favored in Bedigo?",
            "Labor is strongest in Bendigo and Geelong.",
            "bedigo",
            "Bendigo",
        ),
        ("Who wrote to Shelly?", "Gandhi wrote to Shelley twice.", "shelli", "Shelley"),
        ("Who won Bendgio?", "Labor won Bendigo in 1999.", "bendgio", "Bendigo"),  # letters swapped
        (
            "What does the Nederrikn's name change into?",
            "At Wijk bij Duurstede, the Nederrijn changes its name and becomes the Lek.",
            "nederrikn",
            "Nederrijn",
        ),  # a possessive's "'s" is no part of the name
    ],
)
def test_a_word_written_in_another_form_is_held(question: str, text: str, term: str, word: str) -> None:
    assert _written(question, text) == {term: word}


@pytest.mark.parametrize(
    ("question", "text"),
    [
        ("What was the Rhine in WWI?", "In World War II, the Rhine was an obstacle."),  # another war
        ("What drama debuted on ABC in the 70s?", "Dynasty debuted on ABC in 1981."),  # another decade
        ("Who finished third?", "Smith finished 4th after a fall."),  # another number
        ("What is the smallest port?", "Duisburg is a small port."),  # another degree
        ("Who took the ball in the fourth quarter?", "Miller took the ball, four yards out."),  # not "4th"
        ("What is the notice period for contractors?", "The notice period of a contract is a month."),
        ("What was unproven?", "It has not been proved."),  # a negated form keeps its prefix
        ("Who ruled Iran in 1950?", "Iraq was ruled by a king in 1950."),  # a short name is another one
        ("Who lived in Marten?", "Martin and Marden lived there."),  # two names one edit away: which?
        ("Who founded Bendigo?", "Kendigo was founded in 1851."),  # another first letter
        ("Who sat in the parliment?", "The parliament sat in 1707."),  # not a name: as written
    ],
)
def test_another_word_number_or_degree_is_not_held(question: str, text: str) -> None:
    assert _written(question, text) == {}


def test_spellings_meet_under_their_inflection() -> None:
    assert root("utilised") == root("utilized") == root("utilizes")
    assert root("favour") == root("favored") and root("centre") == root("center")
    assert root("travelled") == root("traveled")
    assert root("success") != root("succeed") and root("small") != root("smallest")


WAR = [
    hit("# The Rhine\n\nIn World War II, the Rhine was a formidable obstacle to an invasion.\n", "chk_1"),
    hit("# Shipping\n\nThe Rhine carries barges from Basel to Rotterdam.\n", "chk_2", rank=2),
]


def test_a_term_written_otherwise_counts_as_held_and_is_recorded() -> None:
    question = "What was the Rhine considered to invaders in WWII?"
    evidence = gather([question], WAR)  # no embedder needed: a rule of the language, not a neighbour
    assert evidence.restated == ("wwii -> World War II",)
    assert evidence.signals.unknown == 0.0
    units = units_of(WAR)
    plain = focus(question, units[0], units)
    assert evidence.signals.covered > plain[0] and plain[1] > 0.0  # without it: a term no unit holds
    texts = [h.text for h in WAR]
    assert found_share(question, texts, {"wwii"}) > found_share(question, texts)
    # another war is still a qualifier the documents lack
    assert gather(["What was the Rhine considered to invaders in WWI?"], WAR).signals.unknown > 0.0


SPORTS = [
    hit("# Sports\n\nSetanta Sports confirmed that it would launch on a digital platform.\n", "chk_1"),
    hit("# Cable\n\nNTL's services were renamed Virgin Media on the same day.\n", "chk_2", rank=2),
]


def test_a_misspelt_name_counts_as_held_and_is_recorded() -> None:
    evidence = gather(["What platform was Sentanta Sports launching on?"], SPORTS)
    assert evidence.restated == ("sentanta -> Setanta",)
    assert evidence.signals.unknown == 0.0
    # a name no unit writes within one letter is still one the documents lack
    assert gather(["What platform was Santana Sports launching on?"], SPORTS).signals.unknown > 0.0


def test_other_languages_have_nothing_written_otherwise() -> None:
    token = ANSWER_LANGUAGE.set("de")
    try:
        assert _written("Was war der Rhein im WWII?", "Im World War II war der Rhein ein Hindernis.") == {}
        assert gather(["Was war der Rhein im WWII?"], WAR).restated == ()
    finally:
        ANSWER_LANGUAGE.reset(token)


LAKE = [
    hit(
        '# Lake Constance\n\nThe lake holds the Obersee ("upper lake") and the Untersee ("lower lake").\n',
        "chk_1",
    ),
    hit("# Meaning\n\nThe meaning of the name Bodensee is disputed.\n", "chk_2", rank=2),
]


def test_what_does_x_mean_asks_for_the_meaning_not_the_word() -> None:
    assert category_terms("What does Obersee mean?") == frozenset(terms("mean"))
    assert category_terms("What does the acronym SSO stand for?") == frozenset(terms("stand"))
    assert category_terms("What does the word mean to you?") == frozenset()  # not the last word
    units = units_of(LAKE)
    covered, _ = focus("What does Obersee mean?", units[0], units)
    assert covered == 1.0  # another unit's "meaning" is not a focus the quoted one lacks


def test_am_is_a_form_of_be_not_a_missing_qualifier() -> None:
    assert "am" in said_otherwise("By what time do I have to tell my manager that I am sick?")
    policy = [hit("# Sick leave\n\nTell your manager before 10:00 on the first day you cannot work.\n")]
    units = units_of(policy)
    question = "By what time do I have to tell my manager that I am sick?"
    assert focus(question, units[0], units)[1] < 0.5
    assert found_share(question, [h.text for h in policy]) > found_share(
        "By what time do I have to tell my manager that I am pregnant?", [h.text for h in policy]
    )
