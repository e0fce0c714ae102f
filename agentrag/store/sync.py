"""``store.sync``: make a collection (in one tenant / workspace) a faithful mirror of a source.

One run, under the source's advisory lock (:func:`agentrag.store.sync_state.source_lock`):

1. **List** the source (:mod:`agentrag.store.sync_source`) and read the state of the last run.
2. **Pre-check**: a file whose size + mtime (or ETag) match its state row, while the stored
   document under its key still has the recorded id and sha256, is unchanged and never read.
3. **Read and hash** the others (with their grants sidecar, ``<file>.grants``): same text and
   metadata as stored -> unchanged (nothing written); the same text, the metadata differing in
   ``grants`` only (a sidecar or the front matter's grants changed) -> **regranted**: the row's
   grants and metadata set in place, as ``store.grant`` does (no new revision, nothing
   re-embedded; a deleted sidecar leaves no grants: deny by default; what ``store.grant`` /
   ``store.revoke`` set by hand is kept: migration 0055); stored under its key with
   another text or other metadata -> modified; not stored -> added, unless a document
   whose file vanished has the same text: a **rename**, moved without re-embedding (one
   transaction: the new row, its chunks copied with their vectors under the ids a fresh ingest
   gives, the old row deleted, the revision lineage continued).
4. **Write** added and modified documents through ingest (each document all or nothing; a
   modified document's new revision replaces the old one in one transaction). An unchanged file
   whose document's recorded chunk layout (size, overlap, chunker version) is not this run's is
   read (step 2 never skips it) and, when its chunks come out different, **rechunked** in place
   (:mod:`agentrag.store.sync_layout`).
5. **Delete** the documents of vanished files (chunks, tsvectors, session links and the
   relations they were the source of) in one transaction; other scopes are never touched.
6. **Record** the state; prune old revisions beyond ``keep_revisions``.

Every write is a transaction and the state rows of keys about to be written are recorded
*pending* before the write, so a run killed at any point and run again converges to the rows
of an uninterrupted run. A file that cannot be read or parsed is reported and left as it was
stored; the others go on.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import IngestError, InvalidInputError
from agentrag.readers.base import file_failure
from agentrag.readers.ingest import read_document
from agentrag.store.acl import GRANTS_KEY, document_grants, regrant
from agentrag.store.collections import (
    WRITE_LOCK_SQL,
    Collection,
    check_embedder,
    find_collection,
    write_lock_params,
)
from agentrag.store.connection import retrying
from agentrag.store.ingest import ingest_documents
from agentrag.store.prepare import (
    PreparedDocument,
    canonical_metadata,
    chunk_options,
    document_columns,
)
from agentrag.store.revisions import prune_revisions
from agentrag.store.sync_layout import adopt_layout, changed_layouts, intact_moves, rechunk, run_layout
from agentrag.store.sync_moves import SCOPE_SQL, write_moves
from agentrag.store.sync_report import SyncProgress, SyncReport
from agentrag.store.sync_source import Entry, SyncSource, open_source
from agentrag.store.sync_state import SyncState, source_lock
from agentrag.store.writes import document_id

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from agentrag.store.ingest import IngestProgress
    from agentrag.store.store import Store

__all__ = ["SyncProgress", "SyncReport", "sync"]

# The keys' advisory locks, the statement and key format of ingest's writes (agentrag.store.writes),
# so a sync's rename or deletion and an ingest of the same key serialise.
_KEY_LOCK_SQL = (
    "SELECT count(pg_advisory_xact_lock(h)) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
    " FROM unnest(CAST(:keys AS text[])) AS k ORDER BY h) AS keys"
)
_BY_KEY_SQL = f" FROM agentrag.documents WHERE collection_id = :cid AND {SCOPE_SQL} AND source = ANY(:keys)"


def _but_grants(metadata: dict[str, Any], key: str) -> str:
    """A document's metadata but its grants, canonical: what a grants-only change leaves equal."""
    return canonical_metadata({k: v for k, v in metadata.items() if k != GRANTS_KEY}, key)


