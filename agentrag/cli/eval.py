"""``agentrag eval beir``: index a BEIR dataset and evaluate search (and the offline pipeline) on it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import FUSION_HELP, SEARCH_MODES, AddCommand, print_json, progress

__all__ = ["register"]


def _eval_modes(value: str) -> list[tuple[str, str | None]]:
    """``--compare hybrid,hybrid:rrf,vector`` -> ``[(mode, fusion or None), ...]``, checked."""
    from agentrag.retrieval.fusion import FUSIONS

    systems: list[tuple[str, str | None]] = []
    for token in dict.fromkeys(t.strip() for t in value.split(",") if t.strip()):
        mode, _, fusion = token.partition(":")
        if mode not in SEARCH_MODES or (fusion and (mode != "hybrid" or fusion not in FUSIONS)):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated modes from {', '.join(SEARCH_MODES)} (hybrid:FUSION for a fusion "
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


def cmd_eval_beir(args: argparse.Namespace) -> int:
    """Index a BEIR dataset (idempotent), evaluate one mode or compare several, print the table."""
    import re

    from agentrag.eval import compare, evaluate, ingest_beir, load_beir

    dataset = load_beir(args.path, args.split)
    collection = args.collection or re.sub(r"[^A-Za-z0-9_.-]", "_", dataset.name).lstrip(".-")[:63]
    store = common.open_store(args)
    if args.backend is not None:
        from agentrag.embedders import LocalEmbedder
        from agentrag.store.store import Store

        store = Store(engine=store.engine, embedder=LocalEmbedder(backend=args.backend), migrate=False)
    bars = not args.json  # a bar on a terminal, else a line every 30 s (the first SciFact ingest: minutes)
    queries = min(args.sample, len(dataset.queries)) if args.sample else len(dataset.queries)
    print(
        f"BEIR {dataset.name} ({dataset.split}): {queries} queries, {len(dataset.corpus)} documents; "
        f"collection {collection!r} in {store.url}",
        file=sys.stderr,
    )
    with progress(len(dataset.corpus), bars, desc="ingest", leave=False) as ingested:
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
        with progress(queries, bars, desc=desc, unit="query", leave=False) as evaluated:
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
        columns += ("citation_precision", "grounded", "abstained")
    comparison = compare(
        reports,
        columns=tuple(dict.fromkeys(columns)),
        significance=f"ndcg@{at}" if len(reports) > 1 else None,
    )
    if args.json:
        print_json(
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


def register(sub: Any, add: AddCommand) -> None:
    from agentrag.embedders import DEFAULT_DOCUMENT_BACKEND, DEFAULT_LOCAL_BACKEND, LOCAL_BACKENDS
    from agentrag.eval import answers_cli
    from agentrag.retrieval.fusion import DEFAULT_FUSION, FUSIONS

    ev = sub.add_parser("eval", help="evaluate retrieval (BEIR) and answers (question sets)").add_subparsers(
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
    p.add_argument("--mode", default="hybrid", choices=list(SEARCH_MODES))
    p.add_argument("--top-k", "-k", type=int, default=10, help="hits per query, the deepest cut-off")
    p.add_argument("--depth", type=int, default=100, help="candidates per retrieval leg (default 100)")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=FUSION_HELP)
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
    answers_cli.register(ev, add)  # agentrag eval answers FILE
