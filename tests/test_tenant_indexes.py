"""A large tenant's own partial HNSW index (``Store.optimize``, agentrag/retrieval/tenant_walk.py): built
and dropped by the tenant's size, walked by its tenant-scoped searches (EXPLAIN shows it, prepared or not),
the same rows as without it, and ``chunks.tenant_id`` carried by every write path."""

from __future__ import annotations

import random
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.retrieval import tenant_walk
from agentrag.retrieval.tenant_walk import prepare_tenant_walk, tenant_index_name
from agentrag.retrieval.vector import vector_sql
from agentrag.scope import Scope
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

WORDS = ["alpha", "beta", "gamma", "delta", "orbit", "comet", "nebula", "quasar", "pulsar", "galaxy", "moon"]
BIG = "big o'hara"  # a quote in the tenant: the DDL's literal is PostgreSQL's format('%L')
SIZES = {BIG: 160, "mid": 70, "tiny": 3}  # one-chunk documents per tenant


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tenant_walk, "TENANT_INDEX_MIN_ROWS", 100)
    monkeypatch.setattr(tenant_walk, "TENANT_INDEX_KEEP_ROWS", 50)
    monkeypatch.setattr(tenant_walk, "TENANT_WALK_MIN_ROWS", 5)


@pytest.fixture(scope="module")
def tenants(store: Store) -> Iterator[dict[str, Any]]:
    name = f"tenantidx_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True)
    rng = random.Random(11)
    for tenant, n in SIZES.items():
        items = [(f"{tenant}-{i}", " ".join(rng.choices(WORDS, k=10)), {"topic": i % 4}) for i in range(n)]
        ingest_texts(store, items[: n // 2], collection=name, tenant=tenant, workspace="w1")
        ingest_texts(store, items[n // 2 :], collection=name, tenant=tenant)
    coll = store.collection(name)
    store.ensure_vector_index(coll)
    with store.engine.connect() as conn:
        cid = int(
            conn.execute(
                text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}
            ).scalar_one()
        )
    yield {"name": name, "id": cid}
    store.delete_collection(name)


def _index_exists(store: Store, cid: int, tenant: str) -> bool:
    with store.engine.connect() as conn:
        found = conn.execute(
            text("SELECT to_regclass(:n) IS NOT NULL"), {"n": f"agentrag.{tenant_index_name(cid, tenant)}"}
        ).scalar()
    return bool(found)


def _mismatched_tenants(store: Store, cid: int) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                    " WHERE c.collection_id = :c AND c.tenant_id IS DISTINCT FROM d.tenant_id"
                ),
                {"c": cid},
            ).scalar_one()
        )


def test_optimize_builds_an_index_for_each_large_tenant_only(store: Store, tenants: dict) -> None:
    name, cid = tenants["name"], tenants["id"]
    assert _mismatched_tenants(store, cid) == 0  # the ingest's COPY carried every chunk's tenant
    report = store.optimize(name)
    assert report.built == (BIG,) and report.dropped == 0
    assert _index_exists(store, cid, BIG)
    assert not _index_exists(store, cid, "mid") and not _index_exists(store, cid, "tiny")
    with store.engine.connect() as conn:
        definition = conn.execute(
            text("SELECT pg_get_indexdef(to_regclass(:n))"), {"n": f"agentrag.{tenant_index_name(cid, BIG)}"}
        ).scalar_one()
    assert "USING hnsw" in definition and "tenant_id = 'big o''hara'::text" in definition
    again = store.optimize(name)
    assert (again.built, again.kept, again.dropped) == ((), (BIG,), 0)


def test_a_dry_run_says_what_optimize_would_build_and_builds_nothing(store: Store, tenants: dict) -> None:
    from agentrag.store.tenant_indexes import drop_tenant_indexes

    name, cid = tenants["name"], tenants["id"]
    with store.engine.begin() as conn:
        drop_tenant_indexes(conn, cid)
    plan = store.optimize(name, dry_run=True)
    assert (plan.built, plan.kept, plan.dropped, plan.dry_run, plan.due) == ((BIG,), (), 0, True, True)
    assert str(plan).startswith(f"optimizing {name!r} would build 1 tenant index(es), keep 0, drop 0")
    assert not _index_exists(store, cid, BIG)  # nothing built
    assert store.optimize(name).built == plan.built  # what it said it would do
    after = store.optimize(name, dry_run=True)
    assert (after.built, after.kept, after.dropped, after.due) == ((), (BIG,), 0, False)


