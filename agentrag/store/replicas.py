"""Read replicas: searches on PostgreSQL streaming replicas, writes on the primary.

``Store(url, read_urls=[...])`` (or ``AGENTRAG_READ_DATABASE_URLS``, comma-separated) opens one
bounded pool per replica. A search takes the next healthy replica in turn (round robin) and runs
there exactly as it would on the primary (the same SQL, read-only); everything else (ingest,
deletes, collections, the tsvector sync, listings) stays on the primary.

Health. A replica whose search fails with a database error (refused connection, a server shut
down mid-query, a recovery conflict) is marked down for ``retry_after`` seconds and the search
runs again on the next replica, then on the primary: no search fails because a replica did. After
``retry_after`` the next search tries the replica again (that search is the health check; a dead
replica costs it one refused connection, bounded by ``connect_timeout``). A fallback is never
silent: ``SearchResult.replica_fallback`` says why, ``warnings`` repeats it, and the ``search``
step records a ``replica-fallback`` degradation on the Context and its span.

Read your writes. With ``read_your_writes=True`` a search that follows a write of this Store
(any commit on the primary's pool) first reads the primary's WAL position
(``pg_current_wal_lsn()``) and waits, polling ``pg_last_wal_replay_lsn()``, until the chosen
replica has replayed it, up to ``replica_wait`` seconds; a replica still behind then is skipped
(recorded as above). Without it, a search may not yet see a write made a moment before
(replication lag, usually milliseconds). A search that needs the lexical tsvectors the primary
has just synced waits for them the same way, whatever the setting.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentrag.errors import (
    CollectionNotFoundError,
    DatabaseUnavailableError,
    InvalidInputError,
    StoreError,
)
from agentrag.retrieval.search import search as retrieval_search

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Engine

    from agentrag.embedders import Embedder
    from agentrag.retrieval.lexical import BM25Cache
    from agentrag.retrieval.result import SearchResult
    from agentrag.retrieval.scope_cache import ScopeCache
    from agentrag.retrieval.sources import SearchSource

__all__ = ["READ_URLS_ENV", "ReadReplicas", "ReplicaRouting", "open_read_replicas", "read_urls_from"]

_log = logging.getLogger("agentrag.store")

READ_URLS_ENV = "AGENTRAG_READ_DATABASE_URLS"
DEFAULT_RETRY_AFTER = 5.0  # seconds a failed replica is left out
DEFAULT_REPLICA_WAIT = 2.0  # seconds a read-your-writes search waits for a replica to catch up
CONNECT_TIMEOUT = 3  # seconds (libpq connect_timeout) before a replica counts as down
_POLL = 0.002


def read_urls_from(read_urls: Sequence[str] | str | None) -> list[str]:
    """The replica URLs: ``read_urls`` as given, else ``AGENTRAG_READ_DATABASE_URLS``.

    A string is split on commas. Refused (InvalidInputError): a URL that is not a PostgreSQL
    URL, so a typo fails at ``Store(...)`` and not on the first search.
    """
    from agentrag.store.server import database_url

    raw: Sequence[str]
    if read_urls is None:
        raw = [u for u in os.environ.get(READ_URLS_ENV, "").split(",") if u.strip()]
    elif isinstance(read_urls, str):
        raw = [u for u in read_urls.split(",") if u.strip()]
    else:
        raw = list(read_urls)
    urls: list[str] = []
    for url in raw:
        if not isinstance(url, str) or not url.strip().startswith(("postgres://", "postgresql")):
            raise InvalidInputError(
                f"read_urls takes PostgreSQL URLs (postgresql://user@host:port/db), got {url!r}"
                f" (from {'the ' + READ_URLS_ENV + ' variable' if read_urls is None else 'read_urls'})"
            )
        urls.append(database_url(url.strip()))
    return urls


class _ReplicaSource:
    """The store as a search sees it, with its connections taken from one replica's pool."""

    def __init__(self, store: Any, replicas: ReadReplicas, index: int) -> None:
        self._store = store
        self._replicas = replicas
        self._index = index

    @property
    def engine(self) -> Engine:
        return self._replicas.engines[self._index]

    @property
    def embedder(self) -> Embedder:
        embedder: Embedder = self._store.embedder
        return embedder

    @property
    def bm25_cache(self) -> BM25Cache:
        cache: BM25Cache = self._store.bm25_cache
        return cache

    @property
    def scope_cache(self) -> ScopeCache:
        cache: ScopeCache = self._store.scope_cache  # keyed by the state this replica's snapshot reads
        return cache

    def embed_queries(self, texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
        vectors: np.ndarray = self._store.embed_queries(texts, embedder)
        return vectors

    def query_embedders(
        self, names: Sequence[str], records: Iterable[Any] | None = None
    ) -> dict[str, Embedder]:
        embedders: dict[str, Embedder] = self._store.query_embedders(names, records)
        return embedders

    def ensure_text_index(self, collection_id: int, version: int | None = None) -> None:
        # the tsvectors are written on the primary; this search reads them here, once replayed
        self._store.ensure_text_index(collection_id, version)
        if not self._replicas.caught_up(self._index, self._replicas.primary_lsn()):
            raise DatabaseUnavailableError("the replica had not replayed the primary's tsvector sync in time")


class ReadReplicas:
    """The replicas' pools, their health, and the primary's write position (see the module docstring)."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        primary: Engine,
        pool_size: int,
        max_overflow: int,
        read_your_writes: bool = False,
        retry_after: float = DEFAULT_RETRY_AFTER,
        replica_wait: float = DEFAULT_REPLICA_WAIT,
    ) -> None:
        from sqlalchemy import event

        from agentrag.store.connection import open_engine, register_vector

        if type(read_your_writes) is not bool:
            raise InvalidInputError(f"read_your_writes must be True or False, got {read_your_writes!r}")
        for name, value in (("replica_retry_after", retry_after), ("replica_wait", replica_wait)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidInputError(f"{name} must be a number of seconds >= 0, got {value!r}")
        self.urls = list(urls)
        self.primary = primary
        self.read_your_writes = read_your_writes
        self.retry_after = float(retry_after)
        self.replica_wait = float(replica_wait)
        self.engines: list[Engine] = []
        for url in self.urls:
            engine = open_engine(
                url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                connect_args={"connect_timeout": CONNECT_TIMEOUT},
            )
            event.listen(engine, "connect", register_vector)
            self.engines.append(engine)
        self._lock = threading.Lock()
        self._next = 0
        self._down_until = [0.0] * len(self.engines)
        self._wrote = True  # the first read-your-writes search reads the primary's position once
        event.listen(primary, "commit", self._note_commit)

    # ---- bookkeeping ------------------------------------------------------------------------
    def _note_commit(self, _conn: Any) -> None:
        self._wrote = True

    def names(self) -> list[str]:
        """Each replica's host:port/database, no credentials (for results, logs and spans)."""
        out = []
        for engine in self.engines:
            u = engine.url
            host = u.host or str(u.query.get("host", "local socket"))
            out.append(f"{host}{':' + str(u.port) if u.port else ''}/{u.database}")
        return out

    def order(self) -> list[int]:
        """The replicas to try for the next search: healthy ones in round-robin order, then any
        marked down whose time out is over (they are tried again)."""
        now = time.monotonic()
        with self._lock:
            n = len(self.engines)
            start = self._next
            self._next = (self._next + 1) % n
            return [i for i in ((start + k) % n for k in range(n)) if self._down_until[i] <= now]

    def mark_down(self, index: int, why: str) -> None:
        with self._lock:
            self._down_until[index] = time.monotonic() + self.retry_after
        _log.warning("read replica %s left out for %.0f s: %s", self.names()[index], self.retry_after, why)

    def healthy(self) -> list[bool]:
        now = time.monotonic()
        with self._lock:
            return [until <= now for until in self._down_until]

    def primary_lsn(self) -> str:
        """The primary's current WAL position (at or past every commit made so far)."""
        from sqlalchemy import text

        self._wrote = False  # a commit after this read sets it again
        with self.primary.connect() as conn:
            lsn: str = conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one()
        return lsn

    def caught_up(self, index: int, lsn: str) -> bool:
        """Whether replica ``index`` has replayed ``lsn``, waiting up to ``replica_wait`` seconds."""
        from sqlalchemy import text

        deadline = time.monotonic() + self.replica_wait
        with self.engines[index].connect() as conn:
            query = text("SELECT pg_last_wal_replay_lsn() >= CAST(:lsn AS pg_lsn)")
            while True:
                if conn.execute(query, {"lsn": lsn}).scalar():
                    return True
                conn.rollback()
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)

    def close(self) -> None:
        for engine in self.engines:
            engine.dispose()

    # ---- routing ----------------------------------------------------------------------------
    def run(
        self, store: SearchSource, call: Callable[..., SearchResult], query: str, options: dict[str, Any]
    ) -> SearchResult:
        """``call(source, query, **options)`` on a replica, else on the primary (see the module docstring)."""
        names = self.names()
        why: list[str] = []
        lsn = self.primary_lsn() if self.read_your_writes and self._wrote else None
        for index in self.order():
            try:
                if lsn is not None and not self.caught_up(index, lsn):
                    why.append(
                        f"replica {names[index]} had not replayed this session's writes"
                        f" in {self.replica_wait:g} s"
                    )
                    continue
                result = call(_ReplicaSource(store, self, index), query, **options)
            except CollectionNotFoundError:
                why.append(f"replica {names[index]} does not have the collection yet")
                continue
            except StoreError as exc:
                if type(exc) not in (StoreError, DatabaseUnavailableError):
                    raise  # a typed answer (no such document ...), not the replica's health
                code = getattr(exc, "sqlstate", None)
                what = f"{type(exc).__name__}, SQLSTATE {code}" if code else type(exc).__name__
                self.mark_down(index, what)
                why.append(f"replica {names[index]} failed ({what})")
                continue
            except Exception as exc:
                from agentrag.retrieval.dberrors import is_driver_error

                if not is_driver_error(exc):
                    raise
                self.mark_down(index, type(exc).__name__)
                why.append(f"replica {names[index]} failed ({type(exc).__name__})")
                continue
            served = replace(result, served_by=f"replica {names[index]}")
            return _noted(served, why) if why else served
        if not why:
            why.append("every read replica is marked down")
        return _noted(call(store, query, **options), why)


