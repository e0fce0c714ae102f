"""Grants set by hand outlive the source's (migration 0055): ``store.grant`` / ``store.revoke`` are
kept apart from what the sidecar, the front matter or ``ingest(grants=...)`` say, and the search
enforces (source + granted) - revoked. A sidecar change, a modified file, a rename or a re-ingest
replaces the source's grants only. Before, the next sidecar change dropped a manual grant (and
brought a manually revoked one back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agentrag.store.store import Store
from tests.conftest import fresh_database
from tests.fixtures.upgrade import FIXTURES, restore
from tests.test_sync_grants import found, grants_of, put, who


@pytest.fixture
def acl(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name, acl=True)
    return collection_name


def test_a_manual_grant_and_revoke_outlive_a_sidecar_change(store: Store, acl: str, tmp_path: Path) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "group:sales\ngroup:hr\n")
    doc_id = store.sync(tmp_path, collection=acl).document_ids["a.md"]
    store.grant(doc_id, ["user:alice"])  # by hand: alice, on top of the sidecar
    store.revoke(doc_id, ["group:hr"])  # by hand: not hr, though the sidecar says so
    assert grants_of(store, acl) == {"a.md": ["g:sales", "u:alice"]}

    put(tmp_path, "a.md.grants", "group:sales\ngroup:hr\ngroup:legal\n")  # the sidecar changes
    report = store.sync(tmp_path, collection=acl)
    assert report.regranted == ("a.md",)
    assert grants_of(store, acl) == {"a.md": ["g:legal", "g:sales", "u:alice"]}  # alice kept, hr still out
    assert found(store, acl, who("alice")) == {"a.md"}
    assert found(store, acl, who(None, "hr")) == set()

    store.grant(doc_id, ["group:hr"])  # a grant by hand ends the revoke
    (tmp_path / "a.md.grants").unlink()  # the source grants nothing now: what was granted by hand stays
    store.sync(tmp_path, collection=acl)
    assert grants_of(store, acl) == {"a.md": ["g:hr", "u:alice"]}
    assert store.revoke(doc_id, ["user:alice", "group:hr"]) == []
    assert found(store, acl, who("alice", "hr")) == set()


def test_a_modified_or_renamed_file_keeps_what_was_granted_by_hand(
    store: Store, acl: str, tmp_path: Path
) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "group:sales\n")
    doc_id = store.sync(tmp_path, collection=acl).document_ids["a.md"]
    store.grant(doc_id, ["user:alice"])

    put(tmp_path, "a.md", "Alpha contract terms, second edition.\n")  # a new revision: a new row
    put(tmp_path, "a.md.grants", "group:legal\n")
    report = store.sync(tmp_path, collection=acl)
    assert report.modified == ("a.md",) and report.document_ids["a.md"] != doc_id
    assert grants_of(store, acl) == {"a.md": ["g:legal", "u:alice"]}

    (tmp_path / "a.md").rename(tmp_path / "b.md")  # moved without re-embedding
    (tmp_path / "a.md.grants").rename(tmp_path / "b.md.grants")
    report = store.sync(tmp_path, collection=acl)
    assert report.renamed and grants_of(store, acl) == {"b.md": ["g:legal", "u:alice"]}


def test_a_reingest_with_other_grants_keeps_what_was_granted_by_hand(store: Store, acl: str) -> None:
    first = store.ingest_text("Gamma contract terms.", collection=acl, source="g.md", grants=["group:sales"])
    store.grant(first.document_ids["g.md"], ["user:alice"])
    store.ingest_text("Gamma contract terms, revised.", collection=acl, source="g.md", grants=["group:legal"])
    assert grants_of(store, acl) == {"g.md": ["g:legal", "u:alice"]}
    store.ingest_text("Gamma contract terms, revised twice.", collection=acl, source="g.md")  # none: kept
    assert grants_of(store, acl) == {"g.md": ["g:legal", "u:alice"]}


def _grant_columns(url: str) -> dict[str, Any]:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            found_rows = conn.execute(
                text(
                    "SELECT source, grants, to_jsonb(d) -> 'granted' AS granted,"
                    " to_jsonb(d) -> 'revoked' AS revoked FROM agentrag.documents d"
                    " WHERE grants IS NOT NULL ORDER BY source"
                )
            ).all()
    finally:
        engine.dispose()
    return {r.source: (sorted(r.grants), r.granted, r.revoked) for r in found_rows}


def test_an_upgrade_keeps_every_grant_and_tells_the_manual_ones_apart(fake_embedder: Any) -> None:
    """The last release's database, with one grant added and one taken away by hand (what
    store.grant / revoke wrote then: the grants column only), upgraded: every document's grants are
    what they were, the two manual changes are recorded as such, and a sidecar change keeps them."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    release = sorted(p.name.removesuffix(".sql.gz") for p in FIXTURES.glob("*.sql.gz"))[-1]
    with fresh_database("agentrag_upgrade_grants") as url:
        restore(FIXTURES / f"{release}.sql.gz", url)
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as conn:
            by_meta = dict(conn.execute(text("SELECT source, metadata FROM agentrag.documents")).all())
            assert by_meta["bands.md"]["grants"] == ["group:hr"] and by_meta["holidays.md"]["grants"] == [
                "everyone"
            ]
            conn.execute(
                text("UPDATE agentrag.documents SET grants = grants || '{u:dave}' WHERE source = 'bands.md'")
            )
            conn.execute(text("UPDATE agentrag.documents SET grants = '{}' WHERE source = 'holidays.md'"))
            before = {
                s: sorted(g)
                for s, g in conn.execute(
                    text("SELECT source, grants FROM agentrag.documents WHERE grants IS NOT NULL")
                ).all()
            }
        engine.dispose()
        store = Store(url, embedder=fake_embedder, migrate=True)
        after = _grant_columns(url)
        assert {s: g for s, (g, _, _) in after.items()} == before  # nothing lost
        assert after["bands.md"][1:] == (["u:dave"], [])
        assert after["holidays.md"][1:] == ([], ["*"])
        assert after["reorg.md"][1:] == (["g:leads"], [])  # the fixture's own store.grant, by hand
        from agentrag.store.acl import regrant
        from agentrag.store.collections import find_collection

        hr = find_collection(store.engine, "hr")
        with store.engine.begin() as conn:  # what a sync writes when the sidecars change
            ids = dict(
                conn.execute(
                    text("SELECT source, id FROM agentrag.documents WHERE collection_id = :c"), {"c": hr.id}
                ).all()
            )
            changes = [(ids[s], {"grants": ["group:eng"]}, s) for s in ("bands.md", "holidays.md")]
            assert sorted(regrant(conn, hr, changes)) == sorted(ids[s] for s in ("bands.md", "holidays.md"))
        after = _grant_columns(url)
        assert after["bands.md"][0] == ["g:eng", "u:dave"] and after["holidays.md"][0] == ["g:eng"]
        store.close()


