"""The :class:`Store`: one handle on the PostgreSQL database and what it holds."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseUnavailableError,
    DocumentNotFoundError,
    InvalidInputError,
)
from agentrag.retrieval.dberrors import database_error, guarded
from agentrag.retrieval.lexical import DEFAULT_BM25_MEMORY_BUDGET, BM25Cache
from agentrag.retrieval.search import asearch as retrieval_asearch
from agentrag.retrieval.search import search as retrieval_search
from agentrag.retrieval.vector import DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_M, hnsw_parameters
from agentrag.store.collections import (
    DISTANCES,
    WRITE_LOCK_SQL,
    Collection,
    check_embedder,
    validate_name,
    write_lock_params,
)

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Engine

    from agentrag.embedders import Embedder
    from agentrag.querylog import QueryLogEntry
    from agentrag.scope import Scope
    from agentrag.store.ingest import IngestProgress, IngestReport
    from agentrag.store.migrate import Migration, SchemaStatus
    from agentrag.store.prepare import Executor
    from agentrag.store.reembed import ReembedReport
    from agentrag.store.relations import Relation, Triple

__all__ = ["Document", "Store", "connect"]

_log = logging.getLogger("agentrag.store")
_TSV_LOCK = 0x61727473  # advisory-lock space of the tsvector syncs ("arts"); the key is the collection id
#: maintenance_work_mem of the transaction that builds a collection's GIN index over its tsvectors
#: (PostgreSQL's 64 MB default makes a large build flush its posting lists many times over)
TEXT_INDEX_BUILD_MEMORY = "1GB"

_COLLECTION_SQL = """
SELECT c.id, c.name, c.description, c.embed_model, c.embed_version, c.dimensions, c.distance,
       c.scoped, c.version, c.created_at, c.hnsw_m, c.hnsw_ef_construction, c.hnsw_ef_search,
       (SELECT count(*) FROM agentrag.documents d WHERE d.collection_id = c.id) AS document_count,
       (SELECT count(*) FROM agentrag.chunks k WHERE k.collection_id = c.id) AS chunk_count
