"""A corpus for the interface tests (OpenAI endpoint, MCP, playground, metrics): the sample support
articles for one tenant, one secret document of another tenant, in a collection of their own."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.server_support import new_tenant

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SECRET_TEXT = "Project Nightjar's launch code word is HELIOTROPE. Nightjar ships in March."


def make_corpus(store: Any, prefix: str) -> dict[str, Any]:
    collection = f"{prefix}_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection, description="Lumen support articles")
    a = new_tenant(store, f"{prefix}a")
    b = new_tenant(store, f"{prefix}b")
    store.ingest(SAMPLES / "support", collection=collection, tenant=a)
    secret = store.ingest_text(SECRET_TEXT, collection=collection, source="nightjar.txt", tenant=b)
    b_docs = store.documents(collection, tenant=b)
    return {"collection": collection, "a": a, "b": b, "b_doc": b_docs[0].id, "ingested": secret}
