"""``Store.sync`` and ``Store.revisions``: the store's methods for keeping a collection in sync with
a source and reading a document's history (a base class of :class:`~agentrag.store.store.Store`,
so their bodies stay out of store.py; the work is in :mod:`agentrag.store.sync` and
:mod:`agentrag.store.revisions`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.retrieval.dberrors import guarded

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.scope import Scope
    from agentrag.store.revisions import Revision
    from agentrag.store.sync_report import SyncProgress, SyncReport

__all__ = ["SyncMethods"]


class SyncMethods:
    """The sync and revision methods of :class:`~agentrag.store.store.Store`."""

    engine: Engine

    @guarded("syncing", retry=False)
    def sync(
        self,
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
        """Make ``collection`` (in one ``tenant`` / ``workspace``) mirror ``source``: a local folder
        or an fsspec URL (``s3://bucket/prefix``, with ``storage_options`` for s3fs; the ``sync``
        extra).

        Files are keyed by their path inside the source (as ``ingest`` keys a folder's files).
        Added and modified files are ingested (a modified document's new revision replaces the
        old one in one transaction), a renamed file (same text, new key) is moved without
        re-embedding, unchanged files are neither rewritten nor, when their size + mtime (or
        ETag) match the last sync's, read; with ``delete`` (default) the documents of files gone
        from the source are deleted, in this scope only. ``include`` / ``exclude`` are globs on
        the keys. ``dry_run`` reports what would change and writes nothing. ``keep_revisions=N``
        keeps the text of at most N ended revisions per document (default: all); an ended
        revision never keeps chunks or vectors. A file that cannot be read is reported in
        ``report.failed`` and the others go on. Two syncs of one source serialise; a sync killed
        at any point and run again converges (:mod:`agentrag.store.sync`)."""
        from agentrag.store.sync import sync

        return sync(
            self,  # type: ignore[arg-type]
            source,
            collection=collection,
            tenant=tenant,
            workspace=workspace,
            metadata=metadata,
            include=include,
            exclude=exclude,
            delete=delete,
            dry_run=dry_run,
            keep_revisions=keep_revisions,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            bulk=bulk,
            storage_options=storage_options,
            on_progress=on_progress,
        )

    @guarded("reading revisions")
    def revisions(self, document_id: str, *, scope: Scope | None = None) -> list[Revision]:
        """Every revision of the document ``document_id`` is a revision of, oldest first (number,
        document id, sha256, source key, validity interval); with ``scope``, only inside it
        (checked in SQL). ``store.document(id, revision=n)`` reads one's text."""
        from agentrag.store.revisions import revisions

        return revisions(self.engine, document_id, scope)
