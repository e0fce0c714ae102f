"""A question's word the evidence says in other words (agentrag.paraphrase): held by the focus
signals when a word of the best unit is its near neighbour in the embedder's space, never for a
name, a number, an opposite or a negated form, and never through a word the question says itself."""

from __future__ import annotations

from typing import Any

import pytest

from agentrag.abstain import signals
from agentrag.answer_languages import ANSWER_LANGUAGE
from agentrag.errors import EmbeddingError
from agentrag.evidence import score_units, units_of
from agentrag.extractive import gather
from agentrag.focus import answer_terms
from agentrag.paraphrase import restated
from agentrag.steps._common import terms
from agentrag.unit_vectors import VectorCache
from tests.test_evidence import hit


def _unit(text: str) -> Any:
    return units_of([hit(text)])[0]


def _missing(question: str, text: str) -> list[str]:
    held = set(terms(text))
    return [t for t in answer_terms(question) if t not in held]


@pytest.mark.parametrize(
    ("question", "text", "word"),
    [
        ("Where did the monks flee to?", "After the raid the monks fled to Italy.", "fled"),
        ("What were NTL's services rebranded as?", "In 2007 they were renamed Virgin Media.", "renamed"),
        ("Who was Margaret's husband?", "Margaret married Malcolm III of Scotland in 1070.", "married"),
    ],
)
def test_a_word_said_otherwise_in_the_best_unit_is_restated(
    local_embedder: Any, question: str, text: str, word: str
) -> None:
    missing = _missing(question, text)
    found = restated(question, _unit(text), missing, local_embedder, VectorCache())
    assert word in found.values()
    assert set(found) <= set(missing)


@pytest.mark.parametrize(
    ("question", "text"),
    [
        # a near-miss's qualifier: another thing of the same frame
        ("How many days of sick leave do employees get?", "Every employee receives 25 days of vacation."),
        ("How many weeks of parental leave do grandparents get?", "Birth parents receive 20 weeks of leave."),
        # a name or a number changed (SQuAD's adversarial questions): never restated
        ("What did the council decide on Monday?", "The council decided on Tuesday to close the bridge."),
        # a negated form
        ("Which trade was made illegal in 1807?", "The slave trade was made legal again in 1807."),
        # the unit's word stands for the question's own ("meal"), not for "dinners"
        ("What is the meal allowance for team dinners?", "The meal allowance on business trips is 45 euros."),
    ],
)
def test_a_near_miss_a_name_a_negation_and_the_questions_own_word_are_not_restated(
    local_embedder: Any, question: str, text: str
) -> None:
    assert restated(question, _unit(text), _missing(question, text), local_embedder, VectorCache()) == {}


def test_other_languages_and_no_embedder_restate_nothing(local_embedder: Any) -> None:
    question, text = "Where did the monks flee to?", "After the raid the monks fled to Italy."
    assert restated(question, _unit(text), ["flee"], None, VectorCache()) == {}
    token = ANSWER_LANGUAGE.set("de")
    try:
        assert restated(question, _unit(text), ["flee"], local_embedder, VectorCache()) == {}
    finally:
        ANSWER_LANGUAGE.reset(token)


MONKS = [hit("# Abbey\n\nAfter the raid of 1003 the monks fled to Italy with the relics.\n")]
MARGARET = [hit("# Margaret of Wessex\n\nMargaret married Malcolm III of Scotland in 1070.\n")]


def test_a_restated_word_counts_as_held_in_the_confidence(local_embedder: Any) -> None:
    # a noun (a verb no text says is not held against the unit at all: agentrag.verbs)
    question = "Who was Margaret's husband?"
    evidence = gather([question], MARGARET, embedder=local_embedder, cache=VectorCache())
    units = units_of(MARGARET)
    ranked = score_units([question], units)
    plain = signals([question], ranked, [h.text for h in MARGARET], None)
    assert evidence.signals.covered > plain.covered
    assert evidence.signals.unknown < plain.unknown
    assert evidence.signals.found > plain.found
    assert evidence.fallback is None
    assert evidence.restated == ("husband -> married",)  # what was read in other words, for the answer's span
    # the verb "flee" is restated as "fled", and would not have counted against the unit anyway
    flee = gather(["Where did the monks flee to?"], MONKS, embedder=local_embedder, cache=VectorCache())
    assert flee.restated == ("flee -> fled",)
    assert flee.signals.found == 1.0 and flee.signals.unknown == 0.0


class _WordsFail:
    """The real embedder for sentences; fails for single words (the paraphrase check's)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.version = inner, "words-fail", "1"

    def embed(self, texts: list[str]) -> Any:
        if all(" " not in t for t in texts):
            raise EmbeddingError("no vectors for words")
        return self.inner.embed(texts)


def test_the_check_failing_is_recorded_not_silent(local_embedder: Any) -> None:
    failing = _WordsFail(local_embedder)
    evidence = gather(["Where did the monks flee to?"], MONKS, embedder=failing, cache=VectorCache())
    assert evidence.semantic
    assert evidence.fallback is not None and "said otherwise" in evidence.fallback
