"""The optional query log (table ``agentrag.query_logs``): one row per answered question.

Off unless the caller opts in with ``new(..., query_log=True)``. A row holds the question
text, the retrieved chunk ids, the answer, the mode, whether it was grounded, the latency
of every stage, the model and its token counts. **The question and answer text are stored
only because the caller opted in**: nothing else in agentrag keeps them (spans, logs and
audit events never carry them).

Rows are written off the hot path: ``answer()`` hands the row to one background thread per
store (a single-thread executor) and returns at once. A failed write never fails the query:
it is logged as a warning on ``agentrag.querylog`` (without the question) and dropped.
:func:`flush` waits for pending writes (tests, shutdown); the interpreter also waits for
them at exit. Read the log with :func:`query_logs` / ``Store.query_logs()`` / ``agentrag log``.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.context import Context
    from agentrag.scope import Scope
    from agentrag.store.store import Store

__all__ = ["QueryLogEntry", "QueryLogWriter", "entry_for", "flush", "query_logs", "submit", "writer_for"]

_log = logging.getLogger("agentrag.querylog")

_INSERT_SQL = """
INSERT INTO agentrag.query_logs
    (id, question, collections, chunk_ids, answer, mode, grounded, latency_ms, model,
     input_tokens, output_tokens, tenant_id, workspace_id, session_id)
VALUES (:id, :question, CAST(:collections AS text[]), CAST(:chunk_ids AS jsonb), :answer, :mode, :grounded,
        CAST(:latency_ms AS jsonb), :model, :input_tokens, :output_tokens, :tenant, :workspace, :session)
ON CONFLICT (id) DO NOTHING
"""

_SELECT_SQL = """
SELECT id, created_at, question, collections, chunk_ids, answer, mode, grounded, latency_ms, model,
       input_tokens, output_tokens, tenant_id, workspace_id, session_id
FROM agentrag.query_logs
WHERE {where}
ORDER BY created_at DESC, id
LIMIT :limit
"""


@dataclass(frozen=True, slots=True)
class QueryLogEntry:
    """One row of ``agentrag.query_logs``."""

    id: str
    question: str | None
    collections: tuple[str, ...] = ()
    chunk_ids: tuple[str, ...] = ()
    answer: str | None = None
    mode: str | None = None
    grounded: bool | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    created_at: datetime | None = None
    tenant: str | None = None  # the scope the question was asked in
    workspace: str | None = None
    session: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["collections"] = list(self.collections)
        out["chunk_ids"] = list(self.chunk_ids)
        out["created_at"] = self.created_at.isoformat() if self.created_at else None
        return out

    def params(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "collections": list(self.collections),
            "chunk_ids": json.dumps(list(self.chunk_ids)),
            "answer": self.answer,
            "mode": self.mode,
            "grounded": self.grounded,
            "latency_ms": json.dumps({k: round(float(v), 3) for k, v in self.latency_ms.items()}),
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tenant": self.tenant,
            "workspace": self.workspace,
            "session": self.session,
        }


def entry_for(ctx: Context) -> QueryLogEntry:
    """The row for an answered context."""
    answer_calls = [c for c in ctx.llm_calls if c.purpose == "answer"]
    model = answer_calls[-1].model if answer_calls else getattr(ctx.deps.llm, "model", None)
    collections = (
        ctx.collections or ctx.options.collections or tuple(dict.fromkeys(r.collection for r in ctx.results))
    )
    tokens = ctx.tokens
    scope = ctx.options.scope
    return QueryLogEntry(
        id=ctx.query_id,
        question=ctx.question,
        collections=tuple(collections),
        chunk_ids=tuple(h.chunk_id for h in ctx.hits),
        answer=ctx.answer_text,
        mode=ctx.mode if ctx.error is None else "error",
        grounded=ctx.grounded,
        latency_ms=ctx.latencies_ms,
        model=str(model) if model is not None else None,
        input_tokens=tokens["input"] if ctx.llm_calls else None,
        output_tokens=tokens["output"] if ctx.llm_calls else None,
        tenant=scope.tenant if scope is not None else None,
        workspace=scope.workspace if scope is not None else None,
        session=scope.session if scope is not None else None,
    )


def _describe(exc: BaseException) -> str:
    """A short reason for a failed write, without the statement's parameters (the question)."""
    original = getattr(exc, "orig", None) or exc
    first_line = (str(original).strip().splitlines() or [""])[0][:200]
    return f"{type(original).__name__}: {first_line}" if first_line else type(original).__name__