def test_a_tenant_scoped_search_walks_its_own_index(store: Store, tenants: dict) -> None:
    name = tenants["name"]
    store.optimize(name)
    result = store.search("comet nebula", collections=name, scope=Scope(tenant=BIG), explain=True, top_k=10)
    assert result.plan == (f"{name}: vector=hnsw-tenant lexical=bm25-scope rows=160",)
    assert result.explain is not None and "own HNSW index" in result.explain[0]["reason"]
    assert len(result) == 10
    small = store.search("comet", collections=name, scope=Scope(tenant="mid"), top_k=5)
    assert small.plan == (f"{name}: vector=exact lexical=bm25-scope rows=70",)  # no index of its own


def _ids(store: Store, name: str, query: str, scope: Scope, filters: Any, mode: str) -> list[str]:
    result = store.search(
        query, collections=name, scope=scope, filters=filters, mode=mode, top_k=8, ef_search=400
    )
    return result.chunk_ids


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    topic=st.none() | st.integers(0, 4),
    workspace=st.none() | st.just("w1"),
    ids_read=st.booleans(),
    mode=st.sampled_from(["vector", "hybrid"]),
)
def test_the_same_rows_with_and_without_the_tenant_index(
    store: Store,
    tenants: dict,
    words: list[str],
    topic: int | None,
    workspace: str | None,
    ids_read: bool,
    mode: str,
) -> None:
    """The tenant alone (no test per tuple), or narrowed by a workspace and / or a filter: tested by the
    document ids the plan read, or (``ids_read`` False: more documents than SCOPE_MAX_DOCS) by the
    documents join under the predicate."""
    from agentrag.retrieval import scoped

    name = tenants["name"]
    store.optimize(name)
    query, scope = " ".join(words), Scope(tenant=BIG, workspace=workspace)
    filters = None if topic is None else {"metadata": {"topic": topic}}
    saved = scoped.SCOPE_MAX_DOCS
    scoped.SCOPE_MAX_DOCS = 5_000 if ids_read else 3
    try:
        walked = store.search(query, collections=name, scope=scope, filters=filters, explain=True)
        assert walked.plan[0].startswith(
            f"{name}: vector=hnsw-tenant" if topic != 4 else f"{name}: vector=exact"
        )
        with_index = _ids(store, name, query, scope, filters, mode)
        tenant_walk.ENABLED = False
        try:
            without = _ids(store, name, query, scope, filters, mode)
        finally:
            tenant_walk.ENABLED = True
    finally:
        scoped.SCOPE_MAX_DOCS = saved
    assert with_index == without  # ef_search above the tenant's 160 rows: the walk finds them all


def _plan_text(conn: Any, sql: str, params: dict[str, Any]) -> str:
    rows = conn.execute(text(f"EXPLAIN {sql}"), params).scalars()
    return "\n".join(rows)


def test_explain_shows_the_tenant_index_with_bound_parameters(store: Store, tenants: dict) -> None:
    name, cid = tenants["name"], tenants["id"]
    store.optimize(name)
    index = tenant_index_name(cid, BIG)
    qvec = store.embed_queries(["comet"])[0]
    sql = vector_sql(cid, 64, "cosine", tenant=True)
    with store.engine.connect() as conn:
        prepare_tenant_walk(conn, 20_000)
        assert index in _plan_text(conn, sql, {"qvec": qvec, "depth": 20, "t_tenant": BIG})
        # a statement prepared by name: PostgreSQL's generic plan cannot prove the partial index's
        # predicate from a parameter; the leg's force_custom_plan plans it with the value
        prepared = (
            re.sub(r"CAST\(:qvec AS", "CAST($2 AS", sql).replace(":t_tenant", "$1").replace(":depth", "$3")
        )
        conn.exec_driver_sql(f"PREPARE walk(text, vector, int) AS {prepared}")
        literal = "'[" + ",".join(f"{x:.6f}" for x in qvec) + "]'"
        execute = "EXPLAIN EXECUTE walk('big o''hara', " + literal + ", 20)"  # a utility statement: no $n
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        generic = "\n".join(r[0] for r in conn.exec_driver_sql(execute))
        assert index not in generic
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
        custom = "\n".join(r[0] for r in conn.exec_driver_sql(execute))
        assert index in custom
        conn.rollback()
        conn.exec_driver_sql("DEALLOCATE ALL")


def _index_scans(store: Store, index: str) -> int:
    with store.engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return int(
            conn.execute(
                text("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = :n"),
                {"n": index},
            ).scalar_one()
        )


