"""Run an evaluation: load a BEIR dataset into a collection, search (or run a pipeline) per query, score.

::

    from agentrag.eval import compare, evaluate, ingest_beir, load_beir

    data = load_beir("/data/beir/scifact")
    ingest_beir(store, data, "scifact")                       # idempotent: unchanged documents are skipped
    reports = [evaluate(store, data, "scifact", mode=m) for m in ("vector", "lexical", "hybrid")]
    compare(reports)

* :func:`ingest_beir` indexes one chunk per document (``chunk_size=20000``; embedding models read
  the first few hundred word pieces anyway, as in the published BEIR figures), the document's
  ``source`` being its BEIR id. Re-running it is cheap: the store's content addressing skips
  documents whose text is unchanged.
* :func:`evaluate` runs every query one at a time, in order, after an untimed warm-up (the
  embedder on every query, then ``warmup`` queries: model load, BM25 index build). A query's
  ranking is its hits mapped to BEIR document ids (``Hit.source``), each document kept once at
  its best rank. Latency is wall clock per query.
  With ``pipeline``, each query runs ``pipeline(new(query, store=..., collections=[collection]))``
  and the answer metrics ``citation_precision`` (valid / all citations) and ``grounded`` (its
  mean is the grounded rate) are added, plus ``failed`` (the context ended with an error).
* :func:`subset` shrinks a dataset for quick runs (notebooks, CI): some queries, their relevant
  documents and a number of random other documents.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrag.errors import CollectionNotFoundError, InvalidInputError
from agentrag.eval.beir import BeirDataset
from agentrag.eval.metrics import citation_precision
from agentrag.eval.report import DEFAULT_K_VALUES, EvalReport, QueryEval, evaluate_rankings
from agentrag.rerankers import DEFAULT_CANDIDATES
from agentrag.retrieval.fusion import DEFAULT_FUSION

if TYPE_CHECKING:
    from agentrag.context import Context
    from agentrag.rerankers import Reranker
    from agentrag.retrieval.result import SearchResult
    from agentrag.store.ingest import IngestProgress, IngestReport
    from agentrag.store.store import Store

__all__ = ["BEIR_CHUNK_SIZE", "EvalProgress", "evaluate", "ingest_beir", "subset"]

BEIR_CHUNK_SIZE = 20_000
_MAX_SEARCH_TOP_K = 50  # Store.search's default max_top_k; raised when top_k asks for more


@dataclass(frozen=True, slots=True)
class EvalProgress:
    """One event per evaluated query: ``result`` is the SearchResult, or the Context with ``pipeline``."""

    done: int
    total: int
    query_id: str
    latency_ms: float
    result: SearchResult | Context


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < (0 if allow_zero else 1):
        raise InvalidInputError(f"{name} must be >= {0 if allow_zero else 1}, got {value}")
    return value


# -- datasets ------------------------------------------------------------------------------------------


def _sample_ids(qrels: dict[str, dict[str, int]], n: int, seed: int) -> list[str]:
    """The same choice as ``load_beir(..., sample=n, seed=seed)``, in qrels order."""
    if n >= len(qrels):
        return list(qrels)
    keep = set(random.Random(seed).sample(sorted(qrels), n))
    return [qid for qid in qrels if qid in keep]


def subset(
    dataset: BeirDataset, *, queries: int | None = None, distractors: int | None = None, seed: int = 0
) -> BeirDataset:
    """A smaller copy of ``dataset`` for quick runs.

    ``queries=N`` keeps N queries chosen at random with ``seed`` (the same choice as
    ``load_beir(sample=N, seed=seed)``). ``distractors=M`` shrinks the corpus to the documents
    judged for the kept queries plus M other documents chosen at random with ``seed`` (a corpus
    this small is an easier task than the full one: use it to check a setup, not to report a
    figure). ``None`` keeps all of them.
    """
    qrels = dataset.qrels
    if queries is not None:
        _positive("queries", queries)
        kept = _sample_ids(qrels, queries, seed)
        qrels = {qid: qrels[qid] for qid in kept}
    corpus = dataset.corpus
    if distractors is not None:
        _positive("distractors", distractors, allow_zero=True)
        judged = {doc_id for docs in qrels.values() for doc_id in docs if doc_id in corpus}
        others = sorted(doc_id for doc_id in corpus if doc_id not in judged)
        extra = set(random.Random(seed).sample(others, min(distractors, len(others))))
        corpus = {doc_id: doc for doc_id, doc in corpus.items() if doc_id in judged or doc_id in extra}
    return replace(
        dataset,
        corpus=corpus,
        queries={qid: dataset.queries[qid] for qid in qrels},
        qrels=qrels,
    )


def ingest_beir(
    store: Store,
    dataset: BeirDataset,
    collection: str,
    *,
    chunk_size: int = BEIR_CHUNK_SIZE,
    prune: bool = False,
    on_progress: Callable[[IngestProgress], None] | None = None,
) -> IngestReport:
    """Index ``dataset.corpus`` into ``collection`` (created if missing): one document per BEIR document.

    The text indexed is ``title + "\\n" + text`` (:attr:`BeirDoc.index_text`), the document's
    ``source`` is its BEIR id, chunks do not overlap; with the default ``chunk_size`` every
    SciFact-sized abstract is one chunk. Idempotent: documents already stored with the same text
    are skipped without embedding (the store's content addressing), so a second call costs a
    second or two. ``prune=True`` also deletes the collection's documents that are not in the
    corpus (e.g. left over from a larger :func:`subset`). ``on_progress`` gets the store's
    :class:`~agentrag.store.ingest.IngestProgress` events (one per document, plus ``writing``).
    """
    from agentrag.store.ingest import ingest_texts

    _positive("chunk_size", chunk_size)
    try:
        store.collection(collection)
    except CollectionNotFoundError:
        store.create_collection(
            collection,
            description=f"BEIR {dataset.name} corpus ({len(dataset.corpus)} documents)",
            exist_ok=True,
        )
    if prune:
        keep = set(dataset.corpus)
        documents = [doc.to_dict() for doc in store.documents(collection, limit=10_000_000)]
        stale = [str(doc["id"]) for doc in documents if doc["source"] not in keep]
        for doc_id in stale:
            store.delete_document(doc_id)
    items: list[tuple[str, str, dict[str, Any]]] = [
        (doc.doc_id, doc.index_text, {}) for doc in dataset.corpus.values()
    ]
    return ingest_texts(
        store, items, collection=collection, chunk_size=chunk_size, chunk_overlap=0, on_progress=on_progress
    )


# -- evaluation ----------------------------------------------------------------------------------------


def _doc_ranking(hits: Iterable[Any]) -> list[str]:
    """Hits -> BEIR document ids (``source``, else the stored document id), each once at its best rank."""
    seen: dict[str, None] = {}
    for hit in hits:
        seen.setdefault(hit.source or hit.document_id, None)
    return list(seen)


def _answer_metrics(ctx: Context) -> dict[str, float | None]:
    """Citation precision and grounding of an answer; an abstention is counted as one (``abstained``)
    and is not an answer whose grounding or citations could be measured (``None`` for both)."""
    abstained = ctx.mode == "abstained"
    valid = len(ctx.citations)
    total = valid + len(ctx.invalid_citations)
    return {
        "citation_precision": None if abstained else citation_precision(valid, total),
        "grounded": None if abstained or ctx.grounded is None else float(ctx.grounded),
        "abstained": 1.0 if abstained else 0.0,
        "failed": 1.0 if ctx.error is not None else 0.0,
    }


def _default_name(mode: str, fusion: str) -> str:
    return f"{mode} ({fusion})" if mode == "hybrid" and fusion != DEFAULT_FUSION else mode


def _k_values(top_k: int, k_values: Sequence[int] | None) -> tuple[int, ...]:
    if k_values is not None:
        return tuple(k_values)
    return tuple(sorted({k for k in DEFAULT_K_VALUES if k <= top_k} | {top_k}))


def _check_options(
    mode: str,
    fusion: str,
    top_k: int,
    depth: int,
    warmup: int,
    pipeline: Callable[[Context], Context] | None,
    llm: Any,
    reranker: Reranker | None,
    candidates: int,
) -> None:
    """:func:`evaluate`'s options, refused before anything runs."""
    from agentrag.retrieval.fusion import check_fusion
    from agentrag.retrieval.search import MODES

    if mode not in MODES:
        raise InvalidInputError(f"unknown search mode {mode!r}; valid modes are {', '.join(MODES)}")
    check_fusion(fusion)
    _positive("top_k", top_k)
    _positive("depth", depth)
    _positive("warmup", warmup, allow_zero=True)
    if pipeline is not None and top_k > 50:
        raise InvalidInputError(f"with a pipeline, top_k is the context's limit (1-50), got {top_k}")
    if pipeline is None and llm is not None:
        raise InvalidInputError("llm is used by a pipeline only: pass pipeline= as well")
    if reranker is not None:
        from agentrag.rerankers import Reranker as _Reranker

        if pipeline is not None:
            raise InvalidInputError(
                "with a pipeline, rerank in the pipeline (its rerank step), not reranker="
            )
        if not isinstance(reranker, _Reranker):
            raise InvalidInputError(f"reranker must have rerank(query, texts) -> scores, got {reranker!r}")
        _positive("candidates", candidates)


def _settings(
    mode: str,
    fusion: str,
    depth: int,
    pipeline: Callable[[Context], Context] | None,
    llm: Any,
    reranker: Reranker | None,
    candidates: int,
) -> dict[str, Any]:
    """The report's config beyond the dataset: only the settings that applied."""
    settings: dict[str, Any] = {}
    if mode == "hybrid":
        settings["fusion"] = fusion
    if reranker is not None:
        from agentrag.rerankers import reranker_name

        settings.update(reranker=reranker_name(reranker), candidates=candidates)
    if pipeline is None:
        settings["depth"] = depth
    else:
        settings["pipeline"] = getattr(pipeline, "__name__", None) or repr(pipeline)
        if llm is not None:
            settings["llm"] = getattr(llm, "model", None) or str(llm)
    return settings


def evaluate(
    store: Store,
    dataset: BeirDataset,
    collection: str,
    *,
    mode: str = "hybrid",
    top_k: int = 10,
    depth: int = 100,
    fusion: str = "relative_score",
    name: str | None = None,
    pipeline: Callable[[Context], Context] | None = None,
    llm: Any = None,
    reranker: Reranker | None = None,
    candidates: int = DEFAULT_CANDIDATES,
    sample: int | None = None,
    seed: int = 0,
    k_values: Sequence[int] | None = None,
    warmup: int = 1,
    warm_embedder: bool = True,
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> EvalReport:
    """Evaluate retrieval (or a whole pipeline) on ``dataset``'s queries against ``collection``.

    Without ``pipeline`` each query is one ``store.search(query, collections=[collection],
    mode=mode, top_k=top_k, depth=depth, fusion=fusion)`` (the library's other defaults:
    ``rrf_k=60``, ``vector_weight=0.5``, ``hnsw.ef_search=max(100, depth)``). With ``pipeline``
    each query runs ``pipeline(new(query, store=store, llm=llm, collections=[collection],
    mode=mode, fusion=fusion, limit=top_k))`` (``top_k`` at most 50) and its ranking is
    ``ctx.hits``; ``depth`` then does not apply.

    With ``reranker`` (a :class:`~agentrag.rerankers.Reranker`: a cross-encoder, a hosted model, your
    own) each search returns ``max(top_k, candidates)`` hits, the first ``candidates`` are reordered
    by the reranker (:func:`~agentrag.rerankers.rerank_hits`) and the ranking is cut at ``top_k``; a
    reranker failure raises RerankError (an evaluation never degrades silently). The default name
    gets `` + rerank(<model>)``. A pipeline reranks in its own ``rerank`` step instead.

    The ranking of a query is its hits mapped to BEIR document ids, each document once at its
    best rank (with :func:`ingest_beir` a document is one chunk, so ``top_k`` hits are ``top_k``
    documents). Metrics are computed at ``k_values`` (default: 1, 5, 10, 100 up to ``top_k``,
    and ``top_k``). ``sample=N`` evaluates N queries chosen at random with ``seed`` (as
    ``load_beir(sample=N)`` chooses them). Before the timed run, with ``warm_embedder`` (and a
    mode or pipeline that embeds) the store's embedder embeds every query once, untimed: torch
    builds its CPU kernels per input shape on first use, which would otherwise bill the first
    configuration evaluated; then the first ``warmup`` queries run once, untimed and unscored
    (model load, BM25 index build); the store's query-vector cache is then emptied, so every timed
    query pays for its own embedding. ``on_progress`` gets an :class:`EvalProgress` per query.

    ``name`` defaults to the mode (``"hybrid (relative_score)"`` for that fusion; ``"pipeline"``
    with a pipeline). The report's ``config``
    records the dataset, split, collection and settings.
    """
    _check_options(mode, fusion, top_k, depth, warmup, pipeline, llm, reranker, candidates)
    fetch = top_k if reranker is None else max(top_k, candidates)
    ks = _k_values(top_k, k_values)
    store.collection(collection)  # CollectionNotFoundError now, not at the first query

    query_ids = list(dataset.qrels)
    if sample is not None:
        _positive("sample", sample)
        query_ids = _sample_ids(dataset.qrels, sample, seed)
    qrels = {qid: dataset.qrels[qid] for qid in query_ids}
    queries = {qid: dataset.queries[qid] for qid in query_ids}

    def run(query: str) -> tuple[list[str], SearchResult | Context, dict[str, float | None]]:
        if pipeline is None:
            result = store.search(
                query,
                collections=[collection],
                mode=mode,
                top_k=fetch,
                max_top_k=max(fetch, _MAX_SEARCH_TOP_K),
                depth=depth,
                fusion=fusion,
            )
            if reranker is None:
                return _doc_ranking(result.hits), result, {}
            from agentrag.rerankers import rerank_hits

            reranked = rerank_hits(reranker, result.query, result.hits, candidates=candidates)[:top_k]
            return _doc_ranking(reranked), replace(result, hits=tuple(reranked)), {}
        from agentrag.steps.new import new

        ctx = pipeline(
            new(query, store=store, llm=llm, collections=[collection], mode=mode, fusion=fusion, limit=top_k)
        )
        from agentrag.context import Context

        if not isinstance(ctx, Context):
            raise TypeError(f"pipeline must return a Context, got {type(ctx).__name__}")
        return _doc_ranking(ctx.hits), ctx, _answer_metrics(ctx)

    if warm_embedder and (pipeline is not None or mode in ("vector", "hybrid")):
        embedder = store.embedder
        for qid in query_ids:
            embedder.embed([queries[qid]])
    for qid in query_ids[:warmup]:
        run(queries[qid])
    store.clear_query_cache()  # every timed query pays for its own embedding

    rankings: dict[str, list[str]] = {}
    latencies: dict[str, float] = {}
    extra: dict[str, dict[str, float | None]] = {}
    for done, qid in enumerate(query_ids, start=1):
        started = time.perf_counter()
        ranking, result, answer_metrics = run(queries[qid])
        latencies[qid] = (time.perf_counter() - started) * 1000.0
        rankings[qid] = ranking
        if answer_metrics:
            extra[qid] = answer_metrics
        if on_progress is not None:
            on_progress(EvalProgress(done, len(query_ids), qid, latencies[qid], result))

    config: dict[str, Any] = {
        "dataset": dataset.name,
        "split": dataset.split,
        "collection": collection,
        "mode": mode,
        "top_k": top_k,
        **_settings(mode, fusion, depth, pipeline, llm, reranker, candidates),
    }
    if sample is not None:
        config.update(sample=sample, seed=seed)
    default_name = _default_name(mode, fusion) if pipeline is None else "pipeline"
    if reranker is not None:
        default_name += f" + rerank({config['reranker']})"
    report = evaluate_rankings(
        name or default_name,
        config,
        rankings,
        qrels,
        queries,
        k_values=ks,
        latencies_ms=latencies,
    )
    if not extra:
        return report
    per_query = tuple(
        QueryEval(r.query_id, r.query, r.retrieved, {**r.metrics, **extra.get(r.query_id, {})}, r.latency_ms)
        for r in report.per_query
    )
    return EvalReport(report.name, report.config, per_query)