def _noted(result: SearchResult, why: list[str]) -> SearchResult:
    reason = "; ".join(why)
    _log.warning("search fell back from its read replica: %s", reason)
    return replace(result, replica_fallback=reason, warnings=(*result.warnings, reason))


def open_read_replicas(
    read_urls: Sequence[str] | str | None,
    primary: Engine,
    read_your_writes: bool,
    pool_size: int,
    max_overflow: int,
) -> ReadReplicas | None:
    """The store's replicas (None without any): ``read_urls``, else ``AGENTRAG_READ_DATABASE_URLS``."""
    urls = read_urls_from(read_urls)
    if not urls:
        if read_your_writes is not False:
            raise InvalidInputError(
                "read_your_writes needs read replicas (read_urls or " + READ_URLS_ENV + ")"
            )
        return None
    return ReadReplicas(
        urls,
        primary=primary,
        pool_size=pool_size,
        max_overflow=max_overflow,
        read_your_writes=read_your_writes,
    )


class ReplicaRouting:
    """``Store.search`` / ``Store.asearch``: :func:`agentrag.retrieval.search.search` with the store
    as its source, on a read replica when the store has any (:class:`ReadReplicas`)."""

    replicas: ReadReplicas | None = None

    def search(self, query: str, /, **options: Any) -> SearchResult:
        if self.replicas is None:
            return retrieval_search(self, query, **options)
        return self.replicas.run(self, retrieval_search, query, options)  # type: ignore[arg-type]

    def asearch(self, query: str, /, **options: Any) -> Coroutine[Any, Any, SearchResult]:
        """:meth:`search` in a worker thread (``asyncio.to_thread``), for async applications.

        The options are checked now, so an unknown one raises ``TypeError`` at the call.
        """
        inspect.signature(retrieval_search).bind(self, query, **options)
        return asyncio.to_thread(self.search, query, **options)


# help(Store.search) and inspect.signature show the search's own documentation and options
ReplicaRouting.search.__doc__ = retrieval_search.__doc__
setattr(ReplicaRouting.search, "__wrapped__", retrieval_search)  # noqa: B010 - a function attribute
