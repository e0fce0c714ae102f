"""``agentrag db start | upgrade | status | stop``: the schema and the embedded server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, print_json

__all__ = ["register"]


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    """Apply the pending migrations, all in one transaction (a failure leaves the database as it
    was); ``--dry-run`` lists them and changes nothing."""
    from agentrag.store.store import Store

    store = Store(common.database_url(args), migrate=False)
    pending = store.status().pending
    applied = [] if args.dry_run else store.upgrade()
    status = store.status()
    if args.json:
        print_json(
            {
                "current": status.current,
                "dry_run": args.dry_run,
                "applied": [m.version for m in applied],
                "pending": [m.version for m in status.pending],
            }
        )
    elif args.dry_run:
        names = "".join(f"\n  {m.version:04d}_{m.name}" for m in pending)
        print(
            f"database: {store.url}\nschema version {status.current}; "
            + (
                f"{len(pending)} pending migration(s), not applied (--dry-run):{names}"
                if pending
                else "up to date"
            )
        )
    else:
        done = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "nothing (up to date)"
        print(f"database: {store.url}\napplied: {done}\n{status}")
    store.close()
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


def _given_by_url(args: argparse.Namespace, verb: str) -> bool:
    """Whether the database is given by URL (--database-url or $AGENTRAG_DATABASE_URL): then
    ``db start`` / ``db stop`` have no embedded server to act on, and say so."""
    import os

    if args.database_url or os.environ.get("AGENTRAG_DATABASE_URL"):
        print(f"db {verb} {verb}s the embedded server; this database is given by URL", file=sys.stderr)
        return True
    return False


def cmd_db_start(args: argparse.Namespace) -> int:
    from agentrag.store.server import data_dir, embedded_url, idle_timeout, running_server_url

    if _given_by_url(args, "start"):
        return 2
    where = data_dir() / "pgdata"
    already = running_server_url() is not None
    url = embedded_url(keep_running=True)  # starts it (or reuses it) under the idle watchdog
    if args.json:
        print_json(
            {"url": url, "pgdata": str(where), "already_running": already, "idle_timeout": idle_timeout()}
        )
    else:
        state = "already running" if already else "started"
        print(
            f"{state}: the embedded PostgreSQL in {where}\n"
            f"url: {url}\n"
            f"it stops after {idle_timeout():.0f} s without use (AGENTRAG_SERVER_IDLE_TIMEOUT), "
            "or with `agentrag db stop`"
        )
    return 0


def cmd_db_stop(args: argparse.Namespace) -> int:
    """Stop the embedded server, unless work is in flight on it (``--force``: stop it anyway)."""
    from agentrag.store.server import data_dir, stop_embedded

    if _given_by_url(args, "stop"):
        return 2
    where = data_dir() / "pgdata"
    if not args.force and (busy := _in_flight(where)) is not None:
        connections, calls = busy
        if args.json:
            print_json(
                {"stopped": False, "pgdata": str(where), "busy_connections": connections, "calls": calls}
            )
        print(
            f"not stopped: the embedded PostgreSQL in {where} is in use ({connections} connection(s) "
            f"running a statement or inside a transaction, {calls} other agentrag call(s) under way); "
            "stopping it would abort their work. Let them finish, or stop it anyway: "
            "agentrag db stop --force",
            file=sys.stderr,
        )
        return 1
    stopped = stop_embedded()
    if args.json:
        print_json({"stopped": stopped, "pgdata": str(where)})
    else:
        print(f"stopped the embedded PostgreSQL in {where}" if stopped else f"no server running in {where}")
    return 0


def _in_flight(pgdata: Any) -> tuple[int, int] | None:
    """``(busy connections, live CLI calls)`` of the running server when either is not zero, else None
    (idle, not running, or not reachable to ask: nothing this call can protect)."""
    from agentrag.store.server import client_connections, leases_alive, running_server_url

    url = running_server_url("postgres", pgdata)
    if url is None:
        return None
    try:
        busy, _idle = client_connections(url)
    except Exception:  # a server that takes no connection has no statement to abort
        busy = 0
    calls = leases_alive(pgdata)
    return (busy, calls) if busy or calls else None


def register(sub: Any, add: AddCommand) -> None:
    db = sub.add_parser("db", help="the database: start, upgrade, status, stop").add_subparsers(
        dest="db_command", required=True
    )
    add(db, "start", cmd_db_start, "start the embedded server (or find it running) and say where it is")
    upgrade = add(db, "upgrade", cmd_db_upgrade, "apply pending migrations (one transaction: all or none)")
    upgrade.add_argument("--dry-run", action="store_true", help="list the pending migrations; apply none")
    add(db, "status", cmd_db_status, "show the schema version and pending migrations")
    stop = add(db, "stop", cmd_db_stop, "stop the embedded server (the CLI leaves it running between calls)")
    stop.add_argument(
        "--force", action="store_true", help="stop it even with statements or agentrag calls under way"
    )
