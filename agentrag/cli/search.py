"""``agentrag search``: hybrid, vector or lexical search over collections, with the load timing."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli.common import (
    FILTER_HELP,
    FUSION_HELP,
    SEARCH_MODES,
    AddCommand,
    Load,
    principal_options,
    principal_scope,
    print_json,
    scope_options,
    search_filters,
)

__all__ = ["register"]


def cmd_search(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    scope = None
    if args.all_scopes or args.tenant or args.workspace or args.session:
        scope = Scope(
            tenant=args.tenant, workspace=args.workspace, session=args.session, all_scopes=args.all_scopes
        )
    scope = principal_scope(args, scope)
    import time

    load = Load()
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
        filters=search_filters(args.filter),
        scope=scope,
    )
    search_ms = (time.perf_counter() - t) * 1000
    if args.json:
        print_json({**result.to_dict(), "load_ms": load.to_dict(), "search_ms": round(search_ms, 1)})
        return 0
    print(result)
    print(load.line("search", search_ms))
    return 0


def register(sub: Any, add: AddCommand) -> None:
    from agentrag.retrieval.fusion import DEFAULT_FUSION, FUSIONS

    p = add(
        sub,
        "search",
        cmd_search,
        "search collections (hybrid: pgvector + BM25, fused by relative score or RRF)",
    )
    p.add_argument("query")
    p.add_argument("--collection", "-c", action="append", required=True, help="repeatable")
    p.add_argument("--mode", default="hybrid", choices=list(SEARCH_MODES))
    p.add_argument("--top-k", "-k", type=int, default=5, help="hits to return (1-50)")
    p.add_argument("--depth", type=int, default=100, help="candidates per retrieval leg")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=FUSION_HELP)
    p.add_argument("--min-score", type=float, help="drop hits scoring below this (score of the mode)")
    p.add_argument(
        "--filter",
        "-f",
        action="append",
        metavar="KEY=VALUE",
        help=FILTER_HELP,
    )
    scope_options(p)
    principal_options(p)
    p.add_argument("--all-scopes", action="store_true", help="search every scope of a scoped collection")
