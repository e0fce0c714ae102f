"""What ``store.sync`` reports: :class:`SyncReport`, and :class:`SyncProgress` events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SyncProgress", "SyncReport"]


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """One event of a sync. ``step`` is ``listed`` (once, ``total`` files), ``read`` (a file read
    and hashed), ``renamed``, ``regranted`` (a document's grants set in place), ``rechunked`` (a
    document's chunks laid out again in place), ``written`` (an added / modified document
    committed, from ingest),
    ``deleted`` (once, after the deletions' transaction) or ``recorded`` (the state saved)."""

    step: str
    key: str | None = None
    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class SyncReport:
    """What a sync did (or, with ``dry_run``, would do) to ``collection`` from ``source``.

    ``renamed`` holds ``(old key, new key)`` pairs: moved without re-embedding. ``regranted``: the
    files whose grants alone changed (their sidecar or front matter ``grants``): the document's
    grants set in place, nothing re-embedded, no new revision. ``rechunked``: unchanged files whose
    document's chunks were laid out with another chunk size / overlap or an older chunker
    (``CHUNKER_VERSION``) and come out different now: their chunks replaced in place (same
    document, grants, metadata and revision; a chunk whose text is unchanged keeps its vector).
    ``read`` counts
    the files read and hashed; the others were unchanged by the pre-check (size + mtime, or
    ETag, as recorded). ``chunks_embedded`` counts the chunks of added and modified documents.
    """

    collection: str
    source: str
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    regranted: tuple[str, ...] = ()
    rechunked: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    unchanged: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    read: int = 0
    chunks_embedded: int = 0
    revisions_pruned: int = 0
    document_ids: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def changed(self) -> bool:
        return bool(
            self.added or self.modified or self.regranted or self.rechunked or self.deleted or self.renamed
        )

    def _counts(self) -> str:
        regranted = f"{len(self.regranted)} regranted, " if self.regranted else ""  # (rare: shown if any)
        rechunked = f"{len(self.rechunked)} rechunked, " if self.rechunked else ""  # (likewise)
        return (
            f"{len(self.added)} added, {len(self.modified)} modified, {regranted}{rechunked}"
            f"{len(self.deleted)} deleted, "
            f"{len(self.renamed)} renamed, {len(self.unchanged)} unchanged, {len(self.failed)} failed"
        )

    def __str__(self) -> str:
        head = f"{'dry run: ' if self.dry_run else ''}{self.collection} <- {self.source}: {self._counts()}"
        head += f" ({self.read} read, {self.chunks_embedded} chunks embedded, {self.seconds:.2f}s)"
        lines = [head]
        for verb, keys in (
            ("added", self.added),
            ("modified", self.modified),
            ("regranted", self.regranted),
            ("rechunked", self.rechunked),
            ("deleted", self.deleted),
        ):
            lines += [f"  {verb}: {key}" for key in keys]
        lines += [f"  renamed: {old} -> {new}" for old, new in self.renamed]
        lines += [f"  failed: {why}" for _key, why in self.failed]
        return "\n".join(lines)

    def __repr__(self) -> str:
        failed = ""
        if self.failed:
            shown = "; ".join(why for _key, why in self.failed[:3])
            more = f"; ... {len(self.failed) - 3} more" if len(self.failed) > 3 else ""
            failed = f", FAILED: {shown}{more}"
        dry = ", dry_run=True" if self.dry_run else ""
        return f"SyncReport({self.collection!r}: {self._counts()}{dry}{failed})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "source": self.source,
            "added": list(self.added),
            "modified": list(self.modified),
            "regranted": list(self.regranted),
            "rechunked": list(self.rechunked),
            "deleted": list(self.deleted),
            "renamed": [{"from": old, "to": new} for old, new in self.renamed],
            "unchanged": list(self.unchanged),
            "failed": [{"source": key, "error": why} for key, why in self.failed],
            "dry_run": self.dry_run,
            "read": self.read,
            "chunks_embedded": self.chunks_embedded,
            "revisions_pruned": self.revisions_pruned,
            "document_ids": dict(self.document_ids),
            "seconds": round(self.seconds, 3),
        }
