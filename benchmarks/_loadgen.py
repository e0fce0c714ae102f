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


async def run(
    host: str,
    port: int,
    requests: Sequence[bytes],
    concurrency: int,
    *,
    check: Callable[[int, bytes], bool] = lambda status, _body: status == 200,
) -> tuple[Tally, float]:
    """Send every request in ``requests`` (pre-encoded) from ``concurrency`` keep-alive connections;
    returns the tally (latencies in ms of the successful ones) and the elapsed seconds."""
    tally = Tally()

    async def client(ids: range) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in ids:
                t = time.perf_counter()
                try:
                    writer.write(requests[i])
                    status, body = await _read_response(reader)
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    tally.fail(f"{type(exc).__name__}: {exc}")
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    continue
                if check(status, body):
                    tally.latencies.append((time.perf_counter() - t) * 1000)
                else:
                    tally.fail(f"{status} {body[:300]!r}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(range(w, len(requests), concurrency)) for w in range(concurrency)))
    return tally, time.perf_counter() - started
