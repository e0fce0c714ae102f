"""A search naming no collections, by a caller without a principal (issue #37 item 2, F-7): the
``acl=True`` collections of its tenant are left out and reported (the proof's
``skipped_collections``, a ``collections-skipped`` degradation, ``empty_reason``, the chat
guidance), never a ScopeError; with a principal they are searched. Real PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import agentrag as ar
from agentrag.chat import retrieve_turn
from tests.server_support import new_tenant

SECRET = "Quarterly zebrafish payroll figures are confidential."
OPEN = "Zebrafish care guide for the lab aquarium."


@pytest.fixture(scope="module")
def tenant_corpus(store: Any) -> dict[str, Any]:
    tenant = new_tenant(store, "skip")
    acl, plain = f"acl_{uuid.uuid4().hex[:8]}", f"open_{uuid.uuid4().hex[:8]}"
    store.create_collection(acl, acl=True, tenant=tenant)
    store.create_collection(plain, tenant=tenant)
    store.ingest_text(SECRET, collection=acl, source="pay.txt", tenant=tenant, grants=["group:hr"])
    store.ingest_text(OPEN, collection=plain, source="care.txt", tenant=tenant)
    return {"tenant": tenant, "acl": acl, "plain": plain}


def test_no_principal_searches_what_it_may_see_and_names_what_it_skipped(
    store: Any, tenant_corpus: dict[str, Any]
) -> None:
    scope = ar.Scope(tenant=tenant_corpus["tenant"])
    ctx = ar.new("zebrafish", store=store, scope=scope, mode="lexical") | ar.search()
    assert ctx.error is None
    assert {h.collection for h in ctx.hits} >= {tenant_corpus["plain"]}
    assert tenant_corpus["acl"] not in {h.collection for h in ctx.hits}
    proof = ctx.proof().to_dict()
    skipped = {s["collection"]: s["reason"] for s in proof["skipped_collections"]}
    assert tenant_corpus["acl"] in skipped and "acl=True" in skipped[tenant_corpus["acl"]]
    assert "collections-skipped" in proof["degradations"]
    assert "payroll" not in ctx.proof().to_json()


def test_a_principal_searches_the_acl_collection_and_skips_nothing(
    store: Any, tenant_corpus: dict[str, Any]
) -> None:
    scope = ar.Scope(tenant=tenant_corpus["tenant"], principal=ar.Principal(user="ann", groups=["hr"]))
    ctx = ar.new("zebrafish payroll", store=store, scope=scope, mode="lexical") | ar.search()
    assert tenant_corpus["acl"] in {h.collection for h in ctx.hits}
    assert ctx.skipped_collections == () and ctx.proof().to_dict()["skipped_collections"] == []


def test_only_acl_collections_leave_an_empty_result_that_says_why(store: Any) -> None:
    tenant = new_tenant(store, "skiponly")
    acl = f"acl_{uuid.uuid4().hex[:8]}"
    store.create_collection(acl, acl=True, tenant=tenant)
    store.ingest_text(SECRET, collection=acl, source="pay.txt", tenant=tenant, grants=["everyone"])
    ctx = ar.new("zebrafish payroll", store=store, scope=ar.Scope(tenant=tenant), collections=None)
    ctx = ctx | ar.search(collections=None)
    assert ctx.error is None
    assert acl not in {h.collection for h in ctx.hits}
    if not ctx.hits:  # shared collections of other tests may answer; when none does, it says why
        assert ctx.empty_reason is not None and acl in ctx.empty_reason


def test_retrieve_turn_without_collections_reports_the_skip_in_its_guidance(
    store: Any, tenant_corpus: dict[str, Any]
) -> None:
    scope = ar.Scope(tenant=tenant_corpus["tenant"])
    result = retrieve_turn(
        store,
        [{"role": "user", "content": "what are the payroll figures of zebrafish"}],
        scope=scope,
        config={"abstain": False},
    )
    assert result.mode != "failed", result.skipped_reason
    assert tenant_corpus["acl"] in {s["collection"] for s in result.proof["skipped_collections"]}
    assert "payroll figures are confidential" not in str(result.as_state())
    if not result.grounded:
        assert result.guidance is not None and tenant_corpus["acl"] in result.guidance
