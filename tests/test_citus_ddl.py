"""Every migration's DDL against what Citus can distribute (ARCHITECTURE.md, "Citus").

No Citus here, so the check reads two things: the schema the migrations leave in the real test database
(PostgreSQL's catalogue: constraints, unique indexes, foreign keys, triggers, rules, inheritance) against
the distribution plan below, and the migrations' text for statements Citus does not propagate to its
workers. What the plan still has to change before a cluster can run it (the ``shard_key`` column that
every unique key and co-located foreign key must contain) is listed exactly in ``PENDING``: a new
violation fails, and so does a listed one that went away (then drop it from the list).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
KEY = "shard_key"  # the planned distribution column: coalesce(tenant_id, 'c:' || collection_id)

# How each table of the agentrag schema distributes (ARCHITECTURE.md's table). A new table must be
# placed here: distributed tables are co-located on KEY, reference tables are copied to every node.
PLAN: dict[str, str] = {
    # documents.grants / .private (migrations 0030, 0031): columns of the document row, so a grant lives
    # on the document's shard (co-located by tenant) and a grant or revoke is a single-shard UPDATE; the
    # partial GIN index on grants is built per shard
    "documents": "distributed",
    "chunks": "distributed",
    "chunk_tsv": "distributed",
    "document_sessions": "distributed",
    "relations": "distributed",
    "query_logs": "distributed",
    "audit_events": "distributed",
    "rate_limits": "distributed",  # keyed by tenant_id, already its primary key
    # collections.acl / .private_documents / .tenant_id (0030-0032): small flags read by every search's
    # plan, on the reference table; private_documents is set once, by a collection's first private
    # upload (one two-phase commit per collection, not per document)
    "collections": "reference",
    "tenants": "reference",
    "migrations": "local",  # the migration runner's own table, on the coordinator
    "document_revisions": "distributed",  # a document's history, read with the document (migration 0020)
    "sync_sources": "distributed",  # a synced folder per (collection, tenant, workspace) (0021)
    "sync_files": "distributed",  # its files' state, co-located with their source
    # a collection's k-means centroids (0056): one small row per collection, read by its searches and
    # writes, written by Store.optimize only
    "vector_clusters": "reference",
}
DISTRIBUTION_COLUMN = {"rate_limits": "tenant_id"}  # the others: KEY

# Unique keys and foreign keys between distributed tables that lack the distribution column today
# (ARCHITECTURE.md "Must change": they gain shard_key with the Citus migration step).
PENDING = {
    "unique documents_pkey (id)",
    "unique documents_key (collection_id, source, tenant_id, workspace_id)",
    "unique chunks_pkey (id)",
    "unique chunk_tsv_pkey (chunk_id)",
    "unique document_sessions_pkey (session_id, document_id)",
    "unique relations_pkey (id)",
    "unique relations_unique (collection_id, tenant_id, workspace_id, session_id, subject, relation, object)",
    "unique query_logs_pkey (id)",
    "unique audit_events_pkey (id)",
    "foreign key chunks -> documents (document_id)",
    "foreign key chunk_tsv -> chunks (chunk_id)",
    "foreign key document_sessions -> documents (document_id)",
    # document revisions and sync state (migrations 0020, 0021)
    "unique document_revisions_pkey (lineage, revision)",
    "unique document_revisions_current (document_id)",
    "unique sync_sources_pkey (id)",
    "unique sync_sources_key (collection_id, tenant_id, workspace_id, uri)",
    "unique sync_files_pkey (source_id, key)",
    "foreign key sync_files -> sync_sources (source_id)",
    # the revisions are written by statement triggers with transition tables on documents: Citus runs
    # no triggers on distributed tables (ARCHITECTURE.md: they move into the document writer)
    "trigger documents_revision_open on documents: Citus runs no triggers on distributed tables",
    "trigger documents_revision_close on documents: Citus runs no triggers on distributed tables",
}

# Statements Citus runs on the coordinator only, or refuses on distributed tables.
UNDISTRIBUTABLE = {
    "CREATE RULE": r"\bCREATE\s+(OR\s+REPLACE\s+)?RULE\b",
    "CLUSTER": r"^\s*CLUSTER\b",
    "CREATE MATERIALIZED VIEW": r"\bCREATE\s+MATERIALIZED\s+VIEW\b",
    "INHERITS": r"\bINHERITS\s*\(",
    "LISTEN / NOTIFY": r"^\s*(LISTEN|NOTIFY)\b",
    "ALTER SYSTEM": r"\bALTER\s+SYSTEM\b",
    "CREATE TABLESPACE": r"\bCREATE\s+TABLESPACE\b",
    "CREATE DATABASE": r"\bCREATE\s+DATABASE\b",
    "LOCK TABLE": r"^\s*LOCK\s+(TABLE\s+)?agentrag\.",
    "EXCLUDE constraint": r"\bEXCLUDE\s+USING\b",
    "TEMPORARY table": r"\bCREATE\s+(GLOBAL\s+|LOCAL\s+)?TEMP(ORARY)?\s+TABLE\b",
}


def _statements(sql: str) -> list[str]:
    """The migration's statements, comments dropped, ``$$`` bodies kept whole."""
    sql = re.sub(r"--[^\n]*", "", sql)
    out, current, in_body = [], [], False
    for part in re.split(r"(\$\$|;)", sql):
        if part == "$$":
            in_body = not in_body
        if part == ";" and not in_body:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(part)
    out.append("".join(current).strip())
    return [s for s in out if s]


