"""``agentrag log``: the query log (written for ``new(..., query_log=True)``)."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json

__all__ = ["register"]


def cmd_log(args: argparse.Namespace) -> int:
    from agentrag.scope import Scope

    scope = Scope(tenant=args.tenant) if args.tenant else None
    entries = common.open_store(args).query_logs(limit=args.limit, scope=scope)
    if args.json:
        print_json([e.to_dict() for e in entries])
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


def register(sub: Any, add: AddCommand) -> None:
    p = add(sub, "log", cmd_log, "show the query log (written for new(..., query_log=True))")
    p.add_argument("--limit", "-n", type=int, default=20)
    p.add_argument("--tenant", help="only the questions asked in this tenant's scope")
