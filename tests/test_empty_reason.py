"""Empty results explain themselves (issue #13, item 3): ``SearchResult.empty_reason``, the
search records' and the Context's, shown by ``str()``, the notebook display, ``ask`` and the CLI.
Real PostgreSQL; only the embedder is faked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import agentrag as ar
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder


@pytest.fixture
def notes(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name)
    for n, (classification, text) in enumerate(
        [
            ("public", "Deleted notes stay in the trash for thirty days before they are erased."),
            ("public", "Restore a note from the trash with the Restore button."),
            ("internal", "Support can recover erased notes from backups within a week."),
        ]
    ):
        store.ingest_text(
            text, collection=collection_name, source=f"n{n}.md", metadata={"classification": classification}
        )
    return collection_name


def test_hits_have_no_reason(store: Store, notes: str) -> None:
    result = store.search("trash", collections=notes, mode="lexical")
    assert result.hits and result.empty_reason is None
    assert result.to_dict()["empty_reason"] is None


def test_an_empty_collection(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    result = store.search("trash", collections=collection_name)
    assert len(result) == 0
    assert result.empty_reason is not None
    assert result.empty_reason.startswith(f"collection {collection_name!r} is empty")
    assert f"no hits: collection {collection_name!r} is empty" in str(result)
    assert result.to_dict()["empty_reason"] == result.empty_reason


def test_a_scope_that_excludes_every_document(store: Store, notes: str) -> None:
    """A restricted caller learns nothing of what it may not read: no count, not even whether the
    collection holds anything (issue #26: empty_reason counted other tenants' documents)."""
    result = store.search("trash", collections=notes, scope=ar.Scope(session="chat-1"))
    assert result.empty_reason == (
        f"nothing in collection {notes!r} is visible to the scope (session='chat-1') "
        "(a document is in a session only when it was ingested with that session=)"
    )
    tenant = store.search("trash", collections=notes, scope=ar.Scope(tenant="acme"), mode="lexical")
    assert tenant.empty_reason == f"nothing in collection {notes!r} is visible to the scope (tenant='acme')"


def test_filters_that_exclude_every_document(store: Store, notes: str) -> None:
    result = store.search("trash", collections=notes, filters={"classification": "secret"})
    assert result.empty_reason == "the filters exclude all 3 documents"
    # the filters count what the scope left
    store.ingest_text("Trash in the acme tenant.", collection=notes, source="t.md", tenant="acme")
    scoped = store.search(
        "trash", collections=notes, filters={"classification": "secret"}, scope=ar.Scope(tenant="acme")
    )
    assert scoped.empty_reason == "the filters exclude 1 document in scope"


def test_no_lexical_match(store: Store, notes: str) -> None:
    result = store.search("zeppelin", collections=notes, mode="lexical")
    assert result.empty_reason == (
        "no lexical match: no chunk of the 3 documents shares a term with the query (mode=lexical)"
    )
    sql = store.search("zeppelin", collections=notes, mode="lexical_sql")
    assert sql.empty_reason is not None and sql.empty_reason.startswith("no lexical match")


@pytest.fixture
def failing_store(database_url: str) -> Iterator[Store]:
    s = Store(database_url, embedder=FakeEmbedder(dimensions=64, fail=True))
    yield s
    s.close()


def test_no_lexical_match_and_no_embedder(failing_store: Store, notes: str) -> None:
    result = failing_store.search("zeppelin", collections=notes)  # hybrid: the vector leg fails
    assert result.used_mode == "lexical" and result.degraded
    assert result.empty_reason is not None
    assert result.empty_reason.startswith("no lexical match: no chunk of the 3 documents shares a term")
    assert "no embedder for the vector leg" in result.empty_reason


def test_min_score_that_removes_every_candidate(store: Store, notes: str) -> None:
    result = store.search("trash notes", collections=notes, mode="lexical", min_score=1e6)
    assert result.empty_reason is not None
    assert result.empty_reason.startswith("min_score=1e+06 removed all 3 candidates (best score ")


def test_the_context_and_ask_say_why(store: Store, notes: str) -> None:
    ctx = (
        ar.new("trash", store=store, collections=[notes], scope=ar.Scope(session="chat-1")).search().answer()
    )
    assert ctx.ok and ctx.hits == ()
    assert ctx.results[0].empty_reason == ctx.empty_reason
    assert ctx.empty_reason is not None and "is visible to the scope (session='chat-1')" in ctx.empty_reason
    assert ctx.empty_reason in (ctx.answer_text or "")
    # the notebook display shows it too
    assert "is visible to the scope (session=" in ctx._repr_html_()
    assert "is visible to the scope (session=" in ctx._repr_markdown_()
    found = ar.new("trash", store=store, collections=[notes]).search()
    assert found.hits and found.empty_reason is None and found.results[0].empty_reason is None


def test_several_collections_each_say_why(store: Store, notes: str, collection_name: str) -> None:
    empty = collection_name + "_e"
    store.create_collection(empty)
    ctx = ar.new("zeppelin", store=store, collections=[notes, empty], mode="lexical").search()
    assert ctx.empty_reason is not None
    assert f"{notes}: no lexical match" in ctx.empty_reason
    assert f"{empty}: collection {empty!r} is empty" in ctx.empty_reason


def test_search_result_display_shows_the_reason(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    result = store.search("trash", collections=collection_name)
    assert "is empty" in result._repr_html_() and "is empty" in result._repr_markdown_()


def test_one_search_over_an_empty_and_a_full_collection(
    store: Store, notes: str, collection_name: str
) -> None:
    """The counts read only the documents in scope; an unrestricted scope's count is each collection's
    size, so emptiness is named only when no collection holds anything."""
    empty, other = collection_name + "_a", collection_name + "_b"
    store.create_collection(empty)
    store.create_collection(other)
    both = store.search("trash", collections=[empty, other], mode="lexical")
    assert both.empty_reason is not None
    assert both.empty_reason.startswith(f"collection {empty!r}, {other!r} are empty")
    mixed = store.search("trash", collections=[empty, notes], filters={"classification": "secret"})
    assert mixed.empty_reason == "the filters exclude all 3 documents"
    hidden = store.search("trash", collections=[empty, notes], scope=ar.Scope(tenant="nobody"))
    assert (
        hidden.empty_reason is not None and "is visible to the scope (tenant='nobody')" in hidden.empty_reason
    )
