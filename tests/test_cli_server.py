"""The CLI leaves the embedded server running between calls; `db stop` and the idle watchdog stop it.

These start their own embedded PostgreSQL in a temporary data directory (never the session's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLES, run_cli


def _postmaster_pid(data: Path) -> int | None:
    try:
        pid = int((data / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


@pytest.fixture
def cli_env(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k != "AGENTRAG_DATABASE_URL"}
    env.update(AGENTRAG_DATA_DIR=str(tmp_path / "data"), AGENTRAG_SERVER_IDLE_TIMEOUT="600")
    yield env
    run_cli(env, "db", "stop", "--force")  # never leave a server behind


def test_server_stays_up_between_calls_until_db_stop(cli_env: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = run_cli(cli_env, "db", "status", "--json")
    assert first.returncode == 0, first.stderr
    pid = _postmaster_pid(data)
    assert pid is not None, "the CLI's server should outlive the call"
    second = run_cli(cli_env, "db", "status", "--json")
    assert (
        second.returncode == 0
        and json.loads(second.stdout)["database"] == json.loads(first.stdout)["database"]
    )
    assert _postmaster_pid(data) == pid, "the second call reuses the running server"
    stopped = run_cli(cli_env, "db", "stop", "--json")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True
    assert _postmaster_pid(data) is None
    again = run_cli(cli_env, "db", "stop")
    assert again.returncode == 0 and "no server running" in again.stdout


def test_idle_watchdog_stops_the_server(cli_env: dict[str, str], tmp_path: Path) -> None:
    cli_env["AGENTRAG_SERVER_IDLE_TIMEOUT"] = "2"
    assert run_cli(cli_env, "db", "status").returncode == 0
    data = tmp_path / "data"
    # (that the server outlives a call at all is the test above; here it must stop by itself)
    deadline = time.monotonic() + 60
    while _postmaster_pid(data) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _postmaster_pid(data) is None, "idle for longer than the timeout, the server should stop"
    deadline = time.monotonic() + 30
    while (data / "server-watchdog.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (data / "server-watchdog.pid").exists(), "the watchdog exits with its server"


def test_a_call_slower_than_the_idle_timeout_keeps_its_server(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue #38: on a busy machine a call took longer than the timeout between starting the server
    and connecting, and the watchdog stopped the server under it. A call holds a lease for its life."""
    cli_env["AGENTRAG_SERVER_IDLE_TIMEOUT"] = "1"
    code = (
        "import time, psycopg\n"
        "from agentrag.store.server import embedded_url\n"
        "url = embedded_url(keep_running=True)\n"
        "time.sleep(4)  # four timeouts without a connection: a slow import, a loaded machine\n"
        "psycopg.connect(url.replace('postgresql+psycopg://', 'postgresql://')).close()\n"
        "print('connected')\n"
    )
    slow = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=cli_env, capture_output=True, text=True, timeout=300
    )
    assert slow.returncode == 0 and "connected" in slow.stdout, slow.stderr
    data = tmp_path / "data"
    deadline = time.monotonic() + 120  # once the call has exited, the server is idle: it stops
    while _postmaster_pid(data) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _postmaster_pid(data) is None, "idle once its last call exited, the server should stop"
    assert not any((data / "server-users").iterdir()), "the call's lease went with it"


def test_db_start_says_where_the_server_is(cli_env: dict[str, str], tmp_path: Path) -> None:
    started = run_cli(cli_env, "db", "start")
    assert started.returncode == 0, started.stderr
    data = tmp_path / "data"
    pid = _postmaster_pid(data)
    assert pid is not None and started.stdout.startswith(
        f"started: the embedded PostgreSQL in {data / 'pgdata'}"
    )
    assert "url: postgresql+psycopg://" in started.stdout and "agentrag db stop" in started.stdout
    again = json.loads(run_cli(cli_env, "db", "start", "--json").stdout)
    assert again["already_running"] is True and again["pgdata"] == str(data / "pgdata")
    assert _postmaster_pid(data) == pid, "a second start finds the same server"
    assert run_cli(cli_env, "db", "status").returncode == 0 and _postmaster_pid(data) == pid


