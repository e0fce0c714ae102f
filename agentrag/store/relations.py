"""Knowledge-graph relations: ``(subject, relation, object)`` triples per collection.

Stored in ``agentrag.relations`` (one row per distinct triple in a collection, with an
optional ``source``). :func:`neighbourhood` walks the graph from an entity in both
directions up to ``depth`` hops with a recursive CTE: entities match case-insensitively,
each (entity, hop) is visited once (so cycles terminate), and the result is capped at
``limit`` rows. Every value reaches SQL as a bound parameter.

Scopes (issue #14) are tenant-rooted as for documents: a triple added with
``scope=Scope(tenant=..., workspace=..., session=...)`` records them, and reads filter by the
scope inside SQL (every hop of the walk included), so a path never crosses into another
tenant's triples. Each named part must equal the row's column: unscoped rows (added without a
scope) match only ``None`` / ``Scope()`` (every row, unscoped collections only) and
``Scope.every()``, never a tenant scope. A ``scoped=True`` collection refuses reads without a
tenant (``ScopeError``, as search does) unless ``Scope.every()``.

:func:`format_triples` renders triples as the compact text the answer prompt shows
(``ctx.graph_context``): one ``[rel_<id>] subject --relation--> object`` line each; the
``rel_<id>`` labels can be cited like chunk ids.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError

if TYPE_CHECKING:
    from agentrag.scope import Scope
    from agentrag.store.store import Store

__all__ = [
    "MAX_DEPTH",
    "MAX_FIELD_CHARS",
    "Relation",
    "add_relations",
    "format_triples",
    "mentioned_entities",
    "neighbourhood",
    "read_triples",
    "relations",
]

MAX_DEPTH = 5
MAX_FIELD_CHARS = 1000
MAX_LIMIT = 10_000

Triple = tuple[str, str, str] | tuple[str, str, str, str | None] | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Relation:
    """One stored triple. ``hop`` is its distance from the entity in :func:`neighbourhood` (1 = direct)."""

    id: int
    subject: str
    relation: str
    object: str
    collection: str
    source: str | None = None
    hop: int | None = None
    tenant: str | None = None
    workspace: str | None = None
    session: str | None = None

    @property
    def label(self) -> str:
        return f"rel_{self.id}"

    def __str__(self) -> str:
        return f"{self.subject} --{self.relation}--> {self.object}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subject": self.subject,
            "relation": self.relation,
            "object": self.object,
            "collection": self.collection,
            "source": self.source,
            "hop": self.hop,
            "tenant": self.tenant,
            "workspace": self.workspace,
            "session": self.session,
        }


def _clean(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"relation {name} must be a string, got {type(value).__name__}")
    text = " ".join(value.split())
    if not text:
        raise InvalidInputError(f"relation {name} is empty")
    if len(text) > MAX_FIELD_CHARS:
        raise InvalidInputError(f"relation {name} is longer than {MAX_FIELD_CHARS} characters")
    return text


def _triple(item: Triple, default_source: str | None) -> tuple[str, str, str, str | None]:
    if isinstance(item, Mapping):
        unknown = set(item) - {"subject", "relation", "object", "source"}
        if unknown:
            raise InvalidInputError(
                f"unknown relation field(s) {sorted(unknown)}; use subject, relation, object, source"
            )
        values = [item.get("subject"), item.get("relation"), item.get("object")]
        source = item.get("source") or default_source
    elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) in (3, 4):
        values = list(item[:3])
        source = (item[3] if len(item) == 4 else None) or default_source
    else:
        raise InvalidInputError(
            f"a relation is (subject, relation, object[, source]) or a mapping, got {item!r}"
        )
    subject, relation, obj = (
        _clean(v, n) for v, n in zip(values, ("subject", "relation", "object"), strict=True)
    )
    if source is not None:
        source = _clean(source, "source")
    return subject, relation, obj, source


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


def _write_scope(scope: Scope | None) -> tuple[str | None, str | None, str | None]:
    from agentrag.errors import ScopeError
    from agentrag.retrieval.scope_sql import compile_row_scope
    from agentrag.scope import Scope

    if scope is None:
        return None, None, None
    if not isinstance(scope, Scope):
        raise TypeError(f"scope must be an agentrag.Scope or None, got {type(scope).__name__}")
    if scope.all_scopes:
        raise ScopeError("relations are added in one scope: Scope.every() is for reading")
    if scope.tenant is None and not scope.is_empty:
        raise ScopeError(f"scopes are tenant-rooted: {scope!r} names no tenant")
    compile_row_scope(scope, "r")  # validates the values (NUL bytes, lone surrogates)
    return scope.tenant, scope.workspace, scope.session


def _read_scope(
    store: Store, collection: str, scope: Scope | None, alias: str = "r"
) -> tuple[int, str, dict[str, Any]]:
    """The collection id and the scope's SQL over ``alias`` (with, on an ``acl=True`` collection,
    the grants of each triple's source document); refuses as search does."""
    from agentrag.retrieval.predicate import relation_visibility
    from agentrag.retrieval.scope_sql import check_scope, compile_row_scope

    found = store.collection(collection)
    sql, params = compile_row_scope(scope, alias)
    check_scope(scope, [found.name] if found.scoped else [])
    granted, grant_params = relation_visibility(scope, found.name, acl=found.acl)
    if granted != "TRUE":
        sql = granted if sql == "TRUE" else f"({sql}) AND ({granted})"
    return found.id, sql, {**params, **grant_params}


