"""``Store.document(id, scope=...)``: the scope is checked in SQL; outside it a document is "not found"."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import agentrag as ar


def test_a_document_outside_the_scope_is_not_found(store: Any) -> None:
    collection = f"docscope_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    store.ingest_text("Tenant B's plan is secret.", collection=collection, source="b.txt", tenant="b_scope")
    doc = store.documents(collection, tenant="b_scope")[0]
    assert store.document(doc.id).text == "Tenant B's plan is secret."
    assert store.document(doc.id, scope=ar.Scope(tenant="b_scope")).tenant == "b_scope"
    with pytest.raises(ar.DocumentNotFoundError, match="no document"):
        store.document(doc.id, scope=ar.Scope(tenant="a_scope"))
    with pytest.raises(ar.DocumentNotFoundError):
        store.document(doc.id, scope=ar.Scope(tenant="b_scope", workspace="w1"))
    with pytest.raises(ar.DocumentNotFoundError):
        store.document("doc_missing", scope=ar.Scope(tenant="b_scope"))
