"""``agentrag documents list | delete``."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json
from agentrag.errors import InvalidInputError

__all__ = ["register"]


def cmd_documents_list(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    if args.every_scope:
        if args.tenant or args.workspace:
            raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
        docs = common.open_store(args).documents(args.collection, scope=Scope.every())
    else:
        docs = common.open_store(args).documents(
            args.collection, tenant=args.tenant, workspace=args.workspace
        )
    if args.json:
        print_json([d.to_dict() for d in docs])
        return 0
    for d in docs:
        print(f"{d.id}  {d.collection:<16} {d.chunk_count:>4} chunks  {d.original_filename or d.source}")
    return 0


def cmd_documents_delete(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    store = common.open_store(args)
    scope = Scope.every() if args.every_scope else None
    if args.tenant or args.workspace:
        if args.every_scope:
            raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
        scope = Scope(tenant=args.tenant, workspace=args.workspace)
    for doc_id in args.ids:
        store.delete_document(doc_id, scope=scope)
        print(f"deleted {doc_id}")
    return 0


def register(sub: Any, add: AddCommand) -> None:
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
