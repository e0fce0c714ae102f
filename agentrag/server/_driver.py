"""One statement on a pooled connection's psycopg driver, past SQLAlchemy's execution layer.

The admission check and the audit writer each send a single prepared statement per call on their
own autocommit pool; going to the driver directly saves SQLAlchemy's per-statement work
(benchmarks/HISTORY.md, serving). A backend that died while the connection sat in the pool is
replaced at once: the connection is invalidated (never handed out again) and the statement sent
once more on a fresh one. Any other error is raised as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


def execute_on_driver(
    engine: Engine, statement: str, params: Any, *, fetch: bool = False
) -> dict[str, Any] | None:
    """Run ``statement`` (prepared) with ``params``; the first row as a dict when ``fetch``, else None."""
    import psycopg
    from psycopg.rows import dict_row

    for attempt in (1, 2):
        conn = engine.raw_connection()  # pooled; returned by close()
        driver: Any = conn.driver_connection  # the psycopg connection
        try:
            if fetch:  # dict_row names the columns from the result itself: no cursor.description
                row = driver.cursor(row_factory=dict_row).execute(statement, params, prepare=True).fetchone()
            else:
                driver.execute(statement, params, prepare=True)
                row = None
        except (psycopg.OperationalError, psycopg.InterfaceError):
            broken = driver.broken or driver.closed
            if broken:
                conn.invalidate()  # a dead backend: never handed out again
            conn.close()
            if attempt == 2 or not broken:
                raise
            continue
        except BaseException:
            conn.close()
            raise
        conn.close()
        return row
    raise AssertionError("unreachable")  # pragma: no cover