def test_repeated_searches_keep_using_the_index_after_psycopg_prepares_them(
    store: Store, tenants: dict
) -> None:
    name, cid = tenants["name"], tenants["id"]
    store.optimize(name)
    index = tenant_index_name(cid, BIG)
    before = _index_scans(store, index)
    runs = 12  # past psycopg's prepare_threshold (5) and PostgreSQL's five custom plans
    for i in range(runs):
        store.search(WORDS[i % len(WORDS)], collections=name, scope=Scope(tenant=BIG), mode="vector", top_k=5)
    deadline = time.monotonic() + 120  # a bound for a failure only
    while _index_scans(store, index) - before < runs and time.monotonic() < deadline:
        time.sleep(0.3)  # a backend's statistics reach the shared view within a second or so
    assert _index_scans(store, index) - before >= runs


def test_an_index_goes_when_its_tenant_shrinks_and_chunks_written_before_0046_are_filled(
    store: Store, tenants: dict
) -> None:
    name, cid = f"tenantidx_{uuid.uuid4().hex[:8]}", tenants["id"]
    store.create_collection(name, scoped=True)
    try:
        items = [(f"s-{i}", f"comet {WORDS[i % len(WORDS)]} {i}", {}) for i in range(120)]
        ingest_texts(store, items, collection=name, tenant="shrinks")
        with store.engine.begin() as conn:
            cid = int(
                conn.execute(
                    text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}
                ).scalar_one()
            )
            conn.execute(
                text("UPDATE agentrag.chunks SET tenant_id = NULL WHERE collection_id = :c"), {"c": cid}
            )
        # another tenant's document (its chunk written with its tenant): "shrinks" alone would be the
        # whole collection, searched unrestricted
        ingest_texts(store, [("o-0", "comet elsewhere", {})], collection=name, tenant="other")
        assert store.optimize(name).built == ("shrinks",)
        assert _mismatched_tenants(store, cid) == 0  # filled before the build
        hits = store.search("comet", collections=name, scope=Scope(tenant="shrinks"), top_k=10, explain=True)
        assert hits.plan[0].startswith(f"{name}: vector=hnsw-tenant") and len(hits) == 10
        for doc in store.documents(name, scope=Scope(tenant="shrinks"))[:65]:  # 55 left: kept (>= 50)
            store.delete_document(doc.id, scope=Scope(tenant="shrinks"))
        kept = store.optimize(name)
        assert (kept.kept, kept.dropped) == (("shrinks",), 0)
        for doc in store.documents(name, scope=Scope(tenant="shrinks"))[:10]:  # 45 left: under the line
            store.delete_document(doc.id, scope=Scope(tenant="shrinks"))
        gone = store.optimize(name)
        assert (gone.built, gone.kept, gone.dropped) == ((), (), 1)
        assert not _index_exists(store, cid, "shrinks")
        after = store.search("comet", collections=name, scope=Scope(tenant="shrinks"), top_k=10, explain=True)
        assert after.plan[0].startswith(f"{name}: vector=exact") and len(after) == 10
    finally:
        store.delete_collection(name)


def test_new_hnsw_parameters_and_a_deleted_collection_drop_the_tenant_indexes(store: Store) -> None:
    name = f"tenantidx_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True)
    ingest_texts(store, [(f"d{i}", f"orbit {i}", {}) for i in range(110)], collection=name, tenant="t")
    with store.engine.connect() as conn:
        cid = int(
            conn.execute(
                text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}
            ).scalar_one()
        )
    assert store.optimize(name).built == ("t",)
    store.tune_vector_index(name, hnsw_m=8, hnsw_ef_construction=32)
    assert not _index_exists(store, cid, "t")
    assert store.optimize(name).built == ("t",)
    with store.engine.connect() as conn:
        definition = conn.execute(
            text("SELECT pg_get_indexdef(to_regclass(:n))"), {"n": f"agentrag.{tenant_index_name(cid, 't')}"}
        ).scalar_one()
    assert "m='8'" in definition.replace(" ", "") and "ef_construction='32'" in definition.replace(" ", "")
    store.delete_collection(name)
    assert not _index_exists(store, cid, "t")


def test_a_sync_rename_carries_the_tenant_to_its_chunks(store: Store, tmp_path: Path) -> None:
    name = f"tenantidx_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True)
    try:
        src = tmp_path / "src"
        src.mkdir()
        for i in range(3):
            (src / f"f{i}.md").write_text(f"# file {i}\n\n" + " ".join(WORDS) * 3)
        store.sync(src, collection=name, tenant="acme")
        (src / "f0.md").rename(src / "moved.md")
        report = store.sync(src, collection=name, tenant="acme")
        assert report.renamed == (("f0.md", "moved.md"),)
        with store.engine.connect() as conn:
            cid = int(
                conn.execute(
                    text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}
                ).scalar_one()
            )
            tenants_of_chunks = set(
                conn.execute(
                    text("SELECT DISTINCT tenant_id FROM agentrag.chunks WHERE collection_id = :c"),
                    {"c": cid},
                ).scalars()
            )
        assert tenants_of_chunks == {"acme"} and _mismatched_tenants(store, cid) == 0
    finally:
        store.delete_collection(name)


