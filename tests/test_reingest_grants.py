"""Re-ingest keeps a document's grants unless new ones are given (issue #37 item 4): ``agentrag
ingest DIR -c hr`` after an earlier ``--grant`` used to replace the document with no grant at
all ("1 replaced", then "no grant: admins only")."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentrag as ar
from agentrag.store.store import Store

ADMIN = ar.Scope(principal=ar.Principal(admin=True))


@pytest.fixture
def hr(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name, acl=True)
    return collection_name


def _only(store: Store, collection: str) -> ar.Document:
    (doc,) = store.documents(collection, scope=ADMIN)
    return doc


def test_reingesting_the_same_folder_keeps_its_grants(store: Store, hr: str, tmp_path: Path) -> None:
    (tmp_path / "pay.md").write_text("Salary bands for engineers.\n")
    assert store.ingest(tmp_path, collection=hr, grants=["group:hr"]).added == ("pay.md",)
    again = store.ingest(tmp_path, collection=hr)
    assert again.unchanged == ("pay.md",) and not again.replaced
    assert store.grants(_only(store, hr).id) == ["group:hr"]


def test_an_edited_file_reingested_without_grants_keeps_them(store: Store, hr: str, tmp_path: Path) -> None:
    (tmp_path / "pay.md").write_text("Salary bands for engineers.\n")
    store.ingest(tmp_path, collection=hr, grants=["group:hr"])
    store.grant(_only(store, hr).id, ["user:bob"])  # given after ingest: kept too
    (tmp_path / "pay.md").write_text("Salary bands for engineers, revised.\n")
    assert store.ingest(tmp_path, collection=hr).replaced == ("pay.md",)
    assert store.grants(_only(store, hr).id) == ["group:hr", "user:bob"]
    hits = store.search("salary bands", collections=hr, scope=ar.Scope(principal=ar.Principal(user="bob")))
    assert [h.source for h in hits.hits] == ["pay.md"]


def test_grants_given_on_reingest_replace_the_stored_ones(store: Store, hr: str) -> None:
    store.ingest_text("Salary bands.", collection=hr, source="pay.md", grants=["group:hr"])
    store.ingest_text("Salary bands.", collection=hr, source="pay.md", grants=["user:ann"])
    assert store.grants(_only(store, hr).id) == ["user:ann"]
    store.ingest_text("Salary bands, v2.", collection=hr, source="pay.md")
    assert store.grants(_only(store, hr).id) == ["user:ann"]


def test_a_revoked_document_stays_revoked_on_reingest(store: Store, hr: str) -> None:
    store.ingest_text("Salary bands.", collection=hr, source="pay.md", grants=["group:hr"])
    store.revoke(_only(store, hr).id, ["group:hr"])
    store.ingest_text("Salary bands, v2.", collection=hr, source="pay.md")
    assert store.grants(_only(store, hr).id) == []


def test_the_cli_reingest_keeps_the_grants(
    store: Store, hr: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    (tmp_path / "pay.md").write_text("Salary bands for engineers.\n")
    assert cli.main(["ingest", str(tmp_path), "-c", hr, "--grant", "group:hr"]) == 0
    assert cli.main(["ingest", str(tmp_path), "-c", hr]) == 0
    assert "1 unchanged" in capsys.readouterr().out
    assert cli.main(["acl", "show", _only(store, hr).id]) == 0
    assert capsys.readouterr().out.strip().endswith(": group:hr")
