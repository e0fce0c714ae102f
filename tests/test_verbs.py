"""A question's verbs (issue #36, agentrag.verbs): a verb no retrieved text says is the relation said
in other words, not a qualifier the documents lack; never for a "when" or a how-to question; and two
more patterns of the contrary (agentrag.contrast): a negated form, and roles swapped around a
do-question's stranded preposition."""

from __future__ import annotations

import pytest

from agentrag.abstain import found_share
from agentrag.answer_languages import ANSWER_LANGUAGE
from agentrag.contrast import contrast
from agentrag.evidence import units_of
from agentrag.extractive import gather
from agentrag.focus import focus
from agentrag.verbs import event_verbs, said_otherwise
from tests.test_evidence import hit


@pytest.mark.parametrize(
    ("question", "verbs"),
    [
        ("Who sang the national anthem?", {"sang"}),
        ("What were NTL's services rebranded as?", {"rebrand"}),
        ("What does the word Rheinrinne translate to?", {"translat"}),
        ("Which battle did Temüjin lose to Jamukha?", {"lose"}),
        ("What type of plant is Victoria soon losing?", {"lose"}),
        ("Can I reserve a parking space?", {"reserv"}),
        ("What sea lay west of the empire when Genghis Khan died?", {"die"}),
        # a noun after "what", a determiner or an "-ing" modifier is no verb
        ("What party won the election in the deleted district?", {"won"}),
        ("How long are staging backups kept?", {"kept"}),
    ],
)
def test_a_questions_verbs_are_read_by_their_form_and_place(question: str, verbs: set[str]) -> None:
    assert event_verbs(question) == verbs


def test_when_and_how_to_questions_keep_their_verbs() -> None:
    assert said_otherwise("Who sang the national anthem?") == {"sang"}
    assert said_otherwise("When was the treaty written?") == frozenset()
    assert said_otherwise("In what year was the treaty written?") == frozenset()
    assert said_otherwise("How do I reset my password?") == frozenset()


def test_other_languages_have_no_verbs_read() -> None:
    token = ANSWER_LANGUAGE.set("de")
    try:
        assert event_verbs("Who sang the national anthem?") == frozenset()
        assert said_otherwise("Who usually sang the most anthems?") == frozenset()
    finally:
        ANSWER_LANGUAGE.reset(token)


ANTHEM = [
    hit("# Super Bowl 50\n\nLady Gaga performed the national anthem before the game.\n", "chk_1"),
    hit("# Halftime\n\nColdplay headlined the halftime show with Beyonce and Bruno Mars.\n", "chk_2", rank=2),
]


def test_a_verb_no_text_says_is_not_a_missing_qualifier() -> None:
    units = units_of(ANTHEM)
    best = units[0]
    question = "Who sang the national anthem?"
    assert focus(question, best, units) == (1.0, 0.0)
    assert found_share(question, [h.text for h in ANTHEM]) == 1.0
    # a qualifier no text says still counts, and so does the verb of a "when" question
    covered, unknown = focus("Who sang the national anthem in Spanish?", best, units)
    assert covered < 1.0 and unknown > 0.0
    assert found_share("When was the national anthem sung?", [h.text for h in ANTHEM]) < 1.0


def test_the_paraphrased_verb_raises_the_confidence_the_missing_qualifier_does_not() -> None:
    asked = gather(["Who sang the national anthem?"], ANTHEM)
    near = gather(["Who sang the national anthem in Spanish?"], ANTHEM)
    assert asked.confidence >= 0.5 > near.confidence


@pytest.mark.parametrize(
    ("question", "text"),
    [
        (
            "How many more flows carry insignificant amounts of water?",
            "Three more flows carry significant amounts.",
        ),
        ("Which lake is unaffected by the dam?", "The dam affected Lake Constance."),
        ("What is the least important region?", "The delta is the most important region."),
    ],
)
def test_a_negated_form_in_the_place_of_the_questions_word_is_the_contrary(question: str, text: str) -> None:
    assert contrast(question, text) == 1


def test_a_negated_form_beside_the_questions_own_word_is_not_the_contrary() -> None:
    question = "How many flows carry insignificant amounts of water?"
    assert (
        contrast(question, "Two flows carry significant amounts and three carry insignificant amounts.") == 0
    )


@pytest.mark.parametrize(
    ("question", "text", "swapped"),
    [
        (
            "What does the Atlantic Ocean flow into?",
            "The Rhine flowed west and finally to the Atlantic Ocean.",
            1,
        ),
        (
            "Who did the Irish culture have a profound effect on?",
            "The Normans had an effect on Irish culture.",
            1,
        ),
        ("What does the Rhine flow into?", "The Rhine flows into the North Sea.", 0),
        ("What does the Atlantic Ocean flow into?", "Nothing here names the ocean.", 0),
    ],
)
def test_a_stranded_prepositions_object_being_the_questions_subject_is_the_contrary(
    question: str, text: str, swapped: int
) -> None:
    assert contrast(question, text) == swapped


def test_a_questions_general_words_are_phrasing_not_a_missing_qualifier() -> None:
    assert {"most", "usual", "peopl", "group"} <= said_otherwise(
        "What group of people usually sang the most songs?"
    )
    # a "when" question keeps its verbs but not its general words; numbers and negations are no phrasing
    assert said_otherwise("When was the anthem usually sung?") == {"usual"}
    assert said_otherwise("Who sang two songs without the band?") == {"sang"}
    assert said_otherwise("How do I usually reset my password?") == frozenset()
    units = units_of(ANTHEM)
    question = "Which group of people usually performed the national anthem?"
    assert focus(question, units[0], units) == (1.0, 0.0)
    assert found_share(question, [h.text for h in ANTHEM]) == 1.0
    # a content word no text says still counts
    covered, unknown = focus("Who usually performed the national anthem in Spanish?", units[0], units)
    assert covered < 1.0 and unknown > 0.0


def test_an_adverb_of_time_is_phrasing_an_adjective_of_time_is_not() -> None:
    assert {"soon", "later", "now", "today"} <= said_otherwise(
        "Which plant is Victoria soon losing, later closing, now selling and today running?"
    )
    assert "late" not in said_otherwise("What is the late fee?")  # an adjective: a qualifier
    units = units_of(ANTHEM)
    assert focus("Who soon performed the national anthem?", units[0], units) == (1.0, 0.0)


def test_a_general_word_raises_the_confidence_a_missing_qualifier_does_not() -> None:
    near = gather(["Who performed the national anthem in Spanish?"], ANTHEM)
    for question in (
        "Who performed the most anthems?",
        "What group of people performed the national anthem?",
    ):
        assert gather([question], ANTHEM).confidence >= 0.5 > near.confidence
