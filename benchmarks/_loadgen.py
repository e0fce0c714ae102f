"""A minimal HTTP/1.1 load generator (keep-alive, one connection per concurrent client).

The benchmark's in-process floor has no client at all, so the HTTP side's client must cost as
little as possible: on a 2-core machine every CPU millisecond the load generator spends is a
millisecond the server under test does not get. httpx.AsyncClient spends about 1 ms of Python
per request (request/response models, header objects, the pool); this client writes pre-encoded
request bytes on an asyncio stream and reads the response by ``Content-Length``: what ``wrk`` or
``hey`` do, in a few lines of Python. It speaks just enough HTTP/1.1 for a JSON API that answers
with ``Content-Length`` (uvicorn does for every non-streaming response).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def fail(self, what: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = what
            print("first error:", what[:300], file=sys.stderr)


def request_bytes(host: str, port: int, path: str, headers: dict[str, str], body: bytes) -> bytes:
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in {"Content-Type": "application/json", **headers}.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        raise ValueError("response without Content-Length")
    return status, await reader.readexactly(length)


class Connection:
    """One keep-alive connection; reopened when idle longer than ``expiry`` seconds (uvicorn closes
    idle connections after 5 s: a client must not reuse one the server may be closing)."""

    def __init__(self, host: str, port: int, expiry: float = 2.0) -> None:
        self.host, self.port, self.expiry = host, port, expiry
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0.0

    async def request(self, data: bytes) -> tuple[int, bytes]:
        if self.writer is None or time.monotonic() - self.used > self.expiry:
            self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(data)
            return await _read_response(self.reader)
        except BaseException:
            self.close()
            raise
        finally:
            self.used = time.monotonic()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def run(
    connections: Sequence[Connection],
    requests: Sequence[bytes],
    *,
    check: Callable[[int, bytes], bool] = lambda status, _body: status == 200,
) -> tuple[Tally, float]:
    """Send every request in ``requests`` (pre-encoded), ``len(connections)`` at a time, one per
    connection; returns the tally (latencies in ms of the successful ones) and the elapsed seconds."""
    tally = Tally()
    concurrency = len(connections)

    async def client(conn: Connection, ids: range) -> None:
        for i in ids:
            t = time.perf_counter()
            try:
                status, body = await conn.request(requests[i])
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                tally.fail(f"{type(exc).__name__}: {exc}")
                continue
            if check(status, body):
                tally.latencies.append((time.perf_counter() - t) * 1000)
            else:
                tally.fail(f"{status} {body[:300]!r}")

    started = time.perf_counter()
    await asyncio.gather(
        *(client(conn, range(w, len(requests), concurrency)) for w, conn in enumerate(connections))
    )
    return tally, time.perf_counter() - started
