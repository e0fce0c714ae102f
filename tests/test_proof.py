"""The retrieval proof: chunks round-trip to the stored documents; the schema is pinned."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from sqlalchemy import text

from agentrag.proof import PROOF_SCHEMA, Proof
from agentrag.scope import Scope
from agentrag.steps import new
from agentrag.store.store import Store
from agentrag.testing import FakeLLM
from tests.grounded_support import QUESTION, SUPPORT_FILES


@pytest.fixture(scope="module")
def answered(store: Store, support: str) -> Any:
    ids = [h.chunk_id for h in new(QUESTION, store=store, collections=support).search().hits]
    reply = f"Deleted notes go to the trash [{ids[0]}]. They stay there forever."
    return new(QUESTION, store=store, llm=FakeLLM([reply]), collections=support).search().rerank().answer()


def stored_document(store: Store, doc_id: str) -> tuple[str, str]:
    """The document's text and recorded sha256, straight from agentrag.documents."""
    with store.engine.connect() as conn:
        row = conn.execute(
            text("SELECT text, sha256 FROM agentrag.documents WHERE id = :id"), {"id": doc_id}
        ).one()
    return str(row.text), str(row.sha256)


def test_every_chunk_round_trips_to_its_document(store: Store, answered: Any) -> None:
    proof = answered.proof()
    assert isinstance(proof, Proof)
    assert len(proof.chunks) == len(answered.hits) > 0
    for chunk in proof.chunks:
        document_text, recorded_sha256 = stored_document(store, chunk.doc_id)
        assert document_text[chunk.start_char : chunk.end_char] == chunk.text
        assert (
            hashlib.sha256(document_text.encode("utf-8")).hexdigest()
            == chunk.source_sha256
            == recorded_sha256
        )
        assert hashlib.sha256(chunk.text.encode("utf-8")).hexdigest() == chunk.chunk_sha256
        assert chunk.original_filename in SUPPORT_FILES
        assert Path(chunk.source or "").name == chunk.original_filename
        assert chunk.embed_model == "fake-hashing" and chunk.embed_version == "1"
        assert chunk.similarity_score is None or -1.0 <= chunk.similarity_score <= 1.0


def test_the_generation_records_citations_and_ungrounded_claims(answered: Any) -> None:
    proof = answered.proof()
    assert proof.query_id == answered.query_id
    assert proof.model_version_match is True
    assert proof.mode == "full"
    assert proof.generation is not None
    assert proof.generation.answer == answered.answer_text
    assert proof.generation.cited_chunks == answered.citations
    assert proof.generation.ungrounded_claims == ("They stay there forever.",)
    assert proof.generation.grounded is False
    assert proof.generation.model == "fake"
    assert set(proof.generation.cited_chunks) <= {c.chunk_id for c in proof.chunks}


def test_the_proof_is_json_and_matches_its_schema(answered: Any) -> None:
    proof = answered.proof()
    data = json.loads(proof.to_json())
    assert data == proof.to_dict()
    jsonschema.validate(data, PROOF_SCHEMA)


def test_a_proof_before_answering_has_no_generation(store: Store, support: str) -> None:
    ctx = new(QUESTION, store=store, collections=support, scope=Scope.every()).search()
    proof = ctx.proof()
    assert proof.generation is None and proof.chunks
    jsonschema.validate(proof.to_dict(), PROOF_SCHEMA)


def test_the_scope_is_recorded(store: Store, support: str) -> None:
    ctx = new(QUESTION, store=store, collections=support, scope=Scope(tenant="acme", workspace="ops"))
    proof = ctx.search().proof()
    assert (proof.tenant_id, proof.workspace_id, proof.session_id) == ("acme", "ops", None)


def test_proof_schema_snapshot(snapshot: Any) -> None:
    assert json.dumps(PROOF_SCHEMA, indent=2, sort_keys=True) == snapshot


def _shape(value: Any) -> Any:
    """Keys and value types, with the volatile values (ids, hashes, text, times) left out."""
    if isinstance(value, dict):
        return {key: _shape(v) for key, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def test_proof_shape_snapshot(answered: Any, snapshot: Any) -> None:
    assert _shape(answered.proof().to_dict()) == snapshot


def test_model_version_mismatch_is_recorded(database_url: str, support: str) -> None:
    from agentrag.testing import FakeEmbedder

    newer = Store(database_url, embedder=FakeEmbedder(64, version="2"), migrate=False)
    try:
        ctx = new(QUESTION, store=newer, collections=support).search()
    finally:
        newer.close()
    assert ctx.model_version_match is False
    assert ctx.proof().model_version_match is False
    assert any("version" in w for w in ctx.warnings)
