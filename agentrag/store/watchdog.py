"""Stops the CLI's embedded PostgreSQL after an idle period (``python -m agentrag.store.watchdog``).

Started by :func:`agentrag.store.server.embedded_url` with ``keep_running=True``. Every few
seconds it counts the server's client connections; the server is idle when there are none and
no CLI call has touched ``server-last-use`` for the timeout, and no live CLI process holds a lease
on it (``server-users/<pid>``: a call is in use from its start to its exit, connected or not).
Then it asks PostgreSQL for a *smart* shutdown (SIGTERM: new connections are refused, open
sessions finish first) and exits.
It exits too when the server is gone (``agentrag db stop``, or a library process stopped it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path


def watch(pgdata: Path, timeout: float) -> None:
    from agentrag.store.server import (
        LAST_USE_FILE,
        client_connections,
        leases_alive,
        postmaster_info,
        running_server_url,
    )

    last_use = pgdata.parent / LAST_USE_FILE
    interval = min(15.0, max(0.5, timeout / 10))
    last_active = time.time()
    while True:
        time.sleep(interval)
        info = postmaster_info(pgdata)
        url = running_server_url("postgres", pgdata)
        if info is None or url is None:
            return
        try:
            if leases_alive(pgdata) > 0 or sum(client_connections(url)) > 0:
                last_active = time.time()
        except Exception:
            last_active = time.time()  # cannot tell: count it as busy
        with contextlib.suppress(OSError):
            last_active = max(last_active, last_use.stat().st_mtime)
        if time.time() - last_active >= timeout:
            os.kill(info[0], signal.SIGTERM)
            return


def main() -> None:
    pgdata, timeout = Path(sys.argv[1]), float(sys.argv[2])
    pidfile = pgdata.parent / "server-watchdog.pid"
    try:
        watch(pgdata, timeout)
    finally:
        try:
            if pidfile.read_text().split()[0] == str(os.getpid()):
                pidfile.unlink()
        except (OSError, IndexError):
            pass


if __name__ == "__main__":
    main()
