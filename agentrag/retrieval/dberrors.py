"""Driver errors -> the error tree, and one retry for transient failures.

Every public entry point that talks to PostgreSQL runs under :func:`guarded`: a SQLAlchemy or
psycopg exception never escapes it. It becomes a :class:`~agentrag.errors.StoreError` whose
message names the driver's exception class and the SQLSTATE, never the SQL text or the bound
parameters (which may hold a question, a document or a query vector); the original exception
is not chained either, so a logged traceback cannot carry them. ``exc.sqlstate`` and
``exc.driver_error`` keep the two facts for code.

Transient failures (the connection dropped, the server is shutting down, a serialization
failure or deadlock, no connection free in the pool) are retried once, on a fresh connection,
by entry points that are safe to repeat: reads, and writes that are idempotent per document.
A failure that remains becomes :class:`~agentrag.errors.DatabaseUnavailableError` (transient)
or :class:`~agentrag.errors.StoreError`. Nested guarded calls retry only at the outermost one.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agentrag.errors import AgentragError, DatabaseUnavailableError, StatementTimeoutError, StoreError

__all__ = [
    "TRANSIENT_SQLSTATES",
    "database_error",
    "guarded",
    "is_driver_error",
    "is_transient",
    "run_guarded",
]

T = TypeVar("T")
_log = logging.getLogger("agentrag.store")

# 08xxx connection exceptions; 40001 serialization failure; 40P01 deadlock; 57P01..57P03 admin
# shutdown / crash shutdown / cannot connect now.
TRANSIENT_SQLSTATES = frozenset(
    {"08000", "08001", "08003", "08004", "08006", "08007", "40001", "40P01", "57P01", "57P02", "57P03"}
)
_state = threading.local()


def _sqlstate(exc: BaseException) -> str | None:
    for candidate in (getattr(exc, "orig", None), exc):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str) and code:
            return code
    return None


def is_driver_error(exc: BaseException) -> bool:
    """A SQLAlchemy or psycopg exception (not one of ours)."""
    if isinstance(exc, AgentragError):
        return False
    module = type(exc).__module__
    return module.startswith(("sqlalchemy", "psycopg"))


def is_transient(exc: BaseException) -> bool:
    """Whether repeating the work on a fresh connection may succeed."""
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.TimeoutError):  # pool exhausted for pool_timeout seconds
        return True
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    code = _sqlstate(exc)
    if code is not None:
        return code in TRANSIENT_SQLSTATES
    orig = getattr(exc, "orig", exc)
    import psycopg

    return isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError)


def database_error(exc: BaseException, action: str) -> StoreError:
    """The typed error for a driver exception: its class and SQLSTATE, nothing else."""
    orig = getattr(exc, "orig", None) or exc
    code = _sqlstate(exc)
    name = type(orig).__name__
    transient = is_transient(exc)
    what = f"{name}, SQLSTATE {code}" if code else name
    if transient:
        error: StoreError = DatabaseUnavailableError(f"{action} failed: the database is unavailable ({what})")
    elif _statement_timeout(orig, code):
        cancelled = f"PostgreSQL's statement_timeout cancelled a statement ({what})"
        error = StatementTimeoutError(f"{action} failed: {cancelled}; {STATEMENT_TIMEOUT_FIX}")
    else:
        error = StoreError(f"{action} failed: database error ({what})")
    error.sqlstate = code  # type: ignore[attr-defined]
    error.driver_error = name  # type: ignore[attr-defined]
    error.transient = transient  # type: ignore[attr-defined]
    return error


#: What a StatementTimeoutError says to do (the setting's value is not known once the statement failed).
STATEMENT_TIMEOUT_FIX = (
    "raise it for the role agentrag connects as (ALTER ROLE <role> SET statement_timeout = '5min'; 0: none)"
    " or drop '-c statement_timeout=...' from the connection URL's options. It is set for the connection,"
    " its role or its database (SHOW statement_timeout); a time limit per run is Budget(max_seconds=...)"
)


def _statement_timeout(orig: BaseException, code: str | None) -> bool:
    """A statement cancelled by ``statement_timeout`` (57014 is also a cancel request: the server's
    message says which; it holds no SQL and no parameter)."""
    if code != "57014":
        return False
    diag = getattr(orig, "diag", None)
    return "statement timeout" in (getattr(diag, "message_primary", None) or "")


def run_guarded(action: str, call: Callable[[], T], *, retry: bool = True) -> T:
    """``call()`` with driver errors typed; a transient failure retried once when ``retry``."""
    depth = getattr(_state, "depth", 0)
    if depth:  # an outer guarded call types the error and decides about the retry
        return call()
    _state.depth = 1
    try:
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                return call()
            except AgentragError:
                raise
            except Exception as exc:
                if not is_driver_error(exc):
                    raise
                if attempt + 1 < attempts and is_transient(exc):
                    _log.warning(
                        "%s: transient database error (%s); retrying once", action, type(exc).__name__
                    )
                    continue
                raise database_error(exc, action) from None
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        _state.depth = 0


def guarded(action: str, *, retry: bool = True) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator form of :func:`run_guarded` for public entry points."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> T:
            return run_guarded(action, lambda: fn(*args, **kwargs), retry=retry)

        return inner

    return wrap
