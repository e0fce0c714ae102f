"""In-memory BM25 over the chunks of a collection: the lexical leg's scorer.

The index knows chunks only by *position* (0..n-1 in the order given to
:meth:`BM25Index.build`); scopes and filters are applied afterwards in SQL, so
:meth:`BM25Index.scores` returns every chunk with a positive score, as two numpy arrays
(positions ``int64``, scores ``float32``) sorted by score descending, ties by position
ascending. :meth:`BM25Index.top` is the same, truncated, for when nothing restricts the
result::

    index = BM25Index.build(chunk_texts)
    positions, scores = index.scores("statins lower LDL cholesterol")
    positions, scores = index.top("statins lower LDL cholesterol", 100)

Chunks and queries go through the same tokenizer, :func:`agentrag.retrieval.tokenize.tokenize`.
A query duplicating a word counts it twice (as bm25s, rank_bm25 and Lucene do).

Backends (same tokens, same API):

``"bm25s"`` (default)
    bm25s' sparse matrix of precomputed per-(term, chunk) BM25 scores; a query sums the
    columns of its terms. The matrix is computed here in numpy, in bm25s' own arithmetic (the
    same float64 terms rounded once to float32: equal arrays, tests/test_bm25.py compares them
    with bm25s'), so a search process never imports bm25s and the scipy it imports (issue #39:
    0.3-0.5 s of a CLI search's cold start). ``method`` picks the BM25 variant (Kamphuis et al. 2020):
    ``"lucene"`` (default; idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf part
    tf / (tf + k1 (1 - b + b dl / avgdl))), ``"robertson"`` (idf = ln((N - df + 0.5) /
    (df + 0.5)), clamped at 0) or ``"atire"`` (idf = ln(N / df), tf part times k1 + 1).
    BM25L and BM25+ are not offered: they give chunks *without* any query term a
    positive score, which defeats "return the matching chunks".
``"rank_bm25"``
    ``rank_bm25.BM25Okapi`` as the reference implementation: idf = ln((N - df + 0.5) /
    (df + 0.5)) with negative values replaced by 0.25 x the mean idf, tf part times
    k1 + 1. Its only ``method`` is ``"okapi"``. Ranks like bm25s' ``"robertson"`` (scores
    times k1 + 1) while every query term is in fewer than half of the chunks; a term in
    exactly half scores 0 (so its chunks are not returned), and on tiny corpora the floor
    itself can be negative. It scores a query in pure Python over every chunk
    (O(chunks x query terms)) and keeps a dict per chunk: fine for a few thousand chunks,
    slow for hundreds of thousands (about 1 s per query at 300k chunks).

numpy and rank_bm25 are imported when an index is built, not when this module is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

from agentrag.retrieval.tokenize import tokenize

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Positions: TypeAlias = NDArray[np.int64]
    Scores: TypeAlias = NDArray[np.float32]

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "BM25Index", "Backend", "first_ranked"]

Backend: TypeAlias = Literal["bm25s", "rank_bm25"]

#: The backend :meth:`BM25Index.build` uses unless told otherwise: the same nDCG@10 as bm25s' own
#: pipeline on SciFact and ~100x rank_bm25's speed (benchmarks/HISTORY.md, "Retired experiments").
DEFAULT_BACKEND: Final[Backend] = "bm25s"

#: The BM25 variants each backend implements; the first is its default.
BACKENDS: Final[dict[str, tuple[str, ...]]] = {
    "bm25s": ("lucene", "robertson", "atire"),
    "rank_bm25": ("okapi",),
}


class _Scorer(Protocol):
    """What a backend does: index tokenized texts, score a tokenized query against all of them."""

    n_docs: int
    n_tokens: int

    @property
    def vocab_size(self) -> int: ...

    @property
    def nbytes(self) -> int:
        """The memory the scorer holds (arrays, vocabulary), in bytes."""
        ...

    def match(self, tokens: list[str]) -> tuple[Positions, Scores]:
        """Chunks with a positive score, unique, in no particular order."""
        ...


#: bm25s' idf variants (bm25s.scoring._score_idf_*), in its arithmetic: Python floats.
_IDF = {
    "lucene": lambda df, n: math.log(1 + (n - df + 0.5) / (df + 0.5)),
    "robertson": lambda df, n: math.log(max((n - df + 0.5) / (df + 0.5), 1)),
    "atire": lambda df, n: math.log(n / df),
}


def score_matrix(
    ids: list[list[int]], n_vocab: int, *, k1: float, b: float, method: str
) -> tuple[Any, Any, Any]:
    """bm25s' ``BM25(k1, b, method).index((ids, vocab))`` scores as CSC ``(data, rows, indptr)``:
    one column of postings per term, rows ascending. Each posting's score is computed as bm25s
    computes it (idf stored as float32, the tf part in float64 against the float64 mean length,
    their product rounded to float32), vectorized over the postings instead of per chunk."""
    import numpy as np

    lengths = np.array([len(doc) for doc in ids])
    avg = lengths.mean()  # np.float64, as bm25s computes it
    flat = np.fromiter((t for doc in ids for t in doc), dtype=np.int64, count=int(lengths.sum()))
    chunk = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    keys, counts = np.unique((flat << 32) | chunk, return_counts=True)  # sorted: by term, then chunk
    cols, rows = keys >> 32, keys & 0xFFFFFFFF
    df = np.bincount(cols, minlength=n_vocab)
    idf_of = _IDF[method]
    n = len(ids)
    idf = np.array([idf_of(int(d), n) if d else 0.0 for d in df.tolist()], dtype=np.float32)
    tf = counts.astype(np.float32)
    norm = (1 - b) + b * lengths[rows] / avg
    tfc = tf * np.float32(k1 + 1) / (tf + k1 * norm) if method == "atire" else tf / (k1 * norm + tf)
    data = (idf[cols].astype(np.float64) * tfc).astype(np.float32)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return data, rows.astype(np.int32), indptr


def _dict_bytes(mapping: dict[str, Any]) -> int:
    """A dict's own memory plus its keys' and values' (shared small objects counted each time)."""
    import sys

    getsize = sys.getsizeof
    return getsize(mapping) + sum(getsize(k) + getsize(v) for k, v in mapping.items())


