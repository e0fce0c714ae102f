"""The quoted unit as a window (issue #36): when the best sentence repeats the question and its
neighbour holds the fact of the kind asked for (a name for "who", a year for "when"), the answer
quotes both; a best sentence that holds the fact is quoted alone."""

from __future__ import annotations

from agentrag.answer_window import fills, slot
from agentrag.extractive import gather, render
from tests.test_evidence import hit

RECORD = hit(
    "# Records\n\nThe league was founded in 1920 by eleven teams. The oldest quarterback ever to play in "
    "the final was aged 39 at the time. The record belongs to Peyton Manning, who retired after the game.\n",
    "chk_r",
)
FOUNDED = hit(
    "# History\n\nThe abbey was founded by monks from the north. The first church of the abbey was "
    "consecrated in 1066, after a long dispute over the land.\n",
    "chk_f",
)


def test_what_a_question_asks_for() -> None:
    assert slot("Who held the record before?") == "name"
    assert slot("What was the ship called?") == "name"
    assert slot("When was the church consecrated?") == "time"
    assert slot("How many teams did he lead?") == "number"
    assert slot("Why did the dispute start?") is None


def test_a_fact_is_new_only_when_the_question_does_not_give_it() -> None:
    assert (
        fills("Who played the final at age 39?", "He is also the oldest to play the final at age 39.")
        is False
    )
    assert fills("Who played the final at age 39?", "John Elway played it at age 38.") is True
    assert fills("When was the church consecrated in 1066?", "It was consecrated in 1066.") is False
    assert fills("When was the church consecrated?", "It was consecrated in 1066.") is True
    assert fills("Why was it built?", "It was built in 1066.") is None


def test_the_neighbour_holding_the_name_is_quoted_with_the_best_sentence() -> None:
    evidence = gather(["Who is the oldest quarterback ever to play in the final?"], [RECORD])
    assert evidence.ranked[0][0].unit.text.startswith("The oldest quarterback")  # the best: no name
    said = render(evidence.selected)
    assert "Peyton Manning" in said
    assert said.index("oldest quarterback") < said.index("Peyton Manning")  # reading order
    assert "1920" not in said


def test_a_best_sentence_that_holds_the_fact_is_quoted_without_its_neighbour() -> None:
    evidence = gather(["When was the first church of the abbey consecrated?"], [FOUNDED])
    said = render(evidence.selected)
    assert "1066" in said
    assert "monks" not in said


def test_a_ratio_is_not_the_amount_a_question_asks_for() -> None:
    from agentrag.answer_types import type_fit

    question = "What are the API rate limits on the Team and Business plans?"
    assert type_fit("number", "Business has four times the Team limit.", question=question) < 0
    assert type_fit("number", "Business has twice the Team limit.", question=question) < 0
    assert (
        type_fit("number", "Business has four times the Team limit (1,200 versus 300).", question=question)
        > 0
    )
    assert type_fit("number", "The team won four times.", question="How many times did it win?") > 0


def test_a_unit_of_the_kind_asked_for_outranks_a_close_one_without_it() -> None:
    from agentrag.answer_window import prefer_typed
    from agentrag.evidence import Scored, units_of

    limits = hit(
        "# Limits\n\nLimits differ per plan, and Business has a much higher limit. Business allows 1,200 "
        "requests per minute. The limits were introduced to keep the service fast.\n",
        "chk_l",
    )
    vague, stated, aside = units_of([limits])
    close = [
        Scored(vague, 0.70, 0.6, 0.9, -1.0),
        Scored(stated, 0.66, 0.6, 0.7, 1.0),
        Scored(aside, 0.5, 0.4, 0.4, 0.0),
    ]
    best_first = prefer_typed([close])[0]
    assert best_first[0].unit is stated and best_first[0].score == 0.66
    assert best_first[1].unit is vague and 0.66 - best_first[1].score > 0.06  # out of the selection margin
    far = [Scored(vague, 0.80, 0.6, 0.9, -1.0), Scored(stated, 0.66, 0.6, 0.7, 1.0)]
    assert prefer_typed([far])[0][0].unit is vague  # beyond the margin: the better unit stays first


def test_a_sentence_opening_with_he_is_quoted_with_its_antecedent() -> None:
    career = hit(
        "# Career\n\nMaria Lopez joined the orchestra in 1998 as a violinist. She became its first female "
        "conductor in 2011.\n",
        "chk_c",
    )
    said = render(gather(["Who became the first female conductor of the orchestra?"], [career]).selected)
    assert "Maria Lopez" in said and "first female conductor" in said


def test_who_asks_for_a_name_after_an_opening_phrase_or_last() -> None:
    assert slot("Prior to Manning, who was the oldest quarterback to play in the final?") == "name"
    assert slot("Civil disobedience is highlighted by the example of who?") == "name"
    # a relative "who" before the comma is no question word
    assert slot("The man who built the church, what was his trade?") is None


def test_a_name_is_its_capitalised_words_in_a_row_and_a_possessive_opening_names_one() -> None:
    question = "Prior to Manning, who was the oldest quarterback to play in the final?"
    assert fills(question, "Peyton Manning became the first quarterback to lead two teams.") is False
    assert fills(question, "The past record was held by John Elway at age 38.") is True
    acts = "Gandhi's acts have been described as civil disobedience."
    assert fills("Who is an example of it?", acts) is True
    assert fills("Who is Gandhi?", acts) is False


def test_the_window_widens_from_the_best_sentence_not_from_its_quoted_antecedent() -> None:
    final = hit(
        "# Records\n\nPeyton Manning became the first quarterback to lead two different teams to the final. "
        "He is also the oldest quarterback ever to play in the final at age 39. The past record was held by "
        "John Elway, who won the final at age 38.\n",
        "chk_o",
    )
    evidence = gather(["Prior to Manning, who was the oldest quarterback to play in the final?"], [final])
    assert evidence.ranked[0][0].unit.text.startswith("He is also")  # the best sentence: no new name
    said = render(evidence.selected)
    assert "Peyton Manning" in said  # its antecedent, quoted for "He"
    assert "John Elway" in said  # and the neighbour that names the one asked for


def test_a_when_clause_setting_the_scene_does_not_ask_for_a_time() -> None:
    from agentrag.answer_types import answer_type

    assert answer_type("When the Rhine emerges from Lake Constance, which way does it flow?") is None
    assert answer_type("When many people are arrested, what is a common tactic?") is None
    assert answer_type("When was the church consecrated?") == "time"
    assert answer_type("When did the man who built the church die?") == "time"
    assert answer_type("When year was the treaty signed?") == "time"


def test_what_year_asks_for_a_time() -> None:
    from agentrag.answer_types import answer_type

    assert answer_type("What year did the storm hit the fleet?") == "time"
    assert answer_type("In which century was the abbey founded?") == "time"
    assert answer_type("What is the yearly fee?") == "number"


def test_a_year_in_prose_is_no_amount() -> None:
    question = "How much money was to go to the network under the merger plan?"
    assert fills(question, "He proposed the merger in October 1954, with the network in trouble.") is False
    assert fills(question, "The network would have received $5 million in cash.") is True
    assert fills("How many requests per minute?", "Since 2020, Business allows 1,200 requests per minute.")
    assert fills("How many ships were built?", "In 1954 the yard built 1200 ships.") is True
