"""Coarse vector clusters (issue #39, migration 0056): ``Store.optimize`` fits centroids for a large
collection, every write assigns new chunks, and a scope planned exact reads only its rows in the
clusters nearest the query (``vector=clusters probes=P/K``), rows without a cluster always.

Real PostgreSQL; the FakeEmbedder's hashed vectors. The size thresholds are lowered for the module
(the fit's minimum, chunks per cluster, the scope's minimum) so that a few hundred chunks fit K=32.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import text

import agentrag as ar
from agentrag.retrieval import clusters
from agentrag.store import vector_clusters
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

DOCS = 60
CHUNKS_PER_DOC = 5
GROUPS = 4
WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "iris",
    "jade",
    "kelp",
    "lotus",
    "marble",
    "nectar",
    "onyx",
    "pearl",
    "quartz",
    "reef",
    "saffron",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "anchor",
    "beacon",
    "canyon",
    "dune",
    "estuary",
    "fern",
]


def _chunk(d: int, i: int) -> str:
    n = len(WORDS)
    return (
        " ".join(WORDS[(d * 7 + i * 3 + j * j) % n] + str((d + j) % 5) for j in range(8))
        + f" doc{d} part{i}."
    )


def _docs() -> list[tuple[str, str, dict[str, object]]]:
    return [
        (
            f"doc{d:03d}.txt",
            "\n\n".join(_chunk(d, i) for i in range(CHUNKS_PER_DOC)),
            {"grants": [f"group:g{d % GROUPS}"]},
        )
        for d in range(DOCS)
    ]


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clusters, "MIN_FIT_CHUNKS", 100)
    monkeypatch.setattr(vector_clusters, "CHUNKS_PER_CLUSTER", 8)
    monkeypatch.setattr(clusters, "MIN_SCOPE_ROWS", 20)


def _fill(store: Store, name: str, vector_type: str) -> None:
    store.create_collection(name, acl=True, vector_type=vector_type)
    report = ingest_texts(store, _docs(), collection=name, chunk_size=80, chunk_overlap=0)
    assert report.chunks_written == DOCS * CHUNKS_PER_DOC


@pytest.fixture(params=["vector", "halfvec"])
def fitted(request: pytest.FixtureRequest, store: Store, collection_name: str) -> Iterator[str]:
    _fill(store, collection_name, request.param)
    report = store.optimize(collection_name)
    assert report.clusters.startswith("clusters fitted: K=32")
    yield collection_name
    store.delete_collection(collection_name)


def _principal() -> ar.Principal:
    return ar.Principal(user="u", groups=["g1"])  # a quarter of the documents


def _search(store: Store, name: str, query: str, **kw: object) -> ar.SearchResult:
    return store.search(
        query,
        collections=name,
        mode="vector",
        top_k=3,
        depth=3,
        scope=ar.Scope(principal=kw.pop("principal", _principal())),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def _clusters(store: Store, name: str) -> tuple[int, int]:
    """(chunks with a cluster, chunks without) of the collection."""
    with store.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(c.cluster), count(*) - count(c.cluster) FROM agentrag.chunks c"
                " JOIN agentrag.collections k ON k.id = c.collection_id WHERE k.name = :n"
            ),
            {"n": name},
        ).one()
    return int(row[0]), int(row[1])


def test_the_scope_reads_its_nearest_clusters_and_grants_hold(store: Store, fitted: str) -> None:
    assert _clusters(store, fitted) == (DOCS * CHUNKS_PER_DOC, 0)
    for d in (1, 5, 9, 13):  # documents of group g1
        result = _search(store, fitted, _chunk(d, 2))
        assert re.search(r"vector=clusters probes=\d+/32 ", result.plan[0]), result.plan
        assert result.hits[0].text.strip().startswith(_chunk(d, 2)[:20])
        assert {h.grant for h in result.hits} == {"group:g1"}
    other = _search(store, fitted, _chunk(2, 2))  # a document of g2: never shown to g1
    assert {h.grant for h in other.hits} == {"group:g1"}


def test_the_clusters_rank_as_the_exact_scan_on_their_rows(store: Store, fitted: str) -> None:
    """Every hit of the clusters read is where the exact scan ranks it among the rows it read."""
    for d in (1, 5, 9):
        got = _search(store, fitted, _chunk(d, 0))
        clusters.ENABLED = False
        try:
            exact = _search(store, fitted, _chunk(d, 0))
        finally:
            clusters.ENABLED = True
        assert "vector=exact" in exact.plan[0]
        assert got.hits[0].chunk_id == exact.hits[0].chunk_id
        scores = [h.score for h in got.hits]
        assert scores == sorted(scores, reverse=True)


def test_a_chunk_written_after_the_fit_gets_a_cluster_and_is_found(store: Store, fitted: str) -> None:
    body = "zephyr9 quartz9 harbor9 lotus9 unique late arrival granted to the first group"
    store.ingest_text(body, collection=fitted, source="late.txt", metadata={"grants": ["group:g1"]})
    assert _clusters(store, fitted) == (DOCS * CHUNKS_PER_DOC + 1, 0)
    result = _search(store, fitted, body)
    assert "vector=clusters" in result.plan[0]
    assert result.hits[0].text == body


def test_a_chunk_without_a_cluster_is_always_read(store: Store, fitted: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(clusters, "probes", lambda k, share: 4)
    target = _chunk(5, 3)
    with store.engine.begin() as conn:
        cluster = conn.execute(
            text(
                "UPDATE agentrag.chunks c SET cluster = NULL FROM agentrag.collections k"
                " WHERE k.id = c.collection_id AND k.name = :n AND strpos(c.text, :t) > 0 RETURNING c.id"
            ),
            {"n": fitted, "t": target},
        ).all()
    assert len(cluster) == 1
    result = _search(store, fitted, target)
    assert "vector=clusters probes=4/32" in result.plan[0]
    assert result.hits[0].chunk_id == cluster[0].id


def test_reembed_in_both_directions_voids_and_refits_the_clusters(store: Store, fitted: str) -> None:
    before = [h.chunk_id for h in _search(store, fitted, _chunk(9, 1)).hits]
    other = "halfvec" if store.collection(fitted).vector_type == "vector" else "vector"
    for vector_type in (other, store.collection(fitted).vector_type):
        store.reembed(fitted, vector_type=vector_type)
        assert _clusters(store, fitted) == (0, DOCS * CHUNKS_PER_DOC)
        result = _search(store, fitted, _chunk(9, 1))
        assert "vector=exact" in result.plan[0]
        assert result.hits[0].chunk_id == before[0]
        assert store.optimize(fitted).clusters.startswith("clusters fitted")
        result = _search(store, fitted, _chunk(9, 1))
        assert "vector=clusters" in result.plan[0]
        assert result.hits[0].chunk_id == before[0]


def test_optimize_keeps_a_fit_and_drops_it_on_request(store: Store, fitted: str) -> None:
    assert store.optimize(fitted).clusters.startswith("clusters kept")
    assert store.optimize(fitted, clusters=False).clusters.startswith("clusters dropped")
    result = _search(store, fitted, _chunk(1, 1))
    assert "vector=exact" in result.plan[0]
    store.ingest_text("a new one after the drop", collection=fitted, source="n.txt", metadata={"grants": []})
    assert _clusters(store, fitted)[1] == 1  # no fit: written without a cluster


def test_a_dry_run_says_what_optimize_would_fit_and_writes_nothing(
    store: Store, collection_name: str
) -> None:
    _fill(store, collection_name, "vector")
    try:
        plan = store.optimize(collection_name, dry_run=True)
        assert plan.dry_run and plan.due
        assert plan.clusters == f"clusters would be fitted: K=32 over {DOCS * CHUNKS_PER_DOC} chunks (no fit)"
        assert _clusters(store, collection_name) == (0, DOCS * CHUNKS_PER_DOC)  # no chunk assigned
        assert "vector=exact" in _search(store, collection_name, _chunk(1, 1)).plan[0]
        assert store.optimize(collection_name).clusters.startswith("clusters fitted: K=32")
        kept = store.optimize(collection_name, dry_run=True)
        assert kept.clusters.startswith("clusters kept") and not kept.due
        dropping = store.optimize(collection_name, clusters=False, dry_run=True)
        assert dropping.clusters.startswith("clusters would be dropped: clusters=False") and dropping.due
        assert _clusters(store, collection_name) == (DOCS * CHUNKS_PER_DOC, 0)  # the fit stays
    finally:
        store.delete_collection(collection_name)


def test_optimize_leaves_a_small_collection_alone(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clusters, "MIN_FIT_CHUNKS", DOCS * CHUNKS_PER_DOC + 1)
    _fill(store, collection_name, "vector")
    try:
        report = store.optimize(collection_name)
        assert report.clusters.startswith("clusters none")
        assert _clusters(store, collection_name) == (0, DOCS * CHUNKS_PER_DOC)
        assert "vector=exact" in _search(store, collection_name, _chunk(1, 1)).plan[0]
    finally:
        store.delete_collection(collection_name)


def _shallow(store: Store, name: str) -> ar.SearchResult:
    """depth 1: the cluster read pays for g1's quarter of 300 chunks at any K (it needs 2 x depth rows)."""
    scope = ar.Scope(principal=_principal())
    query = _chunk(1, 1)
    return store.search(query, collections=name, mode="vector", top_k=1, depth=1, scope=scope, explain=True)