def _empty() -> tuple[Positions, Scores]:
    import numpy as np

    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)


class _Bm25sScorer:
    """bm25s' sparse matrix of precomputed scores, read column by column (one per term)."""

    # Below this many postings per chunk, sum the postings sparsely (sort + segment sum)
    # instead of into a dense array over every chunk.
    _SPARSE_RATIO = 16

    def __init__(self, docs: Iterable[list[str]], *, k1: float, b: float, method: str) -> None:
        import numpy as np

        # Each text's tokens go straight to token ids: the token strings of the whole corpus are
        # never all held at once (they would double the peak memory of a build).
        vocab: dict[str, int] = {}
        setdefault = vocab.setdefault
        ids = [[setdefault(token, len(vocab)) for token in tokens] for tokens in docs]
        self.n_docs = len(ids)
        self.n_tokens = sum(map(len, ids))
        self._vocab = vocab
        if vocab:
            data, rows, indptr = score_matrix(ids, len(vocab), k1=k1, b=b, method=method)
            del ids
        else:
            data, rows, indptr = [], [], [0]
        self._data: NDArray[np.float32] = np.ascontiguousarray(data, dtype=np.float32)
        self._rows: NDArray[np.int32] = np.ascontiguousarray(rows, dtype=np.int32)
        self._indptr: NDArray[np.int64] = np.ascontiguousarray(indptr, dtype=np.int64)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def nbytes(self) -> int:
        arrays = self._data.nbytes + self._rows.nbytes + self._indptr.nbytes
        return arrays + _dict_bytes(self._vocab)

    def match(self, tokens: list[str]) -> tuple[Positions, Scores]:
        import numpy as np

        vocab, indptr = self._vocab, self._indptr
        spans = [
            (int(indptr[i]), int(indptr[i + 1])) for i in (vocab.get(t) for t in tokens) if i is not None
        ]
        if not spans:
            return _empty()
        rows: NDArray[np.int32]
        if len(spans) == 1:
            lo, hi = spans[0]
            rows, vals = self._rows[lo:hi], self._data[lo:hi]
            keep = vals > 0
            return rows[keep].astype(np.int64), vals[keep].copy()
        rows = np.concatenate([self._rows[lo:hi] for lo, hi in spans])
        data = np.concatenate([self._data[lo:hi] for lo, hi in spans])
        if len(rows) * self._SPARSE_RATIO < self.n_docs:
            uniq, inverse = np.unique(rows, return_inverse=True)
            summed = np.bincount(inverse, weights=data, minlength=len(uniq)).astype(np.float32)
            keep = summed > 0
            return uniq[keep].astype(np.int64), summed[keep]
        dense = np.bincount(rows, weights=data, minlength=self.n_docs).astype(np.float32)
        positions = np.flatnonzero(dense > 0)
        return positions.astype(np.int64, copy=False), dense[positions]