def test_the_statement_splitter_keeps_dollar_quoted_bodies() -> None:
    sql = "CREATE TABLE a (x int); -- c; d\nDO $$ BEGIN EXECUTE 'x'; END $$;\nCLUSTER a"
    assert _statements(sql) == ["CREATE TABLE a (x int)", "DO $$ BEGIN EXECUTE 'x'; END $$", "CLUSTER a"]


@pytest.mark.parametrize("path", sorted(MIGRATIONS.glob("*.sql")), ids=lambda p: p.name)
def test_no_migration_has_a_statement_citus_cannot_distribute(path: Path) -> None:
    found = [
        f"{what}: {statement[:80]!r}"
        for statement in _statements(path.read_text())
        for what, pattern in UNDISTRIBUTABLE.items()
        if re.search(pattern, statement, re.IGNORECASE | re.MULTILINE)
    ]
    assert found == [], f"{path.name} has statements Citus cannot distribute: {found}"


def test_the_text_check_catches_what_it_looks_for() -> None:
    bad = "CREATE RULE r AS ON INSERT TO agentrag.chunks DO NOTHING;\nCLUSTER agentrag.chunks USING c;"
    hits = {w for s in _statements(bad) for w, p in UNDISTRIBUTABLE.items() if re.search(p, s, re.I | re.M)}
    assert hits == {"CREATE RULE", "CLUSTER"}


def _catalogue(store) -> dict[str, list[tuple]]:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    queries = {
        "tables": "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'agentrag' AND c.relkind IN ('r', 'p')",
        # unique indexes (primary keys and UNIQUE constraints have one), with their columns; an
        # expression column (coalesce(tenant_id, '')) is named by the columns it reads
        "unique": "SELECT t.relname, i.relname, pg_get_indexdef(x.indexrelid)"
        " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
        " JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'agentrag' AND x.indisunique",
        "foreign": "SELECT t.relname, r.relname, (SELECT array_agg(a.attname ORDER BY k.ord) FROM"
        " unnest(f.conkey) WITH ORDINALITY k(num, ord) JOIN pg_attribute a ON a.attrelid = f.conrelid"
        " AND a.attnum = k.num) FROM pg_constraint f JOIN pg_class t ON t.oid = f.conrelid"
        " JOIN pg_class r ON r.oid = f.confrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
        " WHERE n.nspname = 'agentrag' AND f.contype = 'f'",
        "triggers": "SELECT c.relname, g.tgname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'agentrag' AND NOT g.tgisinternal",
        "rules": "SELECT tablename, rulename FROM pg_rules WHERE schemaname = 'agentrag'",
        "inherits": "SELECT c.relname FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'agentrag'"
        " AND NOT c.relispartition",
        "exclusion": "SELECT conname FROM pg_constraint f JOIN pg_namespace n ON n.oid = f.connamespace"
        " WHERE n.nspname = 'agentrag' AND f.contype = 'x'",
    }
    with store.engine.connect() as conn:
        return {name: [tuple(r) for r in conn.execute(text(sql)).all()] for name, sql in queries.items()}


def _index_columns(definition: str) -> tuple[str, ...]:
    """The columns a unique index reads, in order: ``(a, coalesce(b, ''::text))`` -> ``(a, b)``."""
    definition = definition.split(" WHERE ")[0]  # a partial index's predicate is not a key column
    inside = definition[definition.index("(") + 1 : definition.rindex(")")]
    inside = re.sub(r"'[^']*'(::\w+)?", "", inside)
    names = re.findall(r"\b([a-z_][a-z0-9_]*)\b(?!\s*\()", inside)
    return tuple(dict.fromkeys(n for n in names if n not in {"text", "where", "is", "null", "not"}))


def test_the_schema_distributes_as_planned(store) -> None:  # type: ignore[no-untyped-def]
    cat = _catalogue(store)
    tables = {t for (t,) in cat["tables"]}
    unplanned = sorted(tables - set(PLAN))
    assert unplanned == [], (
        f"new tables {unplanned}: add them to PLAN here and to ARCHITECTURE.md's Citus table"
    )
    distributed = {t for t, kind in PLAN.items() if kind == "distributed"}
    reference = {t for t, kind in PLAN.items() if kind == "reference"}

    violations: set[str] = set()
    for table, index, definition in cat["unique"]:
        if table in distributed:
            columns = _index_columns(definition)
            if DISTRIBUTION_COLUMN.get(table, KEY) not in columns:
                violations.add(f"unique {index} ({', '.join(columns)})")
    for table, target, columns in cat["foreign"]:
        if table in reference and target in distributed:
            violations.add(f"reference table {table} references distributed {target}: Citus refuses it")
        if table in distributed and target in distributed and KEY not in columns:
            violations.add(f"foreign key {table} -> {target} ({', '.join(columns)})")
    for table, trigger in cat["triggers"]:
        if table in distributed or table in reference:
            violations.add(f"trigger {trigger} on {table}: Citus runs no triggers on distributed tables")
    violations |= {f"rule {rule} on {table}" for table, rule in cat["rules"]}
    violations |= {f"{table} inherits another table" for (table,) in cat["inherits"]}
    violations |= {f"exclusion constraint {name}" for (name,) in cat["exclusion"]}

    new = sorted(violations - PENDING)
    assert new == [], f"new DDL Citus cannot distribute: {new}"
    assert sorted(PENDING - violations) == [], "fixed: remove these from PENDING (and ARCHITECTURE.md)"


def test_index_columns_reads_expressions() -> None:
    definition = (
        "CREATE UNIQUE INDEX documents_key ON agentrag.documents USING btree"
        " (collection_id, source, COALESCE(tenant_id, ''::text), COALESCE(workspace_id, ''::text))"
    )
    assert _index_columns(definition) == ("collection_id", "source", "tenant_id", "workspace_id")
