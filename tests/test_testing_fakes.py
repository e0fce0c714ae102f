"""agentrag.testing: FakeLLM and FakeEmbedder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.embedders import Embedder, embed_batched
from agentrag.errors import EmbeddingError, LLMError, LLMRateLimitError, LLMTimeoutError
from agentrag.llm import LLM, LLMReply
from agentrag.testing import FakeEmbedder, FakeLLM, FakeLLMExhausted

Q = [{"role": "user", "content": "question?"}]


# --------------------------------------------------------------------------- FakeLLM


def test_replies_come_in_order_and_calls_are_recorded() -> None:
    fake = FakeLLM(["first", "second"])

    assert fake.complete(Q).text == "first"
    assert fake.complete([{"role": "user", "content": "again"}]).text == "second"

    assert fake.calls == [Q, [{"role": "user", "content": "again"}]]
    assert fake.remaining == 0
    assert isinstance(fake, LLM)


def test_exhausted_script_raises_an_llm_error_naming_the_call() -> None:
    fake = FakeLLM(["only"])
    fake.complete(Q)

    with pytest.raises(FakeLLMExhausted, match="call #2") as caught:
        fake.complete(Q)

    assert isinstance(caught.value, LLMError)
    assert len(fake.calls) == 2  # the failed call is recorded too
    with pytest.raises(FakeLLMExhausted):
        FakeLLM().complete(Q)


def test_exception_in_the_script_is_raised_at_that_call() -> None:
    fake = FakeLLM(["a", LLMTimeoutError("slow"), "c"])

    assert fake.complete(Q).text == "a"
    with pytest.raises(LLMTimeoutError, match="slow"):
        fake.complete(Q)
    assert fake.complete(Q).text == "c"


def test_fn_mode_sees_the_messages() -> None:
    fake = FakeLLM(fn=lambda messages: messages[-1]["content"].upper())
    assert fake.complete(Q).text == "QUESTION?"
    assert fake.complete([{"role": "user", "content": "x"}]).text == "X"
    assert len(fake.calls) == 2
    with pytest.raises(TypeError):
        FakeLLM(["a"], fn=lambda m: "b")
    with pytest.raises(TypeError):
        FakeLLM("one string")  # type: ignore[arg-type]


def test_fail_with_raises_on_every_call() -> None:
    outage = LLMRateLimitError("429 forever")
    fake = FakeLLM(["never used"], fail_with=outage)
    for _ in range(2):
        with pytest.raises(LLMRateLimitError):
            fake.complete(Q)
    with pytest.raises(LLMRateLimitError):
        list(fake.stream(Q))
    assert len(fake.calls) == 3
    assert fake.remaining == 1


def test_token_counts_are_a_quarter_of_the_characters() -> None:
    reply = FakeLLM(["x" * 41], model="m").complete([{"role": "user", "content": "y" * 17}])
    assert reply == LLMReply(text="x" * 41, model="m", input_tokens=4, output_tokens=10)


def test_stream_splits_the_reply_into_chunks() -> None:
    fake = FakeLLM(["abcdefghijklmnopqrst", "short"])

    stream = fake.stream(Q)
    assert list(stream) == ["abcdefgh", "ijklmnop", "qrst"]
    assert stream.output_tokens == 5
    assert list(fake.stream(Q)) == ["short"]
    assert len(fake.calls) == 2


def test_stream_consumes_its_reply_only_when_iterated() -> None:
    fake = FakeLLM(["one"])
    stream = fake.stream(Q)
    assert fake.calls == []
    assert next(stream) == "one"
    assert len(fake.calls) == 1


async def test_async_complete_and_stream() -> None:
    fake = FakeLLM(["async reply", "0123456789"], stream_chunk_size=3)

    assert (await fake.acomplete(Q)).text == "async reply"
    assert [piece async for piece in fake.astream(Q)] == ["012", "345", "678", "9"]
    with pytest.raises(FakeLLMExhausted):
        await fake.acomplete(Q)


@given(st.text(min_size=9, max_size=200), st.integers(min_value=1, max_value=8))
def test_stream_pieces_rebuild_the_reply(text: str, size: int) -> None:
    pieces = list(FakeLLM([text], stream_chunk_size=size).stream(Q))
    assert "".join(pieces) == text
    assert len(pieces) >= 2  # longer than the chunk size
    assert all(len(p) <= size for p in pieces)


# --------------------------------------------------------------------------- FakeEmbedder


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_fake_embedder_is_an_embedder_with_the_right_shape() -> None:
    embedder = FakeEmbedder(32)
    assert isinstance(embedder, Embedder)
    assert (embedder.model_id, embedder.version, embedder.dimensions) == ("fake-hashing", "1", 32)

    vectors = embedder.embed(["hello world", "", "Another text here"])

    assert vectors.shape == (3, 32)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert embedder.embed([]).shape == (0, 32)
    assert embed_batched(embedder, ["a", "b", "c"], batch_size=2).shape == (3, 32)


def test_fake_embedder_is_deterministic_and_case_insensitive() -> None:
    a = FakeEmbedder(64).embed(["PostgreSQL vector search", "bm25"])
    b = FakeEmbedder(64).embed(["postgresql Vector SEARCH", "bm25"])
    np.testing.assert_array_equal(a, b)
    # Pinned so the hashing never changes silently (stored vectors depend on it).
    assert np.flatnonzero(a[1]).tolist() == [50]
    assert a[1][50] == 1.0


def test_texts_sharing_words_are_closer() -> None:
    embedder = FakeEmbedder(256)
    query, near, far = embedder.embed(
        [
            "how does hybrid vector search work",
            "hybrid search combines vector and keyword results",
            "bananas are a yellow tropical fruit",
        ]
    )
    assert _cos(query, near) > _cos(query, far)
    assert _cos(query, query) == pytest.approx(1.0, abs=1e-6)


def test_fake_embedder_failure_mode() -> None:
    embedder = FakeEmbedder(8, fail=True)
    with pytest.raises(EmbeddingError, match="outage"):
        embedder.embed(["x"])
    embedder.fail = False
    assert embedder.embed(["x"]).shape == (1, 8)
    assert embedder.calls == [["x"], ["x"]]
    with pytest.raises(ValueError):
        FakeEmbedder(0)


@settings(max_examples=60)
@given(st.lists(st.text(max_size=80), max_size=5))
def test_fake_embedder_vectors_are_always_unit_length(texts: list[str]) -> None:
    vectors = FakeEmbedder(16).embed(texts)
    assert vectors.shape == (len(texts), 16)
    if texts:
        assert np.all(np.isfinite(vectors))
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
