"""The lexical leg: BM25 in memory, scopes and filters in SQL; and a pure-SQL tsvector variant.

BM25 (mode ``"lexical"``, and the lexical leg of ``"hybrid"``)
    Each collection's chunks are indexed with :class:`agentrag.retrieval.bm25.BM25Index`, built
    from the chunk texts in PostgreSQL and cached on the :class:`~agentrag.store.store.Store`
    (``store.bm25_cache``: collection id -> index tagged with the ``collections.version`` it was built
    at; every write bumps the version, so a changed collection is rebuilt on its next search).
    Building is serialised per collection; searching a built index is lock-free.

    Memory budget: an index costs memory in every process that searches the collection (about
    700 bytes per chunk of ~750 characters, ``CachedBM25.nbytes``; benchmarks/scale.py). Each
    cache has a per-collection budget (``Store(bm25_memory_budget=...)``, default
    :data:`DEFAULT_BM25_MEMORY_BUDGET`, 4 GiB: about 5M such chunks; None: no limit). Before
    building, the index's size is estimated from the collection's chunk count and text bytes
    (:func:`estimate_bm25_bytes`); after building, it is measured. Either over the budget, the
    index is not kept and the collection is marked :class:`OverBudget` (until its next change):
    the lexical leg of a search over it then runs ``lexical_sql`` (below) instead of BM25, for
    every collection of that search (BM25 and ``ts_rank`` scores do not compare). The switch is
    never silent: ``SearchResult.lexical_fallback`` says why, a warning repeats it, and the
    ``search`` step records it as a degradation (kind ``bm25-over-budget``) on the Context and
    its span.

    The index knows nothing of scopes or filters. The chunks with a positive BM25 score go
    to PostgreSQL in BM25 order (score descending, ties by chunk id) as a JSON array of ids,
    unnested ``WITH ORDINALITY`` and joined to chunks and documents under the scope and filter
    WHERE clauses, ``ORDER BY rank LIMIT depth`` (the ordinality *is* the score order, so this is
    ``ORDER BY score DESC, id``): ranked rows are never filtered in Python. They go in slices of
    the ranking (the first max(:data:`FIRST_SLICE`, 20 x depth) candidates, then 10x more each
    time) until ``depth`` rows passed or every candidate was sent: the same rows as one
    statement over all the candidates, without sending half a million ids for a filter that
    keeps a hundred. With neither scope
    nor filter there is nothing to enforce: the index's top ``depth`` are the leg's result, with
    no round trip (chunks deleted since the index was built are dropped at the hits' fetch).

tsvector (mode ``"lexical_sql"``), for collections too large to hold in memory
    Stored tsvectors (``agentrag.chunk_tsv``, with a GIN index per collection), each chunk analysed in
    its language and the question in each language of the collection
    (:mod:`agentrag.retrieval.text_search`: PostgreSQL's configuration of the language where the
    server has one, ``simple`` over our own bigrams or stems where it has none), ranked with
    ``ts_rank(..., 1)``. English is ``to_tsvector('english', text)`` against
    ``to_tsquery('english', :q)`` as before languages. The tsvectors are computed the first time
    this mode searches a collection and topped up after each change (see
    :meth:`Store.ensure_text_index`), never at ingest: a tsvector for every chunk would cost
    ingestion most of its speed. ``ts_rank(..., 1)`` ranks by term frequency, length-normalised by
    1 + log(length). The English ``:q`` is built with OR semantics (:func:`tsquery_text`): the
    query's words (Unicode NFKC, lower-cased, split on ``\\w+`` like the BM25 tokenizer, our English
    stop words dropped, deduplicated, at most :data:`MAX_TSQUERY_TERMS` of them, each at most 200
    bytes) with every non-alphanumeric character removed, joined by ``" | "``. After that stripping
    no tsquery operator (``& | ! ( ) : * < > ' \\``) can reach the parser, and PostgreSQL's own
    English stemmer, the one the index uses, stems the words. ``plainto_tsquery`` is not used: its
    AND semantics find nothing for most natural-language questions.

    Quality: PostgreSQL's rankers have no IDF, so this ranks below BM25 (BEIR SciFact nDCG@10
    about 0.60 against 0.69; ``ts_rank_cd`` would give 0.31, see benchmarks/HISTORY.md). Use this
    mode only where BM25 cannot be held in memory.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.languages import DEFAULT_LANGUAGE, analyze, analyzer, query_analyzer
from agentrag.retrieval.bm25 import BM25Index, first_ranked
from agentrag.retrieval.text_search import MAX_TSQUERY_TERMS, lexical_sql_leg, tsquery_text

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection, Engine

__all__ = [
    "DEFAULT_BM25_MEMORY_BUDGET",
    "FIRST_SLICE",
    "MAX_TSQUERY_TERMS",
    "BM25Cache",
    "CachedBM25",
    "OverBudget",
    "bm25_index",
    "cached_bm25",
    "estimate_bm25_bytes",
    "lexical_leg",
    "lexical_sql_leg",
    "over_budget",
    "snapshot_bm25",
    "tsquery_text",
]

#: The lexical leg's first slice of BM25 candidates under a scope or filter (at least 20 x depth).
FIRST_SLICE = 2000
#: The default per-collection memory budget of an in-memory BM25 index, in bytes (4 GiB).
DEFAULT_BM25_MEMORY_BUDGET = 4 * 2**30
# estimate_bm25_bytes: fitted on SciFact abstracts and benchmarks/scale.py's chunks (see there)
_BYTES_PER_CHUNK = 100  # the chunk id (a Python str and its pointer) and the per-chunk arrays
_BYTES_PER_TEXT_BYTE = 0.55  # postings (float32 score + int32 row, one per distinct term of a chunk)
_VOCABULARY_BYTES = 1300  # x sqrt(text bytes): Heaps' law (~10 sqrt(bytes) terms, ~130 bytes each)


@dataclass(frozen=True, slots=True)
class CachedBM25:
    """A collection's BM25 index at ``version``; position ``i`` is chunk ``chunk_ids[i]``."""

    collection_id: int
    version: int
    chunk_ids: np.ndarray  # object array of str, aligned with the index positions
    index: BM25Index
    nbytes: int = 0  # the index's own memory, chunk ids included (measured at build)
    #: the documents of the chunks, sorted and unique (UTF-8 bytes), and each position's document
    #: as an offset into them: a scope read as document ids selects its chunks' positions in C
    #: (:func:`agentrag.retrieval.scoped.scope_bm25_leg`). A chunk never changes document (its id
    #: hashes its document's).
    document_keys: np.ndarray | None = None
    document_of: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class OverBudget:
    """A collection whose BM25 index would exceed the cache's memory budget, at ``version``.

    ``nbytes`` is the estimate (``measured=False``, nothing was built) or the size of the index
    that was built and then dropped (``measured=True``).
    """

    collection_id: int
    version: int
    nbytes: int
    budget: int
    measured: bool

    def reason(self, name: str) -> str:
        how = "measured" if self.measured else "estimated"
        return (
            f"collection {name!r}: its BM25 index would take {self.nbytes / 2**20:,.0f} MB ({how}), over "
            f"the memory budget of {self.budget / 2**20:,.0f} MB (Store(bm25_memory_budget=...)); the "
            "lexical leg ran lexical_sql (PostgreSQL full text) instead of BM25"
        )


