"""The ``agentrag`` command line: the library's verbs, readable output, ``--json`` for scripts.

Exit codes: 0 success, 1 partial failure (some files failed to ingest), 2 an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.errors import AgentragError, InvalidInputError

if TYPE_CHECKING:
    from agentrag.store.store import Store

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def _key_values(pairs: Sequence[str] | None, flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"agentrag: {flag} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def _url(args: argparse.Namespace) -> str | None:
    """--database-url, else $AGENTRAG_DATABASE_URL, else the embedded server, left running between
    calls (an idle watchdog stops it; ``agentrag db stop`` at once)."""
    import os

    url = getattr(args, "database_url", None) or os.environ.get("AGENTRAG_DATABASE_URL")
    if url:
        return str(url)
    from agentrag.store.server import embedded_url

    return embedded_url(keep_running=True)


def _store(args: argparse.Namespace) -> Store:
    from agentrag.store.store import Store

    return Store(_url(args))


class _Load:
    """Time spent before the work: connecting (server, pool, schema check) and loading the model.

    The model loads in a thread while the database connects (ONNX Runtime builds its session in
    native code), so the load's wall time is about the longer of the two, not their sum.
    """

    def __init__(self) -> None:
        self.database_ms = 0.0
        self.model_ms = 0.0
        self.wall_ms = 0.0

    def store(self, args: argparse.Namespace, *, needs_model: bool) -> Store:
        import threading
        import time

        from agentrag.embedders import LocalEmbedder

        failure: list[BaseException] = []

        def load_model() -> None:
            t = time.perf_counter()
            try:
                LocalEmbedder().load()  # the store's default embedder shares the loaded model
            except BaseException as exc:  # re-raised below, in the main thread
                failure.append(exc)
            self.model_ms = (time.perf_counter() - t) * 1000

        start = time.perf_counter()
        thread = threading.Thread(target=load_model, daemon=True) if needs_model else None
        if thread is not None:
            thread.start()
        try:
            store = _store(args)
        finally:
            self.database_ms = (time.perf_counter() - start) * 1000
            if thread is not None:
                thread.join()
        if failure:
            raise failure[0]
        self.wall_ms = (time.perf_counter() - start) * 1000
        return store

    def to_dict(self) -> dict[str, float]:
        return {
            "total": round(self.wall_ms, 1),
            "database": round(self.database_ms, 1),
            "model": round(self.model_ms, 1),
        }

    def line(self, work: str, work_ms: float) -> str:
        parts = f"database {self.database_ms:.0f}" + (f", model {self.model_ms:.0f}" if self.model_ms else "")
        return f"load {self.wall_ms:.0f} ms ({parts}, in parallel)  {work} {work_ms:.1f} ms"


# ---- db ----------------------------------------------------------------------------------------
def cmd_db_upgrade(args: argparse.Namespace) -> int:
    store = _store(args)
    status = store.status()
    if args.json:
        _print_json({"current": status.current, "pending": [m.version for m in status.pending]})
    else:
        print(f"database: {store.url}\n{status}")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from agentrag.store.store import Store

    store = Store(_url(args), migrate=False)
    status = store.status()
    if args.json:
        _print_json(
            {
                "database": store.url,
                "applied": list(status.applied),
                "pending": [m.version for m in status.pending],
                "pgvector": status.vector_version,
            }
        )
    else:
        print(f"database: {store.url}\n{status}")
    return 0


def cmd_db_stop(args: argparse.Namespace) -> int:
    import os

    from agentrag.store.server import data_dir, stop_embedded

    if args.database_url or os.environ.get("AGENTRAG_DATABASE_URL"):
        print("db stop stops the embedded server; this database is given by URL", file=sys.stderr)
        return 2
    stopped = stop_embedded()
    where = data_dir() / "pgdata"
    if args.json:
        _print_json({"stopped": stopped, "pgdata": str(where)})
    else:
        print(f"stopped the embedded PostgreSQL in {where}" if stopped else f"no server running in {where}")
    return 0


# ---- collections -------------------------------------------------------------------------------
def cmd_collections_list(args: argparse.Namespace) -> int:
    collections = _store(args).collections()
    if args.json:
        _print_json([c.to_dict() for c in collections])
        return 0
    if not collections:
        print("no collections yet: agentrag collections create NAME --description '...'")
    for c in collections:
        print(
            f"{c.name:<24} {c.document_count:>6} docs {c.chunk_count:>8} chunks  "
            f"{c.embed_model} ({c.dimensions}d)"
        )
        if c.description:
            print(f"{'':<24} {c.description}")
    return 0


def cmd_collections_create(args: argparse.Namespace) -> int:
    c = _store(args).create_collection(
        args.name,
        description=args.description,
        distance=args.distance,
        scoped=args.scoped,
        exist_ok=args.exist_ok,
        hnsw_m=args.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction,
        ef_search=args.ef_search,
    )
    _print_json(c.to_dict()) if args.json else print(f"created {c!r}")
    return 0


def cmd_collections_tune(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {"hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction}
    if args.ef_search is not None:
        options["ef_search"] = None if args.ef_search == "default" else _positive_int(args.ef_search)
    c = _store(args).tune_vector_index(args.name, **options)
    if args.json:
        _print_json(c.to_dict())
    else:
        ef = "max(100, depth)" if c.hnsw_ef_search is None else c.hnsw_ef_search
        print(f"{c.name}: HNSW m={c.hnsw_m} ef_construction={c.hnsw_ef_construction}, ef_search {ef}")
    return 0


def _positive_int(value: str) -> int:
    from agentrag.errors import InvalidInputError

    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"--ef-search must be an integer or 'default', got {value!r}") from None


def cmd_collections_delete(args: argparse.Namespace) -> int:
    _store(args).delete_collection(args.name)
    print(f"deleted collection {args.name!r}")
    return 0


# ---- ingest ------------------------------------------------------------------------------------
def cmd_ingest(args: argparse.Namespace) -> int:
    from agentrag.errors import CollectionNotFoundError
    from agentrag.store.ingest import iter_files

    store = _store(args)
    if args.backend is not None:
        from agentrag.embedders import LocalEmbedder
        from agentrag.store.store import Store

        store = Store(engine=store.engine, embedder=LocalEmbedder(backend=args.backend), migrate=False)
    try:
        store.collection(args.collection)
    except CollectionNotFoundError:
        if not args.create:
            raise
        store.create_collection(args.collection, description=args.description or "")
    # an extension (e.g. agentrag.executors.cli: --ray) may say where documents are prepared
    factory = getattr(args, "executor_factory", None)
    executor = factory(args) if factory is not None else None
    bars = not args.json and sys.stderr.isatty()
    with _progress(sum(1 for _ in iter_files(args.paths)) if bars else 0, bars) as progress:
        report = store.ingest(
            args.paths,
            collection=args.collection,
            metadata=_key_values(args.metadata, "--metadata"),
            tenant=args.tenant,
            workspace=args.workspace,
            session=args.session,
            on_progress=progress,
            bulk=True if args.bulk else None,
            executor=executor,
        )
    _print_json(report.to_dict()) if args.json else print(report)
    return 0 if report.ok else 1


def cmd_reembed(args: argparse.Namespace) -> int:
    """Re-embed every chunk of a collection with the local model (``--backend``), atomically."""
    from agentrag.embedders import LocalEmbedder

    embedder = LocalEmbedder(args.model, backend=args.backend)
    store = _store(args)
    bar = None
    if not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, desc="reembed", unit="chunk", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    try:
        report = store.reembed(args.collection, embedder=embedder, on_progress=progress)
    finally:
        if bar is not None:
            bar.close()
    _print_json(report.to_dict()) if args.json else print(report)
    return 0


# ---- documents ---------------------------------------------------------------------------------
def cmd_documents_list(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    if args.every_scope:
        if args.tenant or args.workspace:
            raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
        docs = _store(args).documents(args.collection, scope=Scope.every())
    else:
        docs = _store(args).documents(args.collection, tenant=args.tenant, workspace=args.workspace)
    if args.json:
        _print_json([d.to_dict() for d in docs])
        return 0
    for d in docs:
        print(f"{d.id}  {d.collection:<16} {d.chunk_count:>4} chunks  {d.original_filename or d.source}")
    return 0


def cmd_documents_delete(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    store = _store(args)
    scope = Scope.every() if args.every_scope else None
    if args.tenant or args.workspace:
        if args.every_scope:
            raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
        scope = Scope(tenant=args.tenant, workspace=args.workspace)
    for doc_id in args.ids:
        store.delete_document(doc_id, scope=scope)
        print(f"deleted {doc_id}")
    return 0


# ---- search ------------------------------------------------------------------------------------
def _search_filters(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``--filter`` pairs -> a filters dict, with the keys of the Python ``Filters`` model."""
    from agentrag.retrieval.filters import parse_filter_pairs

    return parse_filter_pairs(pairs)


