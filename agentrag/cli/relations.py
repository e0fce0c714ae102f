"""``agentrag relations add | import | list``: knowledge-graph triples."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import (
    AddCommand,
    principal_options,
    principal_scope,
    print_json,
    scope_of,
    scope_options,
)
from agentrag.errors import InvalidInputError

__all__ = ["register"]


def _relation_scope(args: argparse.Namespace) -> Any:
    """--tenant / --workspace / --session, or --every-scope (listing only)."""
    from agentrag.scope import Scope

    if getattr(args, "every_scope", False):
        if args.tenant or args.workspace or args.session:
            raise InvalidInputError(
                "--every-scope cannot be combined with --tenant, --workspace or --session"
            )
        return Scope.every()
    return scope_of(args)


def cmd_relations_add(args: argparse.Namespace) -> int:
    added = common.open_store(args).add_relations(
        args.collection,
        [(args.subject, args.relation, args.object)],
        source=args.source,
        scope=_relation_scope(args),
    )
    triple = f"{args.subject} --{args.relation}--> {args.object}"
    if args.json:
        print_json({"added": added})
    else:
        print(f"added {triple}" if added else f"already present: {triple}")
    return 0


def cmd_relations_import(args: argparse.Namespace) -> int:
    from agentrag.store.relations import read_triples

    triples = read_triples(args.file)
    added = common.open_store(args).add_relations(
        args.collection, triples, source=args.source, scope=_relation_scope(args)
    )
    if args.json:
        print_json({"read": len(triples), "added": added})
    else:
        present = len(triples) - added
        print(f"{args.collection}: {added} new relations ({len(triples)} read, {present} already present)")
    return 0


def cmd_relations_list(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    scope = principal_scope(args, _relation_scope(args))  # acl=True: the triples of readable documents
    if args.entity and args.depth > 1:
        found = store.neighbourhood(args.collection, args.entity, args.depth, limit=args.limit, scope=scope)
    else:
        found = store.relations(args.collection, entity=args.entity, limit=args.limit, scope=scope)
    if args.json:
        print_json([r.to_dict() for r in found])
        return 0
    if not found:
        print("no relations" + (f" for {args.entity!r}" if args.entity else ""))
    for r in found:
        source = f"  ({r.source})" if r.source else ""
        print(f"{r.label:<10} {r}{source}")
    return 0


def register(sub: Any, add: AddCommand) -> None:
    rel = sub.add_parser("relations", help="knowledge-graph triples: add, import, list").add_subparsers(
        dest="rel_command", required=True
    )
    p = add(rel, "add", cmd_relations_add, "add one (subject, relation, object) triple")
    p.add_argument("subject")
    p.add_argument("relation")
    p.add_argument("object")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--source", help="where the triple comes from (e.g. a document)")
    scope_options(p)
    p = add(rel, "import", cmd_relations_import, "import triples from a .csv or .jsonl file")
    p.add_argument("file")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--source", help="default source for triples without one")
    scope_options(p)
    p = add(rel, "list", cmd_relations_list, "list triples, or an entity's neighbourhood")
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--entity", help="only triples with this subject or object (case-insensitive)")
    p.add_argument("--depth", type=int, default=1, help="with --entity: hops to follow (default 1)")
    p.add_argument("--limit", type=int, default=1000)
    scope_options(p)
    principal_options(p)
    p.add_argument("--every-scope", action="store_true", help="list every tenant's (scoped collections)")
