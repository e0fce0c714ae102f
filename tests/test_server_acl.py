"""Document permissions over HTTP (issue #26): the JWT's ``sub`` and groups claim are the principal;
``/search`` and ``/ask`` (JSON and SSE) return only what it may read after random grant edits (a
property), the proof names the grant, and a revoke applies to the next request. A real server
process on 127.0.0.1, real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server_support import auth, new_tenant

DOCS = {
    "pay": ("Salary bands: engineers are paid on the payroll scale.", ["group:hr"]),
    "ceo": ("Salary of the chief executive is set by the board.", ["user:ann"]),
    "cal": ("Salary reviews happen every March.", ["everyone"]),
    "none": ("Salary secrets nobody was granted.", []),
}
GRANTS = {k: set(v[1]) for k, v in DOCS.items()}


@pytest.fixture(scope="module")
def hr(store: Any) -> dict[str, Any]:
    collection = f"acl_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection, acl=True)
    tenant, other = new_tenant(store, "acl", retrieval_top_k_max=10), new_tenant(store, "acl")
    for key, (text, grants) in DOCS.items():
        store.ingest_text(text, collection=collection, source=f"{key}.txt", tenant=tenant, grants=grants)
    store.ingest_text(
        "Salary of the other tenant.",
        collection=collection,
        source="o.txt",
        tenant=other,
        grants=["everyone"],
    )
    return {"collection": collection, "tenant": tenant, "other": other}


def allowed(user: str | None, groups: list[str], grants: dict[str, set[str]] = GRANTS) -> set[str]:
    held = {"everyone", *([f"user:{user}"] if user else []), *(f"group:{g}" for g in groups)}
    return {f"{k}.txt" for k, g in grants.items() if g & held}


def post(client: Any, hr: dict[str, Any], route: str, user: str | None, groups: list[str], **kw: Any) -> Any:
    claims: dict[str, Any] = {"groups": groups}
    if user is not None:
        claims["sub"] = user
    payload = {"query_text": "salary", "collections": [hr["collection"]], "top_k": 10}
    return client.post(
        f"/api/v1/query/{hr['tenant']}/{route}", json=payload, headers={**auth(hr["tenant"], **claims), **kw}
    )


def chunks_of(response: Any, route: str) -> list[dict[str, Any]]:
    """The proof's chunks of a JSON answer, or of an SSE stream's first (retrieval) event."""
    if route != "ask-sse":
        return list(response.json()["chunks"])
    data = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    return list(json.loads(data[0])["chunks"])


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    user=st.sampled_from([None, "ann", "bob"]),
    groups=st.lists(st.sampled_from(["hr", "sales"]), max_size=2, unique=True),
    route=st.sampled_from(["search", "ask", "ask-sse"]),
    edits=st.lists(
        st.tuples(
            st.sampled_from(sorted(DOCS)),
            st.booleans(),
            st.sampled_from(["user:ann", "user:bob", "group:hr", "group:sales", "everyone"]),
        ),
        max_size=3,
    ),
)
def test_a_principal_gets_exactly_what_it_may_read(
    client: Any,
    hr: dict[str, Any],
    store: Any,
    user: str | None,
    groups: list[str],
    route: str,
    edits: list[tuple[str, bool, str]],
) -> None:
    from agentrag.scope import Principal, Scope

    ids = {
        d.source[:-4]: d.id
        for d in store.documents(
            hr["collection"], scope=Scope(tenant=hr["tenant"], principal=Principal(admin=True))
        )
    }
    grants = {k: set(g) for k, g in GRANTS.items()}
    try:
        for key, add, grant in edits:  # the request after a grant or revoke obeys it
            (store.grant if add else store.revoke)(ids[key], [grant])
            (grants[key].add if add else grants[key].discard)(grant)
        sse = {"Accept": "text/event-stream"} if route == "ask-sse" else {}
        response = post(client, hr, route.removesuffix("-sse"), user, groups, **sse)
        if user is None and not groups:
            assert response.status_code == 403 and response.json()["error"]["code"] == "NO_PRINCIPAL"
            return
        assert response.status_code == 200, response.text
        chunks = chunks_of(response, route)
        may = allowed(user, groups, grants)
        assert {c["source"] for c in chunks} == may
        for chunk in chunks:
            assert chunk["grant"] in grants[chunk["source"][:-4]]
        hidden = [text for key, (text, _) in DOCS.items() if f"{key}.txt" not in may]
        assert [t for t in hidden if t in response.text] == [] and "other tenant" not in response.text
    finally:
        for key, original in GRANTS.items():  # back to the module's grants
            if grants[key] - original:
                store.revoke(ids[key], sorted(grants[key] - original))
            if original - grants[key]:
                store.grant(ids[key], sorted(original - grants[key]))


def test_sse_streams_only_what_it_may_read(client: Any, hr: dict[str, Any]) -> None:
    response = post(client, hr, "ask", "bob", ["hr"], Accept="text/event-stream")
    assert response.status_code == 200
    events = [
        json.loads(line[len("data: ") :]) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    retrieval = events[0]
    assert {c["source"] for c in retrieval["chunks"]} == {"pay.txt", "cal.txt"}
    assert "chief executive" not in response.text and "nobody was granted" not in response.text


def test_a_revoke_applies_to_the_next_request(client: Any, hr: dict[str, Any], store: Any) -> None:
    from agentrag.scope import Principal, Scope

    docs = store.documents(
        hr["collection"], scope=Scope(tenant=hr["tenant"], principal=Principal(admin=True))
    )
    cal = next(d for d in docs if d.source == "cal.txt")
    try:
        store.revoke(cal.id, ["everyone"])
        sources = {c["source"] for c in post(client, hr, "search", "bob", []).json()["chunks"]}
        assert sources == set()
    finally:
        store.grant(cal.id, ["everyone"])
    assert {c["source"] for c in post(client, hr, "search", "bob", []).json()["chunks"]} == {"cal.txt"}


def test_a_groups_claim_that_is_not_a_list_is_refused(client: Any, hr: dict[str, Any]) -> None:
    response = client.post(
        f"/api/v1/query/{hr['tenant']}/search",
        json={"query_text": "salary", "collections": [hr["collection"]]},
        headers=auth(hr["tenant"], sub="bob", groups={"hr": True}),
    )
    assert response.status_code == 403 and response.json()["error"]["code"] == "INVALID_GROUPS"


def test_a_tenant_sees_only_its_own_collections(client: Any, hr: dict[str, Any], store: Any) -> None:
    own, theirs = f"own_{uuid.uuid4().hex[:8]}", f"theirs_{uuid.uuid4().hex[:8]}"
    store.create_collection(own, tenant=hr["tenant"])
    store.create_collection(theirs, tenant=hr["other"])
    for n in range(4):
        store.ingest_text(f"Salary note {n}.", collection=own, source=f"{n}.txt", tenant=hr["tenant"])
    store.ingest_text("Salary of the other tenant.", collection=theirs, source="o.txt", tenant=hr["other"])

    def search(collections: list[str], top_k: int = 3) -> Any:
        return client.post(
            f"/api/v1/query/{hr['tenant']}/search",
            json={"query_text": "salary", "collections": collections, "top_k": top_k},
            headers=auth(hr["tenant"], sub="ann", groups=["hr"]),
        )

    refused = search([theirs])
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "COLLECTION_NOT_FOUND"
    assert search([own, theirs]).status_code == 404
    missing = search([f"nope_{uuid.uuid4().hex[:6]}"]).json()["error"]
    assert missing["message"] == refused.json()["error"]["message"]  # not found is not found
    both = search([own, hr["collection"]]).json()
    assert len(both["chunks"]) == 3  # top_k is the total across the collections, not per collection
    assert set(both["collections"]) == {own, hr["collection"]}
