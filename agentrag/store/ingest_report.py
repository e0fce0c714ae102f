"""What an ingest reports: :class:`IngestProgress` events, the :class:`IngestReport`, one
:class:`WriteOutcome` per document written, and the :class:`IngestTally` adding them up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IngestProgress", "IngestReport", "IngestTally", "WriteOutcome"]


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """One event per document: ``status`` is added, replaced, unchanged or failed; before those,
    ``writing`` events come from inside a write transaction, just before its commit (one per
    document of the batch; again for each document written alone after its batch failed)."""

    done: int
    total: int
    source: str
    status: str


@dataclass(frozen=True)
class IngestReport:
    collection: str
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    chunks_written: int = 0
    document_ids: dict[str, str] = field(default_factory=dict)
    #: what happened to the collection's HNSW index: "unchanged" (nothing written), "maintained"
    #: (updated row by row), "built" (created after the load), "rebuilt" (dropped before a bulk
    #: load and built after it)
    vector_index: str = "unchanged"
    index_seconds: float = 0.0  # building the index after the load (0 when not built)
    retried_alone: int = 0  # documents written in a transaction of their own after their batch failed
    #: the local backend that embedded this ingest's chunks (``LocalEmbedder.document_backend``, e.g.
    #: "torch-bf16" by default on a CPU with native bfloat16, "onnx" elsewhere); None when nothing was
    #: embedded or the embedder has no document backend (hosted models, fakes)
    document_backend: str | None = None
    #: the error class of each failed source (UnreadableFileError, FileTooLargeError, StoreError, ...)
    error_types: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced)

    def __str__(self) -> str:
        line = (
            f"{self.collection}: {len(self.added)} added, {len(self.replaced)} replaced, "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed "
            f"({self.chunks_written} chunks written"
            + (f" with {self.document_backend}" if self.document_backend else "")
            + (
                f"; vector index {self.vector_index} in {self.index_seconds:.1f}s"
                if self.index_seconds
                else ""
            )
            + ")"
        )
        return "\n".join([line] + [f"  failed: {why}" for _source, why in self.failed])

    def __repr__(self) -> str:
        failed = ""
        if self.failed:
            shown = "; ".join(why for _source, why in self.failed[:3])
            more = f"; ... {len(self.failed) - 3} more" if len(self.failed) > 3 else ""
            failed = f", FAILED: {shown}{more}"
        backend = f", document_backend={self.document_backend!r}" if self.document_backend else ""
        return (
            f"IngestReport({self.collection!r}: {len(self.added)} added, {len(self.replaced)} replaced, "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed{backend}{failed})"
        )

    def raise_for_failures(self) -> IngestReport:
        """Raise :class:`~agentrag.errors.IngestError` (carrying this report as ``.report``) if a
        source failed; return the report otherwise. The documents that did not fail stay ingested
        (each document is its own transaction)."""
        if self.failed:
            from agentrag.errors import IngestError

            done = len(self.added) + len(self.replaced) + len(self.unchanged)
            reasons = "; ".join(why for _source, why in self.failed[:5])
            error = IngestError(
                f"{len(self.failed)} of {done + len(self.failed)} sources failed to ingest into "
                f"{self.collection!r} (the other {done} are ingested): {reasons}",
                source=self.failed[0][0],
            )
            error.report = self  # type: ignore[attr-defined]
            raise error
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "added": list(self.added),
            "replaced": list(self.replaced),
            "unchanged": list(self.unchanged),
            "failed": [
                {"source": s, "error": e, "type": self.error_types.get(s, "IngestError")}
                for s, e in self.failed
            ],
            "chunks_written": self.chunks_written,
            "document_ids": dict(self.document_ids),
            "vector_index": self.vector_index,
            "index_seconds": round(self.index_seconds, 3),
            "retried_alone": self.retried_alone,
            "document_backend": self.document_backend,
        }


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What :func:`write_documents` did with one document."""

    source: str
    status: str  # added / replaced / unchanged / failed
    document_id: str | None = None
    chunks_written: int = 0
    error: str | None = None
    alone: bool = False  # its batch failed: written (or failed) in a transaction of its own
    error_type: str | None = None  # the error's class (StoreError, StatementTimeoutError, ...)


@dataclass(slots=True)
class IngestTally:
    """What an ingest has done so far, document by document, and the progress callback."""

    collection: str
    total: int
    on_progress: Callable[[IngestProgress], None] | None
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    error_types: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    written: int = 0
    retried: int = 0
    done: int = 0

    def progress(self, source: str, status: str) -> None:
        if self.on_progress is not None:
            self.on_progress(IngestProgress(self.done, self.total, source, status))

    def finished(
        self,
        source: str,
        status: str,
        *,
        document_id: str | None = None,
        error: str = "",
        error_type: str = "",
    ) -> None:
        """One document is done: ``status`` is added, replaced, unchanged or failed."""
        self.done += 1
        if status == "failed":
            self.failed.append((source, error or "failed"))
            self.error_types[source] = error_type or "IngestError"
        else:
            assert document_id is not None
            self.ids[source] = document_id
            {"added": self.added, "replaced": self.replaced, "unchanged": self.unchanged}[status].append(
                source
            )
        self.progress(source, status)

    def report(self, vector_index: str, index_seconds: float, document_backend: str | None) -> IngestReport:
        return IngestReport(
            self.collection,
            tuple(self.added),
            tuple(self.replaced),
            tuple(self.unchanged),
            tuple(self.failed),
            self.written,
            self.ids,
            vector_index=vector_index,
            index_seconds=index_seconds,
            retried_alone=self.retried,
            document_backend=document_backend if self.written else None,
            error_types=dict(self.error_types),
        )
