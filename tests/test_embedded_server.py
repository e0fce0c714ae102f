"""The embedded server and a stale ``postmaster.pid``: a server that died (a crash, a killed
container) leaves its pid file behind, and by the next start another process may hold that pid.
The server is recognised by its program and data directory, never by its pid being alive: such a
file is removed with a warning and the server starts; nothing connects to or signals the process
the file names. The server tests start real servers (the CLI, as a user runs it) in their own
temporary data directories, never the session's."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrag.store import server
from tests.conftest import run_cli


def stale_pidfile(pgdata: Path, pid: int) -> Path:
    """A postmaster.pid as a ready server writes it, naming ``pid``."""
    pgdata.mkdir(parents=True, exist_ok=True)
    path = pgdata / "postmaster.pid"
    lines = [str(pid), str(pgdata), str(int(time.time()) - 3600), "", str(pgdata), "", "  5432001 0", "ready"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not PostgreSQL: the one a reused pid now belongs to."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_a_reused_pid_is_not_the_server(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    pgdata = tmp_path / "pgdata"
    stale_pidfile(pgdata, bystander.pid)
    assert not server.is_postmaster(bystander.pid, pgdata)
    assert server.postmaster_info(pgdata) is None  # so the CLI does not connect to it, nor signal it
    assert server.running_server_url(pgdata=pgdata) is None
    stale_pidfile(pgdata, os.getpid())
    assert server.postmaster_info(pgdata) is None


def test_stale_pidfile_is_removed_with_a_warning(
    tmp_path: Path, bystander: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    pgdata = tmp_path / "pgdata"
    path = stale_pidfile(pgdata, bystander.pid)
    with caplog.at_level(logging.WARNING, logger="agentrag.store"):
        assert server.clear_stale_pidfile(pgdata)
    assert not path.exists() and bystander.poll() is None  # the bystander is untouched
    [record] = [r for r in caplog.records if "postmaster.pid" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING and str(pgdata) in message and f"pid {bystander.pid}" in message
    assert "sleep" not in message and sys.executable not in message  # never the other process's command
    assert not server.clear_stale_pidfile(pgdata)  # nothing left to remove

    stale_pidfile(pgdata, 2**22 + 12345)  # a dead pid: left to PostgreSQL, which replaces the file
    assert not server.clear_stale_pidfile(pgdata) and path.exists()


def test_the_running_servers_pidfile_is_kept(database_url: str) -> None:
    if os.environ.get("AGENTRAG_DATABASE_URL"):
        pytest.skip("the suite runs on an external server: no embedded postmaster.pid to look at")
    pgdata = server.data_dir() / "pgdata"
    info = server.postmaster_info(pgdata)
    assert info is not None and server.is_postmaster(info[0], pgdata)
    assert not server.is_postmaster(info[0], pgdata.parent)  # the same process, another directory
    assert not server.clear_stale_pidfile(pgdata) and (pgdata / "postmaster.pid").exists()


def test_the_server_starts_over_a_stale_pidfile(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    data = tmp_path / "data"
    pgdata = data / "pgdata"
    env = {k: v for k, v in os.environ.items() if k != "AGENTRAG_DATABASE_URL"}
    env.update(AGENTRAG_DATA_DIR=str(data), AGENTRAG_SERVER_IDLE_TIMEOUT="600")
    try:
        stale_pidfile(pgdata, bystander.pid)  # a fresh data directory holding only the stale file
        first = run_cli(env, "db", "status", "--json")
        assert first.returncode == 0, first.stderr
        assert "removed a stale postmaster.pid" in first.stderr and f"pid {bystander.pid}" in first.stderr
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        assert pid != bystander.pid and server.is_postmaster(pid, pgdata)
        assert json.loads(first.stdout)["database"]
        assert run_cli(env, "db", "stop").returncode == 0

        stale_pidfile(pgdata, bystander.pid)  # an initialised data directory after a crash
        stopped = run_cli(env, "db", "stop")  # nothing to stop: the bystander is not signalled
        assert stopped.returncode == 0 and "no server running" in stopped.stdout and bystander.poll() is None
        stale_pidfile(pgdata, os.getpid())  # (the test's own pid: alive, not PostgreSQL)
        again = run_cli(env, "db", "status", "--json")
        assert again.returncode == 0, again.stderr
        assert "removed a stale postmaster.pid" in again.stderr
        assert json.loads(again.stdout)["database"] == json.loads(first.stdout)["database"]
        assert bystander.poll() is None
    finally:
        run_cli(env, "db", "stop", "--force")  # never leave a server behind
