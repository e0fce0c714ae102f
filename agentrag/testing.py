"""Test doubles for code built on agentrag (and for agentrag's own tests).

* :class:`FakeLLM`: scripted replies (or a function of the messages), records every
  call, streams in fixed-size pieces, can inject any exception.
* :class:`FakeEmbedder`: a deterministic hashing embedder; texts that share words get
  close vectors, no model download.

Both work offline and are fast.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from agentrag.errors import EmbeddingError, LLMError
from agentrag.llm import AsyncTextStream, LLMReply, Message, TextStream

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FakeEmbedder", "FakeLLM", "FakeLLMExhausted"]


class FakeLLMExhausted(LLMError):
    """A :class:`FakeLLM` was called more times than it has scripted replies.

    It is an :class:`~agentrag.errors.LLMError` on purpose: the code under test sees
    it as one more model failure (a pipeline degrades rather than crashes). Assert on
    ``fake.calls`` / ``fake.remaining`` to catch scripting mistakes.
    """


class FakeLLM:
    """A scripted :class:`~agentrag.llm.LLM`.

    ``replies`` are consumed in order, one per call (``complete``, ``acomplete``,
    ``stream`` or ``astream``); an exception instance in the list is raised at that
    call. Or ``fn(messages) -> reply`` computes each reply. ``fail_with`` makes every
    call raise that exception. Without any of them, every call raises
    :class:`FakeLLMExhausted`.

    ``calls`` holds the messages of every call (failed ones too), in order. Token
    counts are ``len(text) // 4`` (prompt: all message contents). Streams yield the
    reply in pieces of ``stream_chunk_size`` characters.
    """

    system = "fake"

    def __init__(
        self,
        replies: Iterable[str | BaseException] | None = None,
        *,
        fn: Callable[[list[Message]], str] | None = None,
        model: str = "fake",
        stream_chunk_size: int = 8,
        fail_with: BaseException | None = None,
    ) -> None:
        if replies is not None and fn is not None:
            raise TypeError("FakeLLM takes replies or fn, not both")
        if isinstance(replies, str):
            raise TypeError("FakeLLM replies must be a list of strings, not one string")
        if stream_chunk_size < 1:
            raise ValueError("stream_chunk_size must be >= 1")
        self.model = model
        self.fn = fn
        self.fail_with = fail_with
        self.stream_chunk_size = stream_chunk_size
        self.calls: list[list[Message]] = []
        self._script: deque[str | BaseException] = deque(replies or ())
        self._scripted = len(self._script)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FakeLLM({self.model!r}, {len(self.calls)} calls, {self.remaining} replies left)"

    @property
    def remaining(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._script)

    def complete(self, messages: Sequence[Message]) -> LLMReply:
        prompt = [dict(m) for m in messages]
        with self._lock:
            self.calls.append(prompt)
            number = len(self.calls)
            item: str | BaseException | None = None
            if self.fail_with is None and self.fn is None:
                item = self._script.popleft() if self._script else None
        if self.fail_with is not None:
            raise self.fail_with
        if self.fn is not None:
            item = self.fn([dict(m) for m in prompt])
        if item is None:
            raise FakeLLMExhausted(
                f"FakeLLM {self.model!r} has no reply for call #{number}: "
                f"{self._scripted} scripted, all consumed"
            )
        if isinstance(item, BaseException):
            raise item
        if not isinstance(item, str):
            raise TypeError(f"FakeLLM replies must be str or exceptions, got {type(item).__name__}")
        return LLMReply(
            text=item,
            model=self.model,
            input_tokens=sum(len(m.get("content", "")) for m in prompt) // 4,
            output_tokens=len(item) // 4,
        )

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply:
        import asyncio

        await asyncio.sleep(0)  # let other tasks run, as a real call would
        return self.complete(messages)

    def stream(self, messages: Sequence[Message]) -> TextStream:
        def produce(out: TextStream) -> Iterator[str]:
            reply = self.complete(messages)
            out.input_tokens, out.output_tokens = reply.input_tokens, reply.output_tokens
            yield from self._pieces(reply.text)

        return TextStream(self.model, produce)

    def astream(self, messages: Sequence[Message]) -> AsyncTextStream:
        async def produce(out: AsyncTextStream) -> AsyncIterator[str]:
            reply = await self.acomplete(messages)
            out.input_tokens, out.output_tokens = reply.input_tokens, reply.output_tokens
            for piece in self._pieces(reply.text):
                yield piece

        return AsyncTextStream(self.model, produce)

    def _pieces(self, text: str) -> list[str]:
        size = self.stream_chunk_size
        return [text[i : i + size] for i in range(0, len(text), size)]


_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """A deterministic hashing embedder (satisfies :class:`agentrag.embedders.Embedder`).

    Each lowercased word is hashed (blake2b) to a bucket and a sign; the counts are
    L2-normalised to float32. Same text, same vector, in every process; texts sharing
    words are close. ``fail=True`` (settable any time) makes ``embed`` raise
    :class:`~agentrag.errors.EmbeddingError`, like a provider outage. ``calls`` records
    the texts of every ``embed`` call.
    """

    def __init__(
        self,
        dimensions: int = 64,
        *,
        model_id: str = "fake-hashing",
        version: str = "1",
        fail: bool = False,
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self.dimensions = dimensions
        self.model_id = model_id
        self.version = version
        self.fail = fail
        self.calls: list[list[str]] = []

    def __repr__(self) -> str:
        return f"FakeEmbedder({self.dimensions}, model_id={self.model_id!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        self.calls.append(texts)
        if self.fail:
            raise EmbeddingError(f"{self.model_id}: simulated embedding provider outage")
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _WORD.findall(text.lower()) or [""]:
                bucket, sign = self._slot(token)
                out[row, bucket] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # words cancelled out: fall back to the empty-text vector
                bucket, sign = self._slot("")
                out[row, bucket] = sign
            else:
                out[row] /= norm
        return out

    def _slot(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dimensions, (1.0 if value >> 63 else -1.0)