FROM agentrag.collections c
"""


class _Unset:
    """The type of :data:`_UNSET`: an argument left out (where None is a value)."""


_UNSET = _Unset()


@dataclass(frozen=True, slots=True)
class Document:
    """A stored document. ``text`` is loaded by :meth:`Store.document` (None in listings)."""

    id: str
    collection: str
    source: str
    original_filename: str | None
    sha256: str
    metadata: dict[str, Any]
    classification: str | None
    date: date | None
    tenant: str | None
    workspace: str | None
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    sessions: list[str] = field(default_factory=list)
    text: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        scope = "".join(f" {k}={getattr(self, k)!r}" for k in ("tenant", "workspace") if getattr(self, k))
        return f"Document({self.id} {self.collection}:{self.source!r} {self.chunk_count} chunks{scope})"

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "text"}
        for key in ("created_at", "updated_at", "date"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        return out


def _check_alive(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """The pool's check of a connection it is about to hand out, without a round trip.

    An idle connection has nothing to read: PostgreSQL speaks only when asked, except when it
    ends the session (a terminated backend, a restart: an error message, then end of file). So
    a socket that is readable, or a connection the driver already knows is broken, gets the
    classic check (``SELECT 1``, SQLAlchemy's pre-ping), and a dead one is replaced before it is
    used (``DisconnectionError`` makes the pool take another). A healthy connection costs one
    ``poll()`` instead of a round trip. What this cannot see (a peer gone without a word, e.g. a
    network partition) a ping would have waited on too; reads are retried once anyway
    (:mod:`agentrag.retrieval.dberrors`).
    """
    import select

    from sqlalchemy.exc import DisconnectionError

    if getattr(dbapi_connection, "broken", False) or getattr(dbapi_connection, "closed", False):
        raise DisconnectionError("the connection is closed")
    pgconn = getattr(dbapi_connection, "pgconn", None)
    if pgconn is None:  # not psycopg 3: the classic check
        readable = True
    else:
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
            readable = bool(poller.poll(0))
        except Exception:  # no socket any more
            raise DisconnectionError("the connection has no socket") from None
    if readable:
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            dbapi_connection.rollback()
        except Exception:
            raise DisconnectionError("the connection is dead") from None


def _register_vector(dbapi_connection: Any, _record: Any) -> None:
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(dbapi_connection, "vector")
    if info is not None:
        register_vector_info(dbapi_connection, info)
    dbapi_connection.commit()


class Store:
    """PostgreSQL + pgvector behind a bounded connection pool.

    ``Store()`` uses ``AGENTRAG_DATABASE_URL`` or else the embedded server; ``Store(url)``
    or ``Store(engine=...)`` point at any PostgreSQL 15+ with pgvector. The schema is
    upgraded on first use unless ``migrate=False``. ``embedder`` (default: local
    all-MiniLM-L6-v2, loaded on first use) embeds chunks and queries. ``bm25_memory_budget``
    (bytes, default 4 GiB, None for no limit) caps one collection's in-memory BM25 index: a
    collection over it is searched lexically with ``lexical_sql``, recorded on each result
    (``lexical_fallback``; see :mod:`agentrag.retrieval.lexical`).
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
    ) -> None:
        from sqlalchemy import create_engine, event

        from agentrag.store.server import database_url

        if type(query_cache_size) is not int or query_cache_size < 0:  # type(): True is refused too
            raise InvalidInputError(f"query_cache_size must be an integer >= 0, got {query_cache_size!r}")
        bm25 = BM25Cache(bm25_memory_budget)  # InvalidInputError for a bad budget, before connecting
        if engine is None:
            self._url = database_url(url)
            engine = create_engine(
                self._url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_pre_ping=False,  # _check_alive instead: no round trip per checkout
                pool_timeout=30,
                hide_parameters=True,  # a driver error's text never carries a question or a vector
            )
            event.listen(engine, "checkout", _check_alive)
            self._owns_engine = True
        else:
            self._url = engine.url.render_as_string(hide_password=True)
            self._owns_engine = False
        self.engine = engine
        self._embedder = embedder
        # BM25 cache of the lexical leg (agentrag.retrieval.lexical.bm25_index): collection id ->
        # index tagged with the collection version it was built at; one build lock per collection;
        # the collections over the memory budget.
        self._bm25 = bm25
        self._text_synced: dict[int, int] = {}  # collection id -> version its tsvectors were synced to
        # Query vectors by (model, version, text), most recently used last: a pipeline embeds the
        # same question in route and in every collection's search. Bounded; 0 turns it off.
        self._query_cache_size = query_cache_size
        self._query_vectors: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._query_lock = threading.Lock()
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
        event.listen(engine, "connect", _register_vector)
        engine.dispose()  # pooled connections made before the listener lack the vector type

    # ---- plumbing -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self._url).render_as_string(hide_password=True)

    @property
    def embedder(self) -> Embedder:
        """The store's embedder (default: local all-MiniLM-L6-v2, created on first use)."""
        if self._embedder is None:
            from agentrag.embedders import LocalEmbedder

            local: Embedder = LocalEmbedder()
            self._embedder = local
        return self._embedder

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with the store's embedder, through the bounded query-vector cache.

        Queries repeat within a pipeline (the question is embedded by ``route`` and by the search
        of every collection) and across a chatbot's turns; only the texts not cached are sent to
        the embedder, in one call. Vectors are keyed by the embedder's model, version and the text.
        """
        import numpy as np

        embedder = self.embedder
        if self._query_cache_size == 0:
            return np.asarray(embedder.embed(list(texts)), dtype=np.float32)
        model, version = str(embedder.model_id), str(embedder.version)
        keys = [(model, version, text) for text in texts]
        found: dict[tuple[str, str, str], np.ndarray] = {}
        with self._query_lock:
            for key in keys:
                vector = self._query_vectors.get(key)
                if vector is not None:
                    self._query_vectors.move_to_end(key)
                    found[key] = vector
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing:
            vectors = np.asarray(embedder.embed([key[2] for key in missing]), dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(missing):
                return vectors  # the caller's shape check reports it; nothing is cached
            with self._query_lock:
                for key, vector in zip(missing, vectors, strict=True):
                    vector.setflags(write=False)
                    found[key] = self._query_vectors[key] = vector
                while len(self._query_vectors) > self._query_cache_size:
                    self._query_vectors.popitem(last=False)
        if not keys:
            return np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
        return np.stack([found[key] for key in keys])

    def clear_query_cache(self) -> None:
        """Forget the cached query vectors (benchmarks do, to time every query's embedding)."""
        with self._query_lock:
            self._query_vectors.clear()

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

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
        embedder: Embedder | None = None,
        distance: str = "cosine",
        scoped: bool = False,
        exist_ok: bool = False,
        hnsw_m: int = DEFAULT_HNSW_M,
        hnsw_ef_construction: int = DEFAULT_HNSW_EF_CONSTRUCTION,
        ef_search: int | None = None,
    ) -> Collection:
        """Create a collection recording the embedder's model, version and dimensions.

        ``hnsw_m`` / ``hnsw_ef_construction`` are the build parameters of its HNSW index
        (pgvector's defaults 16 / 64; more of either: better recall on large collections, a
        slower build and a larger index) and ``ef_search`` its default ``hnsw.ef_search`` for
        searches that do not set one (None: ``max(100, depth)``). All three are recorded on the
        collection (:meth:`tune_vector_index` changes them). With ``exist_ok``, an existing
        collection is returned as it is.
        """
        from sqlalchemy import text
        from sqlalchemy.exc import IntegrityError

        validate_name(name)
        if distance not in DISTANCES:
            raise InvalidInputError(f"unknown distance {distance!r}; use one of {sorted(DISTANCES)}")
        hnsw_m, hnsw_ef_construction, ef_search = hnsw_parameters(hnsw_m, hnsw_ef_construction, ef_search)
        embedder = embedder or self.embedder
        if exist_ok:
            try:
                existing = self.collection(name)
            except CollectionNotFoundError:
                pass
            else:
                check_embedder(existing, embedder)
                return existing
        self._described.pop(name, None)
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO agentrag.collections (name, description, embed_model, embed_version,"
                        " dimensions, distance, scoped, hnsw_m, hnsw_ef_construction, hnsw_ef_search)"
                        " VALUES (:name, :description, :model, :version, :dims, :distance, :scoped,"
                        " :m, :ef_construction, :ef_search)"
                    ),
                    {
                        "name": name,
                        "description": description,
                        "model": embedder.model_id,
                        "version": embedder.version,
                        "dims": int(embedder.dimensions),
                        "distance": distance,
                        "scoped": scoped,
                        "m": hnsw_m,
                        "ef_construction": hnsw_ef_construction,
                        "ef_search": ef_search,
                    },
                )
        except IntegrityError as exc:
            if exist_ok:
                return self.collection(name)
            raise CollectionExistsError(f"collection {name!r} already exists") from exc
        return self.collection(name)

    @guarded("reading a collection")
    def collection(self, name: str) -> Collection:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            row = (
                conn.execute(text(_COLLECTION_SQL + " WHERE c.name = :name"), {"name": name})
                .mappings()
                .first()
            )
        if row is None:
            raise CollectionNotFoundError(f"no collection named {name!r}")
        return Collection(**row)

    @guarded("describing collections")
    def describe(self, names: Sequence[str], *, max_age: float = 0.0) -> list[Collection]:
        """Collections by name in one query, without counting their documents (cheap).

        With ``max_age`` (seconds), answers fetched by this store at most that long ago are reused
        and no query runs when every name is known: ``route`` reads descriptions this way. Their
        ``version`` may then be stale; creating or deleting a collection through this store
        forgets them at once.
        """
        from sqlalchemy import text

        if max_age > 0:
            now = time.monotonic()
            cached = [self._described.get(name) for name in names]
            if all(entry is not None and now - entry[0] <= max_age for entry in cached):
                return [entry[1] for entry in cached if entry is not None]
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT id, name, description, embed_model, embed_version, dimensions, distance, scoped,"
                    " version, created_at, hnsw_m, hnsw_ef_construction, hnsw_ef_search"
                    " FROM agentrag.collections WHERE name = ANY(CAST(:names AS text[]))"
                ),
                {"names": list(names)},
            ).mappings()
            found = {row["name"]: Collection(**row) for row in rows}
        fetched = time.monotonic()
        for name, collection in found.items():
            self._described[name] = (fetched, collection)
        missing = [n for n in names if n not in found]
        if missing:
            raise CollectionNotFoundError(f"no collection named {', '.join(repr(n) for n in missing)}")
        return [found[n] for n in names]

    @guarded("listing collections")
    def collections(self) -> list[Collection]:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            rows = conn.execute(text(_COLLECTION_SQL + " ORDER BY c.name")).mappings().all()
        return [Collection(**row) for row in rows]

    @guarded("deleting a collection", retry=False)
    def delete_collection(self, name: str) -> None:
        from sqlalchemy import text

        collection = self.collection(name)
        with self.engine.begin() as conn:
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{collection.hnsw_index}"))
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.chunk_tsv_gin_{int(collection.id)}"))
            conn.execute(text("DELETE FROM agentrag.collections WHERE id = :id"), {"id": collection.id})
        self._bm25.drop(collection.id)
        self._text_synced.pop(collection.id, None)
        self._described.pop(name, None)

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
        from sqlalchemy import text

        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:space, :cid)"), {"space": _TSV_LOCK, "cid": cid})
            row = conn.execute(
                text("SELECT version, tsv_version FROM agentrag.collections WHERE id = :cid"), {"cid": cid}
            ).one_or_none()
            if row is None:
                return
            current, synced = int(row.version), row.tsv_version
            if synced != current:
                conn.execute(
                    text(
                        "INSERT INTO agentrag.chunk_tsv (chunk_id, collection_id, tsv)"
                        " SELECT c.id, c.collection_id, to_tsvector('english', c.text) FROM agentrag.chunks c"
                        " WHERE c.collection_id = :cid AND NOT EXISTS"
                        " (SELECT 1 FROM agentrag.chunk_tsv t WHERE t.chunk_id = c.id)"
                        " ON CONFLICT (chunk_id) DO NOTHING"
                    ),
                    {"cid": cid},
                )
                conn.execute(
                    text("UPDATE agentrag.collections SET tsv_version = :v WHERE id = :cid"),
                    {"v": current, "cid": cid},
                )
            if synced != current or cid not in self._text_synced:
                # A first fill inserts into a table without this collection's index, then builds it
                # once (cheaper than growing a GIN index row by row), with more memory than the
                # server's default for that build only (SET LOCAL: this transaction alone).
                missing = conn.execute(
                    text("SELECT to_regclass(:name) IS NULL"), {"name": f"agentrag.chunk_tsv_gin_{cid}"}
                ).scalar()
                if missing:
                    conn.execute(
                        text("SELECT set_config('maintenance_work_mem', :m, true)"),
                        {"m": TEXT_INDEX_BUILD_MEMORY},
                    )
                    conn.execute(
                        text(
                            f"CREATE INDEX IF NOT EXISTS chunk_tsv_gin_{cid} ON agentrag.chunk_tsv"
                            f" USING gin (tsv) WHERE collection_id = {cid}"
                        )
                    )
        self._text_synced[cid] = current

    @guarded("re-embedding a collection", retry=False)
    def reembed(
        self,
        collection: str,
        *,
        embedder: Embedder | None = None,
        page_size: int = 1024,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> ReembedReport:
        """Re-embed every chunk of ``collection`` with ``embedder`` (default: this store's) and record
        its model, version and dimensions; the HNSW index is rebuilt.

        The fix for a collection embedded with another model or numeric variant (e.g. int8
        vectors from while int8 was ``LocalEmbedder``'s default, now float32): ingesting into it raises
        EmbeddingMismatchError and its searches report ``model_version_match=False`` until then.
        Atomic: the new vectors are computed off to the side and swapped in one transaction, so a
        search sees the old vectors or the new ones, never a mix (:mod:`agentrag.store.reembed`).
        ``on_progress(done, total)`` is called after each page of ``page_size`` chunks."""
        from agentrag.store.reembed import reembed

        return reembed(self, collection, embedder=embedder, page_size=page_size, on_progress=on_progress)

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
        """Build the collection's HNSW index if it is missing (a partial expression index).

        It is built with the collection's recorded ``hnsw_m`` and ``hnsw_ef_construction``.

        ``maintenance_work_mem`` is raised for the build only: an HNSW graph that does not fit
        in PostgreSQL's 64 MB default builds many times slower. ``parallel_workers`` sets
        ``max_parallel_maintenance_workers`` for the build (default: one less than the CPUs
        this process sees, at most 7; the server caps it by its own worker limits). A build
        follows a load, so the chunks' and documents' planner statistics are refreshed with it
        (``ANALYZE``): until autovacuum gets to a freshly loaded table, the planner believes the
        collection holds a few rows and sorts all of them instead of using this index (a
        1M-chunk collection: seconds per query instead of milliseconds, benchmarks/scale.py).
        """
        from sqlalchemy import text

        if not re.fullmatch(r"\d{1,6}(kB|MB|GB)", maintenance_work_mem):
            raise InvalidInputError(
                f"maintenance_work_mem must look like '512MB', got {maintenance_work_mem!r}"
            )
        opclass = DISTANCES[collection.distance][0]
        dims = int(collection.dimensions)
        sql = (
            f"CREATE INDEX IF NOT EXISTS {collection.hnsw_index} ON agentrag.chunks "
            f"USING hnsw ((embedding::vector({dims})) {opclass})"
            f" WITH (m = {int(collection.hnsw_m)}, ef_construction = {int(collection.hnsw_ef_construction)})"
            f" WHERE collection_id = {int(collection.id)}"
        )
        if parallel_workers is None:
            parallel_workers = min(max((os.cpu_count() or 1) - 1, 0), 7)
        if not isinstance(parallel_workers, int) or not 0 <= parallel_workers <= 64:
            raise InvalidInputError(f"parallel_workers must be an int in [0, 64], got {parallel_workers!r}")
        with self.engine.begin() as conn:
            missing = conn.execute(
                text("SELECT to_regclass(:name) IS NULL"), {"name": f"agentrag.{collection.hnsw_index}"}
            ).scalar()
            conn.execute(
                text("SELECT set_config('maintenance_work_mem', :m, true)"), {"m": maintenance_work_mem}
            )
            conn.execute(
                text("SELECT set_config('max_parallel_maintenance_workers', :w, true)"),
                {"w": str(parallel_workers)},
            )
            conn.execute(text(sql))
        if missing:
            with self.engine.begin() as conn:
                conn.execute(text("ANALYZE agentrag.chunks, agentrag.documents"))

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

        Arguments left out keep their recorded values; ``ef_search=None`` goes back to the
        default ``max(100, depth)``. A new ``hnsw_m`` or ``hnsw_ef_construction`` drops the
        collection's HNSW index and builds it again with them before returning (minutes for a
        million chunks; searches meanwhile scan exactly, slowly but correctly). Returns the
        collection as recorded. Raises InvalidInputError (out of pgvector's bounds) and
        CollectionNotFoundError.
        """
        from sqlalchemy import text

        current = self.collection(name)
        m, ef_c, ef_s = hnsw_parameters(
            current.hnsw_m if hnsw_m is None else hnsw_m,
            current.hnsw_ef_construction if hnsw_ef_construction is None else hnsw_ef_construction,
            current.hnsw_ef_search if isinstance(ef_search, _Unset) else ef_search,
        )
        rebuild = (m, ef_c) != (current.hnsw_m, current.hnsw_ef_construction)
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE agentrag.collections SET hnsw_m = :m, hnsw_ef_construction = :ef_c,"
                    " hnsw_ef_search = :ef_s WHERE id = :id"
                ),
                {"m": m, "ef_c": ef_c, "ef_s": ef_s, "id": current.id},
            )
            if rebuild:
                conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{current.hnsw_index}"))
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
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        on_progress: Callable[[IngestProgress], None] | None = None,
        strict: bool = False,
        bulk: bool | None = None,
        executor: Executor | None = None,
    ) -> IngestReport:
        """Ingest files and directories (``.txt``, ``.md``, ``.pdf``) into ``collection``.

        A file that cannot be read or ingested is recorded in ``report.failed`` (shown in the
        report's repr) and the others go on; ``strict=True`` raises IngestError instead, once
        every file was tried (the error's ``.report`` has the details).

        Documents are written many per transaction, each one all or nothing. ``bulk=True`` drops
        the collection's HNSW index before writing and rebuilds it after (faster for a large
        load; vector searches of this collection scan exactly meanwhile); ``bulk=False`` keeps
        it and maintains it row by row; ``None`` (default) decides: bulk when the load brings at
        least ``ingest.AUTO_BULK_MIN_CHUNKS`` chunks and at least as many as the collection
        holds. ``report.vector_index`` and ``report.index_seconds`` say what happened.

        ``executor`` says where files are read, chunked and embedded: in this process
        (:class:`~agentrag.LocalExecutor`, the default) or on Ray workers
        (``agentrag.executors.ray.RayExecutor``, the ``ray`` extra). Writing always happens
        here, each document all or nothing, so the report is the same either way."""
        from agentrag.store.ingest import ingest_paths

        report = ingest_paths(
            self,
            sources,
            collection=collection,
            metadata=metadata,
            tenant=tenant,
            workspace=workspace,
            session=session,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            on_progress=on_progress,
            bulk=bulk,
            executor=executor,
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
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        bulk: bool | None = None,
    ) -> IngestReport:
        """Ingest one string under the key ``source`` (re-ingesting the same text is a no-op;
        ``bulk`` as in :meth:`ingest`)."""
        from agentrag.store.ingest import ingest_texts

        return ingest_texts(
            self,
            [(source, text, metadata or {})],
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
        from sqlalchemy import text

        from agentrag.retrieval.scope_sql import check_scope, compile_scope
        from agentrag.scope import Scope

        if scope is not None and (tenant is not None or workspace is not None):
            raise InvalidInputError("pass either scope= or tenant= / workspace=, not both")
        if scope is None and (tenant is not None or workspace is not None):
            scope = Scope(tenant=tenant, workspace=workspace)
        clauses: list[str] = []
        params: dict[str, Any] = {"limit": int(limit)}
        if collection is not None:
            found = self.collection(collection)
            check_scope(scope, [found.name] if found.scoped else [])
            params["cid"] = found.id
            clauses.append("d.collection_id = :cid")
        else:
            with self.engine.connect() as conn:
                scoped = (
                    conn.execute(text("SELECT name FROM agentrag.collections WHERE scoped")).scalars().all()
                )
            check_scope(scope, scoped)
        scope_sql, scope_params = compile_scope(scope)
        if scope_sql != "TRUE":
            clauses.append(scope_sql)
            params.update(scope_params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(_DOCUMENT_SQL.format(text="NULL", where=where) + " LIMIT :limit"), params
            )
            return [_document(row) for row in rows.mappings()]

    @guarded("reading a document")
    def document(self, document_id: str) -> Document:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    text(_DOCUMENT_SQL.format(text="d.text", where="WHERE d.id = :id")), {"id": document_id}
                )
                .mappings()
                .first()
            )
        if row is None:
            raise DocumentNotFoundError(f"no document with id {document_id!r}")
        return _document(row)

    @guarded("deleting a document", retry=False)
    def delete_document(self, document_id: str, *, scope: Scope | None = None) -> None:
        """Delete a document and its chunks.

        A document of a ``scoped=True`` collection is deleted only inside a scope naming its
        tenant (or ``Scope.every()``); a document outside the scope is "not found".
        """
        from sqlalchemy import text

        from agentrag.retrieval.scope_sql import check_scope, compile_scope

        scope_sql, scope_params = compile_scope(scope)
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    "SELECT c.id AS cid, c.name, c.scoped FROM agentrag.documents d"
                    " JOIN agentrag.collections c ON c.id = d.collection_id WHERE d.id = :id"
                    f" AND ({scope_sql}) FOR UPDATE OF d"
                ),
                {"id": document_id, **scope_params},
            ).first()
            if row is None:
                raise DocumentNotFoundError(f"no document with id {document_id!r}")
            check_scope(scope, [row.name] if row.scoped else [])
            conn.execute(text(WRITE_LOCK_SQL), write_lock_params(row.cid))  # see Store.reembed
            conn.execute(text("DELETE FROM agentrag.documents WHERE id = :id"), {"id": document_id})
            conn.execute(
                text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :id"), {"id": row.cid}
            )

    @guarded("linking a session")
    def link_session(self, document_id: str, session: str) -> None:
        """Make a document visible to a session scope."""
        from sqlalchemy import text
        from sqlalchemy.exc import IntegrityError

        try:
            with self.engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO agentrag.document_sessions (session_id, document_id) VALUES (:s, :d)"
                        " ON CONFLICT DO NOTHING"
                    ),
                    {"s": session, "d": document_id},
                )
        except IntegrityError as exc:
            raise DocumentNotFoundError(f"no document with id {document_id!r}") from exc

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
    def text_index_version(self, collection_id: int) -> int | None:
        """The collection version this store last synced the tsvectors to (None: never)."""
        return self._text_synced.get(int(collection_id))

    @property
    def bm25_cache(self) -> BM25Cache:
        """The lexical leg's BM25 indexes, per collection (:class:`~agentrag.retrieval.lexical.BM25Cache`)."""
        return self._bm25

    # Hybrid (or vector / lexical / lexical_sql) search: ``store.search(query, collections=...)``
    # is :func:`agentrag.retrieval.search.search` with this store as its source; ``asearch``
    # runs it in a worker thread, its options checked at the call.
    search = retrieval_search
    asearch = retrieval_asearch


_DOCUMENT_SQL = """
SELECT d.id, c.name AS collection, d.source, d.original_filename, d.sha256, d.metadata, d.classification,
       d.doc_date AS date, d.tenant_id AS tenant, d.workspace_id AS workspace, d.chunk_count,
       d.created_at, d.updated_at, {text} AS text,
       coalesce((SELECT array_agg(s.session_id ORDER BY s.session_id) FROM agentrag.document_sessions s
                 WHERE s.document_id = d.id), '{{}}') AS sessions
FROM agentrag.documents d JOIN agentrag.collections c ON c.id = d.collection_id
{where}
ORDER BY c.name, d.source
"""


def _document(row: Any) -> Document:
    values = dict(row)
    values["sessions"] = list(values["sessions"] or [])
    return Document(**values)


def connect(url: str | None = None, **options: Any) -> Store:
    """Open a :class:`Store` (see its docstring for the options)."""
    return Store(url, **options)