def test_through_the_cli_a_grant_by_hand_outlives_the_next_sync(
    store: Store,
    acl: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)

    def run(*argv: str) -> str:
        capsys.readouterr()
        code = cli.main(list(argv))
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    folder = tmp_path / "docs"
    put(folder, "a.md", "Alpha contract terms.\n")
    put(folder, "a.md.grants", "group:sales\n")
    run("sync", str(folder), "-c", acl)
    doc_id = store.documents(acl, scope=who(admin=True))[0].id
    run("acl", "grant", doc_id, "user:alice", "--json")
    put(folder, "a.md.grants", "group:legal\n")
    run("sync", str(folder), "-c", acl)
    assert json.loads(run("acl", "show", doc_id, "--json"))["grants"] == ["group:legal", "user:alice"]
    shown = run("acl", "show", doc_id)  # the text says where each grant comes from
    assert "from its source: group:legal" in shown and "granted by hand: user:alice" in shown

    reset = json.loads(run("acl", "reset", doc_id, "--json"))
    assert reset["grants"] == ["group:legal"] and reset["granted"] == reset["revoked"] == []
    assert "by hand" not in run("acl", "show", doc_id)


def test_the_details_tell_the_source_from_the_hand_and_a_reset_returns_to_the_source(
    store: Store, acl: str, tmp_path: Path
) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "group:sales\ngroup:hr\n")
    doc_id = store.sync(tmp_path, collection=acl).document_ids["a.md"]
    untouched = store.grant_details(doc_id)
    assert (untouched.grants, untouched.source, untouched.by_hand) == (["group:hr", "group:sales"],) * 2 + (
        False,
    )

    store.grant(doc_id, ["user:alice"])
    store.revoke(doc_id, ["group:hr"])
    details = store.grant_details(doc_id)
    assert details.grants == ["group:sales", "user:alice"]
    assert (details.source, details.granted, details.revoked) == (
        ["group:hr", "group:sales"],
        ["user:alice"],
        ["group:hr"],
    )
    assert "granted=['user:alice']" in repr(details)
    assert found(store, acl, who("alice")) == {"a.md"} and found(store, acl, who(None, "hr")) == set()

    after = store.reset_grants(doc_id)  # back to what the sidecar says, and the search obeys at once
    assert (after.grants, after.granted, after.revoked, after.by_hand) == (
        ["group:hr", "group:sales"],
        [],
        [],
        False,
    )
    assert store.grant_details(doc_id) == after
    assert found(store, acl, who("alice")) == set() and found(store, acl, who(None, "hr")) == {"a.md"}

    put(tmp_path, "a.md.grants", "group:legal\n")  # the source changes after the reset: it alone counts
    store.sync(tmp_path, collection=acl)
    assert store.grants(doc_id) == ["group:legal"]


def test_details_and_reset_are_refused_where_grants_are_not_enforced_or_not_administered(
    store: Store, collection_name: str
) -> None:
    from agentrag.errors import DocumentNotFoundError, InvalidInputError

    store.create_collection(collection_name)
    doc_id = store.ingest_text("Open terms.", collection=collection_name, source="o.md").document_ids["o.md"]
    for call in (store.grant_details, store.reset_grants):
        with pytest.raises(InvalidInputError, match="acl=True"):
            call(doc_id)
        with pytest.raises(DocumentNotFoundError):
            call("doc_missing")
