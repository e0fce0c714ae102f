"""A unit stating the contrary of the question (agentrag.contrast): SQuAD 2.0's antonym and
changed-number patterns, checked in English only and never for a yes/no question."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.abstain import DEFAULT_CALIBRATION
from agentrag.answer_languages import ANSWER_LANGUAGE
from agentrag.contrast import OPPOSITES, contrast, kinds, numbers
from agentrag.evidence import score_units, units_of
from agentrag.extractive import gather
from tests.test_evidence import hit


def test_an_opposite_in_the_place_of_the_questions_term_is_the_contrary() -> None:
    question = "What is Europe's smallest inland port?"
    assert contrast(question, "Duisburg is the home of Europe's largest inland port.") == 1
    assert contrast(question, "Basel has Europe's smallest inland port; Duisburg its largest.") == 0
    assert contrast(question, "Duisburg is a hub for the sea ports of Rotterdam and Antwerp.") == 0


def test_a_changed_number_is_the_contrary_a_missing_one_is_not() -> None:
    question = "What title did Henry II take in the Canary Islands?"
    assert contrast(question, "Bethencourt took the title of King, as vassal to Henry III of Castile.") == 1
    assert contrast(question, "Bethencourt took the title of King, as vassal to Henry II of Castile.") == 0
    assert contrast(question, "Bethencourt took the title of King of the Canary Islands.") == 0  # no number
    text = "In April 1191 Richard left Messina with a large fleet."
    assert contrast("Who left Messina in the 11th century?", text) == 1
    assert contrast("Who left Messina in 1191?", text) == 0
    assert contrast("Who left Messina in 1191?", "He left Messina with a fleet of 200.", "In 1191") == 0


def test_a_changed_number_is_one_of_the_same_kind_a_count_does_not_contradict_a_year() -> None:
    # the season is the passage's frame; the sentence's number is the count asked for
    question = "How many goals did the club's defence concede in 2019?"
    assert contrast(question, "The defence conceded just 21 goals, the fewest in the league.") == 0
    assert contrast(question, "The defence conceded 30 goals in 2017.") == 1  # another year
    assert contrast("How many goals were scored in the 3rd round?", "Only 12 goals came in the final.") == 0
    assert contrast("How many goals were scored in the 3rd round?", "The 2nd round saw 12 goals.") == 1
    assert kinds("Henry III paid 1,000 florins in 1190 in the 12th century, his 4th visit") == {
        "regnal": {"III"},
        "count": {"1000"},
        "time": {"1190", "12th"},
        "ordinal": {"4th"},
    }


def test_numbers_read_digits_ordinals_regnal_numerals_and_small_words() -> None:
    assert numbers("Henry III paid 1,000 florins in the 1190s to two knights") == {"III", "1000", "1190", "2"}
    assert numbers("The Tenth Doctor") == {"10th"}
    assert numbers("two knights", spelled=False) == set()


def test_a_yes_no_question_is_answered_by_the_contrary() -> None:
    assert contrast("Is the Eastport branch open on Saturdays?", "Saturday: closed") == 0
    assert contrast("Which branch is open on Saturdays?", "Saturday: closed") == 1


def test_other_languages_are_not_checked() -> None:
    token = ANSWER_LANGUAGE.set("de")
    try:
        assert contrast("What is Europe's smallest inland port?", "Europe's largest inland port.") == 0
    finally:
        ANSWER_LANGUAGE.reset(token)


@pytest.mark.parametrize("pair", OPPOSITES.split("|"))
def test_the_questions_own_term_beside_its_opposite_is_never_the_contrary(pair: str) -> None:
    for asked, other in (pair.split(), pair.split()[::-1]):
        question = f"Which river has the {asked} delta?"
        assert contrast(question, f"The Rhine has the {other} delta.") == 1, (asked, other)
        assert contrast(question, f"The Rhine has the {other} delta and the Meuse the {asked}.") == 0


@settings(max_examples=40, deadline=None)
@given(degree=st.sampled_from(["long", "old", "high", "large", "big", "deep", "wide", "early"]))
def test_the_degree_a_how_question_asks_for_is_not_a_term_to_hold(degree: str) -> None:
    opposite = {"long": "short", "old": "new", "high": "low", "large": "small", "big": "small"}
    other = opposite.get(degree, {"deep": "shallow", "wide": "narrow", "early": "late"}.get(degree))
    assert contrast(f"How {degree} is the trial?", f"The {other} trial lasts 14 days.") == 0


PORTS = [
    hit("# Ports\n\nDuisburg is the home of Europe's largest inland port.\n", "chk_1", "doc_1"),
    hit("# Rivers\n\nThe Ruhr joins the Rhine in Duisburg.\n", "chk_2", "doc_2", rank=2),
]


def test_the_unit_stating_the_question_wins_over_the_one_stating_its_contrary() -> None:
    units = units_of(
        [
            hit(
                "# Ports\n\nDuisburg has Europe's largest inland port."
                " Basel has Europe's smallest inland port.\n"
            )
        ]
    )
    best = score_units(["What is Europe's smallest inland port?"], units)[0][0]
    assert best.unit.text.startswith("Basel") and best.contrary == 0.0
    best = score_units(["What is Europe's largest inland port?"], units)[0][0]
    assert best.unit.text.startswith("Duisburg")


def test_the_documents_stating_the_contrary_lower_the_confidence() -> None:
    asked = gather(["What is Europe's largest inland port?"], PORTS)
    contrary = gather(["What is Europe's smallest inland port?"], PORTS)
    assert asked.signals.contrary == 0.0 and contrary.signals.contrary == 1.0
    assert contrary.confidence < asked.confidence
    assert contrary.signals.combined(DEFAULT_CALIBRATION) < asked.signals.combined(DEFAULT_CALIBRATION)
