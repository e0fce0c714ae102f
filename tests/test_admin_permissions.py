"""Principals in the library's administration (issue #37 item 3, F-5 and F-8): grant, revoke,
share, grants and revisions honour a scope's principal, enforced in the SQL that reads the row;
revision reads obey sessions and grants like current reads. The rule is docs/how-to/permissions-admin.md."""

from __future__ import annotations

import pytest

import agentrag as ar
from agentrag.errors import DocumentNotFoundError, PermissionDeniedError
from agentrag.store.store import Store

T = "acme"


def as_(user: str | None = None, *groups: str, admin: bool = False, session: str | None = None) -> ar.Scope:
    return ar.Scope(
        tenant=T, session=session, principal=ar.Principal(user=user, groups=list(groups), admin=admin)
    )


@pytest.fixture
def docs(store: Store, collection_name: str) -> dict[str, str]:
    """An acl collection of tenant acme: the CEO's file (executives only), HR's, and a private
    upload of session s1 (granted to everyone: visible once shared)."""
    store.create_collection(collection_name, acl=True, scoped=True)
    for source, text, grants, session in (
        ("ceo.md", "the chief executive's salary", ["group:exec"], None),
        ("pay.md", "salary bands for engineers", ["group:hr"], None),
        ("mine.md", "my own draft about salary", ["everyone"], "s1"),
    ):
        store.ingest_text(
            text, collection=collection_name, source=source, tenant=T, grants=grants, session=session
        )
    listed = store.documents(collection_name, scope=ar.Scope.every(ar.Principal(admin=True)))
    return {d.source: d.id for d in listed}


def test_bob_cannot_grant_himself_a_document_he_cannot_read(store: Store, docs: dict[str, str]) -> None:
    with pytest.raises(DocumentNotFoundError):
        store.grant(docs["ceo.md"], ["user:bob"], scope=as_("bob"))
    with pytest.raises(DocumentNotFoundError):
        store.document(docs["ceo.md"], scope=as_("bob"))  # and nothing changed
    assert store.grants(docs["ceo.md"], scope=as_(admin=True)) == ["group:exec"]


def test_grants_of_a_document_the_caller_cannot_read_are_not_listed(
    store: Store, docs: dict[str, str]
) -> None:
    with pytest.raises(DocumentNotFoundError):
        store.grants(docs["ceo.md"], scope=as_("bob"))
    with pytest.raises(DocumentNotFoundError):
        store.revoke(docs["ceo.md"], ["group:exec"], scope=as_("bob"))


def test_a_reader_is_not_an_administrator(store: Store, docs: dict[str, str]) -> None:
    reader = as_("bob", "hr")
    assert store.document(docs["pay.md"], scope=reader).text == "salary bands for engineers"
    for attempt in (
        lambda: store.grant(docs["pay.md"], ["user:eve"], scope=reader),
        lambda: store.revoke(docs["pay.md"], ["group:hr"], scope=reader),
        lambda: store.grants(docs["pay.md"], scope=reader),
        lambda: store.share(docs["pay.md"], workspace="team", scope=reader),
    ):
        with pytest.raises(PermissionDeniedError, match="administer"):
            attempt()
    assert store.grants(docs["pay.md"], scope=as_(admin=True)) == ["group:hr"]


def test_an_admin_principal_and_the_application_administer_everything(
    store: Store, docs: dict[str, str]
) -> None:
    assert store.grant(docs["ceo.md"], ["user:bob"], scope=as_(admin=True)) == ["group:exec", "user:bob"]
    assert store.revoke(docs["ceo.md"], ["user:bob"], scope=ar.Scope(tenant=T)) == ["group:exec"]
    with pytest.raises(DocumentNotFoundError):  # an admin of another tenant
        store.grant(
            docs["ceo.md"], ["user:bob"], scope=ar.Scope(tenant="other", principal=ar.Principal(admin=True))
        )


