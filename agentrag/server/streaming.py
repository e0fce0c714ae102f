"""The SSE response of ``/ask`` and the outcome recorded on audit events."""

from __future__ import annotations

from typing import Any

from fastapi.responses import StreamingResponse

__all__ = ["ClosingStream", "with_outcome"]


class ClosingStream(StreamingResponse):
    """A StreamingResponse that closes its generator when the response ends, however it ends (the
    client gone: Starlette cancels the send and leaves the generator suspended otherwise)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def with_outcome(events: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    """The events with ``details.outcome`` set (how the request ended, or ``streaming``)."""
    return [{**e, "details": {**(e.get("details") or {}), "outcome": outcome}} for e in events]