def sync(
    store: Store,
    source: str | Path,
    *,
    collection: str,
    tenant: str | None = None,
    workspace: str | None = None,
    metadata: dict[str, Any] | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    delete: bool = True,
    dry_run: bool = False,
    keep_revisions: int | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    bulk: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    on_progress: Callable[[SyncProgress], None] | None = None,
) -> SyncReport:
    """The body of ``Store.sync`` (see its docstring and this module's)."""
    started = time.perf_counter()
    for name, value in (("tenant", tenant), ("workspace", workspace)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInputError(f"{name} must be a non-empty string, got {value!r}")
    for name, flag in (("delete", delete), ("dry_run", dry_run)):
        if not isinstance(flag, bool):
            raise InvalidInputError(f"{name} must be True or False, got {flag!r}")
    if keep_revisions is not None and (type(keep_revisions) is not int or keep_revisions < 0):
        raise InvalidInputError(
            f"keep_revisions must be an integer >= 0 or None (keep all), got {keep_revisions!r}"
        )
    user_metadata = dict(metadata or {})
    try:
        metadata_sha = hashlib.sha256(canonical_metadata(user_metadata, "metadata").encode()).hexdigest()
    except IngestError as exc:
        raise InvalidInputError(str(exc)) from None
    coll = retrying("reading the collection", lambda: find_collection(store.engine, collection))
    if not dry_run:
        check_embedder(coll, store.embedder_for(coll))  # before anything is read or written
    src = open_source(source, include=include, exclude=exclude, storage_options=storage_options)
    run = _Run(store, coll, src, tenant, workspace, user_metadata, metadata_sha, on_progress)
    run.layout = chunk_options(chunk_size, chunk_overlap)
    run.current, run.bulk = run_layout(*run.layout), bulk
    try:
        with source_lock(store.engine, [coll.id, tenant, workspace, src.uri]):
            report = run.execute(
                delete=delete,
                dry_run=dry_run,
                keep_revisions=keep_revisions,
                ingest_options={"chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "bulk": bulk},
            )
    finally:
        src.close()
    return SyncReport(**{**report, "seconds": time.perf_counter() - started})


class _Run:
    """One sync's work, step by step (the module docstring's numbering)."""

    def __init__(
        self,
        store: Store,
        coll: Collection,
        src: SyncSource,
        tenant: str | None,
        workspace: str | None,
        user_metadata: dict[str, Any],
        metadata_sha: str,
        on_progress: Callable[[SyncProgress], None] | None,
    ) -> None:
        self.store, self.coll, self.src = store, coll, src
        self.tenant, self.workspace = tenant, workspace
        self.scope = {"tenant": tenant or "", "workspace": workspace or ""}
        self.user_metadata, self.metadata_sha = user_metadata, metadata_sha
        self.on_progress = on_progress
        self.state = SyncState(store.engine, coll.id, tenant, workspace, src.uri)
        self.ids: dict[str, str] = {}
        self.layout = chunk_options(None, None)  # chunk size and overlap the files are laid out with
        self.current = run_layout(*self.layout)  # ... with the chunker's version: recorded on each row
        self.bulk: bool | None = None  # ingest's option: rechunks drop and rebuild the HNSW index too
        self.layouts: dict[str, tuple[int, int, int] | None] = {}  # the stored documents' (by key)
        self.failed: list[tuple[str, str]] = []

    def emit(self, step: str, key: str | None = None, done: int = 0, total: int = 0) -> None:
        if self.on_progress is not None:
            self.on_progress(SyncProgress(step, key, done, total))

    def execute(
        self, *, delete: bool, dry_run: bool, keep_revisions: int | None, ingest_options: dict[str, Any]
    ) -> dict[str, Any]:
        # 1. list; the state of the last run
        listed_ns = time.time_ns()
        listing = self.src.list()
        self.emit("listed", total=len(listing))
        if dry_run:
            self.state.find()
        else:
            self.state.start()
        files = self.state.files()
        stored = self._stored(sorted(set(listing) | set(files)))
        # 2. the pre-check; 3. read and hash the others
        unchanged, to_read = self._precheck(listing, files, stored)
        read, added, modified, regranted, confirmed = self._classify(to_read, listing, stored)
        stale = [k for k in confirmed + regranted if self.layouts.get(k) != self.current]
        relaid = changed_layouts(self.store.engine, {self.ids[k]: read[k] for k in stale}, self.current)
        rechunked = [key for key in confirmed + regranted if relaid.get(key)]
        confirmed = [key for key in confirmed if key not in rechunked]
        vanished = sorted(key for key in files if key not in listing)
        renamed = self._renames(added, vanished, read, stored, relaid) if delete else []
        for _old, new in renamed:
            added.remove(new)
        deleted = (
            [k for k in vanished if k in stored and k not in {old for old, _new in renamed}] if delete else []
        )
        report: dict[str, Any] = {
            "collection": self.coll.name,
            "source": self.src.uri,
            "unchanged": tuple(sorted(unchanged + confirmed)),
            "read": len(to_read),
            "dry_run": dry_run,
        }
        if dry_run:
            report.update(
                added=tuple(added),
                modified=tuple(modified),
                regranted=tuple(regranted),
                rechunked=tuple(rechunked),
                deleted=tuple(deleted),
                renamed=tuple(renamed),
                failed=tuple(self.failed),
                document_ids=dict(self.ids),
            )
            return report
        # 4. pending state rows first, then the writes
        self.state.record(
            [
                (key, listing[key], None, None)
                for key in [*added, *modified, *regranted, *rechunked, *(new for _o, new in renamed)]
            ]
            + [(key, listing[key], read[key].sha256, self.ids[key]) for key in confirmed],
            self.metadata_sha,
            listed_ns,
        )
        done_renames: list[tuple[str, str]] = []
        if renamed:  # one transaction for every rename (each one whole), then their state rows
            with self.store.engine.begin() as conn:
                self._locks(conn, [key for pair in renamed for key in pair])
                done_renames = self._move(conn, renamed, read, stored)
                # a pair not moved (the old document changed meanwhile, or bad grants): an ordinary add
                added.extend(new for old, new in renamed if (old, new) not in done_renames)
                self.state.forget(conn, [old for old, _new in done_renames])
            self.state.record(
                [(new, listing[new], read[new].sha256, self.ids[new]) for _old, new in done_renames],
                self.metadata_sha,
                listed_ns,
            )
            for number, (_old, new) in enumerate(renamed, start=1):
                self.emit("renamed", new, number, len(renamed))
        done_regrants = self._regrant(regranted, read, stored)
        modified.extend(key for key in regranted if key not in done_regrants)  # replaced meanwhile
        self.state.record(
            [(k, listing[k], read[k].sha256, self.ids[k]) for k in done_regrants],
            self.metadata_sha,
            listed_ns,
        )
        for number, key in enumerate(done_regrants, start=1):
            self.emit("regranted", key, number, len(done_regrants))
        moved = [new for _old, new in done_renames]  # a rename's layout compared: recorded when the same
        same = [self.ids[k] for k in confirmed + regranted + moved if relaid.get(k) is False]
        adopt_layout(self.store.engine, same, self.current)  # chunks as this run's: the layout recorded
        done_rechunks, rechunk_chunks = self._rechunk([k for k in rechunked if k not in modified], read)
        self.state.record(
            [(k, listing[k], read[k].sha256, self.ids[k]) for k in done_rechunks],
            self.metadata_sha,
            listed_ns,
        )
        modified.extend(key for key in rechunked if key not in done_rechunks and key not in modified)
        ingested = self._ingest([read[k] for k in [*added, *modified]], ingest_options)
        self.state.record(
            [(k, listing[k], read[k].sha256, self.ids[k]) for k in [*added, *modified] if k in self.ids],
            self.metadata_sha,
            listed_ns,
        )
        # 5. deletions, in one transaction (with the state rows of every vanished key)
        if delete:
            self._delete(deleted, vanished)
            self.emit("deleted", total=len(deleted))
        # 6. revisions beyond keep_revisions; the run's record
        pruned = 0
        if keep_revisions is not None:
            with self.store.engine.begin() as conn:
                pruned = prune_revisions(conn, self.coll.id, keep_revisions, self.tenant, self.workspace)
        status = ingested["status"]
        report.update(
            added=tuple(k for k in added if status.get(k) == "added"),
            modified=tuple(k for k in [*added, *modified] if status.get(k) == "replaced"),
            regranted=tuple(done_regrants),
            rechunked=tuple(done_rechunks),
            deleted=tuple(deleted),
            renamed=tuple(done_renames),
            unchanged=tuple(
                sorted([*report["unchanged"], *(k for k in added + modified if status.get(k) == "unchanged")])
            ),
            failed=tuple(self.failed),
            chunks_embedded=ingested["chunks"] + rechunk_chunks,
            revisions_pruned=pruned,
            document_ids=dict(sorted(self.ids.items())),
        )
        self.state.finish(
            {k: len(v) if isinstance(v, tuple) else v for k, v in report.items() if k != "document_ids"}
        )
        self.emit("recorded")
        return report

    def _precheck(
        self, listing: dict[str, Entry], files: dict[str, Any], stored: dict[str, tuple[str, str]]
    ) -> tuple[list[str], list[str]]:
        """``(unchanged, to read)``: a key is unchanged, and never read, when its state row matches the
        listing's entry and the stored document (id, sha256, and chunked as this run chunks)."""
        unchanged: list[str] = []
        to_read: list[str] = []
        for key, entry in listing.items():
            row, doc = files.get(key), stored.get(key)
            recorded = row is not None and doc is not None and (row.document_id, row.sha256) == doc
            recorded = recorded and self.layouts.get(key) == self.current  # and chunked as this run chunks
            if recorded and row is not None and doc is not None and row.matches(entry, self.metadata_sha):
                unchanged.append(key)
                self.ids[key] = doc[0]
                continue
            to_read.append(key)
        return unchanged, to_read

    def _classify(
        self, to_read: list[str], listing: dict[str, Entry], stored: dict[str, tuple[str, str]]
    ) -> tuple[dict[str, PreparedDocument], list[str], list[str], list[str], list[str]]:
        """Read and hash ``to_read`` (the stored metadata of those only): ``(read, added, modified,
        regranted, confirmed)``; regranted: the same text, other grants only (updated in place);
        confirmed: read, unchanged after all (state to refresh)."""
        metadata = self._metadata([key for key in to_read if key in stored])
        read: dict[str, PreparedDocument] = {}
        added: list[str] = []
        modified: list[str] = []
        regranted: list[str] = []
        confirmed: list[str] = []
        for number, key in enumerate(to_read, start=1):
            item = self._read(key, listing[key])
            self.emit("read", key, number, len(to_read))
            if item is None:
                continue
            read[key] = item
            doc = stored.get(key)
            before = metadata.get(key) or {}
            if doc is None:
                added.append(key)
            elif doc[1] == item.sha256 and canonical_metadata(before, key) == canonical_metadata(
                item.metadata, key
            ):
                confirmed.append(key)
                self.ids[key] = doc[0]
            elif doc[1] == item.sha256 and _but_grants(before, key) == _but_grants(item.metadata, key):
                regranted.append(key)
                self.ids[key] = doc[0]
            else:
                modified.append(key)
        return read, added, modified, regranted, confirmed

    def _read(self, key: str, entry: Entry) -> PreparedDocument | None:
        """Read and hash one file (and its grants sidecar, listed with it); None (and a failure
        recorded) when it cannot be, or its grants are not valid in this collection."""
        try:
            file = self.src.source(key)
            text, metadata, chunks = read_document(file, size=self.layout[0], overlap=self.layout[1])
            sidecar = self.src.sidecar(key) if entry.sidecar is not None else None
        except (IngestError, RecursionError, MemoryError, OSError, UnicodeError) as exc:
            self.failed.append((key, f"{key}: {file_failure(key, exc)}"))  # typed; the others go on
            return None
        # read and laid out as ingest reads a file (its reader's chunks kept, its sidecar's grants
        # between the front matter and the sync's own metadata): the same rows
        metadata = {**metadata, **({GRANTS_KEY: sidecar} if sidecar else {}), **self.user_metadata}
        try:
            document_grants(self.coll, metadata, key)
        except IngestError as exc:
            self.failed.append((key, str(exc)))
            return None
        item = PreparedDocument(key, text, metadata, original_filename=file.name, chunks=chunks)
        item.sha256 = hashlib.sha256(item.text.encode("utf-8")).hexdigest()
        return item

    def _rechunk(self, keys: list[str], read: dict[str, PreparedDocument]) -> tuple[list[str], int]:
        """Re-chunk the documents of ``keys`` in place; the keys done (in order) and chunks embedded."""
        if not keys:
            return [], 0
        done, embedded = rechunk(
            self.store, self.coll, self.tenant, [(self.ids[k], read[k]) for k in keys], self._locks, self.bulk
        )
        for number, key in enumerate(done, start=1):
            self.emit("rechunked", key, number, len(done))
        return [key for key in keys if key in set(done)], embedded

    def _regrant(
        self, keys: list[str], read: dict[str, PreparedDocument], stored: dict[str, tuple[str, str]]
    ) -> list[str]:
        """The documents of ``keys`` (their text unchanged) get their file's grants and metadata in
        place, in one transaction under the keys' locks; returns the keys done (a document
        replaced or deleted meanwhile is left to an ordinary write)."""
        if not keys:
            return []
        with self.store.engine.begin() as conn:
            self._locks(conn, keys)
            done = set(regrant(conn, self.coll, [(stored[k][0], read[k].metadata, k) for k in keys]))
        return [key for key in keys if stored[key][0] in done]

    def _renames(
        self,
        added: list[str],
        vanished: list[str],
        read: dict[str, PreparedDocument],
        stored: dict[str, tuple[str, str]],
        relaid: dict[str, bool],
    ) -> list[tuple[str, str]]:
        """``(old, new)``: a new key whose text a vanished key's stored document has (each once),
        and whose stored chunks are what this run's layout cuts (:func:`intact_moves`; what it
        compared goes into ``relaid``). Any other new key is an add, chunked afresh."""
        by_sha: dict[str, list[str]] = {}
        for key in vanished:
            if key in stored:
                by_sha.setdefault(stored[key][1], []).append(key)
        pairs = []
        for key in added:
            candidates = by_sha.get(read[key].sha256)
            if candidates:
                pairs.append((candidates.pop(0), key))
        pairs, compared = intact_moves(self.store.engine, pairs, self.layouts, self.current, stored, read)
        relaid.update(compared)
        return pairs

    def _locks(self, conn: Connection, keys: list[str]) -> None:
        from sqlalchemy import text

        conn.execute(text(WRITE_LOCK_SQL), write_lock_params(self.coll.id))
        conn.execute(
            text(_KEY_LOCK_SQL),
            {"keys": [json.dumps([self.coll.id, k, self.tenant, self.workspace]) for k in keys]},
        )

    def _stored(self, keys: list[str]) -> dict[str, tuple[str, str]]:
        """``{key: (document id, sha256)}`` of the stored documents under ``keys`` in the scope."""
        from sqlalchemy import text

        with self.store.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT source, id, sha256, ARRAY[chunk_size, chunk_overlap, chunker_version]"
                    + _BY_KEY_SQL
                ),
                {"cid": self.coll.id, **self.scope, "keys": keys},
            ).all()
        self.layouts = {source: None if None in lay else tuple(lay) for source, _i, _s, lay in rows}
        return {source: (doc_id, sha) for source, doc_id, sha, _layout in rows}

    def _metadata(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of ``keys`` (the files read: whether one is unchanged after all)."""
        from sqlalchemy import text

        if not keys:
            return {}
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT source, metadata" + _BY_KEY_SQL),
                {"cid": self.coll.id, **self.scope, "keys": keys},
            ).all()
        return {source: meta for source, meta in rows}

    def _move(
        self,
        conn: Connection,
        renamed: list[tuple[str, str]],
        read: dict[str, PreparedDocument],
        stored: dict[str, tuple[str, str]],
    ) -> list[tuple[str, str]]:
        """Rename each ``(old, new)`` inside the caller's transaction (the keys locked), reusing the
        old document's chunks and their vectors; a handful of set-based statements for all of
        them. Returns the pairs moved: a pair whose stored documents no longer allow it (the old
        one changed, or the new key is taken) is left out, with nothing written for it."""
        from sqlalchemy import text

        params = {"cid": self.coll.id, **self.scope}
        current = {
            source: doc_id
            for source, doc_id in conn.execute(
                text("SELECT source, id" + _BY_KEY_SQL),
                {**params, "keys": [key for pair in renamed for key in pair]},
            ).all()
        }
        moves, grants = [], []
        for old, new in renamed:
            if current.get(old) != stored[old][0] or new in current:
                continue
            try:  # the new file's grants, as its ingest would write them (an acl collection's)
                grants.append(document_grants(self.coll, read[new].metadata, new))
            except IngestError:
                continue  # an ordinary add, whose ingest reports the failure
            moves.append((old, new))
        if not moves:
            return []
        olds, news = [old for old, _ in moves], [new for _, new in moves]
        old_ids = [stored[old][0] for old in olds]
        new_ids = [document_id(self.coll, read[new], self.tenant, self.workspace) for new in news]
        columns = [document_columns(read[new].metadata, new) for new in news]
        write_moves(conn, params, olds, news, old_ids, new_ids, read, columns, grants)
        self.ids.update(zip(news, new_ids, strict=True))
        return moves

    def _ingest(self, items: list[PreparedDocument], options: dict[str, Any]) -> dict[str, Any]:
        """Added and modified documents through ingest's write path; their status by key."""
        status: dict[str, str] = {}
        if not items:
            return {"status": status, "chunks": 0}

        def progress(event: IngestProgress) -> None:
            if event.status != "writing":
                self.emit("written", event.source, event.done, event.total)

        report = ingest_documents(
            self.store,
            items,
            collection=self.coll.name,
            tenant=self.tenant,
            workspace=self.workspace,
            on_progress=progress,
            **options,
        )
        for verb, keys in (
            ("added", report.added),
            ("replaced", report.replaced),
            ("unchanged", report.unchanged),
        ):
            for key in keys:
                status[key] = verb
                self.ids[key] = report.document_ids[key]
        self.failed.extend(report.failed)
        return {"status": status, "chunks": report.chunks_written}

    def _delete(self, deleted: list[str], vanished: list[str]) -> None:
        """The documents of ``deleted`` keys, the relations they were the source of, and the state
        rows of every vanished key, in one transaction."""
        from sqlalchemy import text

        params = {"cid": self.coll.id, **self.scope, "keys": deleted}
        with self.store.engine.begin() as conn:
            if deleted:
                self._locks(conn, deleted)
                gone = conn.execute(
                    text(
                        f"DELETE FROM agentrag.documents WHERE collection_id = :cid AND {SCOPE_SQL}"
                        " AND source = ANY(:keys)"
                    ),
                    params,
                ).rowcount
                conn.execute(
                    text(
                        f"DELETE FROM agentrag.relations WHERE collection_id = :cid AND {SCOPE_SQL}"
                        " AND session_id IS NULL AND source = ANY(:keys)"
                    ),
                    params,
                )
                if gone:
                    conn.execute(
                        text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :cid"), params
                    )
            self.state.forget(conn, vanished)
