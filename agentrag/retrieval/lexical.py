"""The lexical leg: BM25 in memory, scopes and filters in SQL; and a pure-SQL tsvector variant.

BM25 (mode ``"lexical"``, and the lexical leg of ``"hybrid"``)
    Each collection's chunks are indexed with :class:`agentrag.retrieval.bm25.BM25Index`, built
    from the chunk texts in PostgreSQL and cached on the :class:`~agentrag.store.store.Store`
    (``store.bm25_cache``: collection id -> index tagged with the ``collections.version`` it was built
    at; every write bumps the version, so a changed collection is rebuilt on its next search).
    Building is serialised per collection; searching a built index is lock-free.

    The index knows nothing of scopes or filters. Every chunk with a positive BM25 score goes
    to PostgreSQL in BM25 order (score descending, ties by chunk id) as one JSON array of ids,
    unnested ``WITH ORDINALITY`` and joined to chunks and documents under the scope and filter
    WHERE clauses, ``ORDER BY rank LIMIT depth`` (the ordinality *is* the score order, so this is
    ``ORDER BY score DESC, id``): ranked rows are never filtered in Python. With neither scope
    nor filter there is nothing to enforce: the index's top ``depth`` are the leg's result, with
    no round trip (chunks deleted since the index was built are dropped at the hits' fetch).

tsvector (mode ``"lexical_sql"``), for collections too large to hold in memory
    Stored ``to_tsvector('english', text)`` values (``agentrag.chunk_tsv``, with a GIN index per
    collection) matched against ``to_tsquery('english', :q)`` and ranked with ``ts_rank(..., 1)``.
    They are computed the first time this mode searches a collection and topped up after each
    change (see :meth:`Store.ensure_text_index`), never at ingest: a tsvector for every chunk
    would cost ingestion most of its speed. ``ts_rank(..., 1)`` ranks by term frequency,
    length-normalised by 1 + log(length). ``:q`` is built here with OR semantics: the query's
    words (Unicode NFKC, lower-cased, split on ``\\w+`` like the BM25 tokenizer, our English stop
    words dropped, deduplicated, at most :data:`MAX_TSQUERY_TERMS` of them, each at most 200 bytes) with every
    non-alphanumeric character removed, joined by ``" | "``. After that stripping no tsquery
    operator (``& | ! ( ) : * < > ' \\``) can reach the parser, and PostgreSQL's own English
    stemmer, the one the index uses, stems the words. ``plainto_tsquery`` is not used: its
    AND semantics find nothing for most natural-language questions.

    Quality: PostgreSQL's rankers have no IDF, so this ranks below BM25 (BEIR SciFact nDCG@10
    about 0.60 against 0.69; ``ts_rank_cd`` would give 0.31, see benchmarks/RESULTS.md). Use this
    mode only where BM25 cannot be held in memory.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.retrieval.bm25 import BM25Index
from agentrag.retrieval.tokenize import STOPWORDS_EN

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection, Engine

__all__ = [
    "MAX_TSQUERY_TERMS",
    "BM25Cache",
    "CachedBM25",
    "bm25_index",
    "cached_bm25",
    "lexical_leg",
    "lexical_sql_leg",
    "tsquery_text",
]

MAX_TSQUERY_TERMS = 256
_MAX_TERM_BYTES = 200  # PostgreSQL refuses tsquery words over 2047 bytes; real words are far shorter
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class CachedBM25:
    """A collection's BM25 index at ``version``; position ``i`` is chunk ``chunk_ids[i]``."""

    collection_id: int
    version: int
    chunk_ids: np.ndarray  # object array of str, aligned with the index positions
    index: BM25Index


def _build(engine: Engine, collection_id: int) -> CachedBM25:
    """Read the version and the chunks in one snapshot and index the texts."""
    import numpy as np
    from sqlalchemy import text

    ids: list[str] = []

    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        version = conn.execute(
            text("SELECT version FROM agentrag.collections WHERE id = :id"), {"id": collection_id}
        ).scalar()
        rows = conn.execution_options(stream_results=True, yield_per=5000).execute(
            text('SELECT id, text FROM agentrag.chunks WHERE collection_id = :id ORDER BY id COLLATE "C"'),
            {"id": collection_id},
        )

        def texts() -> Iterator[str]:
            for row in rows:
                ids.append(row.id)
                yield row.text

        index = BM25Index.build(texts())
        conn.rollback()
    chunk_ids = np.empty(len(ids), dtype=object)
    chunk_ids[:] = ids
    return CachedBM25(collection_id, int(version or 0), chunk_ids, index)


class BM25Cache(dict[int, CachedBM25]):
    """Collection id -> its BM25 index, tagged with the collection version it was built at.

    The owner (a :class:`~agentrag.store.store.Store`) keeps one per instance and drops an
    entry when it deletes the collection; :func:`bm25_index` fills it, one build per collection
    at a time (other collections are not blocked).
    """

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.build_locks: dict[int, threading.Lock] = {}


