"""Opening the Store's engine: a bounded pool whose connections are checked without a round
trip (:func:`check_alive`) and know pgvector's type (:func:`register_vector`); and
:func:`retrying`, a repeat on a fresh connection after a transient driver error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["check_alive", "open_engine", "register_vector", "retrying"]

T = TypeVar("T")


def open_engine(
    url: str, *, pool_size: int, max_overflow: int, connect_args: dict[str, Any] | None = None
) -> Engine:
    """A SQLAlchemy engine on ``url``: a bounded pool, checked out with :func:`check_alive`."""
    from sqlalchemy import create_engine, event

    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=False,  # check_alive instead: no round trip per checkout
        pool_timeout=30,
        hide_parameters=True,  # a driver error's text never carries a question or a vector
        connect_args=connect_args or {},
    )
    event.listen(engine, "checkout", check_alive)
    return engine


def check_alive(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """The pool's check of a connection it is about to hand out, without a round trip.

    An idle connection has nothing to read: PostgreSQL speaks only when asked, except when it
    ends the session (a terminated backend, a restart: an error message, then end of file). So
    a socket that is readable, or a connection the driver already knows is broken, gets the
    classic check (``SELECT 1``, SQLAlchemy's pre-ping), and a dead one is replaced before it is
    used (``DisconnectionError`` makes the pool take another). A healthy connection costs one
    ``poll()`` instead of a round trip. What this cannot see (a peer gone without a word, e.g. a
    network partition) a ping would have waited on too; reads are retried once anyway
    (:mod:`agentrag.retrieval.dberrors`).
    """
    import select

    from sqlalchemy.exc import DisconnectionError

    if getattr(dbapi_connection, "broken", False) or getattr(dbapi_connection, "closed", False):
        raise DisconnectionError("the connection is closed")
    pgconn = getattr(dbapi_connection, "pgconn", None)
    if pgconn is None:  # not psycopg 3: the classic check
        readable = True
    else:
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
            readable = bool(poller.poll(0))
        except Exception:  # no socket any more
            raise DisconnectionError("the connection has no socket") from None
    if readable:
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            dbapi_connection.rollback()
        except Exception:
            raise DisconnectionError("the connection is dead") from None


def register_vector(dbapi_connection: Any, _record: Any) -> None:
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(dbapi_connection, "vector")
    if info is not None:
        register_vector_info(dbapi_connection, info)
    dbapi_connection.commit()


def retrying(action: str, call: Callable[[], T]) -> T:
    """``call()``, repeated once on a fresh connection after a transient driver error.

    Only for work that is safe to repeat (a read, one idempotent document write). A driver
    error that remains becomes a typed StoreError (class name and SQLSTATE, never SQL text).
    """
    from agentrag.retrieval.dberrors import database_error, is_driver_error, is_transient

    for attempt in (0, 1):
        try:
            return call()
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            if attempt == 0 and is_transient(exc):
                continue
            raise database_error(exc, action) from None
    raise AssertionError("unreachable")  # pragma: no cover
