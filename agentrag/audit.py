"""Audit events: what was retrieved and generated, for whom, never what was asked or read.

Two events, after the steps that cause them:

* ``RETRIEVAL_EXECUTED`` after ``search()``: chunk count and chunk ids, collections, modes,
  degradations, model_version_match.
* ``GENERATION_EXECUTED`` after ``answer()``: mode, grounded, cited chunk ids, counts of
  ungrounded claims and invalid citations, model, token counts.

An event carries the query id and the scope (tenant, workspace, session ids) but never the
question text, chunk text or answer text. Events go to ``Deps.audit`` (``new(audit=...)``),
any object with ``emit(event)``; without one, to :class:`LoggingAuditSink` (logger
``agentrag.audit``, level INFO, one JSON object per event). A sink that raises never fails
the query: the failure is logged as a warning.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentrag.context import Context

__all__ = [
    "AuditEvent",
    "AuditEventType",
    "AuditSink",
    "ListAuditSink",
    "LoggingAuditSink",
    "emit",
    "generation_event",
    "retrieval_event",
]

_log = logging.getLogger("agentrag.audit")


class AuditEventType(StrEnum):
    RETRIEVAL_EXECUTED = "RETRIEVAL_EXECUTED"
    GENERATION_EXECUTED = "GENERATION_EXECUTED"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One audit record. ``details`` holds counts and ids only (see the module docstring)."""

    type: AuditEventType
    query_id: str
    tenant: str | None = None
    workspace: str | None = None
    session: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "query_id": self.query_id,
            "timestamp": self.timestamp.isoformat(),
            "tenant": self.tenant,
            "workspace": self.workspace,
            "session": self.session,
            "details": dict(self.details),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str, ensure_ascii=False, sort_keys=True)


@runtime_checkable
class AuditSink(Protocol):
    """Where audit events go: anything with ``emit(event)``. It should not block for long."""

    def emit(self, event: AuditEvent) -> None: ...


class LoggingAuditSink:
    """The default sink: each event as one JSON line on ``logger`` (``agentrag.audit``) at INFO."""

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self.logger = logger or _log
        self.level = level

    def __repr__(self) -> str:
        return f"LoggingAuditSink({self.logger.name!r})"

    def emit(self, event: AuditEvent) -> None:
        if self.logger.isEnabledFor(self.level):  # no JSON for a line nobody logs (the default: WARNING)
            self.logger.log(self.level, "%s %s", event.type.value, event.to_json())


class ListAuditSink:
    """Keeps every event in ``events`` (thread-safe), for tests."""

    def __init__(self) -> None:
        self.events: list[AuditEvent] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ListAuditSink({len(self.events)} events)"

    def emit(self, event: AuditEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of_type(self, kind: AuditEventType | str) -> list[AuditEvent]:
        with self._lock:
            return [e for e in self.events if e.type == kind]


DEFAULT_SINK = LoggingAuditSink()


def emit(ctx: Context, kind: AuditEventType, details: Mapping[str, Any]) -> AuditEvent:
    """Send one event for ``ctx`` to its sink (``ctx.deps.audit`` or the logging sink)."""
    scope = ctx.options.scope
    event = AuditEvent(
        type=kind,
        query_id=ctx.query_id,
        tenant=scope.tenant if scope else None,
        workspace=scope.workspace if scope else None,
        session=scope.session if scope else None,
        details=dict(details),
    )
    sink = ctx.deps.audit or DEFAULT_SINK
    try:
        sink.emit(event)
    except Exception as exc:
        _log.warning("the audit sink %r failed: %s", type(sink).__name__, type(exc).__name__)
    return event


def retrieval_event(ctx: Context) -> AuditEvent:
    """``RETRIEVAL_EXECUTED`` for a context that has just been searched."""
    hits = ctx.hits
    return emit(
        ctx,
        AuditEventType.RETRIEVAL_EXECUTED,
        {
            "chunk_count": len(hits),
            "chunk_ids": [h.chunk_id for h in hits],
            "collections": sorted({r.collection for r in ctx.results}),
            "searches": len(ctx.results),
            "failed_searches": sum(1 for r in ctx.results if r.error),
            "used_modes": sorted({r.used_mode for r in ctx.results}),
            "degradations": sorted({d.kind for d in ctx.degradations if d.step == "search"}),
            "model_version_match": ctx.model_version_match,
        },
    )


def generation_event(ctx: Context) -> AuditEvent:
    """``GENERATION_EXECUTED`` for a context that has just been answered."""
    answer_calls = [c for c in ctx.llm_calls if c.purpose == "answer"]
    return emit(
        ctx,
        AuditEventType.GENERATION_EXECUTED,
        {
            "mode": ctx.mode,
            "grounded": ctx.grounded,
            "context_chunk_ids": [h.chunk_id for h in ctx.context_used],
            "cited_chunk_ids": list(ctx.citations),
            "citation_count": len(ctx.citations),
            "invalid_citation_count": len(ctx.invalid_citations),
            "ungrounded_claim_count": len(ctx.ungrounded_claims),
            "model": answer_calls[-1].model if answer_calls else None,
            "input_tokens": ctx.tokens["input"],
            "output_tokens": ctx.tokens["output"],
        },
    )