def cached_bm25(cache: BM25Cache, collection_id: int, version: int | None) -> CachedBM25 | None:
    """The cached index of a collection if it is at ``version`` or later (any, for None); never builds.

    A search holding a pooled connection asks this, never :func:`bm25_index`: building reads the
    chunks on a connection of its own, and waiting for a second connection while holding one
    deadlocks a small or busy pool. The search builds with :func:`bm25_index` before checkout.
    """
    with cache.lock:
        entry = cache.get(collection_id)
    if entry is not None and (version is None or entry.version >= version):
        return entry
    return None


def bm25_index(cache: BM25Cache, engine: Engine, collection_id: int, version: int) -> CachedBM25:
    """The cached index of a collection, rebuilt when it is older than ``version``. Thread-safe.

    Takes a pooled connection to build: never call it while holding one (see :func:`cached_bm25`).
    """
    lock, builds = cache.lock, cache.build_locks
    with lock:
        entry = cache.get(collection_id)
        if entry is not None and entry.version >= version:
            return entry
        build_lock = builds.setdefault(collection_id, threading.Lock())
    with build_lock:  # one build per collection at a time; other collections are not blocked
        with lock:
            entry = cache.get(collection_id)
        if entry is not None and entry.version >= version:
            return entry
        built = _build(engine, collection_id)
        with lock:
            current = cache.get(collection_id)
            if current is None or current.version <= built.version:
                cache[collection_id] = built
        return built


_LEXICAL_SQL = """
SELECT b.id, b.rank
FROM jsonb_array_elements_text(CAST(:ids AS jsonb)) WITH ORDINALITY AS b(id, rank)
JOIN agentrag.chunks c ON c.id = b.id
JOIN agentrag.documents d ON d.id = c.document_id
WHERE c.collection_id = {cid} AND ({where})
ORDER BY b.rank
LIMIT :depth
"""


def lexical_leg(
    conn: Connection,
    cached: CachedBM25,
    *,
    collection_id: int,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
) -> list[tuple[str, float]]:
    """``[(chunk_id, bm25_score), ...]`` best first, at most ``depth``, for one collection.

    ``cached`` is the collection's index (:func:`cached_bm25`); the leg itself only runs SQL on
    ``conn``.
    """
    from sqlalchemy import text

    if where.strip() == "TRUE":
        # Nothing to enforce: the index holds exactly the collection's chunks at ``version`` (or
        # later), so its top ``depth`` are the answer without a round trip. A chunk deleted since
        # is dropped when the hits are fetched, as in the vector leg.
        positions, scores = cached.index.top(query, depth)
        return [(str(i), float(s)) for i, s in zip(cached.chunk_ids[positions], scores, strict=True)]
    positions, scores = cached.index.scores(query)
    if len(positions) == 0:
        return []
    # The candidates go in BM25 order (score descending, ties by chunk id: positions follow
    # ``ORDER BY id COLLATE "C"``) as one JSON array; WITH ORDINALITY carries that order, so
    # ``ORDER BY b.rank`` is ``ORDER BY score DESC, id``. The scores stay here: binding a
    # text[] and a float4[] of thousands of elements costs ~10x more than one JSON string.
    ids = json.dumps(cached.chunk_ids[positions].tolist())
    sql = _LEXICAL_SQL.format(cid=int(collection_id), where=where)
    rows = conn.execute(text(sql), {**params, "ids": ids, "depth": int(depth)}).all()
    return [(row.id, float(scores[row.rank - 1])) for row in rows]


def tsquery_text(query: str) -> str:
    """The OR tsquery source for ``query`` (see the module docstring); ``""`` when no word is left."""
    if not query.isascii():
        query = unicodedata.normalize("NFKC", query)
    terms: dict[str, None] = {}
    for word in _WORDS.findall(query.lower()):
        term = "".join(ch for ch in word if ch.isalnum())
        if len(term) < 2 or term in STOPWORDS_EN or len(term.encode("utf-8", "ignore")) > _MAX_TERM_BYTES:
            continue
        if not term.isascii():
            try:
                term.encode("utf-8")
            except UnicodeEncodeError:  # pragma: no cover - isalnum() excludes surrogates
                continue
        terms[term] = None
        if len(terms) >= MAX_TSQUERY_TERMS:
            break
    return " | ".join(terms)


_LEXICAL_TS_SQL = """
SELECT c.id, ts_rank(t.tsv, q, 1) AS score
FROM agentrag.chunk_tsv t
JOIN agentrag.chunks c ON c.id = t.chunk_id
JOIN agentrag.documents d ON d.id = c.document_id,
     to_tsquery('english', :tsq) AS q
WHERE t.collection_id = {cid} AND t.tsv @@ q AND ({where})
ORDER BY score DESC, c.id COLLATE "C"
LIMIT :depth
"""


def lexical_sql_leg(
    conn: Connection,
    *,
    collection_id: int,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
) -> list[tuple[str, float]]:
    """``[(chunk_id, ts_rank), ...]`` best first, at most ``depth``, for one collection."""
    from sqlalchemy import text

    tsq = tsquery_text(query)
    if not tsq:
        return []
    sql = _LEXICAL_TS_SQL.format(cid=int(collection_id), where=where)
    rows = conn.execute(text(sql), {**params, "tsq": tsq, "depth": int(depth)}).all()
    return [(row.id, float(row.score)) for row in rows]