def add_relations(
    store: Store,
    collection: str,
    triples: Iterable[Triple],
    *,
    source: str | None = None,
    scope: Scope | None = None,
) -> int:
    """Add triples to ``collection``; returns how many were new (existing ones are left as they are).

    A triple is ``(subject, relation, object)``, ``(subject, relation, object, source)`` or a
    mapping with those keys. ``source`` is the default source (e.g. the document they came from).
    ``scope`` (tenant-rooted: a workspace or session needs its tenant) is recorded on every row;
    reads see the triples only inside a scope naming it.
    Idempotent: the unique index over (collection, scope, subject, relation, object) makes a
    repeat a no-op; the same triple in two tenants is two rows.
    """
    from sqlalchemy import text

    tenant, workspace, session = _write_scope(scope)
    rows = [_triple(item, source) for item in triples]
    if not rows:
        return 0
    cid = store.collection(collection).id
    params = [
        {"cid": cid, "s": s, "r": r, "o": o, "src": src, "t": tenant, "w": workspace, "ses": session}
        for s, r, o, src in dict.fromkeys(rows)
    ]
    with store.engine.begin() as conn:
        inserted = 0
        for batch_start in range(0, len(params), 500):
            batch = params[batch_start : batch_start + 500]
            result = conn.execute(
                text(
                    "INSERT INTO agentrag.relations"
                    " (collection_id, subject, relation, object, source, tenant_id, workspace_id, session_id)"
                    " SELECT :cid, :s, :r, :o, :src, :t, :w, :ses"
                    " ON CONFLICT DO NOTHING"
                ),
                batch,
            )
            inserted += max(result.rowcount, 0)
    return inserted


def _row(row: Any, hop: int | None = None) -> Relation:
    return Relation(
        row.id, row.subject, row.relation, row.object, row.collection, row.source, hop,
        row.tenant_id, row.workspace_id, row.session_id,
    )  # fmt: skip


def relations(
    store: Store,
    collection: str,
    *,
    entity: str | None = None,
    relation: str | None = None,
    limit: int = 1000,
    scope: Scope | None = None,
) -> list[Relation]:
    """Triples of ``collection`` in ``scope``, optionally those with ``entity`` as subject or
    object and/or of one ``relation`` type (both case-insensitive), ordered by id."""
    from sqlalchemy import text

    cid, scope_sql, scope_params = _read_scope(store, collection, scope)
    clauses = ["r.collection_id = :cid", f"({scope_sql})"]
    params: dict[str, Any] = {"cid": cid, "limit": _limit(limit), **scope_params}
    if entity is not None:
        clauses.append("(lower(r.subject) = lower(:entity) OR lower(r.object) = lower(:entity))")
        params["entity"] = _clean(entity, "entity")
    if relation is not None:
        clauses.append("lower(r.relation) = lower(:relation)")
        params["relation"] = _clean(relation, "relation")
    sql = (
        "SELECT r.id, r.subject, r.relation, r.object, r.source, c.name AS collection,"
        " r.tenant_id, r.workspace_id, r.session_id"
        " FROM agentrag.relations r JOIN agentrag.collections c ON c.id = r.collection_id"
        f" WHERE {' AND '.join(clauses)} ORDER BY r.id LIMIT :limit"
    )
    with store.engine.connect() as conn:
        return [_row(row) for row in conn.execute(text(sql), params)]


