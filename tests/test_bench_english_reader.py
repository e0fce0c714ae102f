"""benchmarks/english_reader.py's pairs: fit data only, labelled by where the answer is, so the session-29
figures of RESULTS.md ("Every language") cannot be read off the report half or mislabelled pairs."""

from __future__ import annotations

import json

import pytest

from benchmarks.answers_loco import SHARED
from benchmarks.english_reader import pairs

DATA = SHARED / "xquad-dev"

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)"
)


@pytest.fixture(scope="module")
def items() -> list[dict]:
    return pairs()


def test_the_pairs_come_from_the_fit_half_only(items: list[dict]) -> None:
    xquad = json.loads((DATA / "xquad-dev.en.json").read_text())["data"]
    report_half = {a["title"] for a in xquad[12:]}
    titles = {p["article"] for p in items}
    assert "Rhine" in report_half  # the SQuAD 2.0 subset's Rhine is XQuAD-dev article 20
    assert not titles & report_half
    assert {a["title"] for a in xquad[:12]} <= titles
    assert "Computational_complexity_theory" in titles


def test_a_sentence_is_positive_only_where_it_holds_a_gold_answer(items: list[dict]) -> None:
    answers: dict[str, list[str]] = {}
    for name in ("train-v2.0-subset.json", "dev-v2.0-subset.json"):
        for article in json.loads((SHARED / "squad2-subset" / name).read_text())["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    texts = qa.get("plausible_answers", []) if qa.get("is_impossible") else qa["answers"]
                    answers.setdefault(qa["question"], []).extend(a["text"] for a in texts)
    assert {p["y"] for p in items if p["kind"] == "pos"} == {1}
    assert {p["y"] for p in items if p["kind"] != "pos"} == {0}
    squad = [p for p in items if p["kind"] in ("pos", "adv") and p["q"] in answers]
    assert squad and any(p["kind"] == "adv" for p in squad)
    # the answer (or an adversarial question's plausible one) begins inside the sentence marked as holding it
    held = [any(a[:12] in p["s"] for a in answers[p["q"]]) for p in squad]
    assert sum(held) / len(held) > 0.95
    # every answerable question has its sentence among the pairs
    asked = {p["q"] for p in items if p["kind"] in ("pos", "other")}
    with_answer = {p["q"] for p in items if p["kind"] == "pos"}
    assert len(with_answer) / len(asked) > 0.97
