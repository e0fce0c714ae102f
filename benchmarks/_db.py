"""Benchmarks use their own database on the embedded server (or AGENTRAG_DATABASE_URL)."""

from __future__ import annotations

import os
from typing import Any

from agentrag.store.store import Store

#: AGENTRAG_BENCH_DATABASE: another database on the same server (two branches' runs side by side)
BENCH_DATABASE = os.environ.get("AGENTRAG_BENCH_DATABASE", "agentrag_bench")


def bench_url() -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from agentrag.store.server import database_url

    base = make_url(database_url())
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": BENCH_DATABASE}
        ).scalar()
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{BENCH_DATABASE}"'))
    admin.dispose()
    return base.set(database=BENCH_DATABASE).render_as_string(hide_password=False)


def bench_store(embedder: Any = None) -> Store:
    return Store(bench_url(), embedder=embedder)
