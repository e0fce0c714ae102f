"""The handbook in German, Chinese and Japanese (benchmarks/corpora/handbook_*) and the choice of the
threshold's curve (benchmarks.multilingual_loco), without a database or a model."""

from __future__ import annotations

import pytest

from benchmarks import multilingual_loco, near_miss_languages


@pytest.mark.parametrize("language", near_miss_languages.LANGUAGES)
def test_each_answerable_question_s_fact_is_written_in_its_source(language: str) -> None:
    docs, items = near_miss_languages.corpus(language)
    kinds = [near_miss_languages.category(i) for i in items]
    assert (kinds.count("answerable"), kinds.count("near_miss"), kinds.count("absent")) == (25, 14, 6)
    assert len(docs) == 12
    for item in items:
        if item["kind"] == "answerable":
            (source,) = item["sources"]
            assert any(fact in docs[source] for fact in item["expected"]), (item["id"], source)


def _row(confidence: float, semantic: float) -> dict[str, object]:
    return {
        "confidence": confidence,
        "abstained": False,
        "threshold_applies": True,
        "signals": {"semantic": semantic},
    }


def test_raise_only_never_answers_below_the_table_and_the_full_curve_may() -> None:
    from agentrag.answer_languages import abstain_below

    table = abstain_below("de", multilingual_loco.MODEL)
    close = _row(table - 0.1, 0.99)  # a question very close to its unit, below the table's threshold
    assert multilingual_loco.shipped(1.0)(close, "de")
    assert not multilingual_loco.shipped(0.0)(close, "de")
    assert not multilingual_loco.table_only(close, "de")
    far = _row(table + 0.05, 0.70)  # far from its unit: the curve raises the threshold either way
    assert not multilingual_loco.shipped(0.0)(far, "de") and not multilingual_loco.shipped(1.0)(far, "de")