def _reason(store: Store, name: str) -> str:
    explained = _shallow(store, name).explain
    assert explained is not None
    return str(explained[0]["reason"])


def test_an_unfitted_collection_s_exact_scan_names_optimize_until_it_is_fitted(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lever is said where it applies (``explain``'s reason), and only there: not once the
    collection is fitted, nor for a collection too small for ``optimize`` to fit."""
    _fill(store, collection_name, "vector")
    try:
        with store.engine.begin() as conn:  # the HNSW index's row estimate, as autovacuum leaves it
            conn.execute(text("ANALYZE agentrag.chunks"))
        hint = f"Store.optimize({collection_name!r}) would read only the scope's rows"
        assert hint in _reason(store, collection_name)
        monkeypatch.setattr(clusters, "MIN_FIT_CHUNKS", DOCS * CHUNKS_PER_DOC + 1)
        assert "Store.optimize" not in _reason(store, collection_name)
        monkeypatch.setattr(clusters, "MIN_FIT_CHUNKS", 100)
        assert store.optimize(collection_name).clusters.startswith("clusters fitted")
        assert "vector=clusters" in _shallow(store, collection_name).plan[0]
        assert "Store.optimize" not in _reason(store, collection_name)
    finally:
        store.delete_collection(collection_name)


def test_the_admin_and_a_small_scope_keep_their_plans(store: Store, fitted: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    admin = _search(store, fitted, _chunk(1, 1), principal=ar.Principal(user="root", admin=True))
    assert "vector=clusters" not in admin.plan[0]
    monkeypatch.setattr(clusters, "MIN_SCOPE_ROWS", DOCS * CHUNKS_PER_DOC)
    assert "vector=exact" in _search(store, fitted, _chunk(1, 1)).plan[0]


def test_a_tenant_scope_reads_its_clusters_and_only_its_own(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name, scoped=True)
    try:
        for t in range(4):
            docs = [(s, body, {}) for s, body, _meta in _docs()[t::4]]
            ingest_texts(
                store, docs, collection=collection_name, tenant=f"t{t}", chunk_size=80, chunk_overlap=0
            )
        assert store.optimize(collection_name).clusters.startswith("clusters fitted: K=32")
        for d in (1, 5, 9):  # documents of tenant t1
            result = store.search(
                _chunk(d, 4),
                collections=collection_name,
                mode="vector",
                top_k=3,
                depth=3,
                scope=ar.Scope(tenant="t1"),
            )
            assert "vector=clusters" in result.plan[0], result.plan
            assert result.hits[0].text.strip().startswith(_chunk(d, 4)[:20])
            sources = {h.source for h in result.hits}
            assert all(int(s[3:6]) % 4 == 1 for s in sources), sources
    finally:
        store.delete_collection(collection_name)
