"""What a "no collection named ..." error tells the user: the database it looked in (the embedded
server's data directory or the URL, password hidden), the close names and the collections that do
exist there, so a typo or a forgotten ``AGENTRAG_DATA_DIR`` is plain from the message."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrag.errors import CollectionNotFoundError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

__all__ = ["database_label", "missing_collections_error"]


def database_label(url: str) -> str:
    """``the embedded database in DIR`` for the embedded server (its socket is ``DIR/pgdata``),
    else ``the database URL`` (with the password hidden, as given)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    host = parsed.query.get("host")
    host = host[0] if isinstance(host, tuple) else host
    if host and host.startswith("/") and host.rstrip("/").endswith("/pgdata"):
        return f"the embedded database in {host.rstrip('/')[: -len('/pgdata')]} (AGENTRAG_DATA_DIR)"
    return f"the database {parsed.render_as_string(hide_password=True)}"


def missing_collections_error(bind: Engine | Connection, names: Sequence[str]) -> CollectionNotFoundError:
    """CollectionNotFoundError for ``names`` (the ones missing), naming the database searched, the
    close names (``did you mean``) and every collection there (one query on ``bind``)."""
    from sqlalchemy import text

    statement = text("SELECT name FROM agentrag.collections ORDER BY name")
    if hasattr(bind, "connect"):
        with bind.connect() as conn:
            existing = list(conn.execute(statement).scalars())
    else:
        existing = list(bind.execute(statement).scalars())
    url = bind.engine.url.render_as_string(hide_password=True)
    parts = [f"no collection named {', '.join(repr(n) for n in names)} in {database_label(url)}"]
    close = {m for n in names for m in difflib.get_close_matches(n, existing, n=3, cutoff=0.6)}
    if close:
        parts.append(f" (did you mean {' or '.join(repr(c) for c in sorted(close))}?)")
    listed = ", ".join(repr(n) for n in existing) or "none yet"
    parts.append(f"; collections in this database: {listed}")
    return CollectionNotFoundError("".join(parts))