def test_optimize_refuses_bad_input(store: Store, tenants: dict) -> None:
    from agentrag.errors import CollectionNotFoundError, InvalidInputError

    with pytest.raises(CollectionNotFoundError):
        store.optimize("no_such_collection_here")
    with pytest.raises(InvalidInputError, match="maintenance_work_mem"):
        store.optimize(tenants["name"], maintenance_work_mem="1; DROP")


def test_the_cli_optimizes_with_the_same_report(
    store: Store, tenants: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    store.optimize(tenants["name"])
    assert cli.main(["collections", "optimize", tenants["name"], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report.pop("clusters").startswith("clusters none: ")  # too small for vector clusters
    expected = {"collection": tenants["name"], "built": [], "kept": [BIG], "dropped": 0, "due": False}
    assert report == {**expected, "dry_run": False}
    assert cli.main(["collections", "optimize", tenants["name"], "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned.pop("clusters").startswith("clusters none: ")
    assert planned == {**expected, "dry_run": True}
    assert cli.main(["collections", "optimize", tenants["name"], "--maintenance-work-mem", "lots"]) == 2
    assert "maintenance_work_mem must look like '512MB'" in capsys.readouterr().err


def test_a_reembed_to_other_dimensions_drops_the_tenant_index_and_optimize_rebuilds_it(
    database_url: str,
) -> None:
    from agentrag.testing import FakeEmbedder

    name = f"tenantidx_{uuid.uuid4().hex[:8]}"
    old = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    new = Store(database_url, embedder=FakeEmbedder(32, model_id="fake-other", version="2"))
    try:
        old.create_collection(name, scoped=True)
        ingest_texts(
            old,
            [(f"d{i}", f"nebula {WORDS[i % 11]} {i}", {}) for i in range(120)],
            collection=name,
            tenant="t",
        )
        ingest_texts(old, [("o-0", "nebula elsewhere", {})], collection=name, tenant="other")  # not the whole
        cid = old.collection(name).id
        assert old.optimize(name).built == ("t",)
        # the index casts to vector(64): the swap's 32-dimensional vectors could not be written through it
        assert new.reembed(name).chunks == 121
        assert not _index_exists(new, cid, "t")
        assert new.optimize(name).built == ("t",)
        hits = new.search("nebula", collections=name, scope=Scope(tenant="t"), top_k=10, explain=True)
        assert hits.plan[0].startswith(f"{name}: vector=hnsw-tenant") and len(hits) == 10
        assert _mismatched_tenants(new, cid) == 0
    finally:
        old.delete_collection(name)
        old.close()
        new.close()


def test_a_halfvec_collection_gets_halfvec_tenant_indexes_and_walks_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #39: the tenant's index is built on ``embedding_half::halfvec(dims)`` with its operator class,
    the walk states that expression (the plan says hnsw-tenant) and finds what an exact scan finds."""
    name = f"tenantidx_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True, vector_type="halfvec")
    try:
        rng = random.Random(5)
        big = [(f"b{i}", " ".join(rng.choices(WORDS, k=10)), {}) for i in range(150)]
        ingest_texts(store, big, collection=name, tenant="big")
        ingest_texts(store, [("o-0", "nebula elsewhere", {})], collection=name, tenant="other")
        cid = store.collection(name).id
        assert store.optimize(name).built == ("big",)
        with store.engine.connect() as conn:
            definition = conn.execute(
                text("SELECT pg_get_indexdef(to_regclass(:n))"),
                {"n": f"agentrag.{tenant_index_name(cid, 'big')}"},
            ).scalar_one()
        assert "(embedding_half)::halfvec(64)" in definition and "halfvec_cosine_ops" in definition
        walked = store.search(
            "comet nebula", collections=name, scope=Scope(tenant="big"), top_k=10, mode="vector"
        )
        assert walked.plan[0].startswith(f"{name}: vector=hnsw-tenant") and len(walked) == 10
        monkeypatch.setattr(tenant_walk, "ENABLED", False)
        exact = store.search(
            "comet nebula", collections=name, scope=Scope(tenant="big"), top_k=10, mode="vector"
        )
        assert "hnsw-tenant" not in exact.plan[0]
        assert [round(h.score, 3) for h in walked.hits] == [round(h.score, 3) for h in exact.hits]
    finally:
        store.delete_collection(name)
