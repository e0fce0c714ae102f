"""``store.sync``'s state in PostgreSQL (migration 0021): the source's row, one row per file seen,
and the advisory lock that serialises two syncs of one source.

The state is a cache for the pre-check, never the truth: a file is skipped without being read
only when its recorded size + mtime (or ETag) match the listing AND the stored document under its
key still has the recorded id and sha256. Rows are written *pending* (sha256 NULL) before a
write, so a sync killed mid-write leaves every key it may have written on record, and the next
run still deletes the document of a file removed meanwhile.

A row's ``metadata_sha256`` fingerprints what the sync adds to the file's own metadata: the sync's
``metadata`` and, when the file has one, its grants sidecar's listed facts (:func:`fingerprint`),
so a new, changed or deleted sidecar fails the pre-check of its (unchanged) file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from agentrag.store.sync_source import Entry

__all__ = ["FileState", "SyncState", "fingerprint", "source_lock"]

# A modification within this long of the listing that recorded a file's mtime may share its
# mtime tick: such a row is not trusted by the pre-check (git's "racy" entries).
RACY_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class FileState:
    size: int | None
    mtime_ns: int | None
    etag: str | None
    sha256: str | None  # None: pending (a write was under way)
    document_id: str | None
    metadata_sha256: str | None  # of the sync's own metadata when this row was recorded
    listed_ns: int  # when the listing that recorded it started

    def matches(self, entry: Entry, metadata_sha256: str) -> bool:
        """The pre-check: ``entry`` is the file this row recorded (by ETag, else size and mtime),
        with the same sidecar (or none) as then."""
        if self.sha256 is None or self.metadata_sha256 != fingerprint(metadata_sha256, entry):
            return False
        side = entry.sidecar
        if side is not None and side.etag is None and (side.mtime_ns is None or self._racy(side.mtime_ns)):
            return False
        if entry.etag is not None or self.etag is not None:
            return entry.etag == self.etag and entry.size == self.size
        if entry.mtime_ns is None or entry.size is None:
            return False
        if self._racy(entry.mtime_ns):
            return False
        return entry.size == self.size and entry.mtime_ns == self.mtime_ns

    def _racy(self, mtime_ns: int) -> bool:
        """Modified around the listing that recorded this row: its mtime tick proves nothing."""
        return mtime_ns >= self.listed_ns - RACY_NS


def fingerprint(metadata_sha256: str, entry: Entry | None) -> str:
    """The ``metadata_sha256`` of a file's row: the sync's metadata's, and its sidecar's facts."""
    side = entry.sidecar if entry is not None else None
    if side is None:
        return metadata_sha256  # (the rows of files without a sidecar are as they always were)
    facts = json.dumps([metadata_sha256, side.size, side.mtime_ns, side.etag])
    return hashlib.sha256(facts.encode()).hexdigest()


@contextlib.contextmanager
def source_lock(engine: Engine, key: list[Any]) -> Iterator[None]:
    """Hold a session advisory lock on ``key`` (a sync source) for the block: a second sync of the
    same source waits here. The lock lives on a connection of its own (autocommit, no transaction
    kept open); a killed process's lock goes with its connection."""
    from sqlalchemy import text

    lock = json.dumps(["agentrag.sync", *key])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT pg_advisory_lock(hashtextextended(:k, 0))"), {"k": lock})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": lock})


class SyncState:
    """The state rows of one (collection, tenant, workspace, source URI)."""

    def __init__(
        self, engine: Engine, collection_id: int, tenant: str | None, workspace: str | None, uri: str
    ) -> None:
        self.engine = engine
        self.key = {"cid": collection_id, "tenant": tenant, "workspace": workspace, "uri": uri}
        self.source_id: int | None = None

    def find(self) -> int | None:
        """The source's id if it was synced before (a dry run creates nothing)."""
        from sqlalchemy import text

        with self.engine.connect() as conn:
            self.source_id = conn.execute(
                text(
                    "SELECT id FROM agentrag.sync_sources WHERE collection_id = :cid AND uri = :uri"
                    " AND coalesce(tenant_id, '') = coalesce(:tenant, '')"
                    " AND coalesce(workspace_id, '') = coalesce(:workspace, '')"
                ),
                self.key,
            ).scalar()
        return self.source_id

    def start(self) -> int:
        from sqlalchemy import text

        with self.engine.begin() as conn:
            self.source_id = int(
                conn.execute(
                    text(
                        "INSERT INTO agentrag.sync_sources (collection_id, tenant_id, workspace_id, uri,"
                        " last_started_at) VALUES (:cid, :tenant, :workspace, :uri, now())"
                        " ON CONFLICT (collection_id, coalesce(tenant_id, ''), coalesce(workspace_id, ''),"
                        " uri)"
                        " DO UPDATE SET last_started_at = now() RETURNING id"
                    ),
                    self.key,
                ).scalar_one()
            )
        return self.source_id

    def files(self) -> dict[str, FileState]:
        from sqlalchemy import text

        if self.source_id is None:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT key, size, mtime_ns, etag, sha256, document_id, metadata_sha256, listed_ns"
                    " FROM agentrag.sync_files WHERE source_id = :sid"
                ),
                {"sid": self.source_id},
            ).all()  # (fetched at once: a row at a time costs more than the query on 10,000 files)
        return {
            key: FileState(size, mtime, etag, sha, doc_id, msha, int(listed))
            for key, size, mtime, etag, sha, doc_id, msha, listed in rows
        }

    def record(
        self,
        rows: Iterable[tuple[str, Entry | None, str | None, str | None]],
        metadata_sha256: str,
        listed_ns: int,
    ) -> None:
        """Upsert ``(key, entry, sha256, document id)`` rows (sha256 None: pending)."""
        from sqlalchemy import text

        params = [
            {
                "sid": self.source_id,
                "key": key,
                "size": entry.size if entry else None,
                "mtime": entry.mtime_ns if entry else None,
                "etag": entry.etag if entry else None,
                "sha": sha,
                "doc": doc_id,
                "msha": fingerprint(metadata_sha256, entry),
                "listed": listed_ns,
            }
            for key, entry, sha, doc_id in rows
        ]
        if not params:
            return
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO agentrag.sync_files (source_id, key, size, mtime_ns, etag, sha256,"
                    " document_id, metadata_sha256, listed_ns)"
                    " VALUES (:sid, :key, :size, :mtime, :etag, :sha, :doc, :msha,"
                    " :listed) ON CONFLICT (source_id, key) DO UPDATE SET size = EXCLUDED.size,"
                    " mtime_ns = EXCLUDED.mtime_ns, etag = EXCLUDED.etag, sha256 = EXCLUDED.sha256,"
                    " document_id = EXCLUDED.document_id, metadata_sha256 = EXCLUDED.metadata_sha256,"
                    " listed_ns = EXCLUDED.listed_ns, seen_at = now()"
                ),
                params,
            )

    def forget(self, conn: Connection, keys: list[str]) -> None:
        """Drop the rows of ``keys`` (inside the caller's transaction: the deletion's)."""
        from sqlalchemy import text

        if keys:
            conn.execute(
                text("DELETE FROM agentrag.sync_files WHERE source_id = :sid AND key = ANY(:keys)"),
                {"sid": self.source_id, "keys": keys},
            )

    def finish(self, report: dict[str, Any]) -> None:
        from sqlalchemy import text

        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE agentrag.sync_sources SET last_finished_at = now(),"
                    " last_report = CAST(:r AS jsonb)"
                    " WHERE id = :sid"
                ),
                {"sid": self.source_id, "r": json.dumps(report, default=str)},
            )