def cmd_search(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    scope = None
    if args.all_scopes or args.tenant or args.workspace or args.session:
        scope = Scope(
            tenant=args.tenant, workspace=args.workspace, session=args.session, all_scopes=args.all_scopes
        )
    import time

    load = _Load()
    store = load.store(args, needs_model=args.mode in ("vector", "hybrid"))
    t = time.perf_counter()
    result = store.search(
        args.query,
        collections=args.collection,
        mode=args.mode,
        top_k=args.top_k,
        depth=args.depth,
        fusion=args.fusion,
        min_score=args.min_score,
        filters=_search_filters(args.filter),
        scope=scope,
    )
    search_ms = (time.perf_counter() - t) * 1000
    if args.json:
        _print_json({**result.to_dict(), "load_ms": load.to_dict(), "search_ms": round(search_ms, 1)})
        return 0
    print(result)
    print(load.line("search", search_ms))
    return 0


# ---- ask (the pipeline), relations, log ---------------------------------------------------------
def _scope_of(args: argparse.Namespace) -> Any:
    from agentrag.scope import Scope

    if args.tenant or args.workspace or args.session:
        return Scope(tenant=args.tenant, workspace=args.workspace, session=args.session)
    return None


def _source_line(hit: Any) -> str:
    where = hit.source or hit.document_id
    if hit.section:
        where += f", section: {hit.section}"
    if hit.page is not None:
        where += f", page {hit.page}"
    return f"[{hit.chunk_id}] {where}"


_SOURCE_KEYS = ("chunk_id", "document_id", "collection", "source", "section", "page", "score")


def _ask_dict(ctx: Any, proof: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query_id": ctx.query_id,
        "question": ctx.question,
        "answer": ctx.answer_text,
        "mode": ctx.mode,
        "grounded": ctx.grounded,
        "citations": list(ctx.citations),
        "invalid_citations": list(ctx.invalid_citations),
        "ungrounded_claims": list(ctx.ungrounded_claims),
        "sources": [{k: getattr(h, k) for k in _SOURCE_KEYS} for h in ctx.context_used],
        "graph_context": ctx.graph_context,
        "warnings": list(ctx.warnings),
        "empty_reason": ctx.empty_reason,
        "latency_ms": ctx.latencies_ms,
        "tokens": ctx.tokens,
    }
    if proof:
        out["proof"] = ctx.proof().to_dict()
    return out


def _print_answer(ctx: Any, *, streamed: bool, load: _Load | None = None) -> None:
    if ctx.mode == "raw-results":
        print("The language model failed, so there is no generated answer. The retrieved sources:")
    elif not streamed:
        print(ctx.answer_text or "")
    cited = set(ctx.citations)
    if ctx.context_used:
        print("\nSources:")
        for number, hit in enumerate(ctx.context_used, start=1):
            mark = "  (cited)" if hit.chunk_id in cited else ""
            print(f"  {number}. {_source_line(hit)}{mark}")
            if ctx.mode == "raw-results":
                snippet = " ".join(hit.text.split())
                print(f"     {snippet[:300]}{'...' if len(snippet) > 300 else ''}")
    graph_cited = [c for c in ctx.citations if c.startswith("rel_")]
    if ctx.graph_context and (graph_cited or ctx.mode == "graph-only"):
        print("\nKnowledge graph:")
        for line in ctx.graph_context.splitlines():
            print(f"  {line}")
    if ctx.invalid_citations:
        print(f"\nInvalid citations (not among the retrieved sources): {', '.join(ctx.invalid_citations)}")
    if ctx.ungrounded_claims:
        print("\nUngrounded claims (no valid citation):")
        for claim in ctx.ungrounded_claims:
            print(f"  - {claim}")
    grounded = {True: "yes", False: "no", None: "n/a"}[ctx.grounded]
    total = ctx.latencies_ms.get("total", 0.0)
    timing = load.line("answer", total) if load is not None else f"{total:.0f} ms"
    print(f"\nmode: {ctx.mode}  grounded: {grounded}  sources: {len(ctx.context_used)}  {timing}")
    for warning in dict.fromkeys(ctx.warnings):
        print(f"warning: {warning}", file=sys.stderr)


def cmd_ask(args: argparse.Namespace) -> int:
    import os

    from agentrag.context import Context
    from agentrag.steps import answer_stream, new

    model = args.llm or os.environ.get("AGENTRAG_LLM") or None
    load = _Load()
    store = load.store(args, needs_model=args.mode in ("vector", "hybrid") or args.route)
    ctx = new(
        args.question,
        store=store,
        llm=model,
        collections=args.collection or None,
        mode=args.mode,
        fusion=args.fusion,
        limit=args.top_k,
        scope=_scope_of(args),
        filters=_search_filters(args.filter),
    )
    if args.route:
        ctx = ctx.route()
    if args.decompose:
        ctx = ctx.decompose()
    if args.entity:
        ctx = ctx.enrich(entity=args.entity, depth=args.depth)
    ctx = ctx.search(self_correct=args.self_correct).rerank()
    streamed = args.stream and not args.json
    if streamed:
        for item in answer_stream(ctx, suppress_ungrounded=args.suppress_ungrounded):
            if isinstance(item, Context):
                ctx = item
            elif not ctx.error:
                print(item, end="", flush=True)
        print()
    else:
        ctx = ctx.answer(suppress_ungrounded=args.suppress_ungrounded)
    ctx.raise_for_error()
    if args.json:
        _print_json({**_ask_dict(ctx, args.proof), "load_ms": load.to_dict()})
        return 0
    _print_answer(ctx, streamed=streamed, load=load)
    if args.proof:
        print("\nRetrieval proof:")
        print(ctx.proof().to_json())
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from agentrag.chatbot import main as chat_main

    return chat_main(args)


def _relation_scope(args: argparse.Namespace) -> Any:
    """--tenant / --workspace / --session, or --every-scope (listing only)."""
    from agentrag.scope import Scope

    if getattr(args, "every_scope", False):
        if args.tenant or args.workspace or args.session:
            raise InvalidInputError(
                "--every-scope cannot be combined with --tenant, --workspace or --session"
            )
        return Scope.every()
    return _scope_of(args)


def cmd_relations_add(args: argparse.Namespace) -> int:
    added = _store(args).add_relations(
        args.collection,
        [(args.subject, args.relation, args.object)],
        source=args.source,
        scope=_relation_scope(args),
    )
    triple = f"{args.subject} --{args.relation}--> {args.object}"
    if args.json:
        _print_json({"added": added})
    else:
        print(f"added {triple}" if added else f"already present: {triple}")
    return 0


def cmd_relations_import(args: argparse.Namespace) -> int:
    from agentrag.store.relations import read_triples

    triples = read_triples(args.file)
    added = _store(args).add_relations(
        args.collection, triples, source=args.source, scope=_relation_scope(args)
    )
    if args.json:
        _print_json({"read": len(triples), "added": added})
    else:
        present = len(triples) - added
        print(f"{args.collection}: {added} new relations ({len(triples)} read, {present} already present)")
    return 0


def cmd_relations_list(args: argparse.Namespace) -> int:
    store = _store(args)
    scope = _relation_scope(args)
    if args.entity and args.depth > 1:
        found = store.neighbourhood(args.collection, args.entity, args.depth, limit=args.limit, scope=scope)
    else:
        found = store.relations(args.collection, entity=args.entity, limit=args.limit, scope=scope)
    if args.json:
        _print_json([r.to_dict() for r in found])
        return 0
    if not found:
        print("no relations" + (f" for {args.entity!r}" if args.entity else ""))
    for r in found:
        source = f"  ({r.source})" if r.source else ""
        print(f"{r.label:<10} {r}{source}")
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    scope = Scope(tenant=args.tenant) if args.tenant else None
    entries = _store(args).query_logs(limit=args.limit, scope=scope)
    if args.json:
        _print_json([e.to_dict() for e in entries])
        return 0
    if not entries:
        print("the query log is empty: it is written only for new(..., query_log=True)")
    for e in entries:
        when = e.created_at.strftime("%Y-%m-%d %H:%M:%S") if e.created_at else "?"
        total = e.latency_ms.get("total", 0.0)
        grounded = {True: "grounded", False: "ungrounded", None: "-"}[e.grounded]
        print(f"{when}  {e.id}  {e.mode or '-'}  {grounded}  {total:.0f} ms  {e.model or '-'}")
        print(f"  Q: {' '.join((e.question or '').split())[:200]}")
        if e.answer:
            print(f"  A: {' '.join(e.answer.split())[:200]}")
    return 0


_FILTER_HELP = (
    "classification=, doc_ids=, date_range.start=, date_range.end= (YYYY-MM-DD) or metadata.KEY=VALUE: "
    "the keys of the Python filters; repeatable (repeated keys match any of the values)"
)
_FUSION_HELP = (
    "how hybrid fuses its legs: relative_score (min-max normalised scores, equal weights; default) "
    "or rrf (reciprocal rank fusion, k=60)"
)


# ---- eval --------------------------------------------------------------------------------------
_EVAL_MODES = ("hybrid", "vector", "lexical", "lexical_sql")


def _eval_modes(value: str) -> list[tuple[str, str | None]]:
    """``--compare hybrid,hybrid:rrf,vector`` -> ``[(mode, fusion or None), ...]``, checked."""
    from agentrag.retrieval.fusion import FUSIONS

    systems: list[tuple[str, str | None]] = []
    for token in dict.fromkeys(t.strip() for t in value.split(",") if t.strip()):
        mode, _, fusion = token.partition(":")
        if mode not in _EVAL_MODES or (fusion and (mode != "hybrid" or fusion not in FUSIONS)):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated modes from {', '.join(_EVAL_MODES)} (hybrid:FUSION for a fusion "
                f"from {', '.join(FUSIONS)}), got {token!r} in {value!r}"
            )
        systems.append((mode, fusion or None))
    if not systems:
        raise argparse.ArgumentTypeError(f"expected comma-separated modes, got {value!r}")
    return systems


def _eval_reranker(args: argparse.Namespace) -> Any:
    """``--rerank cross-encoder:MODEL`` or ``--rerank api:MODEL`` -> a Reranker (None without)."""
    if not args.rerank:
        return None
    from agentrag.errors import InvalidInputError
    from agentrag.rerankers import APIReranker, CrossEncoderReranker

    kind, _, model = args.rerank.partition(":")
    if kind == "cross-encoder":
        return CrossEncoderReranker(model) if model else CrossEncoderReranker()
    if kind == "api" and model:
        return APIReranker(model, api_base=args.rerank_api_base)
    raise InvalidInputError(
        "--rerank takes cross-encoder[:MODEL] or api:MODEL (e.g. api:cohere/rerank-english-v3.0), "
        f"got {args.rerank!r}"
    )


@contextlib.contextmanager
def _progress(
    total: int, enabled: bool, *, desc: str | None = None, unit: str = "doc", leave: bool = True
) -> Iterator[Callable[[Any], None]]:
    """A tqdm bar on stderr when ``enabled`` and the ``on_progress`` callback that moves it one
    step per event (not for ingest's "writing" events); the bar is closed on the way out."""
    bar = None
    if enabled:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave)

    def advance(event: Any) -> None:
        if bar is not None and getattr(event, "status", None) != "writing":
            bar.update(1)

    try:
        yield advance
    finally:
        if bar is not None:
            bar.close()


