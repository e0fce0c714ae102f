"""The LLM protocol and the records of a call: :data:`Message`, :class:`LLMReply`, :class:`LLMCall`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["LLM", "LLMCall", "LLMReply", "Message"]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True, slots=True)
class LLMReply:
    """What a model returned. ``retries`` counts the attempts that failed before it."""

    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    retries: int = 0


@dataclass(frozen=True, slots=True)
class LLMCall:
    """The record of one model call, as kept on the pipeline context.

    ``reply`` is the raw text (None when the call failed), ``parsed`` the validated
    value as plain data when the reply was parsed, ``error`` ``"<ExceptionType>: message"``
    when the call failed or its reply was unusable, ``repair`` True for the repair
    attempt of :func:`complete_json`.
    """

    purpose: str
    model: str
    # The prompt holds a random per-request delimiter, and latency is a timing: neither takes
    # part in equality, so two runs with the same inputs and replies compare equal.
    messages: tuple[Message, ...] = field(hash=False, compare=False)
    reply: str | None
    parsed: Any = field(default=None, hash=False)
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = field(default=0.0, compare=False)
    error: str | None = None
    repair: bool = False
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        parts = [
            self.purpose + (" (repair)" if self.repair else ""),
            self.model,
            f"{len(self.messages)} msgs",
        ]
        if self.reply is not None:
            parts.append(f"-> {snippet(self.reply)!r}")
        if self.input_tokens is not None or self.output_tokens is not None:
            parts.append(f"{self.input_tokens}+{self.output_tokens} tok")
        parts.append(f"{self.latency_ms:.1f}ms")
        if self.retries:
            parts.append(f"{self.retries} retries")
        if self.error is not None:
            parts.append(f"error={snippet(self.error)!r}")
        return f"LLMCall({' '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class LLM(Protocol):
    """What agentrag needs from a language model.

    ``stream`` / ``astream`` may return a :class:`TextStream` / :class:`AsyncTextStream`
    (or any iterator with ``input_tokens`` / ``output_tokens`` attributes filled by the
    end of the stream); the token counts are then recorded.
    """

    model: str

    def complete(self, messages: Sequence[Message]) -> LLMReply: ...

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply: ...

    def stream(self, messages: Sequence[Message]) -> Iterator[str]: ...

    def astream(self, messages: Sequence[Message]) -> AsyncIterator[str]: ...


def int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def snippet(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
