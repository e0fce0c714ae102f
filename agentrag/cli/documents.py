"""``agentrag documents list | show | revisions | delete``."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, principal_options, principal_scope, print_json
from agentrag.errors import InvalidInputError

__all__ = ["register"]


def cmd_documents_list(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    if args.every_scope and (args.tenant or args.workspace):
        raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
    # acl=True collections: what --user / --group may read (docs/how-to/permissions.md)
    scope = principal_scope(args, Scope.every() if args.every_scope else _tenant_scope(args))
    docs = common.open_store(args).documents(args.collection, scope=scope)
    if args.json:
        print_json([d.to_dict() for d in docs])
        return 0
    for d in docs:
        print(f"{d.id}  {d.collection:<16} {d.chunk_count:>4} chunks  {d.original_filename or d.source}")
    return 0


def _tenant_scope(args: argparse.Namespace) -> Any:
    """``Scope(tenant, workspace)`` from --tenant / --workspace, or None."""
    from agentrag.scope import Scope

    return Scope(tenant=args.tenant, workspace=args.workspace) if args.tenant or args.workspace else None


def _read_scope(args: argparse.Namespace) -> Any:
    """--tenant / --workspace and the principal of --user / --group / --admin (None: no scope)."""
    return principal_scope(args, _tenant_scope(args))


def cmd_documents_show(args: argparse.Namespace) -> int:
    """One document with its text; ``--revision N``: the text that revision had."""
    doc = common.open_store(args).document(args.id, revision=args.revision, scope=_read_scope(args))
    if args.json:
        print_json({**doc.to_dict(), "text": doc.text})
        return 0
    revision = f" revision {doc.revision}" if doc.revision is not None else ""
    print(f"{doc.id}  {doc.collection}:{doc.source}{revision}  sha256 {doc.sha256}\n")
    print(doc.text)
    return 0


def cmd_documents_revisions(args: argparse.Namespace) -> int:
    revisions = common.open_store(args).revisions(args.id, scope=_read_scope(args))
    if args.json:
        print_json([r.to_dict() for r in revisions])
        return 0
    for r in revisions:
        until = r.valid_to.isoformat(timespec="seconds") if r.valid_to else "current"
        print(
            f"{r.revision:>4}  {r.document_id}  {r.source}"
            f"  {r.valid_from.isoformat(timespec='seconds')} .. {until}"
        )
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
    docs = sub.add_parser("documents", help="list, show, delete documents; their revisions").add_subparsers(
        dest="doc_command", required=True
    )
    p = add(docs, "list", cmd_documents_list, "list documents")
    p.add_argument("--collection", "-c")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument("--every-scope", action="store_true", help="list every tenant's (scoped collections)")
    principal_options(p)
    p = add(docs, "show", cmd_documents_show, "show a document's text (--revision N: an earlier revision's)")
    p.add_argument("id")
    p.add_argument("--revision", type=int, metavar="N", help="the revision's number (documents revisions ID)")
    p.add_argument("--tenant", help="the document's tenant (scoped collections)")
    p.add_argument("--workspace")
    principal_options(p)
    p = add(docs, "revisions", cmd_documents_revisions, "list a document's revisions")
    p.add_argument("id")
    p.add_argument("--tenant", help="the document's tenant (scoped collections)")
    p.add_argument("--workspace")
    principal_options(p)  # revisions are read as the document is (acl=True: --user / --group / --admin)
    p = add(docs, "delete", cmd_documents_delete, "delete documents by id", json_flag=False)
    p.add_argument("ids", nargs="+")
    p.add_argument("--tenant", help="the documents' tenant (required on scoped collections)")
    p.add_argument("--workspace")
    p.add_argument("--every-scope", action="store_true", help="delete in any tenant (scoped collections)")
