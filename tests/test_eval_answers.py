"""The answer benchmark's measurement code (agentrag.eval.answers, agentrag.eval.support_check).

Real PostgreSQL (the session store, FakeEmbedder); FakeLLM scripts the replies, so what is
asserted is the scoring, whatever the answer step's local strategy does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentrag as ar
from agentrag.errors import InvalidInputError
from agentrag.eval.answers import (
    Outcome,
    calibrate,
    fact_hit,
    load_answer_set,
    run_answers,
    score,
)
from agentrag.eval.support_check import FORMS, build_replies, check_replies, score_support
from agentrag.store.store import Store
from agentrag.testing import FakeLLM
from tests.conftest import REPO

SAMPLES = REPO / "samples"
TRASH = "How long do deleted notes stay in the trash?"
TRASH_SENTENCE = "Items stay in the trash for 30 days on every plan"


@pytest.fixture(scope="module")
def support(store: Store) -> str:
    name = "answers_eval_support"
    store.create_collection(name, exist_ok=True)
    for file in (
        "recover-deleted-note.md",
        "two-factor-authentication-reset.md",
        "attachment-size-limits.md",
    ):
        store.ingest(SAMPLES / "support" / file, collection=name)
    return name


def write(tmp_path: Path, rows: list[Any]) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


# ---- the question sets -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "corpus", "at_least"), [("samples", SAMPLES, 120), ("library", SAMPLES / "library", 60)]
)
def test_shipped_sets_are_valid_and_their_facts_are_in_their_sources(
    name: str, corpus: Path, at_least: int
) -> None:
    answer_set = load_answer_set(SAMPLES / "answers" / f"{name}.jsonl")
    assert len(answer_set.items) >= at_least
    kinds = {item["kind"] for item in answer_set.items}
    assert kinds == {"answerable", "unanswerable", "out_of_domain", "small_talk", "followup"}
    specs = json.loads((corpus / "collections.json").read_text())
    assert list(answer_set.collections) == [s["name"] for s in specs]
    folders = {s["name"]: corpus / s["name"] for s in specs}
    folders = {n: f if f.is_dir() else corpus / n.split("_", 1)[-1] for n, f in folders.items()}
    for item in answer_set.of_kind("answerable", "followup"):
        texts = []
        for source in item["sources"]:
            collection, _, file = source.partition("/")
            texts.append((folders[collection] / file).read_text())
        assert all(fact_hit(t, item["expected"]) for t in texts), item["id"]
    assert {i["fact"] for i in answer_set.of_kind("answerable")} == {"prose", "list", "table"}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "x", "kind": "trivia", "question": "q"}, "kind must be one of"),
        ({"id": "x", "kind": "answerable", "question": "q", "sources": ["c/a.md"]}, "needs 'expected'"),
        ({"id": "x", "kind": "answerable", "question": "q", "expected": ["a"]}, "needs 'sources'"),
        (
            {"id": "x", "kind": "followup", "question": "q", "expected": ["a"], "sources": ["c/a.md"]},
            "history",
        ),
        (
            {
                "id": "x",
                "kind": "answerable",
                "question": "q",
                "expected": ["a"],
                "sources": ["c/a"],
                "fact": "x",
            },
            "fact",
        ),
        ({"id": "", "kind": "unanswerable", "question": "q"}, "'id' must be"),
        ("{not json", "not JSON"),
    ],
)
def test_bad_lines_raise_with_their_line(tmp_path: Path, row: Any, message: str) -> None:
    path = write(tmp_path, [{"kind": "meta", "collections": ["c"]}, row])
    with pytest.raises(InvalidInputError, match=message) as caught:
        load_answer_set(path)
    assert f"{path}:2" in str(caught.value)


def test_duplicate_ids_and_empty_sets_raise(tmp_path: Path) -> None:
    row = {"id": "a", "kind": "out_of_domain", "question": "q"}
    with pytest.raises(InvalidInputError, match="duplicate id 'a'"):
        load_answer_set(write(tmp_path, [row, row]))
    with pytest.raises(InvalidInputError, match="no questions"):
        load_answer_set(write(tmp_path, [{"kind": "meta", "collections": ["c"]}]))


def test_collections_from_the_sources_when_there_is_no_meta_line(tmp_path: Path) -> None:
    rows = [
        {
            "id": "1",
            "kind": "answerable",
            "question": "q",
            "expected": ["a"],
            "sources": ["api/x.md", "support/y.md"],
        },
        {"id": "2", "kind": "answerable", "question": "q", "expected": ["a"], "sources": ["api/z.md"]},
    ]
    answer_set = load_answer_set(write(tmp_path, rows))
    assert answer_set.collections == () and answer_set.source_collections() == ("api", "support")


def test_fact_hit_ignores_citations_emphasis_and_dash_forms() -> None:
    answer = "Items stay in the trash for **30 days** [chk_0123456789abcdef]. Refunds take 5–10 days."
    assert fact_hit(answer, ["30 days"]) and fact_hit(answer, ["5-10 DAYS"])
    assert not fact_hit(answer, ["0123456789"])  # inside the citation marker only
    assert not fact_hit(answer, ["90 days", ""])


# ---- metrics on outcomes ----------------------------------------------------------------------
def outcome(
    kind: str, *, grounded: bool | None = True, abstained: bool = False, hit: bool = False, **kw: Any
) -> Outcome:
    return Outcome(
        id=kw.pop("id", kind),
        kind=kind,
        question="q",
        grounded=grounded,
        abstained=abstained,
        fact_hit=hit if kind in ("answerable", "followup") else None,
        fact=kw.pop("fact", "prose" if kind in ("answerable", "followup") else None),
        **kw,
    )


def test_score_counts_abstention_and_false_grounding_per_kind() -> None:
    outcomes = [
        outcome("answerable", hit=True, source_hit=True, fact="table"),
        outcome("answerable", hit=False, source_hit=True),
        outcome("answerable", grounded=False, abstained=True),  # a wrong abstention
        outcome("unanswerable", grounded=False, abstained=True),
        outcome("unanswerable", grounded=True),  # false-grounded
        outcome("unanswerable", grounded=False),  # not grounded, but not an abstention either
        outcome("out_of_domain", grounded=False, abstained=True),
        outcome("small_talk", grounded=None, abstained=True, mode="abstained"),
        outcome("small_talk", grounded=True, mode="full"),
        outcome("followup", hit=True, source_hit=False),
    ]
    m = score(outcomes)
    assert m["fact_hit"] == round(1 / 3, 4) and m["source_hit"] == round(2 / 3, 4)
    assert m["fact_hit_by_type"] == {"prose": 0.0, "list": None, "table": 1.0}
    assert m["answerable_abstained"] == round(1 / 3, 4)
    assert m["abstention_precision"] == round(2 / 3, 4)  # small talk is not counted
    assert m["abstention_recall"] == 0.5
    assert m["false_grounded_in_domain"] == round(1 / 3, 4) and m["false_grounded_out_of_domain"] == 0.0
    assert m["small_talk_grounded"] == 0.5
    assert m["followup_fact_hit"] == 1.0 and m["followup_source_hit"] == 0.0
    assert score([outcome("answerable", hit=True)])["abstention_precision"] is None


def test_calibrate_puts_the_threshold_between_the_confidences() -> None:
    outcomes = [outcome("answerable", hit=True, confidence=c) for c in (0.7, 0.8, 0.9)]
    outcomes.append(outcome("answerable", hit=False, confidence=0.95))  # answered wrongly: no weight
    outcomes += [outcome("unanswerable", confidence=c) for c in (0.2, 0.3, 0.45)]
    outcomes.append(outcome("out_of_domain", grounded=False, confidence=0.99))  # ungrounded: refused anyway
    cal = calibrate(outcomes)
    assert 0.45 < cal["abstain_below"] <= 0.7
    assert cal["best_range"] == [0.46, 0.7] and cal["abstain_below"] == pytest.approx(0.58)
    assert cal["answerable_fact_hit"] == 0.75 and cal["unanswerable_refused"] == 1.0
    with pytest.raises(InvalidInputError, match="answer_confidence"):
        calibrate([*outcomes, outcome("unanswerable", confidence=None)])
    with pytest.raises(InvalidInputError, match="answerable and unanswerable"):
        calibrate([outcome("answerable", hit=True, confidence=0.5)])


# ---- the pipeline over a real store ------------------------------------------------------------
def chunk_saying(store: Store, collection: str, question: str, sentence: str) -> str:
    ctx = ar.new(question, store=store, collections=[collection]).search().rerank()
    return next(h.chunk_id for h in ctx.hits if sentence in h.text.replace("**", ""))


def test_run_answers_scores_a_cited_fact_and_an_uncited_reply(store: Store, support: str) -> None:
    label = chunk_saying(store, support, TRASH, TRASH_SENTENCE)
    items = [
        {
            "id": "a",
            "kind": "answerable",
            "question": TRASH,
            "expected": ["30 days"],
            "sources": [f"{support}/recover-deleted-note.md"],
        },
    ]
    [answered] = run_answers(
        store, items, [support], llm=FakeLLM([f"{TRASH_SENTENCE} [{label}]."]), strategy="local"
    )
    assert answered.cited == [f"{support}/recover-deleted-note.md"] and answered.source_hit is True
    assert answered.fact_hit is True and answered.fact_retrieved is True and answered.abstained is False
    assert answered.answer_ms > 0 and answered.error is None and answered.searched == TRASH

    ood = [{"id": "o", "kind": "out_of_domain", "question": "What is the capital of France?"}]
    [reply] = run_answers(
        store, ood, [support], llm=FakeLLM(["The capital of France is Paris."]), strategy="local"
    )
    assert reply.cited == [] and reply.grounded is not True and reply.abstained is False  # answered, uncited
    assert score([answered, reply])["false_grounded_out_of_domain"] == 0.0


def test_run_answers_rejects_an_unknown_answer_option(store: Store, support: str) -> None:
    with pytest.raises(TypeError):
        run_answers(store, [], [support], answer_options={"no_such_option": 1})


def test_followups_run_with_their_history(store: Store, support: str) -> None:
    label = chunk_saying(store, support, TRASH, TRASH_SENTENCE)
    item = {
        "id": "f",
        "kind": "followup",
        "history": [
            {"role": "user", "content": "How do I recover a deleted note?"},
            {"role": "assistant", "content": "Restore it from the trash."},
        ],
        "question": "how long is it kept there?",
        "expected": ["30 days"],
        "sources": [f"{support}/recover-deleted-note.md"],
    }
    llm = FakeLLM([f"{TRASH_SENTENCE} [{label}]."])
    [out] = run_answers(store, [item], [support], llm=llm, strategy="local")
    assert out.question == "how long is it kept there?" and out.fact_hit is True
    assert out.to_dict()["kind"] == "followup" and out.to_dict()["abstained"] is False


# ---- the support check -------------------------------------------------------------------------
def test_scripted_replies_cover_every_form_and_score_what_was_flagged(store: Store, support: str) -> None:
    items = [
        {"id": "a", "kind": "answerable", "question": TRASH, "expected": ["30 days"], "sources": ["x/y.md"]},
        {
            "id": "b",
            "kind": "answerable",
            "question": "How do I reset two-factor authentication?",
            "expected": ["recovery code"],
            "sources": ["x/y.md"],
        },
    ]
    replies = build_replies(store, items, [support], replies=24, seed=1)
    assert len(replies) == 24 and replies == build_replies(store, items, [support], replies=24, seed=1)
    forms = {u.form for r in replies for u in r.units}
    assert forms >= {"supported", "uncited", "colon", "lowercase", "short", "semicolon"}
    assert forms <= {*FORMS, "semicolon-head"}
    for reply in replies:
        for unit in reply.units:
            assert unit.text in reply.text
            if unit.form == "colon":
                assert unit.text.endswith(":") and "[" not in unit.text
            if unit.form == "short":
                assert len(unit.text.split()) <= 2
            if unit.form == "lowercase":
                assert unit.text[0].islower() and f"]. {unit.text}" in reply.text
            if unit.form == "semicolon":
                assert unit.text.startswith("; ")
    checked = check_replies(store, replies, [support])
    assert all(len(r.flagged) == len(r.units) and r.error is None for r in checked)
    uncited = [f for r in checked for u, f in zip(r.units, r.flagged, strict=True) if u.form == "uncited"]
    assert uncited and all(uncited)  # an uncited claim: flagged by every version of the check
    result = score_support(checked)
    assert result["replies"] == 24 and result["supported_sentences"] > 0
    assert result["by_form"]["uncited"]["flagged"] == 1.0


def test_score_support_arithmetic() -> None:
    from agentrag.eval.support_check import Reply, Unit

    replies = [
        Reply("q", "", (Unit("a", "supported", True), Unit("b", "fabricated", False)), flagged=[False, True]),
        Reply("q", "", (Unit("c", "supported", True), Unit("d", "short", False)), flagged=[True, False]),
        Reply(
            "q", "", (Unit("e", "semicolon-head", True), Unit("f", "semicolon", False)), flagged=[True, True]
        ),
        Reply("q", "", (Unit("g", "supported", True),), flagged=[True], error="LLMError: x"),  # not scored
    ]
    result = score_support(replies)
    assert result["unsupported_sentences"] == 3 and result["supported_sentences"] == 2
    assert result["unsupported_flagged"] == round(2 / 3, 4) and result["supported_kept"] == 0.5
    assert result["flag_precision"] == round(2 / 3, 4) and result["errors"] == 1
    assert result["by_form"]["short"] == {"sentences": 1, "flagged": 0.0}