def cmd_eval_beir(args: argparse.Namespace) -> int:
    """Index a BEIR dataset (idempotent), evaluate one mode or compare several, print the table."""
    import re

    from agentrag.eval import compare, evaluate, ingest_beir, load_beir

    dataset = load_beir(args.path, args.split)
    collection = args.collection or re.sub(r"[^A-Za-z0-9_.-]", "_", dataset.name).lstrip(".-")[:63]
    store = _store(args)
    if args.backend is not None:
        from agentrag.embedders import LocalEmbedder
        from agentrag.store.store import Store

        store = Store(engine=store.engine, embedder=LocalEmbedder(backend=args.backend), migrate=False)
    bars = not args.json and sys.stderr.isatty()
    queries = min(args.sample, len(dataset.queries)) if args.sample else len(dataset.queries)
    print(
        f"BEIR {dataset.name} ({dataset.split}): {queries} queries, {len(dataset.corpus)} documents; "
        f"collection {collection!r} in {store.url}",
        file=sys.stderr,
    )
    with _progress(len(dataset.corpus), bars, desc="ingest", leave=False) as ingested:
        ingest = ingest_beir(store, dataset, collection, on_progress=ingested)
    print(
        f"  {len(ingest.added)} added, {len(ingest.replaced)} replaced, {len(ingest.unchanged)} unchanged, "
        f"{len(ingest.failed)} failed",
        file=sys.stderr,
    )
    for source, why in ingest.failed:
        print(f"  failed: {source}: {why}", file=sys.stderr)

    reranker = _eval_reranker(args)
    systems = args.compare or [(args.mode, None)]
    runs: list[dict[str, Any]] = [
        {"mode": mode, "fusion": fusion or args.fusion, "depth": args.depth} for mode, fusion in systems
    ]
    if reranker is not None:  # the first system, reranked: its p-value says what the reranker adds
        runs.append({**runs[0], "reranker": reranker, "candidates": args.rerank_candidates})
    if args.pipeline:  # the offline pipeline: answers with their citation precision and grounded rate
        runs.append(
            {
                "mode": runs[0]["mode"],
                "fusion": runs[0]["fusion"],
                "pipeline": _offline_pipeline(args, reranker),
            }
        )
    reports = []
    for run in runs:
        desc = "pipeline" if "pipeline" in run else run["mode"]
        with _progress(queries, bars, desc=desc, unit="query", leave=False) as evaluated:
            reports.append(
                evaluate(
                    store,
                    dataset,
                    collection,
                    top_k=args.top_k,
                    sample=args.sample,
                    seed=args.seed,
                    on_progress=evaluated,
                    **run,
                )
            )
    at = min(10, args.top_k)
    columns: tuple[str, ...] = (f"ndcg@{at}", f"recall@{args.top_k}", f"mrr@{at}", "qps", "p50_ms", "p99_ms")
    if args.pipeline:
        columns += ("citation_precision", "grounded")
    comparison = compare(
        reports,
        columns=tuple(dict.fromkeys(columns)),
        significance=f"ndcg@{at}" if len(reports) > 1 else None,
    )
    if args.json:
        _print_json(
            {
                "dataset": dataset.name,
                "split": dataset.split,
                "collection": collection,
                "ingest": {
                    "added": len(ingest.added),
                    "replaced": len(ingest.replaced),
                    "unchanged": len(ingest.unchanged),
                    "failed": [{"source": s, "error": e} for s, e in ingest.failed],
                },
                "comparison": comparison.to_dict(),
                "reports": [report.to_dict() for report in reports],
            }
        )
    elif len(reports) == 1:
        print(reports[0])
    else:
        print(comparison)
        print(
            f"p_rand / p_t: two-sided paired randomisation test ({comparison.n_permutations} sign flips, "
            f"seed {comparison.seed}) / paired t-test on per-query ndcg@{at}, against {reports[0].name!r}"
        )
    return 0 if ingest.ok else 1


