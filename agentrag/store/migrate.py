"""Versioned plain-SQL migrations from ``migrations/NNNN_name.sql``.

Every run takes a transaction-scoped advisory lock first, so two processes upgrading at
once serialise; each pending file runs in that one transaction and is recorded in
``agentrag.migrations``. A failure rolls the whole upgrade back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentrag._resources import resource_dir
from agentrag.errors import ExtensionMissingError, MigrationError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

__all__ = ["Migration", "SchemaStatus", "available_migrations", "status", "upgrade"]

_LOCK_KEY = 0x61676E747261  # "agntra": the advisory lock all agentrag upgrades share
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    path: Path


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    applied: tuple[int, ...]
    pending: tuple[Migration, ...]
    vector_version: str | None

    @property
    def current(self) -> int:
        return max(self.applied, default=0)

    def __str__(self) -> str:
        pending = ", ".join(f"{m.version:04d}_{m.name}" for m in self.pending) or "none"
        return (
            f"schema version {self.current}; pending: {pending}; pgvector {self.vector_version or 'missing'}"
        )


def available_migrations(directory: Path | None = None) -> list[Migration]:
    directory = directory or resource_dir("migrations")
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"migration file {path.name!r} is not named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {directory}")
    return found


def _applied(conn: Connection) -> tuple[int, ...]:
    from sqlalchemy import text

    exists = conn.execute(text("SELECT to_regclass('agentrag.migrations')")).scalar()
    if exists is None:
        return ()
    return tuple(conn.execute(text("SELECT version FROM agentrag.migrations ORDER BY version")).scalars())


def _vector_version(conn: Connection) -> str | None:
    from sqlalchemy import text

    return conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()


def _check_vector_available(conn: Connection) -> None:
    from sqlalchemy import text

    installed = _vector_version(conn)
    available = conn.execute(text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).scalar()
    if installed is None and available is None:
        raise ExtensionMissingError(
            "the PostgreSQL server has no pgvector extension. Install it on the server "
            "(e.g. `apt install postgresql-16-pgvector`, or build from github.com/pgvector/pgvector), "
            "then run `agentrag db upgrade`; or unset AGENTRAG_DATABASE_URL to use the embedded server, "
            "which ships pgvector 0.8."
        )


def status(engine: Engine, directory: Path | None = None) -> SchemaStatus:
    with engine.connect() as conn:
        applied = _applied(conn)
        vector = _vector_version(conn)
    pending = tuple(m for m in available_migrations(directory) if m.version not in applied)
    return SchemaStatus(applied, pending, vector)


def upgrade(engine: Engine, directory: Path | None = None) -> list[Migration]:
    """Apply pending migrations; return the ones this call applied (empty when up to date)."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    migrations = available_migrations(directory)
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
            _check_vector_available(conn)
            conn.execute(text("CREATE SCHEMA IF NOT EXISTS agentrag"))
            conn.execute(
                text(
                    "CREATE TABLE IF NOT EXISTS agentrag.migrations ("
                    " version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            done = set(_applied(conn))
            applied = []
            for migration in migrations:
                if migration.version in done:
                    continue
                sql = migration.path.read_text(encoding="utf-8")
                conn.exec_driver_sql(sql)
                conn.execute(
                    text("INSERT INTO agentrag.migrations (version, name) VALUES (:v, :n)"),
                    {"v": migration.version, "n": migration.name},
                )
                applied.append(migration)
            return applied
    except ExtensionMissingError:
        raise
    except DBAPIError as exc:
        raise MigrationError(f"schema upgrade failed and was rolled back: {exc.orig}") from exc