def estimate_bm25_bytes(chunks: int, text_bytes: int) -> int:
    """The memory an index of ``chunks`` chunks holding ``text_bytes`` bytes of text will take.

    Chunk ids per chunk, postings per byte of text and a vocabulary growing with the square root
    of the text (Heaps' law), fitted to measured ``nbytes``: within about 15 % on English prose.
    The measured size after a build is what finally decides.
    """
    return int(
        chunks * _BYTES_PER_CHUNK
        + text_bytes * _BYTES_PER_TEXT_BYTE
        + _VOCABULARY_BYTES * math.sqrt(max(text_bytes, 0))
    )


def _measure(chunk_ids: np.ndarray, index: BM25Index) -> int:
    import sys

    return index.nbytes + chunk_ids.nbytes + sum(map(sys.getsizeof, chunk_ids))


def _index_on(conn: Connection, collection_id: int) -> CachedBM25:
    """The collection's index as ``conn``'s transaction sees it: its version and its chunks."""
    import numpy as np
    from sqlalchemy import text

    ids: list[str] = []
    documents: list[bytes] = []
    version, declared = conn.execute(
        text("SELECT version, language FROM agentrag.collections WHERE id = :id"), {"id": collection_id}
    ).one_or_none() or (0, None)
    languages, language_of = ([declared], {}) if declared else _document_languages(conn, collection_id)
    rows = conn.execute(  # streamed: this statement's options only (conn may be a search's)
        text(
            "SELECT id, document_id, text FROM agentrag.chunks WHERE collection_id = :id"
            ' ORDER BY id COLLATE "C"'
        ),
        {"id": collection_id},
        execution_options={"stream_results": True, "yield_per": 5000},
    )
    analyze_one = analyzer(languages[0], stop_words=True)

    def tokens() -> Iterator[list[str]]:
        for row in rows:
            ids.append(row.id)
            documents.append(row.document_id.encode("utf-8"))
            if language_of:  # a collection of several languages: each chunk in its document's
                yield analyze(row.text, language_of.get(row.document_id), stop_words=True)
            else:
                yield analyze_one(row.text)

    index = BM25Index.from_tokens(tokens(), query_tokens=query_analyzer(languages, stop_words=True))
    chunk_ids = np.empty(len(ids), dtype=object)
    chunk_ids[:] = ids
    keys, of = np.unique(np.array(documents, dtype=bytes), return_inverse=True)
    document_of = of.astype(np.int32).reshape(-1)
    nbytes = _measure(chunk_ids, index) + keys.nbytes + document_of.nbytes
    return CachedBM25(collection_id, int(version or 0), chunk_ids, index, nbytes, keys, document_of)