class _RankBm25Scorer:
    """rank_bm25.BM25Okapi, the reference: a Python loop over every chunk per query term."""

    def __init__(self, tokenized: Iterable[list[str]], *, k1: float, b: float) -> None:
        docs = list(tokenized)
        self.n_docs = len(docs)
        self.n_tokens = sum(map(len, docs))
        self._model: Any = None  # BM25Okapi divides by zero on a corpus without tokens
        if self.n_tokens:
            from rank_bm25 import BM25Okapi

            self._model = BM25Okapi(docs, k1=k1, b=b)

    @property
    def vocab_size(self) -> int:
        return 0 if self._model is None else len(self._model.idf)

    @property
    def nbytes(self) -> int:
        if self._model is None:
            return 0
        return _dict_bytes(self._model.idf) + sum(map(_dict_bytes, self._model.doc_freqs))

    def match(self, tokens: list[str]) -> tuple[Positions, Scores]:
        import numpy as np

        if self._model is None:
            return _empty()
        idf = self._model.idf
        known = [t for t in tokens if t in idf]  # unknown terms add 0 to every chunk
        if not known:
            return _empty()
        dense = np.asarray(self._model.get_scores(known), dtype=np.float32)
        positions = np.flatnonzero(dense > 0)
        return positions.astype(np.int64, copy=False), dense[positions]


def first_ranked(positions: Positions, scores: Scores, k: int) -> tuple[Positions, Scores]:
    """The first ``k`` of (positions, scores) in rank order: score descending, ties by position.

    Exactly the first ``k`` of the whole ranking (a prefix of :meth:`BM25Index.scores`), in
    O(n + k log k) rather than a sort of all ``n``.
    """
    import numpy as np

    if len(scores) > k:
        if k <= 0:
            return _empty()
        # Keep every score >= the k-th best (ties at the cut included), then order those.
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        positions, scores = positions[keep], scores[keep]
    order = np.lexsort((positions, -scores))[:k]
    return positions[order], scores[order]