def _offline_pipeline(args: argparse.Namespace, reranker: Any) -> Any:
    """``search -> rerank -> answer``, local strategies (no LLM); reranked by ``reranker`` if given."""

    def offline_pipeline(ctx: Any) -> Any:
        if reranker is None:
            return ctx.search().rerank().answer()
        searched = ctx.search(limit=max(args.rerank_candidates, ctx.options.limit))
        return searched.rerank(
            reranker=reranker, candidates=args.rerank_candidates, top_k=ctx.options.limit
        ).answer()

    return offline_pipeline


def cmd_demo(args: argparse.Namespace) -> int:
    from agentrag.demo import run_demo

    return run_demo(args)


# ---- parser ------------------------------------------------------------------------------------
def _scope_options(parser: argparse.ArgumentParser) -> None:
    """--tenant, --workspace, --session."""
    for flag in ("--tenant", "--workspace", "--session"):
        parser.add_argument(flag)


def build_parser() -> argparse.ArgumentParser:
    from agentrag.embedders import (
        DEFAULT_DOCUMENT_BACKEND,
        DEFAULT_LOCAL_BACKEND,
        DEFAULT_LOCAL_MODEL,
        LOCAL_BACKENDS,
    )
    from agentrag.retrieval.fusion import DEFAULT_FUSION, FUSIONS

    parser = argparse.ArgumentParser(prog="agentrag", description="Agentic RAG over PostgreSQL + pgvector.")
    parser.add_argument(
        "--database-url", help="PostgreSQL URL (default: $AGENTRAG_DATABASE_URL, else the embedded server)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        parent: Any, name: str, handler: Handler, help: str, json_flag: bool = True
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        if json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    db = sub.add_parser("db", help="schema: upgrade, status, stop").add_subparsers(
        dest="db_command", required=True
    )
    add(db, "upgrade", cmd_db_upgrade, "apply pending migrations")
    add(db, "status", cmd_db_status, "show the schema version and pending migrations")
    add(db, "stop", cmd_db_stop, "stop the embedded server (the CLI leaves it running between calls)")

    col = sub.add_parser("collections", help="list, create, delete collections").add_subparsers(
        dest="col_command", required=True
    )
    add(col, "list", cmd_collections_list, "list collections")
    p = add(col, "create", cmd_collections_create, "create a collection")
    p.add_argument("name")
    p.add_argument("--description", default="", help="what the collection holds (used for routing)")
    p.add_argument("--distance", default="cosine", choices=["cosine", "l2", "inner_product"])
    p.add_argument(
        "--scoped", action="store_true", help="refuse queries without a tenant/workspace/session scope"
    )
    p.add_argument("--exist-ok", action="store_true", help="no error if a collection by that name exists")
    p.add_argument("--hnsw-m", type=int, default=16, help="HNSW links per node (2..100, default 16)")
    p.add_argument(
        "--hnsw-ef-construction", type=int, default=64, help="HNSW build candidate list (>= 2 m, default 64)"
    )
    p.add_argument(
        "--ef-search", type=int, help="the collection's default ef_search (default max(100, depth))"
    )
    p = add(
        col, "tune", cmd_collections_tune, "change a collection's HNSW parameters (rebuilds on m changes)"
    )
    p.add_argument("name")
    p.add_argument("--hnsw-m", type=int, help="new HNSW m (rebuilds the index)")
    p.add_argument("--hnsw-ef-construction", type=int, help="new HNSW ef_construction (rebuilds the index)")
    p.add_argument("--ef-search", help="new default ef_search, or 'default' for max(100, depth)")
    p = add(col, "delete", cmd_collections_delete, "delete a collection and its documents", json_flag=False)
    p.add_argument("name")

    p = add(sub, "ingest", cmd_ingest, "ingest files and directories (.txt, .md, .pdf)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--description", help="description for --create")
    p.add_argument("--metadata", "-m", action="append", metavar="KEY=VALUE")
    p.add_argument(
        "--bulk",
        action="store_true",
        help="drop the collection's vector index before the load and rebuild it after (large loads;"
        " without it, decided by the load's size)",
    )
    p.add_argument(
        "--backend",
        choices=list(LOCAL_BACKENDS),
        help=f"how the local model embeds the documents (default: {DEFAULT_DOCUMENT_BACKEND} on a CPU with"
        f" native bfloat16, AMX / AVX512-BF16, and torch installed: 1.2-2.7x {DEFAULT_LOCAL_BACKEND}, the"
        f" same vectors to cosine 0.99997; else {DEFAULT_LOCAL_BACKEND}). Searches embed queries with"
        f" {DEFAULT_LOCAL_BACKEND} either way (one version)",
    )
    _scope_options(p)

    p = add(
        sub,
        "reembed",
        cmd_reembed,
        "re-embed every chunk of a collection with the local model (atomically; rebuilds its vector index)",
    )
    p.add_argument("collection")
    p.add_argument(
        "--backend",
        choices=list(LOCAL_BACKENDS),
        help=f"how the model embeds the chunks (default for the bundled all-MiniLM-L6-v2:"
        f" {DEFAULT_DOCUMENT_BACKEND} on a CPU with native bfloat16 and torch installed, else"
        f" {DEFAULT_LOCAL_BACKEND})",
    )
    p.add_argument("--model", default=DEFAULT_LOCAL_MODEL, help="sentence-transformers model or directory")

    docs = sub.add_parser("documents", help="list, delete documents").add_subparsers(
        dest="doc_command", required=True
    )
    p = add(docs, "list", cmd_documents_list, "list documents")
    p.add_argument("--collection", "-c")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument("--every-scope", action="store_true", help="list every tenant's (scoped collections)")
    p = add(docs, "delete", cmd_documents_delete, "delete documents by id", json_flag=False)
    p.add_argument("ids", nargs="+")
    p.add_argument("--tenant", help="the documents' tenant (required on scoped collections)")
    p.add_argument("--workspace")
    p.add_argument("--every-scope", action="store_true", help="delete in any tenant (scoped collections)")

    p = add(
        sub,
        "search",
        cmd_search,
        "search collections (hybrid: pgvector + BM25, fused by relative score or RRF)",
    )
    p.add_argument("query")
    p.add_argument("--collection", "-c", action="append", required=True, help="repeatable")
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "lexical", "lexical_sql"])
    p.add_argument("--top-k", "-k", type=int, default=5, help="hits to return (1-50)")
    p.add_argument("--depth", type=int, default=100, help="candidates per retrieval leg")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=_FUSION_HELP)
    p.add_argument("--min-score", type=float, help="drop hits scoring below this (score of the mode)")
    p.add_argument(
        "--filter",
        "-f",
        action="append",
        metavar="KEY=VALUE",
        help=_FILTER_HELP,
    )
    _scope_options(p)
    p.add_argument("--all-scopes", action="store_true", help="search every scope of a scoped collection")

    p = add(sub, "ask", cmd_ask, "answer a question from the collections, with citations and sources")
    p.add_argument("question")
    p.add_argument("--collection", "-c", action="append", help="collection to search (repeatable)")
    p.add_argument("--llm", help="model name for litellm (default: $AGENTRAG_LLM; none: extractive answer)")
    p.add_argument("--self-correct", action="store_true", help="judge the results and rewrite the query")
    p.add_argument("--route", action="store_true", help="pick the collections worth searching first")
    p.add_argument("--decompose", action="store_true", help="split a multi-part question into sub-questions")
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "lexical", "lexical_sql"])
    p.add_argument("--top-k", type=int, default=5, help="chunks per search (default 5)")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=_FUSION_HELP)
    p.add_argument("--entity", help="add this entity's knowledge-graph neighbourhood to the context")
    p.add_argument("--depth", type=int, default=1, help="hops of the --entity neighbourhood (default 1)")
    p.add_argument("--filter", "-f", action="append", metavar="KEY=VALUE", help=_FILTER_HELP)
    p.add_argument("--suppress-ungrounded", action="store_true", help="strip uncited sentences")
    p.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    p.add_argument("--proof", action="store_true", help="print the retrieval proof (JSON)")
    _scope_options(p)

    p = add(sub, "chat", cmd_chat, "chat in the terminal: follow-ups in context, citations per turn", False)
    p.add_argument(
        "--samples", action="store_true", help="chat over the sample corpus, linked to the session"
    )
    p.add_argument("--collection", "-c", action="append", help="collection to search (repeatable)")
    p.add_argument("--llm", help="model name for litellm (default: $AGENTRAG_LLM; none: local strategies)")
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "lexical", "lexical_sql"])
    p.add_argument("--rewrite", action="store_true", help="search 1-2 rewrites of each question too")
    p.add_argument("--llm-rerank", action="store_true", help="let the LLM order the chunks (needs --llm)")
    p.add_argument("--max-chunks", type=int, default=6, help="chunks in the context per turn (default 6)")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument("--session", help="session scope (with --samples: default a new session id)")

    rel = sub.add_parser("relations", help="knowledge-graph triples: add, import, list").add_subparsers(
        dest="rel_command", required=True
    )
    p = add(rel, "add", cmd_relations_add, "add one (subject, relation, object) triple")
    p.add_argument("subject")
    p.add_argument("relation")
    p.add_argument("object")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--source", help="where the triple comes from (e.g. a document)")
    _scope_options(p)
    p = add(rel, "import", cmd_relations_import, "import triples from a .csv or .jsonl file")
    p.add_argument("file")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--source", help="default source for triples without one")
    _scope_options(p)
    p = add(rel, "list", cmd_relations_list, "list triples, or an entity's neighbourhood")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--entity", help="only triples with this subject or object (case-insensitive)")
    p.add_argument("--depth", type=int, default=1, help="with --entity: hops to follow (default 1)")
    p.add_argument("--limit", type=int, default=1000)
    _scope_options(p)
    p.add_argument("--every-scope", action="store_true", help="list every tenant's (scoped collections)")

    p = add(sub, "log", cmd_log, "show the query log (written for new(..., query_log=True))")
    p.add_argument("--limit", "-n", type=int, default=20)
    p.add_argument("--tenant", help="only the questions asked in this tenant's scope")

    ev = sub.add_parser("eval", help="evaluate retrieval on a BEIR dataset").add_subparsers(
        dest="eval_command", required=True
    )
    p = add(
        ev,
        "beir",
        cmd_eval_beir,
        "index a BEIR-format dataset (one chunk per document; idempotent) and evaluate search on its "
        "queries: nDCG, recall, precision, MRR, hit rate and latency",
    )
    p.add_argument("path", help="folder with corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv")
    p.add_argument("--split", default="test", help="qrels split: qrels/SPLIT.tsv (default: test)")
    p.add_argument("--mode", default="hybrid", choices=list(_EVAL_MODES))
    p.add_argument("--top-k", "-k", type=int, default=10, help="hits per query, the deepest cut-off")
    p.add_argument("--depth", type=int, default=100, help="candidates per retrieval leg (default 100)")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=_FUSION_HELP)
    p.add_argument("--sample", type=int, help="evaluate N queries chosen at random (with --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compare",
        type=_eval_modes,
        metavar="MODES",
        help="modes side by side, e.g. hybrid,hybrid:rrf,vector,lexical (hybrid:FUSION picks the fusion), "
        "with paired p-values against the first",
    )
    p.add_argument(
        "--rerank",
        metavar="RERANKER",
        help="also evaluate the first mode reranked: cross-encoder[:MODEL or directory] or api:MODEL "
        "(litellm.rerank, e.g. api:cohere/rerank-english-v3.0)",
    )
    p.add_argument(
        "--rerank-candidates", type=int, default=50, help="fused candidates to rerank (default 50)"
    )
    p.add_argument("--rerank-api-base", help="api_base for --rerank api:MODEL")
    p.add_argument(
        "--pipeline",
        action="store_true",
        help="also run the offline pipeline (search, rerank, extractive answer) and report citation "
        "precision and grounded rate",
    )
    p.add_argument("--collection", "-c", help="collection to index and search (default: the folder's name)")
    p.add_argument(
        "--backend",
        choices=list(LOCAL_BACKENDS),
        help=f"how the local model runs, for the corpus and the queries alike (default: queries with"
        f" {DEFAULT_LOCAL_BACKEND}, the corpus with {DEFAULT_DOCUMENT_BACKEND} on a CPU with native"
        f" bfloat16 and torch installed, else {DEFAULT_LOCAL_BACKEND})",
    )

    p = add(
        sub,
        "demo",
        cmd_demo,
        "ingest the sample corpus and run the pipeline on two questions",
        json_flag=False,
    )
    p.add_argument("--samples", help="folder with collections.json and one folder per collection")

    _register_plugins(sub, add)  # e.g. serve, tenants, audit from the server extension
    return parser


def _register_plugins(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Commands of extension packages: ``register(sub, add)`` of each ``agentrag.cli`` entry point.

    The library never imports an extension (tests/test_layers.py); extensions declare their
    commands in pyproject.toml instead (``[project.entry-points."agentrag.cli"]``).
    """
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group="agentrag.cli"), key=lambda e: e.name):
        entry.load()(sub, add)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except AgentragError as exc:
        print(f"agentrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