def _document_languages(conn: Connection, collection_id: int) -> tuple[list[str], dict[str, str | None]]:
    """The languages of a collection without a declared one, and document id -> its recorded
    language when there are several (empty when one: no chunk needs its own)."""
    from sqlalchemy import text

    found = (
        conn.execute(
            text("SELECT DISTINCT language FROM agentrag.documents WHERE collection_id = :id"),
            {"id": collection_id},
        )
        .scalars()
        .all()
    )
    languages = sorted({code or DEFAULT_LANGUAGE for code in found}) or [DEFAULT_LANGUAGE]
    if len(languages) == 1:
        return languages, {}
    rows = conn.execute(
        text("SELECT id, language FROM agentrag.documents WHERE collection_id = :id"), {"id": collection_id}
    )
    return languages, {row.id: row.language for row in rows}


def _estimate_on(conn: Connection, collection_id: int) -> tuple[int, int]:
    """(collection version, estimated index bytes), read in one statement."""
    from sqlalchemy import text

    row = conn.execute(
        text(
            "SELECT k.version, count(c.id) AS n, coalesce(sum(octet_length(c.text)), 0) AS size"
            " FROM agentrag.collections k LEFT JOIN agentrag.chunks c ON c.collection_id = k.id"
            " WHERE k.id = :id GROUP BY k.version"
        ),
        {"id": collection_id},
    ).one_or_none()
    if row is None:
        return 0, 0
    return int(row.version), estimate_bm25_bytes(int(row.n), int(row.size))


class BM25Cache(dict[int, CachedBM25]):
    """Collection id -> its BM25 index, tagged with the collection version it was built at.

    The owner (a :class:`~agentrag.store.store.Store`) keeps one per instance and drops an
    entry when it deletes the collection; :func:`bm25_index` fills it, one build per collection
    at a time (other collections are not blocked).
    """

    def __init__(self, memory_budget: int | None = DEFAULT_BM25_MEMORY_BUDGET) -> None:
        super().__init__()
        if memory_budget is not None and (type(memory_budget) is not int or memory_budget < 0):
            from agentrag.errors import InvalidInputError

            raise InvalidInputError(
                f"bm25_memory_budget must be an integer number of bytes >= 0 or None, got {memory_budget!r}"
            )
        #: bytes one collection's index may take; None: no limit
        self.memory_budget = memory_budget
        #: collections whose index is over the budget (their lexical leg runs lexical_sql)
        self.over_budget: dict[int, OverBudget] = {}
        self.lock = threading.Lock()
        self.build_locks: dict[int, threading.Lock] = {}

    def drop(self, collection_id: int) -> None:
        """Forget a collection (deleted): its index and its over-budget mark."""
        with self.lock:
            self.pop(collection_id, None)
            self.over_budget.pop(collection_id, None)


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


def over_budget(cache: BM25Cache, collection_id: int, version: int | None) -> OverBudget | None:
    """The collection's over-budget mark if it is at ``version`` or later (any, for None)."""
    with cache.lock:
        entry = cache.over_budget.get(collection_id)
    if entry is not None and (version is None or entry.version >= version):
        return entry
    return None


def bm25_index(cache: BM25Cache, engine: Engine, collection_id: int, version: int) -> CachedBM25 | OverBudget:
    """The cached index of a collection, rebuilt when it is older than ``version``. Thread-safe.

    :class:`OverBudget` instead when the index would exceed ``cache.memory_budget`` (estimated
    before building, measured after; see the module docstring): nothing is kept in memory then.
    Takes a pooled connection to build: never call it while holding one (see :func:`cached_bm25`).
    """
    lock, builds = cache.lock, cache.build_locks

    def current() -> CachedBM25 | OverBudget | None:
        entry = cache.get(collection_id)
        if entry is not None and entry.version >= version:
            return entry
        mark = cache.over_budget.get(collection_id)
        if mark is not None and mark.version >= version:
            return mark
        return None

    with lock:
        found = current()
        if found is not None:
            return found
        build_lock = builds.setdefault(collection_id, threading.Lock())
    with build_lock:  # one build per collection at a time; other collections are not blocked
        with lock:
            found = current()
        if found is not None:
            return found
        # the estimate, the version and the chunks in one snapshot
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            found = _build_within_budget(cache, conn, collection_id, serve_over=False)
            conn.rollback()
        return found