class BM25Index:
    """BM25 over a fixed list of texts; immutable once built, safe to query from many threads.

    Build with :meth:`build`. ``len(index)`` is the number of texts (chunks) indexed.
    """

    __slots__ = ("_avg_doc_len", "_n_docs", "_query_tokens", "_scorer", "b", "backend", "k1", "method")

    def __init__(
        self,
        scorer: _Scorer,
        *,
        n_docs: int,
        avg_doc_len: float,
        backend: Backend,
        method: str,
        k1: float,
        b: float,
        query_tokens: Callable[[str], list[str]] = tokenize,
    ) -> None:
        self._scorer = scorer
        self._query_tokens = query_tokens
        self._n_docs = n_docs
        self._avg_doc_len = avg_doc_len
        self.backend: Backend = backend
        self.method = method
        self.k1 = k1
        self.b = b

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str | None = None,
        backend: Backend = DEFAULT_BACKEND,
    ) -> BM25Index:
        """Tokenize (English) and index ``texts``; position ``i`` in results is ``texts[i]``.

        ``k1=1.5, b=0.75`` are the defaults of bm25s and rank_bm25 (Lucene's are 1.2 / 0.75).
        ``method`` is the BM25 variant, one of ``BACKENDS[backend]``; None means that
        backend's default (``"lucene"`` for bm25s, ``"okapi"`` for rank_bm25).
        Raises ``TypeError`` for an unknown backend or method, ``ValueError`` for k1 < 0 or
        b outside [0, 1].
        """
        return cls.from_tokens(map(tokenize, texts), k1=k1, b=b, method=method, backend=backend)

    @classmethod
    def from_tokens(
        cls,
        docs: Iterable[list[str]],
        *,
        query_tokens: Callable[[str], list[str]] = tokenize,
        k1: float = 1.5,
        b: float = 0.75,
        method: str | None = None,
        backend: Backend = DEFAULT_BACKEND,
    ) -> BM25Index:
        """Index texts tokenized already (``docs``: one token list per text, e.g. each in its own
        language, :func:`agentrag.languages.analyze`); ``query_tokens`` tokenizes a query the same
        way. Otherwise as :meth:`build`."""
        if backend not in BACKENDS:
            raise TypeError(f"unknown BM25 backend {backend!r}; expected one of {sorted(BACKENDS)}")
        methods = BACKENDS[backend]
        if method is None:
            method = methods[0]
        elif method not in methods:
            raise TypeError(f"BM25 backend {backend!r} has no method {method!r}; expected one of {methods}")
        if not (math.isfinite(k1) and k1 >= 0):
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not (0 <= b <= 1):
            raise ValueError(f"b must be in [0, 1], got {b!r}")

        scorer: _Scorer
        if backend == "bm25s":
            scorer = _Bm25sScorer(docs, k1=k1, b=b, method=method)
        else:
            scorer = _RankBm25Scorer(docs, k1=k1, b=b)
        n_docs = scorer.n_docs
        return cls(
            scorer,
            n_docs=n_docs,
            avg_doc_len=scorer.n_tokens / n_docs if n_docs else 0.0,
            backend=backend,
            method=method,
            k1=k1,
            b=b,
            query_tokens=query_tokens,
        )

    def __len__(self) -> int:
        return self._n_docs

    @property
    def avg_doc_len(self) -> float:
        """Mean number of tokens per indexed text (after stop words)."""
        return self._avg_doc_len

    @property
    def vocab_size(self) -> int:
        """Number of distinct tokens (stems) in the index."""
        return self._scorer.vocab_size

    @property
    def nbytes(self) -> int:
        """The memory the index holds (postings, vocabulary), in bytes; computed on each call."""
        return self._scorer.nbytes

    def scores(self, query: str) -> tuple[Positions, Scores]:
        """Every chunk with a score > 0 for ``query``: (positions, scores), best first.

        Ties are ordered by position. A query with no indexed token (only stop words,
        punctuation, unknown words) gives two empty arrays.
        """
        import numpy as np

        positions, scores = self._scorer.match(self._query_tokens(query))
        order = np.lexsort((positions, -scores))
        return positions[order], scores[order]

    def top(self, query: str, k: int) -> tuple[Positions, Scores]:
        """The first ``k`` of :meth:`scores` (fewer if fewer chunks match), computed faster."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k!r}")
        return first_ranked(*self.match(query), k)

    def match(self, query: str) -> tuple[Positions, Scores]:
        """Every chunk with a score > 0 for ``query``, unordered: rank them with :func:`first_ranked`."""
        return self._scorer.match(self._query_tokens(query))

    def __repr__(self) -> str:
        return (
            f"BM25Index(backend={self.backend!r}, method={self.method!r}, k1={self.k1}, b={self.b}, "
            f"docs={self._n_docs}, vocab={self.vocab_size}, avg_doc_len={self._avg_doc_len:.1f})"
        )
