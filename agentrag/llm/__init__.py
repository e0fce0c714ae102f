"""Language models: one small protocol, a litellm adapter, and traced calls.

An :class:`LLM` is anything with a ``model`` name and ``complete`` / ``acomplete`` /
``stream`` / ``astream``. Three ship with agentrag:

* :class:`LiteLLM` for any model litellm knows: ``"gpt-4o-mini"``,
  ``"anthropic/claude-3-5-haiku-latest"``, ``"ollama/llama3.1"``, or
  ``"openai/<name>"`` plus ``api_base`` for any OpenAI-compatible server. It retries
  429, 5xx, connection errors and timeouts itself, with exponential backoff.
* :class:`CallableLLM` turns a function ``prompt -> reply`` (sync or async) into an LLM.
* ``agentrag.testing.FakeLLM``, scripted, for tests.

Pipeline steps do not call an LLM directly: they go through :func:`call_llm` (one
traced call, returning an :class:`LLMCall` record), :func:`complete_json` (a reply
validated against a pydantic model, with one repair attempt) or :func:`stream_llm`.
Each has an ``a``-prefixed async twin.

Every failure is an :class:`~agentrag.errors.LLMError`; the failed call's record is
attached to the exception as ``exc.call`` (and, for :func:`complete_json`, every
record so far as ``exc.calls``).

The package, one module per job: :mod:`~agentrag.llm.protocol` (the protocol and the call
records), :mod:`~agentrag.llm.calls` (traced calls), :mod:`~agentrag.llm.streams` (streams),
:mod:`~agentrag.llm.structured` (JSON replies), :mod:`~agentrag.llm.litellm_adapter` (litellm
with retries) and :mod:`~agentrag.llm.callables` (functions as models). Import from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names resolve on first use (PEP 562), so importing one module of the package
# (agentrag.llm.deadline, by every search) does not import litellm's adapter, streams and telemetry.
_LAZY = {
    "CallableLLM": "callables",
    "as_llm": "callables",
    "messages_to_prompt": "callables",
    "acall_llm": "calls",
    "call_llm": "calls",
    "LiteLLM": "litellm_adapter",
    "retry_after_seconds": "litellm_adapter",
    "LLM": "protocol",
    "LLMCall": "protocol",
    "LLMReply": "protocol",
    "Message": "protocol",
    "AsyncLLMStream": "streams",
    "AsyncTextStream": "streams",
    "LLMStream": "streams",
    "TextStream": "streams",
    "astream_llm": "streams",
    "stream_llm": "streams",
    "JSON_REPAIR_PROMPT": "structured",
    "acomplete_json": "structured",
    "complete_json": "structured",
}

if TYPE_CHECKING:
    from agentrag.llm.callables import CallableLLM, as_llm, messages_to_prompt
    from agentrag.llm.calls import acall_llm, call_llm
    from agentrag.llm.litellm_adapter import LiteLLM
    from agentrag.llm.litellm_adapter import retry_after_seconds as retry_after_seconds
    from agentrag.llm.protocol import LLM, LLMCall, LLMReply, Message
    from agentrag.llm.streams import (
        AsyncLLMStream,
        AsyncTextStream,
        LLMStream,
        TextStream,
        astream_llm,
        stream_llm,
    )
    from agentrag.llm.structured import JSON_REPAIR_PROMPT, acomplete_json, complete_json


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"agentrag.llm.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "JSON_REPAIR_PROMPT",
    "LLM",
    "AsyncLLMStream",
    "AsyncTextStream",
    "CallableLLM",
    "LLMCall",
    "LLMReply",
    "LLMStream",
    "LiteLLM",
    "Message",
    "TextStream",
    "acall_llm",
    "acomplete_json",
    "as_llm",
    "astream_llm",
    "call_llm",
    "complete_json",
    "messages_to_prompt",
    "stream_llm",
]