def snapshot_bm25(
    cache: BM25Cache, conn: Connection, collection_id: int, version: int
) -> CachedBM25 | OverBudget:
    """The collection's index at exactly ``version``, the version ``conn``'s snapshot reads.

    The cached one when it is at that version; otherwise built on ``conn``, inside the search's own
    snapshot (its chunk ids are the ones the snapshot sees), and offered to the cache, which keeps
    the newest. For a search that lost the race with writes on every snapshot it took
    (:func:`agentrag.retrieval.legs.snapshot_indexes`): the build holds the search's connection, but
    takes no second one, so a small pool cannot deadlock. Over the memory budget (estimated before,
    measured after) the collection is marked :class:`OverBudget` as :func:`bm25_index` does; an index
    measured over it serves this one search and is not kept.
    """
    entry = cached_bm25(cache, collection_id, version)
    if entry is not None and entry.version == version:
        return entry
    return _build_within_budget(cache, conn, collection_id, serve_over=True)


def _build_within_budget(
    cache: BM25Cache, conn: Connection, collection_id: int, *, serve_over: bool
) -> CachedBM25 | OverBudget:
    """The collection's index built on ``conn`` (as its transaction sees it) under the cache's memory
    budget: estimated first (over it: the collection is marked :class:`OverBudget`, nothing is built),
    measured after (over it: marked, not kept, and returned only when ``serve_over``, for the one
    search that needs this exact version); within it, offered to the cache."""
    budget = cache.memory_budget
    if budget is not None:
        at, estimate = _estimate_on(conn, collection_id)
        if estimate > budget:
            return _mark(cache, OverBudget(collection_id, at, estimate, budget, measured=False))
    built = _index_on(conn, collection_id)
    if budget is None or built.nbytes <= budget:
        _keep(cache, built)
        return built
    mark = _mark(cache, OverBudget(collection_id, built.version, built.nbytes, budget, measured=True))
    return built if serve_over else mark


def _keep(cache: BM25Cache, built: CachedBM25) -> None:
    """Cache ``built`` unless a newer index of its collection is there already."""
    with cache.lock:
        entry = cache.get(built.collection_id)
        if entry is None or entry.version <= built.version:
            cache[built.collection_id] = built
            cache.over_budget.pop(built.collection_id, None)


def _mark(cache: BM25Cache, mark: OverBudget) -> OverBudget:
    with cache.lock:
        entry = cache.over_budget.get(mark.collection_id)
        if entry is None or entry.version <= mark.version:
            cache.over_budget[mark.collection_id] = mark
            cache.pop(mark.collection_id, None)
    return mark


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
    positions, scores = cached.index.match(query)
    n = len(positions)
    # The candidates go in BM25 order (score descending, ties by chunk id: positions follow
    # ``ORDER BY id COLLATE "C"``) as JSON arrays; WITH ORDINALITY carries that order, so
    # ``ORDER BY b.rank`` is ``ORDER BY score DESC, id``. The scores stay here: binding a
    # text[] and a float4[] of thousands of elements costs ~10x more than one JSON string.
    # In slices of the ranking, each 10x the last: the rows of a slice that pass the WHERE
    # clause rank below every row of the slices before, so the leg stops as soon as ``depth``
    # rows passed, exactly as one statement over all the candidates would (a query term in
    # half of a million chunks would otherwise send 500,000 ids for a filter to keep 100).
    sql = _LEXICAL_SQL.format(cid=int(collection_id), where=where)
    found: list[tuple[str, float]] = []
    start, end = 0, min(n, max(FIRST_SLICE, 20 * depth))
    while start < n and len(found) < depth:
        ranked, ranked_scores = first_ranked(positions, scores, end)
        ids = json.dumps(cached.chunk_ids[ranked[start:end]].tolist())
        rows = conn.execute(text(sql), {**params, "ids": ids, "depth": int(depth - len(found))}).all()
        found.extend((row.id, float(ranked_scores[start + row.rank - 1])) for row in rows)
        start, end = end, min(n, end * 10)
    return found
