"""A metadata filter's equality also compiles to a containment the GIN index serves (migration 0045):
the same documents either way, and the index is there for the planner to use."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.retrieval.filters import compile_filters
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

VALUES: list[Any] = [0, 1, 1.0, 2.5, -3, "a", "b", "", True, False, None, [1], [1, 2], ["a"], {"x": 1}, {}]


@pytest.fixture(scope="module")
def docs(store: Store) -> Iterator[dict[str, Any]]:
    name = f"metaidx_{uuid.uuid4().hex[:8]}"
    store.create_collection(name)
    items = []
    for i, v in enumerate(VALUES):
        items.append((f"k-{i}", f"document {i}", {"k": v, "other": VALUES[-1 - i]}))
    items.append(("no-key", "document without the key", {"other": 1}))
    items.append(("empty", "document with no metadata", {}))
    ingest_texts(store, items, collection=name)
    with store.engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}).scalar()
    yield {"name": name, "cid": cid}
    store.delete_collection(name)


def _ids(store: Store, cid: int, where: str, params: dict[str, Any]) -> list[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                f"SELECT d.source FROM agentrag.documents d WHERE d.collection_id = {int(cid)} AND ({where})"
            ),
            params,
        ).all()
    return sorted(r.source for r in rows)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(["k", "other", "missing"]),
    value=st.one_of(
        st.sampled_from([0, 1, 1.0, 2.5, -3, "a", "b", "", True, False, None]), st.integers(-3, 3)
    ),
)
def test_the_containment_keeps_exactly_the_equal_documents(
    store: Store, docs: dict, key: str, value: Any
) -> None:
    where, params = compile_filters({"metadata": {key: value}})
    assert "d.metadata @> CAST(:f_mo0 AS jsonb)" in where
    equality_only = where.replace("d.metadata @> CAST(:f_mo0 AS jsonb) AND ", "")
    assert "@>" not in equality_only
    assert _ids(store, docs["cid"], where, params) == _ids(store, docs["cid"], equality_only, params)


def test_a_filter_of_several_keys_and_an_in_list(store: Store, docs: dict) -> None:
    where, params = compile_filters({"metadata": {"k": {"in": ["a", "b"]}, "other": None}})
    assert where.count("@>") == 1  # an in-list has no containment (GIN cannot serve `@> ANY`)
    assert _ids(store, docs["cid"], where, params) == ["k-5"]


def test_the_metadata_index_serves_the_containment(store: Store) -> None:
    with store.engine.connect() as conn:
        definition = conn.execute(
            text(
                "SELECT indexdef FROM pg_indexes"
                " WHERE schemaname = 'agentrag' AND indexname = 'documents_metadata'"
            )
        ).scalar()
        assert definition is not None and "gin (metadata jsonb_path_ops)" in definition
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                text("EXPLAIN SELECT id FROM agentrag.documents d WHERE d.metadata @> CAST(:m AS jsonb)"),
                {"m": '{"k": 1}'},
            )
        )
    assert "documents_metadata" in plan
