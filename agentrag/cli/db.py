"""``agentrag db upgrade | status | stop``: the schema and the embedded server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json

__all__ = ["register"]


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    store = common.open_store(args)
    status = store.status()
    if args.json:
        print_json({"current": status.current, "pending": [m.version for m in status.pending]})
    else:
        print(f"database: {store.url}\n{status}")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from agentrag.store.store import Store

    store = Store(common.database_url(args), migrate=False)
    status = store.status()
    if args.json:
        print_json(
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
        print_json({"stopped": stopped, "pgdata": str(where)})
    else:
        print(f"stopped the embedded PostgreSQL in {where}" if stopped else f"no server running in {where}")
    return 0


def register(sub: Any, add: AddCommand) -> None:
    db = sub.add_parser("db", help="schema: upgrade, status, stop").add_subparsers(
        dest="db_command", required=True
    )
    add(db, "upgrade", cmd_db_upgrade, "apply pending migrations")
    add(db, "status", cmd_db_status, "show the schema version and pending migrations")
    add(db, "stop", cmd_db_stop, "stop the embedded server (the CLI leaves it running between calls)")
