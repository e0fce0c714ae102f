"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for offline tests.

Register it once in ``tests/conftest.py``::

    pytest_plugins = ["tests.openai_stub"]

then ask for the ``openai_stub`` fixture (a fresh server per test)::

    def test_reply(openai_stub):
        openai_stub.enqueue(reply("hello", prompt_tokens=5, completion_tokens=1))
        llm = LiteLLM("openai/stub-model", api_base=openai_stub.url, api_key="sk-test")
        assert llm.complete([{"role": "user", "content": "hi"}]).text == "hello"
        assert openai_stub.requests[0].json["model"] == "stub-model"

Every POST takes the next scripted :class:`StubResponse` from one queue, in order.
Hosted rerankers (litellm's ``cohere/`` and ``jina_ai/`` rerank routes with ``api_base`` set to
``url``) post to ``.../rerank``: script them with :func:`rerank_results`.
When the queue is empty, ``/v1/embeddings`` answers with deterministic vectors of
``embedding_dimensions`` floats, ``.../rerank`` with each document's share of the query's words
as its score, and anything else answers ``418 stub script exhausted``
(a 4xx, so clients do not retry it and the test fails loudly).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "OpenAIStub",
    "RecordedRequest",
    "StubResponse",
    "embeddings",
    "error",
    "malformed",
    "openai_stub",
    "rate_limited",
    "reply",
    "rerank_results",
    "slow",
    "stream",
]


@dataclass(frozen=True)
class StubResponse:
    """One scripted answer. ``sse_events`` set means a ``text/event-stream`` reply."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    sse_events: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _completion(text: str, model: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def reply(
    text: str, *, model: str = "stub-model", prompt_tokens: int = 11, completion_tokens: int = 7
) -> StubResponse:
    """A normal ``chat.completion`` with usage."""
    body = json.dumps(_completion(text, model, prompt_tokens, completion_tokens)).encode()
    return StubResponse(body=body, headers={"Content-Type": "application/json"})


def error(status: int, message: str = "stub error", *, headers: dict[str, str] | None = None) -> StubResponse:
    """An OpenAI-style error body with the given status (400, 401, 404, 500 ...)."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_exceeded"}
    body = {"error": {"message": message, "type": kind.get(status, "server_error"), "code": None}}
    return StubResponse(
        status=status,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def rate_limited(retry_after: float | None = None) -> StubResponse:
    """A 429, with a ``Retry-After`` header (seconds) when given."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return error(429, "Rate limit reached (stub)", headers=headers)


def slow(delay: float, text: str = "too late") -> StubResponse:
    """A normal reply sent only after ``delay`` seconds (use it to trigger client timeouts)."""
    return replace(reply(text), delay=delay)


def malformed() -> StubResponse:
    """A 200 whose body is not JSON."""
    return StubResponse(body=b'{"id": "chatcmpl-stub", "choices": [ this is not json', headers={})


def stream(
    pieces: list[str],
    *,
    model: str = "stub-model",
    prompt_tokens: int = 11,
    completion_tokens: int | None = None,
) -> StubResponse:
    """Server-sent events: one ``chat.completion.chunk`` per piece, a usage chunk, ``[DONE]``."""

    def chunk(delta: dict[str, str], finish: str | None) -> str:
        return json.dumps(
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    events = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": piece}, None) for piece in pieces]
    events.append(chunk({}, "stop"))
    out = len(pieces) if completion_tokens is None else completion_tokens
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": out, "total_tokens": prompt_tokens + out}
    events.append(
        json.dumps(
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    )
    events.append("[DONE]")
    return StubResponse(headers={"Content-Type": "text/event-stream"}, sse_events=tuple(events))


def embeddings(vectors: list[list[float]], *, model: str = "stub-embed") -> StubResponse:
    """A scripted ``/v1/embeddings`` answer."""
    body = {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": len(vectors), "total_tokens": len(vectors)},
    }
    return StubResponse(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def rerank_results(scores: list[float], *, order: list[int] | None = None) -> StubResponse:
    """A scripted hosted-rerank answer (Cohere / Jina ``/rerank`` shape, which litellm's ``cohere/``
    and ``jina_ai/`` rerank routes read): ``scores[i]`` is document i's relevance score; results are
    listed in ``order`` (default: best first, as the providers list them)."""
    indexes = order if order is not None else sorted(range(len(scores)), key=lambda i: -scores[i])
    body = {
        "id": "stub-rerank",
        "results": [{"index": i, "relevance_score": scores[i]} for i in indexes],
        "meta": {"billed_units": {"search_units": 1}},
    }
    return StubResponse(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def _overlap(query: str, document: str) -> float:
    """The unscripted rerank score: the share of the query's words found in the document."""
    words = set(query.lower().split())
    return len(words & set(document.lower().split())) / len(words) if words else 0.0


def _auto_vector(text: str, dimensions: int) -> list[float]:
    digest = hashlib.blake2b(text.encode(), digest_size=dimensions).digest()
    return [(b - 127.5) / 127.5 for b in digest]


class OpenAIStub:
    """The server. ``url`` ends in ``/v1`` (what OpenAI clients take as ``api_base``)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.embedding_dimensions = 8
        self._queue: deque[StubResponse] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def enqueue(self, *responses: StubResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Scripted responses not served yet."""
        with self._lock:
            return len(self._queue)

    def requests_to(self, suffix: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith(suffix)]

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: RecordedRequest) -> StubResponse:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if request.path.endswith("/embeddings"):
            payload = request.json or {}
            inputs = payload.get("input", [])
            inputs = [inputs] if isinstance(inputs, str) else inputs
            vectors = [_auto_vector(str(t), self.embedding_dimensions) for t in inputs]
            return embeddings(vectors, model=str(payload.get("model", "stub-embed")))
        if request.path.endswith("/rerank"):
            payload = request.json or {}
            query = str(payload.get("query", ""))
            return rerank_results([_overlap(query, str(d)) for d in payload.get("documents", [])])
        return error(418, "stub script exhausted: enqueue a response for this request")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or drop keep-alive connections are expected; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _make_handler(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._answer(error(404, f"no GET route {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorded = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            response = stub._next(recorded)
            if response.delay and stub._closing.wait(response.delay):
                return
            with contextlib.suppress(ConnectionError):  # the client gave up (timeout)
                self._answer(response)

        def _answer(self, response: StubResponse) -> None:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.sse_events is None:
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in response.sse_events:
                self._chunk(f"data: {event}\n\n".encode())
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A fresh scripted OpenAI-compatible server for one test."""
    stub = OpenAIStub()
    try:
        yield stub
    finally:
        stub.close()
