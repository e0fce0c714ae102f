"""Issue #38 item 2: upgrades lose nothing. Each release's fixture (a database it wrote, see
tests/fixtures/make_upgrade_fixture.py) is restored into a fresh database and upgraded with the
current code; then every document, chunk, vector, revision, grant, session link, relation, audit
row, tenant, sync record and HNSW index (a tenant's own too) is as it was, and the searches return
the hits recorded when the fixture was written. A migration that fails leaves the database as it
was: the whole run is one transaction."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrag.errors import MigrationError
from agentrag.store.migrate import available_migrations, upgrade
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder
from tests.conftest import REPO, fresh_database
from tests.fixtures.upgrade import EMBEDDER_DIMENSIONS, FIXTURES, digests, restore, search_hits

RELEASES = sorted(p.name.removesuffix(".sql.gz") for p in FIXTURES.glob("*.sql.gz"))
MAX_FIXTURE_BYTES = 5 * 1024 * 1024


def _expected(release: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{release}.json").read_text())


@pytest.fixture
def restored(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    release = request.param
    with fresh_database("agentrag_upgrade") as url:
        restore(FIXTURES / f"{release}.sql.gz", url)
        yield url, _expected(release)


def _store(url: str, *, migrate: bool) -> Store:
    return Store(url, embedder=FakeEmbedder(dimensions=EMBEDDER_DIMENSIONS), migrate=migrate)


def _differences(found: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    return [
        f"{name}: {found.get(name)} != recorded {want}"
        for name, want in expected.items()
        if found.get(name) != want
    ]


def test_every_release_has_a_fixture_and_each_is_small() -> None:
    import agentrag

    assert agentrag.__version__ in RELEASES, (
        "run python -m tests.fixtures.make_upgrade_fixture (docs/explanation/releases.md)"
    )
    for release in RELEASES:
        assert (FIXTURES / f"{release}.sql.gz").stat().st_size < MAX_FIXTURE_BYTES
        assert _expected(release)["version"] == release


@pytest.mark.parametrize("restored", RELEASES, indirect=True)
def test_an_upgraded_release_loses_nothing_and_searches_the_same(
    restored: tuple[str, dict[str, Any]],
) -> None:
    url, expected = restored
    store = _store(url, migrate=False)
    before = store.status()
    assert before.current == expected["schema"]
    applied = store.upgrade()
    assert [m.version for m in applied] == [m.version for m in before.pending]
    assert not store.status().pending
    assert _differences(digests(store.engine), expected["checks"]) == []
    assert search_hits(store) == expected["searches"]
    store.close()


def _migrations_with(tmp_path: Path, extra: dict[str, str]) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    for migration in available_migrations():
        shutil.copy(migration.path, folder / migration.path.name)
    for name, sql in extra.items():
        (folder / name).write_text(sql)
    return folder


@pytest.mark.parametrize("restored", RELEASES[-1:], indirect=True)
def test_a_failing_migration_leaves_the_database_as_it_was(
    restored: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, expected = restored
    store = _store(url, migrate=True)  # the current schema first: the broken run is all that is pending
    schema = store.status().applied
    destructive = {
        "9997_drop_revisions.sql": "DROP TABLE agentrag.document_revisions CASCADE;",
        "9998_rewrite.sql": (
            "UPDATE agentrag.documents SET metadata = '{}'::jsonb, grants = NULL;\n"
            "DELETE FROM agentrag.audit_events;\n"
            "UPDATE agentrag.chunks SET embedding = (SELECT embedding FROM agentrag.chunks LIMIT 1);\n"
            "DROP INDEX agentrag.chunks_hnsw_3;\n"
            "ALTER TABLE agentrag.relations ADD COLUMN weight real;"
        ),
        "9999_broken.sql": "SELECT 1 / 0;",
    }
    with pytest.raises(MigrationError, match="rolled back: division by zero"):
        upgrade(store.engine, _migrations_with(tmp_path, destructive))
    assert store.status().applied == schema  # none of the run's migrations is recorded
    assert _differences(digests(store.engine), expected["checks"]) == []
    assert search_hits(store) == expected["searches"]
    store.close()


def test_no_migration_leaves_the_upgrade_transaction() -> None:
    """An upgrade is atomic only if no migration commits or runs what cannot run in a transaction."""
    forbidden = re.compile(r"\b(COMMIT|ROLLBACK|BEGIN\s*;|CONCURRENTLY|VACUUM|START\s+TRANSACTION)\b", re.I)
    for migration in available_migrations():
        sql = "\n".join(line.split("--", 1)[0] for line in migration.path.read_text().splitlines())
        sql = re.sub(r"\$\$.*?\$\$", "", sql, flags=re.S)  # function bodies (BEGIN ... END) are fine
        assert not forbidden.search(sql), f"{migration.path.name}: {forbidden.search(sql).group(0)}"  # type: ignore[union-attr]


def test_db_upgrade_dry_run_lists_the_pending_migrations_and_applies_none() -> None:
    every = available_migrations()
    with fresh_database("agentrag_dry_run") as url:

        def cli(*argv: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "agentrag", "--database-url", url, "db", *argv],
                cwd=REPO, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return done.stdout

        listed = json.loads(cli("upgrade", "--dry-run", "--json"))
        assert listed["dry_run"] is True and listed["applied"] == []
        assert listed["pending"] == [m.version for m in every] and listed["current"] == 0
        text = cli("upgrade", "--dry-run")
        assert f"{len(every)} pending migration(s), not applied (--dry-run)" in text
        assert all(f"{m.version:04d}_{m.name}" in text for m in every)
        assert json.loads(cli("status", "--json"))["applied"] == []  # still nothing applied
        done = json.loads(cli("upgrade", "--json"))
        assert done["applied"] == [m.version for m in every] and done["pending"] == []
        assert "up to date" in cli("upgrade", "--dry-run")
