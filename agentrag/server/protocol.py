"""uvicorn's httptools protocol with the limits uvicorn lacks (``agentrag serve`` runs it).

A request line over ``max_request_line_bytes`` gets 414; a request head over
``max_header_bytes`` or ``max_header_count`` headers gets 431; a connection that has not sent a
complete request head within ``header_timeout_s`` of opening (or of its request's first byte)
gets 408. Each answer closes the connection, and is counted in the ``agentrag.server.refused``
metric (:func:`agentrag.server.limits.head_refused`: route ``(request head)``). The limits come
from the worker's :class:`~agentrag.server.config.ServerConfig` (``AGENTRAG_*``). The idle
keep-alive timeout is uvicorn's own (``keep_alive_s``). Imports uvicorn: only the server process
loads this module.

A response's head and body leave in one ``send()`` (:class:`_HeadWithBody`): uvicorn writes the
status line and headers when the app sends ``http.response.start`` and the body when it sends
``http.response.body``, two writes, so two TCP segments and two wake-ups of the client for a
plain JSON response. The head is held until the end of the event loop's turn instead, and goes
with the body written in that turn (the same bytes, in the same order); a streamed response's
head still leaves in that turn, before its first event.
"""

from __future__ import annotations

import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agentrag.server.limits import RequestLimits, error_body, head_refused

__all__ = ["GuardedHttpToolsProtocol"]

_log = logging.getLogger("agentrag.server")
_LIMITS: list[RequestLimits] = []


def _process_limits() -> RequestLimits:
    if not _LIMITS:
        from agentrag.server.config import ServerConfig

        _LIMITS.append(RequestLimits.of(ServerConfig.from_env()))
    return _LIMITS[0]


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """See the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = _process_limits()
        self.head_timer: Any = None
        self.in_head = True
        self.head_bytes = 0
        self.header_count = 0
        self.refused = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        super().data_received(data)
        if self.in_head and not self.refused:  # the head is still incomplete after this chunk
            self.head_bytes += len(data)
            if self.head_bytes > self.limits.max_header_bytes + self.limits.max_request_line_bytes + 64:
                self._refuse(431, "Request Header Fields Too Large")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_head, self.header_count = True, 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        if self.refused:
            return
        super().on_url(url)
        if len(self.url) > self.limits.max_request_line_bytes:
            self._refuse(414, "URI Too Long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.refused:
            return
        self.header_count += 1
        if self.header_count > self.limits.max_header_count:
            return self._refuse(431, "Request Header Fields Too Large")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_head, self.head_bytes = False, 0
        self._disarm()
        if not self.refused:
            before = self.cycle
            super().on_headers_complete()
            if self.cycle is not None and self.cycle is not before:  # its task has not run yet
                self.cycle.transport = _HeadWithBody(self.transport, self.loop)  # type: ignore[assignment]

    def on_body(self, body: bytes) -> None:
        if not self.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self.refused:
            super().on_message_complete()

    def _arm(self) -> None:
        if self.head_timer is None and not self.refused:
            self.head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timeout)

    def _disarm(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timeout(self) -> None:
        self.head_timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self.in_head and not busy:
            self._refuse(408, "Request Timeout")

    def _refuse(self, status: int, reason: str) -> None:
        self.refused = True
        self._disarm()
        body = error_body(reason.upper().replace(" ", "_"), reason.lower(), None)
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\n".encode()
            + b"content-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.transport.close()
        _log.info("request refused at the HTTP layer: %d %s", status, reason)
        head_refused(status)


class _HeadWithBody:
    """A response cycle's view of the connection's transport: its first write (the response head)
    is held until the next write in the same turn of the event loop (the body), and both are sent
    in one ``write``; a first write alone is sent at the end of that turn, ``close`` sends it first.
    Everything else is the transport's own."""

    __slots__ = ("_first", "_held", "_loop", "_transport")

    def __init__(self, transport: Any, loop: Any) -> None:
        self._transport, self._loop = transport, loop
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data, self._held = self._held + data, None
        elif self._first:
            self._first, self._held = False, bytes(data)
            self._loop.call_soon(self._flush)
            return
        self._transport.write(data)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