# The walk: frontier rows (entity, hop). UNION (not UNION ALL) visits each (entity, hop) once,
# and hop < :depth bounds the recursion, so cycles terminate and the work is at most
# depth x (entities reachable). The edges are then every relation touching an entity reached
# at hop < depth, each at its smallest hop + 1. {scope} (the scope over the alias r, from
# compile_row_scope: this module's text, values bound) sits in both joins, so every hop stays
# inside the scope and a path cannot pass through another tenant's triples.
_NEIGHBOURHOOD_SQL = """
WITH RECURSIVE walk(entity, hop) AS (
    SELECT lower(CAST(:entity AS text)), 0
  UNION
    SELECT CASE WHEN lower(r.subject) = w.entity THEN lower(r.object) ELSE lower(r.subject) END, w.hop + 1
    FROM walk w
    JOIN agentrag.relations r
      ON r.collection_id = :cid AND ({scope})
     AND (lower(r.subject) = w.entity OR lower(r.object) = w.entity)
    WHERE w.hop + 1 < :depth
),
reached AS (
    SELECT entity, min(hop) AS hop FROM walk GROUP BY entity
),
edges AS (
    SELECT r.id, min(x.hop) + 1 AS hop
    FROM reached x
    JOIN agentrag.relations r
      ON r.collection_id = :cid AND ({scope})
     AND (lower(r.subject) = x.entity OR lower(r.object) = x.entity)
    GROUP BY r.id
)
SELECT r.id, r.subject, r.relation, r.object, r.source, c.name AS collection, e.hop,
       r.tenant_id, r.workspace_id, r.session_id
FROM edges e
JOIN agentrag.relations r ON r.id = e.id
JOIN agentrag.collections c ON c.id = r.collection_id
ORDER BY e.hop, r.id
LIMIT :limit
"""


def neighbourhood(
    store: Store,
    collection: str,
    entity: str,
    depth: int = 1,
    *,
    limit: int = 200,
    scope: Scope | None = None,
) -> list[Relation]:
    """Every triple in ``scope`` within ``depth`` hops of ``entity`` (either direction), nearest first.

    ``depth`` is 1 to :data:`MAX_DEPTH`; at most ``limit`` rows come back.
    """
    from sqlalchemy import text

    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise InvalidInputError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    cid, scope_sql, scope_params = _read_scope(store, collection, scope)
    params: dict[str, Any] = {"cid": cid, "entity": _clean(entity, "entity"), "depth": depth}
    params.update(limit=_limit(limit), **scope_params)
    sql = _NEIGHBOURHOOD_SQL.replace("{scope}", scope_sql)
    with store.engine.connect() as conn:
        return [_row(row, row.hop) for row in conn.execute(text(sql), params)]


def mentioned_entities(
    store: Store, collection: str, question: str, *, limit: int = 3, scope: Scope | None = None
) -> list[str]:
    """Subjects and objects of ``collection``'s triples in ``scope`` that occur in ``question``
    (case-insensitive), longest first."""
    from sqlalchemy import text

    sql = """
    SELECT name FROM (
        SELECT DISTINCT ON (lower(name)) name FROM (
            SELECT r.subject AS name FROM agentrag.relations r WHERE r.collection_id = :cid AND ({scope})
            UNION ALL
            SELECT r.object FROM agentrag.relations r WHERE r.collection_id = :cid AND ({scope})
        ) names
        WHERE length(name) >= 3 AND strpos(lower(CAST(:text AS text)), lower(name)) > 0
        ORDER BY lower(name), name
    ) found
    ORDER BY length(name) DESC, name
    LIMIT :limit
    """
    cid, scope_sql, scope_params = _read_scope(store, collection, scope)
    params = {"cid": cid, "text": question, "limit": _limit(limit), **scope_params}
    with store.engine.connect() as conn:
        return [row.name for row in conn.execute(text(sql.replace("{scope}", scope_sql)), params)]


def format_triples(triples: Iterable[Relation]) -> str:
    """The compact text of ``ctx.graph_context``: ``[rel_<id>] subject --relation--> object (source)``."""
    lines = []
    for t in triples:
        where = f" (source: {t.source})" if t.source else ""
        lines.append(f"[{t.label}] {t.subject} --{t.relation}--> {t.object}{where}")
    return "\n".join(lines)


def read_triples(path: str | Path) -> list[dict[str, Any]]:
    """Triples from a ``.csv`` (header: subject, relation, object[, source]) or ``.jsonl`` file
    (one object with those keys per line)."""
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        content = file.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InvalidInputError(f"cannot read {file}: {exc}") from exc
    out: list[dict[str, Any]] = []
    if suffix == ".csv":
        reader = csv.DictReader(content.splitlines())
        missing = {"subject", "relation", "object"} - set(reader.fieldnames or ())
        if missing:
            raise InvalidInputError(f"{file}: the CSV header lacks {', '.join(sorted(missing))}")
        for row in reader:
            out.append({k: row.get(k) for k in ("subject", "relation", "object", "source") if row.get(k)})
    elif suffix in (".jsonl", ".ndjson"):
        for number, line in enumerate(content.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise InvalidInputError(f"{file}:{number}: not JSON: {exc}") from exc
            if not isinstance(item, dict):
                raise InvalidInputError(f"{file}:{number}: expected an object with subject, relation, object")
            out.append(item)
    else:
        raise InvalidInputError(f"{file}: relations import reads .csv or .jsonl files")
    return out
