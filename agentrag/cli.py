"""The ``agentrag`` command line: the library's verbs, readable output, ``--json`` for scripts.

Exit codes: 0 success, 1 partial failure (some files failed to ingest), 2 an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.errors import AgentragError

if TYPE_CHECKING:
    from agentrag.store.store import Store

__all__ = ["main", "build_parser"]

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


def _store(args: argparse.Namespace) -> Store:
    from agentrag.store.store import Store

    return Store(getattr(args, "database_url", None))


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

    store = Store(args.database_url, migrate=False)
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


# ---- collections -------------------------------------------------------------------------------
def cmd_collections_list(args: argparse.Namespace) -> int:
    collections = _store(args).collections()
    if args.json:
        _print_json([c.to_dict() for c in collections])
        return 0
    if not collections:
        print("no collections yet: agentrag collections create NAME --description '...'")
    for c in collections:
        print(f"{c.name:<24} {c.document_count:>6} docs {c.chunk_count:>8} chunks  {c.embed_model} ({c.dimensions}d)")
        if c.description:
            print(f"{'':<24} {c.description}")
    return 0


def cmd_collections_create(args: argparse.Namespace) -> int:
    c = _store(args).create_collection(
        args.name, description=args.description, distance=args.distance, scoped=args.scoped
    )
    _print_json(c.to_dict()) if args.json else print(f"created {c!r}")
    return 0


def cmd_collections_delete(args: argparse.Namespace) -> int:
    _store(args).delete_collection(args.name)
    print(f"deleted collection {args.name!r}")
    return 0


# ---- ingest ------------------------------------------------------------------------------------
def cmd_ingest(args: argparse.Namespace) -> int:
    from agentrag.errors import CollectionNotFoundError
    from agentrag.store.ingest import iter_files

    store = _store(args)
    try:
        store.collection(args.collection)
    except CollectionNotFoundError:
        if not args.create:
            raise
        store.create_collection(args.collection, description=args.description or "")
    bar = None
    if not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=sum(1 for _ in iter_files(args.paths)), unit="doc", file=sys.stderr)

    def progress(event: Any) -> None:
        if bar is not None and event.status != "writing":
            bar.update(1)

    try:
        report = store.ingest(
            args.paths,
            collection=args.collection,
            metadata=_key_values(args.metadata, "--metadata"),
            tenant=args.tenant,
            workspace=args.workspace,
            session=args.session,
            on_progress=progress,
        )
    finally:
        if bar is not None:
            bar.close()
    _print_json(report.to_dict()) if args.json else print(report)
    return 0 if report.ok else 1


# ---- documents ---------------------------------------------------------------------------------
def cmd_documents_list(args: argparse.Namespace) -> int:
    docs = _store(args).documents(args.collection, tenant=args.tenant, workspace=args.workspace)
    if args.json:
        _print_json([d.to_dict() for d in docs])
        return 0
    for d in docs:
        print(f"{d.id}  {d.collection:<16} {d.chunk_count:>4} chunks  {d.original_filename or d.source}")
    return 0


def cmd_documents_delete(args: argparse.Namespace) -> int:
    store = _store(args)
    for doc_id in args.ids:
        store.delete_document(doc_id)
        print(f"deleted {doc_id}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from agentrag.demo import run_demo

    return run_demo(args)


# ---- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrag", description="Agentic RAG over PostgreSQL + pgvector.")
    parser.add_argument(
        "--database-url", help="PostgreSQL URL (default: $AGENTRAG_DATABASE_URL, else the embedded server)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(parent: Any, name: str, handler: Handler, help: str, json_flag: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        if json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    db = sub.add_parser("db", help="schema: upgrade, status").add_subparsers(dest="db_command", required=True)
    add(db, "upgrade", cmd_db_upgrade, "apply pending migrations")
    add(db, "status", cmd_db_status, "show the schema version and pending migrations")

    col = sub.add_parser("collections", help="list, create, delete collections").add_subparsers(
        dest="col_command", required=True
    )
    add(col, "list", cmd_collections_list, "list collections")
    p = add(col, "create", cmd_collections_create, "create a collection")
    p.add_argument("name")
    p.add_argument("--description", default="", help="what the collection holds (used for routing)")
    p.add_argument("--distance", default="cosine", choices=["cosine", "l2", "inner_product"])
    p.add_argument("--scoped", action="store_true", help="refuse queries without a tenant/workspace/session scope")
    p = add(col, "delete", cmd_collections_delete, "delete a collection and its documents", json_flag=False)
    p.add_argument("name")

    p = add(sub, "ingest", cmd_ingest, "ingest files and directories (.txt, .md, .pdf)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--description", help="description for --create")
    p.add_argument("--metadata", "-m", action="append", metavar="KEY=VALUE")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument("--session")

    docs = sub.add_parser("documents", help="list, delete documents").add_subparsers(dest="doc_command", required=True)
    p = add(docs, "list", cmd_documents_list, "list documents")
    p.add_argument("--collection", "-c")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p = add(docs, "delete", cmd_documents_delete, "delete documents by id", json_flag=False)
    p.add_argument("ids", nargs="+")

    p = add(sub, "demo", cmd_demo, "ingest the sample corpus and run the pipeline on two questions", json_flag=False)
    p.add_argument("--samples", help="folder with collections.json and one folder per collection")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except AgentragError as exc:
        print(f"agentrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