def test_db_start_refuses_a_database_url(database_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentrag", "--database-url", database_url, "db", "start"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "embedded server" in out.stderr


def test_bad_idle_timeout_is_a_clear_error(cli_env: dict[str, str]) -> None:
    cli_env["AGENTRAG_SERVER_IDLE_TIMEOUT"] = "soon"
    out = run_cli(cli_env, "db", "status")
    assert out.returncode != 0 and "AGENTRAG_SERVER_IDLE_TIMEOUT must be a number" in out.stderr


def test_db_stop_refuses_a_database_url(database_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentrag", "--database-url", database_url, "db", "stop"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "embedded server" in out.stderr


def test_search_splits_load_from_search_and_never_imports_torch(database_url: str) -> None:
    """The default local embedder on the CLI's path: ONNX Runtime, no torch, timing split."""
    env = {**os.environ, "AGENTRAG_DATABASE_URL": database_url}
    name = f"cold_{os.getpid()}"
    ingest = run_cli(env, "ingest", str(SAMPLES / "product_docs"), "-c", name, "--create")
    assert ingest.returncode == 0, ingest.stderr
    # one process (a CLI process's cold start each is what the ingest above already shows): the JSON
    # search, the modules it imported, then the text search's output, then the collection deleted
    code = (
        "import sys, json, io, contextlib; from agentrag.cli import main; buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    main(['search', 'single sign-on', '-c', {name!r}, '--json'])\n"
        "out = json.loads(buf.getvalue())\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "text = io.StringIO()\n"
        "with contextlib.redirect_stdout(text):\n"
        f"    code = main(['search', 'single sign-on', '-c', {name!r}])\n"
        f"main(['collections', 'delete', {name!r}, '--yes'])\n"
        "print(json.dumps({'hits': len(out['hits']), 'load': out['load_ms'], 'search': out['search_ms'],\n"
        "  'heavy': heavy, 'text': text.getvalue(), 'code': code}))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["heavy"] == [] and result["hits"] > 0
    assert set(result["load"]) == {"total", "database", "model"} and result["load"]["model"] > 0
    assert result["search"] > 0
    assert result["code"] == 0
    text = result["text"]
    assert "load " in text and "(database " in text and "  search " in text


def _connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))


def test_db_stop_waits_for_work_in_flight_and_force_stops_it(cli_env: dict[str, str], tmp_path: Path) -> None:
    """A statement or an open transaction on the server (a notebook, an ingest, a service) is work that
    stopping it would abort: `db stop` refuses, says why and how to force it; an idle connection (a
    pool's spare) does not hold it; `--force` stops it whatever runs."""
    data = tmp_path / "data"
    started = run_cli(cli_env, "db", "start", "--json")
    assert started.returncode == 0, started.stderr
    url = json.loads(started.stdout)["url"]
    busy, idle = _connect(url), _connect(url)
    try:
        busy.execute("SELECT 1")  # psycopg opens a transaction: 'idle in transaction' until it ends
        refused = run_cli(cli_env, "db", "stop", "--json")
        assert refused.returncode == 1
        assert json.loads(refused.stdout) == {
            "stopped": False,
            "pgdata": str(data / "pgdata"),
            "busy_connections": 1,
            "calls": 0,
        }
        assert "in use (1 connection(s)" in refused.stderr and "agentrag db stop --force" in refused.stderr
        assert _postmaster_pid(data) is not None and busy.execute("SELECT 2").fetchone() == (2,)
        busy.commit()  # the work done: only idle connections are left
        stopped = run_cli(cli_env, "db", "stop", "--json")
        assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True
        assert _postmaster_pid(data) is None
    finally:
        busy.close()
        idle.close()
    url = json.loads(run_cli(cli_env, "db", "start", "--json").stdout)["url"]
    busy = _connect(url)
    try:
        busy.execute("SELECT 1")
        forced = run_cli(cli_env, "db", "stop", "--force")
        assert forced.returncode == 0 and "stopped the embedded PostgreSQL" in forced.stdout
        assert _postmaster_pid(data) is None
    finally:
        busy.close()
