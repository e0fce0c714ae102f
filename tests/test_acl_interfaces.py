"""Document permissions (issue #26) through the CLI and the LangGraph subgraph: random grants,
principals, sessions and grant edits, against the model of tests/acl_support.py. Real PostgreSQL;
the library's own property is in test_acl.py, the HTTP service's in test_server_acl.py."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrag as ar
from agentrag.store.store import Store
from tests import acl_support as acl

PROPERTY = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@PROPERTY
@given(
    drawn=acl.DOCS,
    edits=acl.EDITS,
    principal=acl.PRINCIPAL,
    session=st.sampled_from([None, *acl.SESSIONS]),
)
def test_the_langgraph_subgraph_returns_only_what_the_principal_may_read(
    store: Store,
    drawn: list[tuple[set[str], str | None]],
    edits: list[tuple[int, bool, str]],
    principal: ar.Principal,
    session: str | None,
) -> None:
    from agentrag.integrations.langgraph import rag_subgraph

    name = f"acl_{uuid.uuid4().hex[:10]}"
    store.create_collection(name, acl=True)
    docs = acl.ingest(store, name, drawn)
    graph = rag_subgraph(store, config={"collections": [name], "mode": "lexical", "abstain": False})
    # the conversation's scope: its tenant, user, groups and session (a session includes the shared)
    configurable = {"tenant_id": acl.TENANT, "user_id": principal.user, "groups": list(principal.groups)}
    if session is not None:
        configurable["session_id"] = session

    def check() -> None:
        allowed = {d.source for d in docs if d.visible(principal, session, include_shared=True)}
        out = graph.invoke({"messages": [("user", acl.QUESTION)]}, config={"configurable": configurable})
        if allowed:
            assert out["rag_mode"] in {"full", "lexical-only", "low-confidence"}, out["rag_mode"]
        assert {c["source"] for c in out["rag_chunks"]} == allowed  # every visible one, nothing else
        assert {c["source"] for c in (out["rag_proof"] or {}).get("chunks", [])} <= allowed
        state = json.dumps(out, default=str)
        assert acl.leaked(docs, allowed, state) == []  # not in the context, proof, guidance or citations

    check()
    for index, add, grant in edits:
        doc = acl.edit(docs, index, add, grant)
        (store.grant if add else store.revoke)(doc.id, [grant])
    check()  # the next turn obeys the edits
    store.delete_collection(name)


@PROPERTY
@given(
    drawn=acl.DOCS,
    edits=acl.EDITS,
    principal=acl.PRINCIPAL,
    session=st.sampled_from([None, *acl.SESSIONS]),
    include_shared=st.booleans(),
)
def test_the_cli_returns_only_what_the_principal_may_read(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    drawn: list[tuple[set[str], str | None]],
    edits: list[tuple[int, bool, str]],
    principal: ar.Principal,
    session: str | None,
    include_shared: bool,
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    name = f"acl_{uuid.uuid4().hex[:10]}"
    store.create_collection(name, acl=True)
    docs = acl.ingest(store, name, drawn)
    include_shared = include_shared and session is not None
    who = ["--tenant", acl.TENANT, "--user", str(principal.user), *(f"--group={g}" for g in principal.groups)]
    if session is not None:
        who += ["--session", session, *(["--include-shared"] if include_shared else [])]

    def run(*argv: str) -> str:
        capsys.readouterr()
        code = cli.main(list(argv))
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    def check() -> None:
        allowed = {d.source for d in docs if d.visible(principal, session, include_shared)}
        out = run(
            "search", "shared words document", "-c", name, "--mode", "lexical", "-k", "10", "--json", *who
        )
        assert {h["source"] for h in json.loads(out)["hits"]} == allowed
        assert acl.leaked(docs, allowed, out) == []

    check()
    for index, add, grant in edits:  # through `agentrag acl grant|revoke`
        doc = acl.edit(docs, index, add, grant)
        shown = json.loads(run("acl", "grant" if add else "revoke", doc.id, grant, "--json"))
        assert set(shown["grants"]) == doc.grants
    check()  # the next command obeys them
    store.delete_collection(name)