class QueryLogWriter:
    """Writes :class:`QueryLogEntry` rows on one background thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrag-querylog")
        self._pending: set[Future[bool]] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"QueryLogWriter({len(self._pending)} pending)"

    def submit(self, entry: QueryLogEntry) -> Future[bool]:
        """Queue ``entry``; the future is True once written, False when the write failed."""
        future = self._executor.submit(self._write, entry)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[bool]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _write(self, entry: QueryLogEntry) -> bool:
        from sqlalchemy import text

        try:
            with self.engine.begin() as conn:
                conn.execute(text(_INSERT_SQL), entry.params())
        except Exception as exc:  # never fail (or even disturb) the query
            _log.warning("could not write query log %s: %s", entry.id, _describe(exc))
            return False
        return True

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued row is written (or has failed)."""
        with self._lock:
            pending = list(self._pending)
        if pending:
            wait_futures(pending, timeout=timeout)

    def close(self) -> None:
        self.flush()
        self._executor.shutdown(wait=True)


_writers: weakref.WeakKeyDictionary[Any, QueryLogWriter] = weakref.WeakKeyDictionary()
_writers_lock = threading.Lock()


def writer_for(store: Store) -> QueryLogWriter:
    """The store's writer (one background thread per store, made on first use)."""
    with _writers_lock:
        writer = _writers.get(store)
        if writer is None:
            writer = _writers[store] = QueryLogWriter(store.engine)
        return writer


def submit(ctx: Context) -> Future[bool] | None:
    """Queue the row for ``ctx`` when it opted in (``query_log=True``) and has a store."""
    store = ctx.deps.store
    if not ctx.deps.query_log or store is None:
        return None
    return writer_for(store).submit(entry_for(ctx))


def flush(store: Store | None = None, timeout: float | None = None) -> None:
    """Wait for the pending query-log writes of ``store`` (default: of every store)."""
    with _writers_lock:
        if store is None:
            writers = list(_writers.values())
        else:
            writer = _writers.get(store)
            writers = [writer] if writer is not None else []
    for writer in writers:
        writer.flush(timeout)


def query_logs(store: Store, *, limit: int = 20, scope: Scope | None = None) -> list[QueryLogEntry]:
    """The newest ``limit`` rows, newest first; with ``scope``, only the rows asked in it.

    Scopes are tenant-rooted: a scope naming a workspace or session must name its tenant
    (ScopeError); ``None`` or ``Scope.every()`` reads every row (an operator's view).
    """
    from sqlalchemy import text

    from agentrag.errors import InvalidInputError, ScopeError
    from agentrag.scope import Scope

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidInputError(f"limit must be an integer from 1 to 10000, got {limit!r}")
    if scope is not None and not isinstance(scope, Scope):
        raise TypeError(f"scope must be an agentrag.Scope or None, got {type(scope).__name__}")
    clauses: list[str] = ["TRUE"]
    params: dict[str, Any] = {"limit": limit}
    if scope is not None and not scope.all_scopes and not scope.is_empty:
        if scope.tenant is None:
            raise ScopeError(f"{scope!r} names no tenant: the query log's scopes are tenant-rooted")
        for column, value in (("tenant_id", scope.tenant), ("workspace_id", scope.workspace),
                              ("session_id", scope.session)):  # fmt: skip
            if value is not None:
                clauses.append(f"{column} = :{column}")
                params[column] = value
    with store.engine.connect() as conn:
        rows = conn.execute(text(_SELECT_SQL.format(where=" AND ".join(clauses))), params).mappings().all()
    return [
        QueryLogEntry(
            id=row["id"],
            question=row["question"],
            collections=tuple(row["collections"] or ()),
            chunk_ids=tuple(row["chunk_ids"] or ()),
            answer=row["answer"],
            mode=row["mode"],
            grounded=row["grounded"],
            latency_ms=dict(row["latency_ms"] or {}),
            model=row["model"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            created_at=row["created_at"],
            tenant=row["tenant_id"],
            workspace=row["workspace_id"],
            session=row["session_id"],
        )
        for row in rows
    ]
