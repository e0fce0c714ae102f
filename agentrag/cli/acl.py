"""``agentrag acl grant | revoke | show | reset | share``: document permissions

The how-to: docs/how-to/permissions.md."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json
from agentrag.errors import InvalidInputError

__all__ = ["register"]


def _scope(args: argparse.Namespace) -> Any:
    """The tenant-rooted scope the document lives in (--tenant / --workspace, or --every-scope)."""
    from agentrag.scope import Scope

    if args.every_scope:
        if args.tenant or args.workspace:
            raise InvalidInputError("--every-scope cannot be combined with --tenant or --workspace")
        return Scope.every()
    if args.tenant or args.workspace:
        return Scope(tenant=args.tenant, workspace=args.workspace)
    return None


def _show(args: argparse.Namespace, doc_id: str, grants: list[str] | None) -> int:
    if args.json:
        print_json({"document_id": doc_id, "grants": grants})
    elif grants is None:
        print(f"{doc_id}: its collection does not enforce grants (created without --acl)")
    else:
        print(f"{doc_id}: {', '.join(grants) if grants else '(no grant: admins only)'}")
    return 0


def cmd_acl_grant(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    return _show(args, args.document, store.grant(args.document, args.grants, scope=_scope(args)))


def cmd_acl_revoke(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    return _show(args, args.document, store.revoke(args.document, args.grants, scope=_scope(args)))


def _listed(grants: list[str]) -> str:
    return ", ".join(grants) if grants else "-"


def _show_details(args: argparse.Namespace, details: Any) -> int:
    """The grants and where they come from: the source's, and what was changed by hand."""
    if args.json:
        print_json(
            {
                "document_id": details.document_id,
                "grants": details.grants,
                "source": details.source,
                "granted": details.granted,
                "revoked": details.revoked,
            }
        )
        return 0
    print(f"{details.document_id}: {', '.join(details.grants) or '(no grant: admins only)'}")
    print(f"  from its source: {_listed(details.source)}")
    if details.by_hand:
        print(f"  granted by hand: {_listed(details.granted)}")
        print(f"  revoked by hand: {_listed(details.revoked)}")
        print(f"  (agentrag acl reset {details.document_id} undoes what was changed by hand)")
    return 0


def cmd_acl_show(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    grants = store.grants(args.document, scope=_scope(args))
    if grants is None:
        return _show(args, args.document, grants)
    return _show_details(args, store.grant_details(args.document, scope=_scope(args)))


def cmd_acl_reset(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    return _show_details(args, store.reset_grants(args.document, scope=_scope(args)))


def cmd_acl_share(args: argparse.Namespace) -> int:
    common.open_store(args).share(args.document, workspace=args.workspace, scope=_scope(args))
    print(f"shared {args.document}" + (f" into workspace {args.workspace!r}" if args.workspace else ""))
    return 0


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tenant", help="the document's tenant (required on scoped collections)")
    p.add_argument("--workspace")
    p.add_argument("--every-scope", action="store_true", help="the document may be in any tenant")


def register(sub: Any, add: AddCommand) -> None:
    acl = sub.add_parser("acl", help="grant, revoke, show, reset who may read a document").add_subparsers(
        dest="acl_command", required=True
    )
    grant_help = "user:NAME, group:NAME or everyone"
    for name, handler, what in (
        ("grant", cmd_acl_grant, "let users / groups read a document (acl=True collections)"),
        ("revoke", cmd_acl_revoke, "take grants away (the next query obeys)"),
    ):
        p = add(acl, name, handler, what)
        p.add_argument("document", help="the document id (agentrag documents list)")
        p.add_argument("grants", nargs="+", metavar="GRANT", help=grant_help)
        _where(p)
    for name, handler, what in (
        ("show", cmd_acl_show, "a document's grants: its source's, granted and revoked by hand"),
        ("reset", cmd_acl_reset, "undo what was granted or revoked by hand: the source's grants again"),
    ):
        p = add(acl, name, handler, what)
        p.add_argument("document")
        _where(p)
    p = add(acl, "share", cmd_acl_share, "promote a private session upload to the tenant's shared documents")
    p.add_argument("document")
    p.add_argument("--tenant", help="the document's tenant (required on scoped collections)")
    p.add_argument("--workspace", help="the workspace it joins (default: its own)")
    p.add_argument("--every-scope", action="store_true", help="the document may be in any tenant")
