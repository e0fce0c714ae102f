"""Document permissions (issue #26): principals, grants, private sessions, enforced in SQL.

Real PostgreSQL; only the embedder is faked. The property test draws random grants, principals
and edits and checks every search mode, the listing and Store.document against a model of who
may read what, computed in Python from the grants and sessions alone (tests/acl_support.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrag as ar
from agentrag.errors import CollectionNotFoundError, DocumentNotFoundError, InvalidInputError, ScopeError
from agentrag.store.store import Store
from tests import acl_support as acl


@pytest.fixture
def hr(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name, acl=True)
    store.ingest_text(
        "salary bands for engineers", collection=collection_name, source="pay.md", grants=["group:hr"]
    )
    store.ingest_text(
        "salary of the chief executive", collection=collection_name, source="ceo.md", grants=["user:ann"]
    )
    store.ingest_text(
        "salary review calendar", collection=collection_name, source="cal.md", grants=["everyone"]
    )
    store.ingest_text("salary secrets nobody reads", collection=collection_name, source="none.md")
    return collection_name


def sources(result: ar.SearchResult) -> set[str | None]:
    return {h.source for h in result.hits}


def who(user: str | None = None, *groups: str, admin: bool = False) -> ar.Scope:
    return ar.Scope(principal=ar.Principal(user=user, groups=list(groups), admin=admin))


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical", "lexical_sql"])
def test_grants_decide_in_every_mode(store: Store, hr: str, mode: str) -> None:
    def found(scope: ar.Scope) -> set[str | None]:
        return sources(store.search("salary", collections=hr, mode=mode, top_k=10, scope=scope))

    assert found(who("bob")) == {"cal.md"}
    assert found(who("bob", "hr")) == {"cal.md", "pay.md"}
    assert found(who("ann")) == {"cal.md", "ceo.md"}
    assert found(who(admin=True)) == {"cal.md", "ceo.md", "pay.md", "none.md"}


def test_no_principal_on_an_acl_collection_is_refused(store: Store, hr: str) -> None:
    with pytest.raises(ScopeError, match=r"acl=True.*Principal"):
        store.search("salary", collections=hr)
    with pytest.raises(ScopeError, match="acl=True"):
        store.documents(hr)


def test_the_hit_and_the_proof_name_the_grant(store: Store, hr: str) -> None:
    result = store.search("salary", collections=hr, top_k=10, scope=who("ann", "hr"))
    assert {h.source: h.grant for h in result.hits} == {
        "ceo.md": "user:ann",
        "pay.md": "group:hr",
        "cal.md": "everyone",
    }
    ctx = ar.new("salary", store=store, collections=[hr], scope=who("ann"), limit=10) | ar.search()
    assert {c.source: c.grant for c in ctx.proof().chunks} == {"ceo.md": "user:ann", "cal.md": "everyone"}


def test_grant_and_revoke_apply_to_the_next_query(store: Store, hr: str) -> None:
    pay = next(d for d in store.documents(hr, scope=who(admin=True)) if d.source == "pay.md")
    assert store.grants(pay.id) == ["group:hr"]
    assert store.grant(pay.id, ["user:bob"]) == ["group:hr", "user:bob"]
    assert "pay.md" in sources(store.search("salary", collections=hr, top_k=10, scope=who("bob")))
    assert store.revoke(pay.id, "user:bob, group:hr") == []
    assert "pay.md" not in sources(store.search("salary", collections=hr, top_k=10, scope=who("bob", "hr")))
    with pytest.raises(InvalidInputError, match="unknown grant"):
        store.grant(pay.id, ["role:admin"])
    with pytest.raises(DocumentNotFoundError):
        store.grant("doc_missing", ["user:bob"])


def test_grants_need_an_acl_collection(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    report = store.ingest_text("x", collection=collection_name, source="a.md", grants=["user:a"])
    assert report.failed and "acl=True" in str(report.failed[0])
    store.ingest_text("plain text", collection=collection_name, source="b.md")
    doc = store.documents(collection_name)[0]
    assert store.grants(doc.id) is None
    with pytest.raises(InvalidInputError, match="does not enforce grants"):
        store.grant(doc.id, ["user:a"])


def test_front_matter_and_sidecar_grants(store: Store, collection_name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, acl=True)
    (tmp_path / "a.md").write_text("---\ngrants: group:legal, user:zoe\n---\ncontract terms\n")
    (tmp_path / "b.md").write_text("contract annex\n")
    (tmp_path / "b.md.grants").write_text("# who reads the annex\ngroup:sales\n")
    report = store.ingest(tmp_path, collection=collection_name)
    assert report.ok, report
    assert sources(store.search("contract", collections=collection_name, scope=who("zoe"))) == {"a.md"}
    assert sources(store.search("contract", collections=collection_name, scope=who(None, "sales"))) == {
        "b.md"
    }


def test_a_synced_rename_keeps_the_documents_grants(store: Store, collection_name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, acl=True)
    (tmp_path / "a.md").write_text("---\ngrants: group:legal\n---\n" + "contract terms. " * 5)
    assert store.sync(tmp_path, collection=collection_name).ok
    (tmp_path / "a.md").rename(tmp_path / "b.md")  # the same text: moved, not re-embedded
    report = store.sync(tmp_path, collection=collection_name)
    assert report.renamed == (("a.md", "b.md"),), report
    legal, nobody = who(None, "legal"), who("zoe")
    assert sources(store.search("contract", collections=collection_name, scope=legal)) == {"b.md"}
    assert sources(store.search("contract", collections=collection_name, scope=nobody)) == set()
    (tmp_path / "b.md").write_text("---\ngrants: user:zoe\n---\n" + "contract terms. " * 5)
    (tmp_path / "b.md").rename(tmp_path / "c.md")  # same text, new grants: the new file's grants
    report = store.sync(tmp_path, collection=collection_name)
    assert report.renamed == (("b.md", "c.md"),), report
    assert sources(store.search("contract", collections=collection_name, scope=nobody)) == {"c.md"}
    assert sources(store.search("contract", collections=collection_name, scope=legal)) == set()


def test_relations_are_as_readable_as_their_source_document(store: Store, hr: str) -> None:
    store.add_relations(
        hr,
        [
            ("alice", "is paid", "band 3", "pay.md"),
            ("ceo", "is paid", "a lot", "ceo.md"),
            ("review", "happens in", "march", "cal.md"),
            ("alice", "knows", "ceo"),  # no source: no document grants it
        ],
    )

    def triples(scope: ar.Scope | None, entity: str | None = None) -> set[str]:
        return {r.subject + ">" + r.object for r in store.relations(hr, entity=entity, scope=scope)}

    for read in (
        lambda: store.relations(hr),
        lambda: store.neighbourhood(hr, "alice", 2),
        lambda: store.relations(hr, scope=ar.Scope(tenant="t")),
    ):
        with pytest.raises(ScopeError, match="acl=True"):
            read()
    assert triples(who("bob")) == {"review>march"}
    assert triples(who("bob", "hr")) == {"review>march", "alice>band 3"}
    assert triples(who(admin=True)) == {"review>march", "alice>band 3", "ceo>a lot", "alice>ceo"}
    # the walk never passes through a hidden triple: alice -> ceo -> 'a lot' is the admin's only path
    assert store.neighbourhood(hr, "alice", 2, scope=who("ann")) == []
    assert {r.object for r in store.neighbourhood(hr, "ceo", 2, scope=who("ann"))} == {"a lot"}
    assert len(store.neighbourhood(hr, "alice", 2, scope=who(admin=True))) == 3
    pay = next(d for d in store.documents(hr, scope=who(admin=True)) if d.source == "pay.md")
    store.revoke(pay.id, ["group:hr"])  # the next read obeys it
    assert triples(who("bob", "hr")) == {"review>march"}


def test_store_document_obeys_the_scope(store: Store, hr: str) -> None:
    pay = next(d for d in store.documents(hr, scope=who(admin=True)) if d.source == "pay.md")
    with pytest.raises(DocumentNotFoundError):
        store.document(pay.id, scope=who("bob"))
    with pytest.raises(DocumentNotFoundError):
        store.document(pay.id)
    assert store.document(pay.id, scope=who("x", "hr")).text == "salary bands for engineers"


def test_empty_reason_says_nothing_of_what_the_caller_cannot_read(store: Store, hr: str) -> None:
    result = store.search(
        "salary", collections=hr, scope=ar.Scope(tenant="t", principal=ar.Principal(user="bob"))
    )
    assert result.empty_reason == (
        f"nothing in collection {hr!r} is visible to the scope (tenant='t', principal=Principal(user='bob'))"
    )


def test_private_session_uploads(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text(
        "handbook: holidays policy", collection=collection_name, source="handbook.md", tenant="t"
    )
    store.ingest_text(
        "my holidays plan", collection=collection_name, source="mine.md", tenant="t", session="s1"
    )

    def found(scope: ar.Scope | None) -> set[str | None]:
        return sources(store.search("holidays", collections=collection_name, top_k=10, scope=scope))

    assert found(None) == {"handbook.md"}
    assert found(ar.Scope(tenant="t")) == {"handbook.md"}
    assert found(ar.Scope(tenant="t", session="s2")) == set()
    assert found(ar.Scope(tenant="t", session="s1")) == {"mine.md"}
    assert found(ar.Scope(tenant="t", session="s1", include_shared=True)) == {"handbook.md", "mine.md"}
    assert found(ar.Scope.every()) == {"handbook.md", "mine.md"}
    assert {d.source for d in store.documents(collection_name, tenant="t")} == {"handbook.md"}
    mine = next(d for d in store.documents(collection_name, scope=ar.Scope.every()) if d.source == "mine.md")
    store.share(mine.id, workspace="team")
    assert found(ar.Scope(tenant="t")) == {"handbook.md", "mine.md"}
    with pytest.raises(ScopeError, match="include_shared=True needs a session"):
        ar.Scope(tenant="t", include_shared=True)


def test_principal_values_are_checked() -> None:
    with pytest.raises(ScopeError):
        ar.Principal()
    with pytest.raises(ScopeError):
        ar.Principal(user="a\x00b")
    with pytest.raises(ScopeError):
        ar.Principal(user="a", groups="hr")  # type: ignore[arg-type]
    assert ar.Principal(user="a", groups=["b", "a", "b"]).groups == ("a", "b")


# ---- the property: nobody ever reads what they may not -----------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    drawn=acl.DOCS,
    edits=acl.EDITS,
    principal=acl.PRINCIPAL,
    session=st.sampled_from([None, *acl.SESSIONS]),
    include_shared=st.booleans(),
    mode=st.sampled_from(["hybrid", "vector", "lexical", "lexical_sql"]),
)
def test_no_principal_reads_what_it_may_not(
    store: Store,
    drawn: list[tuple[set[str], str | None]],
    edits: list[tuple[int, bool, str]],
    principal: ar.Principal,
    session: str | None,
    include_shared: bool,
    mode: str,
) -> None:
    import uuid

    name = f"acl_{uuid.uuid4().hex[:10]}"
    store.create_collection(name, acl=True)
    docs = acl.ingest(store, name, drawn)
    include_shared = include_shared and session is not None
    scope = ar.Scope(tenant=acl.TENANT, session=session, include_shared=include_shared, principal=principal)

    def check() -> None:
        allowed = {d.id for d in docs if d.visible(principal, session, include_shared)}
        result = store.search("shared words document", collections=name, mode=mode, top_k=10, scope=scope)
        assert {h.document_id for h in result.hits} <= allowed
        if mode != "lexical_sql":  # every visible document matches: exactly min(k, visible)
            assert {h.document_id for h in result.hits} == allowed
        assert {d.id for d in store.documents(name, scope=scope)} == allowed
        for d in docs:
            if d.id in allowed:
                assert store.document(d.id, scope=scope).id == d.id
            else:
                with pytest.raises(DocumentNotFoundError):
                    store.document(d.id, scope=scope)
        if not result.hits:
            assert result.empty_reason is not None and not re.search(r"\d+ documents?", result.empty_reason)
        # the triples: those of the scope's own rows (a session's, or the shared ones) it may read
        triples = {r.source for r in store.relations(name, scope=scope)}
        assert triples == {d.source for d in docs if d.session == session and d.id in allowed}

    check()
    for index, add, grant in edits:  # grants change after ingest, without re-embedding
        doc = acl.edit(docs, index, add, grant)
        (store.grant if add else store.revoke)(doc.id, [grant])
    check()  # the next query obeys them
    store.delete_collection(name)


def test_a_tenants_collection_is_hidden_from_other_tenants(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name, tenant="acme")
    assert store.collection(collection_name).tenant == "acme"
    store.ingest_text("acme roadmap for next year", collection=collection_name, source="r.md", tenant="acme")
    with pytest.raises(InvalidInputError, match="no collection named"):
        store.ingest_text("x", collection=collection_name, source="x.md", tenant="globex")
    assert len(store.search("roadmap", collections=collection_name, scope=ar.Scope(tenant="acme"))) == 1
    with pytest.raises(CollectionNotFoundError, match=f"^no collection named {collection_name!r}$"):
        store.search("roadmap", collections=collection_name, scope=ar.Scope(tenant="globex"))
    with pytest.raises(ScopeError, match="belongs to a tenant"):
        store.search("roadmap", collections=collection_name)
    assert len(store.search("roadmap", collections=collection_name, scope=ar.Scope.every())) == 1


def test_document_ids_are_unambiguous(store: Store, collection_name: str) -> None:
    """Fields were joined by \\x1f: source 's\\x1ft' without a tenant and source 's' in tenant 't\\x1f'
    encoded the same and got one id. Ids of fields without \\x1f are unchanged."""
    import hashlib

    store.create_collection(collection_name)
    a = store.ingest_text("same text", collection=collection_name, source="s\x1ft")
    b = store.ingest_text("same text", collection=collection_name, source="s", tenant="t\x1f")
    assert a.added and b.added
    assert a.document_ids["s\x1ft"] != b.document_ids["s"]
    plain = store.ingest_text("same text", collection=collection_name, source="plain")
    sha = hashlib.sha256(b"same text").hexdigest()
    old = hashlib.sha256("\x1f".join([collection_name, "plain", "", "", sha]).encode()).hexdigest()[:16]
    assert plain.document_ids["plain"] == "doc_" + old


def test_the_cli_grants_revokes_and_searches_as_a_principal(
    store: Store, hr: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    def found(*who: str) -> set[str]:
        code, out, err = run("search", "salary", "-c", hr, "--mode", "lexical", "-k", "10", "--json", *who)
        assert code == 0, err
        return {h["source"] for h in json.loads(out)["hits"]}

    pay = next(d for d in store.documents(hr, scope=who(admin=True)) if d.source == "pay.md")
    assert found("--user", "bob") == {"cal.md"}
    assert found("--user", "bob", "--group", "hr") == {"cal.md", "pay.md"}
    code, _out, err = run("search", "salary", "-c", hr, "--mode", "lexical")
    assert code == 2 and "acl=True" in err and "Principal" in err
    assert run("acl", "grant", pay.id, "user:bob")[1].strip() == f"{pay.id}: group:hr, user:bob"
    assert found("--user", "bob") == {"cal.md", "pay.md"}
    code, out, _ = run("acl", "revoke", pay.id, "user:bob", "--json")
    assert json.loads(out) == {"document_id": pay.id, "grants": ["group:hr"]}
    assert found("--user", "bob") == {"cal.md"}
    shown = run("acl", "show", pay.id)[1].splitlines()
    assert shown[0] == f"{pay.id}: group:hr" and "  revoked by hand: user:bob" in shown
    code, _out, err = run("acl", "grant", pay.id, "role:x")
    assert code == 2 and "unknown grant" in err
    store.add_relations(hr, [("alice", "is paid", "band 3", "pay.md"), ("review", "in", "march", "cal.md")])
    code, out, err = run("relations", "list", "-c", hr, "--user", "bob", "--json")
    assert code == 0, err
    assert [r["source"] for r in json.loads(out)] == ["cal.md"]
    code, _out, err = run("relations", "list", "-c", hr)
    assert code == 2 and "acl=True" in err
    # documents list / show read as the principal too
    code, out, err = run("documents", "list", "-c", hr, "--user", "bob", "--json")
    assert code == 0 and {d["source"] for d in json.loads(out)} == {"cal.md"}, err
    code, out, err = run("documents", "list", "-c", hr, "--admin", "--json")
    assert code == 0 and len(json.loads(out)) == 4, err
    code, out, err = run("documents", "show", pay.id, "--user", "bob")
    assert code != 0 and "salary bands" not in out + err
    code, out, err = run("documents", "show", pay.id, "--user", "bob", "--group", "hr")
    assert code == 0 and "salary bands for engineers" in out, err
