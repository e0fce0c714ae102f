"""The retrieval proof: verifiable provenance of every chunk behind an answer.

``ctx.proof()`` returns a :class:`Proof`: the query id and scope, every retrieved chunk
with its document, original filename, text, page, character offsets into the stored
document text, similarity, classification, embedding model and version, and the sha256 of
the document text, plus a timestamp, ``model_version_match`` and, once answered, the
generation (answer, cited chunks, ungrounded claims, the answer's confidence and, per answer
sentence, its supporting span: document id and character offsets, text, support score). In a
conversation (``condense()`` ran) it also holds the user's message (``original_question``) and
the standalone question that was searched (``condensed_question``). So for every chunk::

    document.text[chunk.start_char:chunk.end_char] == chunk.text
    sha256(document.text.encode("utf-8")).hexdigest() == chunk.source_sha256

It is plain data: ``proof.to_dict()`` / ``proof.to_json()``; :data:`PROOF_SCHEMA` is its
JSON Schema. Building it reads nothing from the database: the search fetched each hit's
original filename with its text (``None`` when unknown, e.g. text ingested with ``ingest_text``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.context import Context
    from agentrag.hits import Hit

__all__ = ["PROOF_SCHEMA", "Generation", "Proof", "ProofChunk", "build_proof"]

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProofChunk:
    """One retrieved chunk and where exactly it comes from."""

    chunk_id: str
    doc_id: str
    collection: str
    original_filename: str | None
    source: str | None
    text: str
    page: int | None
    section: str | None
    start_char: int
    end_char: int
    rank: int
    score: float  # the final score of the search mode that ran (the fused score for hybrid)
    similarity_score: float | None  # vector similarity; None when the vector leg did not find it
    classification: str | None
    embed_model: str | None
    embed_version: str | None
    source_sha256: str | None  # sha256 of the stored document text
    chunk_sha256: str | None  # sha256 of ``text``
    #: where the chunk is in its file: page / page_end, slide, sheet + rows, section path, ...
    #: (``agentrag.readers.format_locator`` puts it in words); None when there is nothing to add
    locator: dict[str, Any] | None = None
    revision: int | None = (
        None  # the document's revision: store.document(doc_id, revision=...) reads its text
    )
    grant: str | None = None  # on an acl=True collection, the grant that made it visible


@dataclass(frozen=True, slots=True)
class Generation:
    """What the answer step produced and how its citations checked out."""

    answer: str | None
    cited_chunks: tuple[str, ...]
    ungrounded_claims: tuple[str, ...]
    invalid_citations: tuple[str, ...]
    grounded: bool | None
    mode: str | None
    model: str | None
    context_chunks: tuple[str, ...]  # the chunk ids that went into the prompt
    confidence: float | None = None  # ctx.answer_confidence (agentrag.abstain)
    # per answer sentence, its supporting span: sentence, chunk_id, document_id, start, end, text,
    # score, supported, method (ctx.support)
    support: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Proof:
    """The retrieval proof of one query (seed 001's schema, plus scope and mode)."""

    query_id: str
    tenant_id: str | None
    workspace_id: str | None
    session_id: str | None
    collections: tuple[str, ...]
    chunks: tuple[ProofChunk, ...]
    timestamp: str
    model_version_match: bool | None
    mode: str | None
    degradations: tuple[str, ...] = ()
    generation: Generation | None = None
    # a conversation: what the user wrote, and the standalone question condense() searched for
    original_question: str | None = None
    condensed_question: str | None = None
    # collections a search of "every collection" left out, and why: ({"collection", "reason"}, ...)
    skipped_collections: tuple[tuple[str, str], ...] = ()
    schema_version: int = field(default=SCHEMA_VERSION)

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: every leaf is an immutable str / number / bool /
        # None or a tuple of str, so nothing needs asdict's recursive copy (the serving API calls
        # this once per request; asdict cost as much as the JSON encoding).
        out = {name: getattr(self, name) for name in _PROOF_FIELDS}
        out["collections"] = list(self.collections)
        out["degradations"] = list(self.degradations)
        out["skipped_collections"] = [{"collection": c, "reason": r} for c, r in self.skipped_collections]
        out["chunks"] = [{name: getattr(c, name) for name in _CHUNK_FIELDS} for c in self.chunks]
        if self.generation is not None:
            g = {name: getattr(self.generation, name) for name in _GENERATION_FIELDS}
            for key in ("cited_chunks", "ungrounded_claims", "invalid_citations", "context_chunks"):
                g[key] = list(g[key])
            g["support"] = [dict(span) for span in g["support"]]
            out["generation"] = g
        return out

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def chunk(self, chunk_id: str) -> ProofChunk:
        for c in self.chunks:
            if c.chunk_id == chunk_id:
                return c
        raise KeyError(chunk_id)

    def __repr__(self) -> str:
        answered = f", cited={list(self.generation.cited_chunks)}" if self.generation else ""
        return f"Proof({self.query_id}: {len(self.chunks)} chunks{answered})"


_PROOF_FIELDS = tuple(f.name for f in fields(Proof))
_CHUNK_FIELDS = tuple(f.name for f in fields(ProofChunk))
_GENERATION_FIELDS = tuple(f.name for f in fields(Generation))


def _filename(hit: Hit) -> str | None:
    """The hit's original filename: fetched with the hit by the search (no extra query); a hit
    built elsewhere may carry it in its metadata instead."""
    if hit.original_filename is not None:
        return hit.original_filename
    name = hit.metadata.get("original_filename") if hit.metadata else None
    return name if isinstance(name, str) else None


def build_proof(ctx: Context) -> Proof:
    """The :class:`Proof` of ``ctx`` (what ``ctx.proof()`` returns)."""
    hits = ctx.hits
    chunks = tuple(
        ProofChunk(
            chunk_id=h.chunk_id,
            doc_id=h.document_id,
            collection=h.collection,
            original_filename=_filename(h),
            source=h.source,
            text=h.text,
            page=h.page,
            section=h.section,
            start_char=h.start_char,
            end_char=h.end_char,
            rank=h.rank,
            score=h.score,
            similarity_score=h.vector_score,
            classification=h.classification,
            embed_model=h.embed_model,
            embed_version=h.embed_version,
            source_sha256=h.source_sha256,
            chunk_sha256=h.chunk_sha256,
            locator=h.locator,
            revision=h.revision,
            grant=h.grant,
        )
        for h in hits
    )
    generation = None
    if ctx.answer_text is not None or ctx.mode is not None:
        answer_calls = [c for c in ctx.llm_calls if c.purpose == "answer"]
        generation = Generation(
            answer=ctx.answer_text,
            cited_chunks=ctx.citations,
            ungrounded_claims=ctx.ungrounded_claims,
            invalid_citations=ctx.invalid_citations,
            grounded=ctx.grounded,
            mode=ctx.mode,
            model=answer_calls[-1].model if answer_calls else None,
            context_chunks=tuple(h.chunk_id for h in ctx.context_used),
            confidence=ctx.answer_confidence,
            support=tuple(asdict(span) for span in ctx.support),
        )
    scope = ctx.options.scope
    collections = (
        ctx.collections or ctx.options.collections or tuple(dict.fromkeys(r.collection for r in ctx.results))
    )
    return Proof(
        query_id=ctx.query_id,
        tenant_id=scope.tenant if scope else None,
        workspace_id=scope.workspace if scope else None,
        session_id=scope.session if scope else None,
        collections=tuple(collections),
        chunks=chunks,
        timestamp=ctx.created_at.isoformat(),
        model_version_match=ctx.model_version_match,
        mode=ctx.mode,
        degradations=tuple(dict.fromkeys(d.kind for d in ctx.degradations)),
        generation=generation,
        original_question=ctx.original_question,
        condensed_question=ctx.question if ctx.original_question is not None else None,
        skipped_collections=ctx.skipped_collections,
    )


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


_CHUNK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [f.name for f in fields(ProofChunk)],
    "properties": {
        "chunk_id": {"type": "string"},
        "doc_id": {"type": "string"},
        "collection": {"type": "string"},
        "original_filename": _nullable("string"),
        "source": _nullable("string"),
        "text": {"type": "string"},
        "page": _nullable("integer"),
        "section": _nullable("string"),
        "start_char": {"type": "integer", "minimum": 0},
        "end_char": {"type": "integer", "minimum": 0},
        "rank": {"type": "integer", "minimum": 1},
        "score": {"type": "number"},
        "similarity_score": _nullable("number"),
        "classification": _nullable("string"),
        "embed_model": _nullable("string"),
        "embed_version": _nullable("string"),
        "source_sha256": _nullable("string"),
        "chunk_sha256": _nullable("string"),
        "locator": _nullable("object"),
        "revision": _nullable("integer"),
        "grant": _nullable("string"),
    },
}

_SUPPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "sentence",
        "chunk_id",
        "document_id",
        "start",
        "end",
        "text",
        "score",
        "supported",
        "method",
    ],
    "properties": {
        "sentence": {"type": "string"},
        "chunk_id": _nullable("string"),
        "document_id": _nullable("string"),
        "start": _nullable("integer"),
        "end": _nullable("integer"),
        "text": {"type": "string"},
        "score": {"type": "number"},
        "supported": {"type": "boolean"},
        "method": {"type": "string"},
    },
}

_GENERATION_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": [f.name for f in fields(Generation)],
    "properties": {
        "answer": _nullable("string"),
        "cited_chunks": {"type": "array", "items": {"type": "string"}},
        "ungrounded_claims": {"type": "array", "items": {"type": "string"}},
        "invalid_citations": {"type": "array", "items": {"type": "string"}},
        "grounded": _nullable("boolean"),
        "mode": _nullable("string"),
        "model": _nullable("string"),
        "context_chunks": {"type": "array", "items": {"type": "string"}},
        "confidence": _nullable("number"),
        "support": {"type": "array", "items": _SUPPORT_SCHEMA},
    },
}

PROOF_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "agentrag retrieval proof",
    "type": "object",
    "additionalProperties": False,
    "required": [f.name for f in fields(Proof)],
    "properties": {
        "query_id": {"type": "string"},
        "tenant_id": _nullable("string"),
        "workspace_id": _nullable("string"),
        "session_id": _nullable("string"),
        "collections": {"type": "array", "items": {"type": "string"}},
        "chunks": {"type": "array", "items": _CHUNK_SCHEMA},
        "timestamp": {"type": "string", "format": "date-time"},
        "model_version_match": _nullable("boolean"),
        "mode": _nullable("string"),
        "degradations": {"type": "array", "items": {"type": "string"}},
        "generation": _GENERATION_SCHEMA,
        "original_question": _nullable("string"),
        "condensed_question": _nullable("string"),
        "skipped_collections": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["collection", "reason"],
                "properties": {"collection": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
        "schema_version": {"type": "integer", "const": SCHEMA_VERSION},
    },
}
"""The JSON Schema of :meth:`Proof.to_dict` (snapshot-tested)."""
