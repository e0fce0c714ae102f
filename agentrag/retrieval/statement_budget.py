"""A search's SQL under a run's deadline: each statement's ``statement_timeout`` is the time left.

``Budget(max_seconds=...)`` (:mod:`agentrag.llm.deadline`) bounds a search's statements through
PostgreSQL's ``statement_timeout``, which the server arms afresh at the start of every statement.
One ``SET LOCAL`` at the start of the transaction would give every statement the whole time left
*then*: a search of several slow statements could pass its deadline by up to that much per
statement. So :func:`bounded` sets it at the transaction's start and again before each statement
(a ``before_cursor_execute`` hook on the search's connection), to the time left at that statement's
start: within :data:`SLACK_MS` or 2 % of it (a re-set costs a round trip, so a statement that
starts a few milliseconds after the last setting keeps it).

A ``statement_timeout`` of the connection's own (set for the role or the database, or in the
connection URL's ``options``) is never raised: each statement gets the smaller of the two. When
that one fires, the cancel is the user's setting, not the budget: :class:`StatementTimeout` says
which fired, and :func:`agentrag.retrieval.dberrors.database_error` raises
:class:`~agentrag.errors.StatementTimeoutError`, which names the setting and how to raise it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentrag.llm.deadline import budget_exceeded, remaining
from agentrag.retrieval.dberrors import is_driver_error

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["SLACK_MS", "StatementTimeout", "bounded", "cancelled_by"]

#: A statement keeps the timeout in force when it exceeds the time left by at most this many
#: milliseconds (or 2 % of the time left, whichever is more).
SLACK_MS = 5

# The connection's own statement_timeout in milliseconds (0: none), read once, and the budget's
# time left set as this transaction's (SET LOCAL), never above the connection's own.
_FIRST_SQL = """
SELECT own.ms, set_config('statement_timeout',
       (CASE WHEN own.ms > 0 THEN least(own.ms, CAST(:ms AS bigint)) ELSE CAST(:ms AS bigint) END)::text,
       true)
FROM (SELECT CAST(extract(epoch FROM CAST(current_setting('statement_timeout') AS interval)) * 1000
             AS bigint) AS ms) AS own
"""
_SET_SQL = "SELECT set_config('statement_timeout', %s, true)"


class StatementTimeout:
    """The timeout in force on a search's connection, and whether it is the budget's."""

    __slots__ = ("by_deadline", "in_force", "own")

    def __init__(self, own: int, in_force: int, by_deadline: bool) -> None:
        self.own = own  # the connection's own statement_timeout, ms (0: none)
        self.in_force = in_force  # what the current statement runs under, ms
        self.by_deadline = by_deadline  # in_force is the budget's time left (else the own one)

    def before_statement(self, cursor: Any) -> None:
        """Before a statement: the time left as its timeout, when it is shorter than the one in force."""
        left = remaining()
        if left is None:  # the deadline scope ended: what is in force stays (SET LOCAL ends with us)
            return
        if left <= 0:
            raise budget_exceeded("search")
        ms = max(1, int(left * 1000))
        target, by_deadline = (self.own, False) if 0 < self.own <= ms else (ms, True)
        if self.in_force - target > max(SLACK_MS, target // 50):
            cursor.connection.execute(_SET_SQL, (str(target),))
            self.in_force, self.by_deadline = target, by_deadline


@contextmanager
def bounded(conn: Connection) -> Iterator[StatementTimeout | None]:
    """Under a deadline: every statement on ``conn`` inside bounded by the time left at its start
    (the module docstring); None without a deadline, and nothing is run then."""
    left = remaining()
    if left is None:
        yield None
        return
    if left <= 0:
        raise budget_exceeded("search")
    from sqlalchemy import event, text

    ms = max(1, int(left * 1000))  # an integer, bound: set_config takes text
    own = int(conn.execute(text(_FIRST_SQL), {"ms": str(ms)}).scalar_one())
    state = StatementTimeout(own, own if 0 < own <= ms else ms, not 0 < own <= ms)

    def hook(_conn: Any, cursor: Any, *_: Any) -> None:
        state.before_statement(cursor)

    event.listen(conn, "before_cursor_execute", hook)
    try:
        yield state
    finally:
        event.remove(conn, "before_cursor_execute", hook)


def cancelled_by(exc: BaseException, state: StatementTimeout | None) -> str | None:
    """``"deadline"`` when ``exc`` is a statement the budget's timeout cancelled (SQLSTATE 57014,
    query_canceled, under a deadline), ``"own"`` when the connection's own timeout did; else None."""
    if state is None or not is_driver_error(exc):
        return None
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) != "57014":
        return None
    return "deadline" if state.by_deadline else "own"