def test_an_uploader_administers_its_own_private_upload_only(store: Store, docs: dict[str, str]) -> None:
    mine = docs["mine.md"]
    with pytest.raises(DocumentNotFoundError):  # another session of the tenant
        store.grant(mine, ["user:eve"], scope=as_("eve", session="s2"))
    with pytest.raises(DocumentNotFoundError):
        store.share(mine, scope=as_("eve", session="s2"))
    with pytest.raises(DocumentNotFoundError):  # no session: a private upload is hidden
        store.grants(mine, scope=as_("bob"))
    uploader = as_("bob", "hr", session="s1")
    assert store.grants(mine, scope=uploader) == ["everyone"]
    assert store.revoke(mine, ["everyone"], scope=uploader) == []
    assert store.grant(mine, ["group:hr"], scope=uploader) == ["group:hr"]
    store.share(mine, scope=uploader)
    assert store.document(mine, scope=as_("zoe", "hr")).text == "my own draft about salary"
    with pytest.raises(PermissionDeniedError):  # shared: the tenant's, administered by admins
        store.grant(mine, ["everyone"], scope=uploader)


@pytest.fixture
def session_upload(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name)
    store.ingest_text("draft one", collection=collection_name, source="d.md", tenant=T, session="s1")
    store.ingest_text("draft two", collection=collection_name, source="d.md", tenant=T, session="s1")
    (doc,) = store.documents(collection_name, scope=ar.Scope.every())
    return doc.id


@pytest.mark.parametrize(
    "scope",
    [ar.Scope(tenant=T), ar.Scope(tenant=T, session="s2"), None],
    ids=["tenant", "other-session", "none"],
)
def test_a_private_uploads_revisions_stay_in_its_session(
    store: Store, session_upload: str, scope: ar.Scope | None
) -> None:
    with pytest.raises(DocumentNotFoundError):
        store.document(session_upload, scope=scope, revision=1)
    with pytest.raises(DocumentNotFoundError):
        store.revisions(session_upload, scope=scope)
    own = ar.Scope(tenant=T, session="s1")
    assert store.document(session_upload, scope=own, revision=1).text == "draft one"
    assert [r.revision for r in store.revisions(session_upload, scope=own)] == [1, 2]


def test_revisions_obey_grants_like_current_reads(
    store: Store, docs: dict[str, str], collection_name: str
) -> None:
    store.ingest_text(
        "the chief executive's salary, raised", collection=collection_name, source="ceo.md", tenant=T
    )  # a new revision, its grants kept
    current = next(
        d.id for d in store.documents(collection_name, scope=as_(admin=True)) if d.source == "ceo.md"
    )
    with pytest.raises(DocumentNotFoundError):
        store.revisions(current, scope=as_("bob"))
    with pytest.raises(DocumentNotFoundError):
        store.document(current, scope=as_("bob"), revision=1)
    executive = as_("ann", "exec")
    assert [r.revision for r in store.revisions(current, scope=executive)] == [1, 2]
    assert store.document(current, scope=executive, revision=1).text == "the chief executive's salary"
    store.revoke(current, ["group:exec"], scope=as_(admin=True))  # revoked: the history goes too
    with pytest.raises(DocumentNotFoundError):
        store.document(docs["ceo.md"], scope=executive, revision=1)


def test_the_cli_lists_revisions_as_a_principal(
    store: Store, docs: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    ceo = docs["ceo.md"]
    assert cli.main(["documents", "revisions", ceo, "--tenant", T, "--user", "bob"]) == 2
    assert "no document" in capsys.readouterr().err
    assert cli.main(["documents", "revisions", ceo, "--tenant", T, "--user", "ann", "--group", "exec"]) == 0
    assert ceo in capsys.readouterr().out


def test_a_session_scope_never_administers_another_sessions_upload(
    store: Store, docs: dict[str, str]
) -> None:
    mine = docs["mine.md"]
    for other in (ar.Scope(tenant=T, session="s2"), as_(admin=True, session="s2")):
        with pytest.raises(DocumentNotFoundError):
            store.share(mine, scope=other)
        with pytest.raises(DocumentNotFoundError):
            store.grants(mine, scope=other)
    assert store.grants(mine, scope=ar.Scope(tenant=T, session="s1")) == ["everyone"]
    assert store.grants(mine, scope=as_(admin=True)) == ["everyone"]  # an admin outside any session
