"""A pytest plugin (in ``pytest_plugins`` of tests/conftest.py and notebooks/conftest.py): the
suite and the notebooks run against their own embedded PostgreSQL in a temporary data
directory, never the user's.

Unless ``AGENTRAG_DATABASE_URL`` points at a server (then every test run uses a fresh database
there and drops it), ``AGENTRAG_DATA_DIR`` is set, before anything starts the embedded server, to
a new temporary directory (or to ``AGENTRAG_TEST_DATA_DIR`` when set, to reuse one between runs).
Subprocesses (the CLI tests, the notebook kernels) inherit it. Each pytest-xdist worker (``make
test`` runs two) is a session of its own: it makes its own directory, so its own embedded server
and databases. When the session ends the server is stopped and a temporary directory removed: the
suite leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_OWNED: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _OWNED
    if os.environ.get("AGENTRAG_DATABASE_URL"):
        return
    reuse = os.environ.get("AGENTRAG_TEST_DATA_DIR")
    if reuse:
        os.environ["AGENTRAG_DATA_DIR"] = reuse
        return
    _OWNED = Path(tempfile.mkdtemp(prefix="agentrag-test-"))
    os.environ["AGENTRAG_DATA_DIR"] = str(_OWNED)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _OWNED
    if _OWNED is None:
        return
    from agentrag.store import server

    for pgdata, handle in list(server._servers.items()):
        if pgdata.is_relative_to(_OWNED):
            cleanup = getattr(handle, "cleanup", None)
            if cleanup is not None:
                cleanup()
            server._servers.pop(pgdata, None)
    shutil.rmtree(_OWNED, ignore_errors=True)
    _OWNED = None
