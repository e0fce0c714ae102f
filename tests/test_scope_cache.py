"""The scope planner's cached count (agentrag.retrieval.scope_cache, migration 0057): a principal's next
search reads its scope from the store's cache while the collection is in the same state, and every writer
of documents, grants, sharing or session links makes the next search count again and see exactly the new
visibility. Against the real PostgreSQL of the test session."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

import agentrag as ar
from agentrag.retrieval import scope_cache
from agentrag.retrieval.scope_cache import CachedScope, ScopeCache, scope_key
from agentrag.retrieval.scoped import ScopeCount
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

ANN = ar.Principal(user="ann", groups=["g0"])


@pytest.fixture
def acl(store: Store) -> Iterator[dict[str, Any]]:
    """An acl collection of 12 one-chunk documents: doc-i readable by group g<i mod 3>."""
    name = f"scope_cache_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, acl=True)
    items = [(f"doc-{i}", f"orbit comet report {i}", {"grants": [f"group:g{i % 3}"]}) for i in range(12)]
    report = ingest_texts(store, items, collection=name)
    yield {"name": name, "ids": dict(report.document_ids)}
    store.delete_collection(name)


def _search(
    store: Store, name: str, scope: ar.Scope, mode: str = "vector"
) -> tuple[set[str], bool, list[str]]:
    """``(the hits' sources, whether the plan's count came from the cache, the statements sent)``; every
    visible chunk is a hit (top_k above the collection's size)."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        result = store.search("orbit comet", collections=name, mode=mode, top_k=50, scope=scope, explain=True)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert result.explain is not None
    assert not any("left out" in w for w in result.warnings)
    return {h.source for h in result.hits}, bool(result.explain[0]["cached"]), statements


def _counted(statements: list[str]) -> bool:
    return any("d.chunk_count AS n" in s for s in statements)


def _uncached(store: Store, name: str, scope: ar.Scope, mode: str = "vector") -> set[str]:
    saved = scope_cache.ENABLED
    scope_cache.ENABLED = False
    try:
        return _search(store, name, scope, mode)[0]
    finally:
        scope_cache.ENABLED = saved


@pytest.mark.parametrize("mode", ["vector", "hybrid", "lexical"])
def test_a_principal_s_next_search_reads_its_scope_from_the_cache(
    store: Store, acl: dict[str, Any], mode: str
) -> None:
    scope = ar.Scope(principal=ANN)
    first, first_cached, first_sent = _search(store, acl["name"], scope, mode)
    again, again_cached, again_sent = _search(store, acl["name"], scope, mode)
    assert first == again == {f"doc-{i}" for i in range(0, 12, 3)}
    assert (first_cached, _counted(first_sent)) == (False, True)
    assert (again_cached, _counted(again_sent)) == (True, False)
    bo = ar.Scope(principal=ar.Principal(user="bo", groups=["g1"]))
    other, other_cached, _ = _search(store, acl["name"], bo)
    assert not other_cached and other == {f"doc-{i}" for i in range(1, 12, 3)}  # another principal: its own


def _grant(store: Store, acl: dict[str, Any]) -> set[str]:
    store.grant(acl["ids"]["doc-1"], "group:g0")
    return {"doc-1"}


def _revoke(store: Store, acl: dict[str, Any]) -> set[str]:
    store.revoke(acl["ids"]["doc-3"], "group:g0")
    return {"-doc-3"}


def _reset(store: Store, acl: dict[str, Any]) -> set[str]:
    store.revoke(acl["ids"]["doc-6"], "group:g0")  # bumps too: the reset must bump on its own
    _search(store, acl["name"], ar.Scope(principal=ANN))
    _search(store, acl["name"], ar.Scope(principal=ANN))
    store.reset_grants(acl["ids"]["doc-6"])
    return set()


def _ingest(store: Store, acl: dict[str, Any]) -> set[str]:
    ingest_texts(store, [("doc-new", "orbit comet new", {"grants": ["group:g0"]})], collection=acl["name"])
    return {"doc-new"}


def _delete(store: Store, acl: dict[str, Any]) -> set[str]:
    store.delete_document(acl["ids"]["doc-9"])
    return {"-doc-9"}


WRITERS: dict[str, Callable[[Store, dict[str, Any]], set[str]]] = {
    "grant": _grant,
    "revoke": _revoke,
    "reset_grants": _reset,
    "ingest": _ingest,
    "delete_document": _delete,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_writer_makes_the_next_search_count_again_and_see_exactly_the_new_visibility(
    store: Store, acl: dict[str, Any], writer: str
) -> None:
    scope = ar.Scope(principal=ANN)
    before = _search(store, acl["name"], scope)[0]
    assert _search(store, acl["name"], scope)[1]  # cached
    change = WRITERS[writer](store, acl)
    after, cached, sent = _search(store, acl["name"], scope)
    assert not cached and _counted(sent)
    added = {c for c in change if not c.startswith("-")}
    expected = (before | added) - {c[1:] for c in change if c.startswith("-")}
    assert after == expected == _uncached(store, acl["name"], scope)
    assert _search(store, acl["name"], scope)[1:2] == (True,)  # the new state is cached in turn


def test_grant_and_revoke_between_two_searches_the_second_sees_exactly_the_new_visibility(
    store: Store, acl: dict[str, Any]
) -> None:
    """In every mode: a grant shows the document in the very next search, a revoke hides it."""
    scope = ar.Scope(principal=ANN)
    mine = {f"doc-{i}" for i in range(0, 12, 3)}
    for mode in ("vector", "hybrid", "lexical"):
        assert _search(store, acl["name"], scope, mode)[0] == mine
        assert _search(store, acl["name"], scope, mode)[0] == mine
        store.grant(acl["ids"]["doc-2"], "user:ann")
        assert _search(store, acl["name"], scope, mode)[0] == mine | {"doc-2"}
        store.revoke(acl["ids"]["doc-2"], "user:ann")
        store.revoke(acl["ids"]["doc-0"], "group:g0")
        assert _search(store, acl["name"], scope, mode)[0] == mine - {"doc-0"}
        store.reset_grants(acl["ids"]["doc-0"])
        store.reset_grants(acl["ids"]["doc-2"])


def test_a_sync_that_changes_grants_only_makes_the_next_search_count_again(
    store: Store, collection_name: str, tmp_path: Path
) -> None:
    store.create_collection(collection_name, acl=True)
    (tmp_path / "a.md").write_text("orbit comet alpha")
    (tmp_path / "a.md.grants").write_text("group:g0\n")
    (tmp_path / "b.md").write_text("orbit comet beta")
    (tmp_path / "b.md.grants").write_text("group:g1\n")
    store.sync(tmp_path, collection=collection_name)
    scope = ar.Scope(principal=ANN)
    assert _search(store, collection_name, scope)[0] == {"a.md"}
    assert _search(store, collection_name, scope)[1]
    (tmp_path / "b.md.grants").write_text("group:g0\n")
    report = store.sync(tmp_path, collection=collection_name)
    assert report.regranted  # in place: the documents and their version unchanged
    after, cached, _ = _search(store, collection_name, scope)
    assert (after, cached) == ({"a.md", "b.md"}, False)
    store.delete_collection(collection_name)


def test_sharing_and_linking_a_private_upload_make_the_next_search_count_again(
    store: Store, collection_name: str
) -> None:
    store.create_collection(collection_name)
    store.ingest_text("orbit comet shared", collection=collection_name, source="shared.md", tenant="t")
    store.ingest_text(
        "orbit comet mine", collection=collection_name, source="mine.md", tenant="t", session="s1"
    )
    s2 = ar.Scope(tenant="t", session="s2", include_shared=True)
    shared = ar.Scope(tenant="t")
    assert _search(store, collection_name, s2)[0] == {"shared.md"}
    assert _search(store, collection_name, s2)[1]
    mine = next(d for d in store.documents(collection_name, scope=ar.Scope.every()) if d.source == "mine.md")
    store.link_session(mine.id, "s2")
    assert _search(store, collection_name, s2)[:2] == ({"shared.md", "mine.md"}, False)
    assert _search(store, collection_name, shared)[0] == {"shared.md"}
    assert _search(store, collection_name, shared)[1]
    store.share(mine.id)
    assert _search(store, collection_name, shared)[:2] == ({"shared.md", "mine.md"}, False)
    store.delete_collection(collection_name)


def test_a_stale_entry_never_shows_a_row_the_scope_may_not_read(
    store: Store, acl: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that did not bump the counters (none does: this one is made to) leaves the cached scope
    of the state before; the fetch re-tests the predicate on the hits, so the revoked document is not
    returned, the search says why, and the store's cached scopes are dropped."""
    from agentrag.store import acl as permissions

    scope = ar.Scope(principal=ANN)
    mine = {f"doc-{i}" for i in range(0, 12, 3)}
    assert _search(store, acl["name"], scope)[0] == mine
    monkeypatch.setattr(permissions, "bump_acl_version", lambda conn, collection_id: None)
    store.revoke(acl["ids"]["doc-3"], "group:g0")
    result = store.search("orbit comet", collections=acl["name"], mode="vector", top_k=50, scope=scope)
    assert {h.source for h in result.hits} == mine - {"doc-3"}
    assert any("1 hit(s) left out: outside the scope" in w for w in result.warnings)
    assert len(store.scope_cache) == 0
    assert _search(store, acl["name"], scope)[:2] == (mine - {"doc-3"}, False)


def test_reembedding_keeps_the_cached_scope_right(store: Store, acl: dict[str, Any]) -> None:
    scope = ar.Scope(principal=ANN)
    before = _search(store, acl["name"], scope)[0]
    store.reembed(acl["name"], vector_type="halfvec")
    after, _cached, _ = _search(store, acl["name"], scope)
    assert after == before == _uncached(store, acl["name"], scope)


def _entry(ids: int) -> CachedScope:
    return CachedScope(ScopeCount(ids, ids, tuple(f"doc_{i:x}" for i in range(ids)), ids), None)


def test_the_cache_is_bounded_by_entries_and_ids_and_keeps_one_state_per_collection() -> None:
    cache = ScopeCache(max_entries=3, max_ids=10)
    for i in range(4):
        cache.put(scope_key(i, 1, 0, "sql", {"p": "x"}), _entry(1))
    assert len(cache) == 3 and cache.get(scope_key(0, 1, 0, "sql", {"p": "x"})) is None
    cache.put(scope_key(7, 1, 0, "sql", {"p": "y"}), _entry(9))
    assert len(cache) == 2  # 9 ids + the three others' exceed 10: the two oldest went
    cache.put(scope_key(7, 1, 0, "sql", {"p": "z"}), _entry(1))
    assert len(cache) == 2
    cache.put(scope_key(7, 2, 0, "sql", {"p": "z"}), _entry(1))  # the collection's next state
    assert len(cache) == 1 and cache.get(scope_key(7, 2, 0, "sql", {"p": "z"})) is not None
    cache.put(scope_key(8, 1, 0, "sql", {}), _entry(11))  # more ids than the whole bound: not kept
    assert cache.get(scope_key(8, 1, 0, "sql", {})) is None


def test_the_key_tells_every_bound_value_and_counter_apart() -> None:
    base = scope_key(1, 2, 3, "sql", {"t": "1", "f": [1, 2]})
    assert base == scope_key(1, 2, 3, "sql", {"f": [1, 2], "t": "1"})
    for other in (
        scope_key(1, 2, 4, "sql", {"t": "1", "f": [1, 2]}),
        scope_key(1, 3, 3, "sql", {"t": "1", "f": [1, 2]}),
        scope_key(1, 2, 3, "sql2", {"t": "1", "f": [1, 2]}),
        scope_key(1, 2, 3, "sql", {"t": 1, "f": [1, 2]}),
        scope_key(1, 2, 3, "sql", {"t": "1", "f": [2, 1]}),
    ):
        assert other != base


def test_a_large_scope_s_estimate_is_cached_for_the_plan_only(
    store: Store, acl: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scope estimated from the statistics and not counted (many grant tokens, a large share): the next
    search in the same state plans from the cached estimate (no EXPLAIN); the walk still tests the predicate
    in its own statement, so a grant between the two is seen at once."""
    from agentrag.retrieval import scoped

    monkeypatch.setattr(scoped, "COUNT_MAX_TOKENS", 2)
    monkeypatch.setattr(scoped, "UNCOUNTED_MIN_SHARE", 0.0)
    scope = ar.Scope(principal=ar.Principal(user="ann", groups=["g0", "g1"]))
    first, _, first_sent = _search(store, acl["name"], scope)
    again, _, again_sent = _search(store, acl["name"], scope)
    assert first == again == {f"doc-{i}" for i in range(12) if i % 3 != 2}
    assert [
        sum(s.startswith("EXPLAIN (FORMAT JSON)") for s in sent) for sent in (first_sent, again_sent)
    ] == [1, 0]
    assert not _counted(first_sent) and not _counted(again_sent)
    store.grant(acl["ids"]["doc-2"], "user:ann")
    after, _, after_sent = _search(store, acl["name"], scope)
    assert after == first | {"doc-2"} and sum(s.startswith("EXPLAIN (FORMAT JSON)") for s in after_sent) == 1
