"""Structured output: a reply parsed as JSON and validated against a pydantic model, with one
repair attempt (:func:`complete_json` / :func:`acomplete_json`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentrag._sansio import Body, run_async, run_sync
from agentrag.errors import LLMOutputError
from agentrag.llm.calls import call_body
from agentrag.llm.protocol import LLM, LLMCall, Message
from agentrag.telemetry import DEFAULT_TELEMETRY, Telemetry

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

__all__ = ["JSON_REPAIR_PROMPT", "acomplete_json", "complete_json"]

M = TypeVar("M", bound="BaseModel")


JSON_REPAIR_PROMPT = (
    "Your previous reply could not be used: {problem}\n"
    "Reply again with only the JSON object, with no other text and no code fences."
)
"""The user message of the one repair attempt of :func:`complete_json`."""

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_SCAN_STARTS = 64
MAX_JSON_REPLY_CHARS = 200_000
"""A JSON reply longer than this is refused (LLMOutputError) before it is parsed."""
MAX_JSON_DEPTH = 64
"""A JSON reply nested deeper than this is refused before it is parsed (no RecursionError)."""
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _UnusableReply(Exception):
    """Why a reply could not be turned into the schema (text for the repair prompt)."""


class _RefusedReply(_UnusableReply):
    """A reply too large or too deeply nested to parse: no repair is asked for."""


class _JSONExchange(Generic[M]):
    """The parse / repair logic of complete_json, shared by the sync and async drivers.

    The body sends ``messages`` (with ``repair``), hands each successful call to
    :meth:`accept` until it returns a value, and passes any call failure to
    :meth:`failed`.
    """

    def __init__(self, messages: Sequence[Message], schema: type[M]) -> None:
        self.schema = schema
        self.original = [dict(m) for m in messages]
        self.messages = self.original
        self.repair = False
        self.calls: list[LLMCall] = []

    def accept(self, call: LLMCall) -> M | None:
        """The validated value; None when a repair attempt must be sent; raises after it."""
        try:
            value = _parse_json_reply(call.reply or "", self.schema)
        except _UnusableReply as problem:
            self.calls.append(replace(call, error=f"LLMOutputError: {problem}"))
            if self.repair or isinstance(problem, _RefusedReply):
                error = LLMOutputError(
                    f"{self.schema.__name__}: the reply was unusable even after one repair: {problem}",
                    raw=call.reply,
                )
                error.call = self.calls[-1]  # type: ignore[attr-defined]
                error.calls = list(self.calls)  # type: ignore[attr-defined]
                raise error from None
            self.repair = True
            self.messages = [
                *self.original,
                {"role": "assistant", "content": call.reply or ""},
                {"role": "user", "content": JSON_REPAIR_PROMPT.format(problem=problem)},
            ]
            return None
        self.calls.append(replace(call, parsed=value.model_dump(mode="json")))
        return value

    def failed(self, exc: BaseException) -> None:
        failed_call = getattr(exc, "call", None)
        calls = [*self.calls, failed_call] if isinstance(failed_call, LLMCall) else list(self.calls)
        with suppress(AttributeError):
            exc.calls = calls  # type: ignore[attr-defined]


def _complete_json(
    llm: LLM, messages: Sequence[Message], schema: type[M], *, purpose: str, telemetry: Telemetry
) -> Body[tuple[M, list[LLMCall]]]:
    """The one body of :func:`complete_json` and :func:`acomplete_json`."""
    exchange = _JSONExchange(messages, schema)
    while True:
        try:
            call = yield from call_body(
                llm, exchange.messages, purpose=purpose, telemetry=telemetry, repair=exchange.repair
            )
        except BaseException as exc:
            exchange.failed(exc)
            raise
        value = exchange.accept(call)
        if value is not None:
            return value, exchange.calls


def complete_json(
    llm: LLM,
    messages: Sequence[Message],
    schema: type[M],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
) -> tuple[M, list[LLMCall]]:
    """Ask for a JSON object and validate it as ``schema``.

    The reply may wrap the object in a ```json fence or in prose. When it cannot be
    parsed or validated, one repair attempt is made: the reply goes back as the
    assistant turn, followed by :data:`JSON_REPAIR_PROMPT` naming the problem. If that
    fails too: :class:`LLMOutputError` (``raw`` = the last reply, ``calls`` = every
    record). Returns the value and the call records (1 or 2).
    """
    return run_sync(_complete_json(llm, messages, schema, purpose=purpose, telemetry=telemetry))


async def acomplete_json(
    llm: LLM,
    messages: Sequence[Message],
    schema: type[M],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
) -> tuple[M, list[LLMCall]]:
    """The async twin of :func:`complete_json`."""
    return await run_async(_complete_json(llm, messages, schema, purpose=purpose, telemetry=telemetry))


def _parse_json_reply(text: str, schema: type[M]) -> M:
    from pydantic import ValidationError

    if len(text) > MAX_JSON_REPLY_CHARS:
        raise _RefusedReply(f"the reply is {len(text)} characters long (limit {MAX_JSON_REPLY_CHARS}).")
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        raise _RefusedReply(f"the reply is nested more than {MAX_JSON_DEPTH} levels deep.")
    try:
        data = _extract_json(text)
        return schema.model_validate(data)
    except ValidationError as exc:
        raise _UnusableReply(_describe_validation_error(exc)) from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise _RefusedReply("the reply is nested too deeply to parse.") from None


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of ``text`` outside JSON strings (an upper bound is enough)."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def _extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, a fenced block, or the first object/array."""
    stripped = text.strip()
    if not stripped:
        raise _UnusableReply("the reply was empty.")
    with suppress(ValueError):
        return json.loads(stripped)
    for match in _FENCE.finditer(stripped):
        with suppress(ValueError):
            return json.loads(match.group(1).strip())
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(stripped) if ch in "{["][:_MAX_SCAN_STARTS]
    for start in starts:
        with suppress(ValueError):
            value, _ = decoder.raw_decode(stripped, start)
            return value
    raise _UnusableReply("the reply does not contain a JSON object.")


def _describe_validation_error(exc: ValidationError, limit: int = 8) -> str:
    errors = exc.errors(include_url=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "the JSON does not match the expected schema (" + "; ".join(parts) + ")."
