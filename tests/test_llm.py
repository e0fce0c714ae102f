"""agentrag.llm: LiteLLM against a local OpenAI-compatible stub, CallableLLM, as_llm,
traced calls, JSON replies with one repair, streams."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
from pydantic import BaseModel

from agentrag.embedders import LiteLLMEmbedder
from agentrag.errors import (
    LLMError,
    LLMOutputError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
)
from agentrag.llm import (
    JSON_REPAIR_PROMPT,
    LLM,
    CallableLLM,
    LiteLLM,
    LLMCall,
    LLMReply,
    acall_llm,
    acomplete_json,
    as_llm,
    astream_llm,
    call_llm,
    complete_json,
    messages_to_prompt,
    stream_llm,
)
from agentrag.testing import FakeLLM
from tests.openai_stub import (
    OpenAIStub,
    error,
    malformed,
    rate_limited,
    reply,
    slow,
    stream,
)

# litellm's streaming types trip a pydantic warning on import; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")

HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}]


class Sleeps(list[float]):
    """Records sleeps instead of waiting (sync and async)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make_llm(openai_stub: OpenAIStub, sleeps: Sleeps) -> Callable[..., LiteLLM]:
    def make(**kwargs: object) -> LiteLLM:
        return LiteLLM(
            "openai/stub-model",
            api_base=openai_stub.url,
            api_key="sk-test",
            sleep=sleeps,
            async_sleep=sleeps.asleep,
            **kwargs,  # type: ignore[arg-type]
        )

    return make


# --------------------------------------------------------------------------- LiteLLM over HTTP


def test_complete_returns_text_model_and_tokens(openai_stub: OpenAIStub, make_llm, sleeps) -> None:
    openai_stub.enqueue(reply("Hello there", prompt_tokens=12, completion_tokens=3))

    result = make_llm(max_tokens=50).complete(HI)

    assert result == LLMReply(text="Hello there", model="stub-model", input_tokens=12, output_tokens=3)
    [request] = openai_stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["model"] == "stub-model"
    assert request.json["messages"] == HI
    assert request.json["temperature"] == 0.0
    assert request.json["max_tokens"] == 50
    assert "stream" not in request.json or request.json["stream"] is False
    assert sleeps == []


def test_429_with_retry_after_waits_that_long_then_succeeds(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(rate_limited(retry_after=2), reply("ok"))

    result = make_llm().complete(HI)

    assert result.text == "ok"
    assert result.retries == 1
    assert sleeps == [2.0]
    assert len(openai_stub.requests) == 2


def test_retry_after_is_capped_at_max_backoff(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(rate_limited(retry_after=120), reply("ok"))
    assert make_llm(max_backoff=5.0).complete(HI).text == "ok"
    assert sleeps == [5.0]


def test_429_every_time_raises_rate_limit_error_after_max_retries(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(*[rate_limited() for _ in range(3)])

    with pytest.raises(LLMRateLimitError) as caught:
        make_llm(max_retries=2, backoff=0.1).complete(HI)

    assert len(openai_stub.requests) == 3
    assert len(sleeps) == 2
    assert caught.value.retries == 2  # type: ignore[attr-defined]
    assert caught.value.status_code == 429  # type: ignore[attr-defined]
    assert "429" in str(caught.value)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_is_never_retried(openai_stub, make_llm, sleeps, status: int) -> None:
    openai_stub.enqueue(error(status, "nope"), reply("never sent"))

    with pytest.raises(LLMRequestError) as caught:
        make_llm().complete(HI)

    assert len(openai_stub.requests) == 1
    assert sleeps == []
    assert caught.value.status_code == status  # type: ignore[attr-defined]
    assert openai_stub.pending == 1


def test_500_is_retried_then_succeeds(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(error(500), reply("recovered"))

    result = make_llm(backoff=0.5).complete(HI)

    assert result.text == "recovered"
    assert len(openai_stub.requests) == 2
    [wait] = sleeps
    assert 0.25 <= wait <= 0.5  # half to all of backoff * 2**0


def test_backoff_grows_exponentially_with_jitter_and_cap(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(error(503), error(502), error(500), error(500), reply("ok"))

    assert make_llm(max_retries=4, backoff=1.0, max_backoff=3.0).complete(HI).text == "ok"

    ceilings = [1.0, 2.0, 3.0, 3.0]
    assert len(sleeps) == 4
    for wait, ceiling in zip(sleeps, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling


def test_5xx_after_every_retry_is_a_plain_llm_error(openai_stub, make_llm) -> None:
    openai_stub.enqueue(error(500), error(500))
    with pytest.raises(LLMError) as caught:
        make_llm(max_retries=1).complete(HI)
    assert type(caught.value) is LLMError
    assert len(openai_stub.requests) == 2


def test_timeout_raises_llm_timeout_error(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(slow(10), slow(10))

    with pytest.raises(LLMTimeoutError) as caught:
        make_llm(timeout=0.5, max_retries=1).complete(HI)

    assert len(openai_stub.requests) == 2  # timeouts are retried
    assert len(sleeps) == 1
    assert "0.5s" in str(caught.value)


def test_malformed_body_is_an_llm_error(openai_stub, make_llm) -> None:
    # litellm reports an unparseable body as a 500, so it is retried like one.
    openai_stub.enqueue(malformed(), malformed())

    with pytest.raises(LLMError) as caught:
        make_llm(max_retries=1).complete(HI)

    assert type(caught.value) is LLMError
    assert len(openai_stub.requests) == 2


def test_stream_yields_pieces_and_usage(openai_stub, make_llm) -> None:
    openai_stub.enqueue(stream(["Hel", "lo, ", "wor", "ld"], prompt_tokens=9, completion_tokens=4))

    text_stream = make_llm().stream(HI)
    pieces = list(text_stream)

    assert len(pieces) >= 2
    assert "".join(pieces) == "Hello, world"
    assert (text_stream.input_tokens, text_stream.output_tokens) == (9, 4)
    [request] = openai_stub.requests
    assert request.json["stream"] is True


def test_stream_retries_before_the_first_piece(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(rate_limited(retry_after=1), stream(["a", "b"]))
    assert "".join(make_llm().stream(HI)) == "ab"
    assert sleeps == [1.0]


def test_stream_request_error_is_raised_on_iteration(openai_stub, make_llm) -> None:
    openai_stub.enqueue(error(401))
    with pytest.raises(LLMRequestError):
        list(make_llm().stream(HI))


async def test_acomplete(openai_stub, make_llm, sleeps) -> None:
    openai_stub.enqueue(error(500), reply("async hello", prompt_tokens=5, completion_tokens=2))

    result = await make_llm().acomplete(HI)

    assert (result.text, result.input_tokens, result.output_tokens) == ("async hello", 5, 2)
    assert len(sleeps) == 1  # the injected async sleep
    assert len(openai_stub.requests) == 2


async def test_acomplete_rate_limit_and_request_errors(openai_stub, make_llm) -> None:
    openai_stub.enqueue(rate_limited(), rate_limited(), error(401))
    llm = make_llm(max_retries=1)
    with pytest.raises(LLMRateLimitError):
        await llm.acomplete(HI)
    with pytest.raises(LLMRequestError):
        await llm.acomplete(HI)
    assert len(openai_stub.requests) == 3


async def test_acomplete_timeout(openai_stub, make_llm) -> None:
    openai_stub.enqueue(slow(10))
    with pytest.raises(LLMTimeoutError):
        await make_llm(timeout=0.5, max_retries=0).acomplete(HI)


async def test_astream(openai_stub, make_llm) -> None:
    openai_stub.enqueue(stream(["The ", "answer ", "is ", "42."], completion_tokens=4))

    text_stream = make_llm().astream(HI)
    pieces = [piece async for piece in text_stream]

    assert len(pieces) >= 2
    assert "".join(pieces) == "The answer is 42."
    assert text_stream.output_tokens == 4


def test_call_llm_with_litellm_records_retries(openai_stub, make_llm) -> None:
    openai_stub.enqueue(error(503), reply("fine", prompt_tokens=4, completion_tokens=1))
    call = call_llm(make_llm(), HI, purpose="route")
    assert (call.reply, call.retries, call.model) == ("fine", 1, "openai/stub-model")
    assert (call.input_tokens, call.output_tokens) == (4, 1)


def test_litellm_embedder_against_the_stub(openai_stub: OpenAIStub) -> None:
    openai_stub.embedding_dimensions = 8
    embedder = LiteLLMEmbedder(
        "openai/stub-embed", dimensions=8, api_base=openai_stub.url, api_key="sk-test", batch_size=2
    )

    vectors = embedder.embed(["alpha", "beta", "gamma"])

    assert vectors.shape == (3, 8)
    assert vectors.dtype == np.float32
    requests = openai_stub.requests_to("/embeddings")
    assert [r.json["input"] for r in requests] == [["alpha", "beta"], ["gamma"]]
    again = embedder.embed(["gamma"])
    np.testing.assert_array_equal(again[0], vectors[2])


# --------------------------------------------------------------------------- LiteLLM without HTTP


def test_litellm_rejects_the_arguments_it_owns() -> None:
    with pytest.raises(TypeError, match="num_retries"):
        LiteLLM("gpt-4o-mini", num_retries=2)
    with pytest.raises(TypeError):
        LiteLLM("")


def test_litellm_repr_hides_the_api_key() -> None:
    text = repr(LiteLLM("openai/x", api_base="http://127.0.0.1:1/v1", api_key="sk-secret"))
    assert "sk-secret" not in text
    assert "openai/x" in text


def test_retry_after_headers_are_read_from_the_exception() -> None:
    from agentrag.llm import retry_after_seconds

    class Response:
        def __init__(self, headers: dict[str, str]) -> None:
            self.headers = headers

    class Failure(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            self.response = Response(headers)

    assert retry_after_seconds(Failure({"Retry-After": "3"})) == 3.0
    assert retry_after_seconds(Failure({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after_seconds(Failure({})) is None
    assert retry_after_seconds(Exception()) is None


# --------------------------------------------------------------------------- CallableLLM / as_llm


def test_callable_llm_prompt_format_and_model_name() -> None:
    seen: list[str] = []

    def echo(prompt: str) -> str:
        seen.append(prompt)
        return "pong"

    llm = CallableLLM(echo)
    result = llm.complete(HI)

    assert seen == ["system:\nBe brief.\n\nuser:\nSay hello"]
    assert seen[0] == messages_to_prompt(HI)
    assert result == LLMReply(text="pong", model=llm.model)
    assert llm.model.startswith("callable:") and llm.model.endswith("echo")
    assert isinstance(llm, LLM)


async def test_callable_llm_async_function() -> None:
    async def shout(prompt: str) -> str:
        await asyncio.sleep(0)
        return prompt.upper()

    llm = CallableLLM(shout, model="shouter")
    assert (await llm.acomplete([{"role": "user", "content": "hi"}])).text == "USER:\nHI"
    assert [p async for p in llm.astream([{"role": "user", "content": "x"}])] == ["USER:\nX"]
    with pytest.raises(TypeError, match="acomplete"):
        llm.complete([{"role": "user", "content": "hi"}])  # inside a running loop


async def test_callable_llm_sync_function_under_acomplete() -> None:
    llm = CallableLLM(lambda prompt: str(len(prompt)))
    assert (await llm.acomplete([{"role": "user", "content": "abc"}])).text == "9"


def test_callable_llm_async_function_from_sync_code() -> None:
    async def answer(prompt: str) -> str:
        return "42"

    assert CallableLLM(answer).complete([{"role": "user", "content": "?"}]).text == "42"


def test_callable_llm_errors_become_llm_errors() -> None:
    def broken(prompt: str) -> str:
        raise ConnectionError("provider down")

    with pytest.raises(LLMError, match="provider down") as caught:
        CallableLLM(broken).complete(HI)
    assert isinstance(caught.value.__cause__, ConnectionError)
    with pytest.raises(TypeError, match="expected str"):
        CallableLLM(lambda p: 42).complete(HI)  # type: ignore[arg-type,return-value]
    assert list(CallableLLM(lambda p: "whole").stream(HI)) == ["whole"]


def test_as_llm() -> None:
    fake = FakeLLM(["x"])
    assert as_llm(None) is None
    assert as_llm(fake) is fake
    by_name = as_llm("gpt-4o-mini")
    assert isinstance(by_name, LiteLLM) and by_name.model == "gpt-4o-mini"
    assert isinstance(as_llm(lambda prompt: "x"), CallableLLM)
    with pytest.raises(TypeError):
        as_llm(42)


# --------------------------------------------------------------------------- call_llm / streams


def test_call_llm_returns_the_record() -> None:
    messages = [dict(m) for m in HI]
    call = call_llm(FakeLLM(["Hello!"]), messages, purpose="answer")

    assert isinstance(call, LLMCall)
    assert (call.purpose, call.model, call.reply, call.error, call.repair) == (
        "answer",
        "fake",
        "Hello!",
        None,
        False,
    )
    assert call.ok
    assert call.messages == tuple(HI)
    assert call.output_tokens == len("Hello!") // 4
    assert call.latency_ms >= 0
    messages[1]["content"] = "changed afterwards"
    assert call.messages[1]["content"] == "Say hello"  # the record keeps its own copy


def test_call_llm_failure_attaches_the_record() -> None:
    with pytest.raises(LLMTimeoutError) as caught:
        call_llm(FakeLLM([LLMTimeoutError("too slow")]), HI, purpose="route")

    failed = caught.value.call  # type: ignore[attr-defined]
    assert isinstance(failed, LLMCall)
    assert failed.reply is None
    assert failed.error == "LLMTimeoutError: too slow"
    assert failed.purpose == "route"


async def test_acall_llm() -> None:
    call = await acall_llm(FakeLLM(["async"]), HI, purpose="rewrite")
    assert call.reply == "async"
    with pytest.raises(LLMRequestError) as caught:
        await acall_llm(FakeLLM([LLMRequestError("bad key")]), HI, purpose="rewrite")
    assert caught.value.call.error.startswith("LLMRequestError")  # type: ignore[attr-defined]


def test_llm_call_repr_is_short() -> None:
    call = LLMCall(
        purpose="answer",
        model="m",
        messages=({"role": "user", "content": "q" * 10_000},),
        reply="r" * 10_000,
        latency_ms=12.345,
    )
    text = repr(call)
    assert len(text) < 200
    assert "answer" in text and "12.3ms" in text
    assert hash(call) == hash(call)  # dict fields are excluded from the hash


def test_stream_llm_yields_pieces_then_has_the_record() -> None:
    fake = FakeLLM(["The quick brown fox jumps"], stream_chunk_size=5)
    streamed = stream_llm(fake, HI, purpose="answer")
    assert streamed.call is None

    pieces = list(streamed)

    assert pieces == ["The q", "uick ", "brown", " fox ", "jumps"]
    assert streamed.text == "The quick brown fox jumps"
    assert streamed.call is not None
    assert streamed.call.reply == "The quick brown fox jumps"
    assert streamed.call.output_tokens == len("The quick brown fox jumps") // 4
    with pytest.raises(RuntimeError, match="once"):
        list(streamed)


def test_stream_llm_failure_and_early_close() -> None:
    failing = stream_llm(FakeLLM([LLMRateLimitError("429")]), HI, purpose="answer")
    with pytest.raises(LLMRateLimitError) as caught:
        list(failing)
    assert failing.call is caught.value.call  # type: ignore[attr-defined]
    assert failing.call is not None and failing.call.error == "LLMRateLimitError: 429"

    partial = stream_llm(FakeLLM(["abcdefghijklmnop"], stream_chunk_size=4), HI, purpose="answer")
    pieces = iter(partial)
    assert next(pieces) == "abcd"
    pieces.close()  # type: ignore[attr-defined]
    assert partial.call is not None
    assert partial.call.reply == "abcd"
    assert partial.call.error is not None and "stopped by the caller" in partial.call.error


async def test_astream_llm() -> None:
    streamed = astream_llm(FakeLLM(["0123456789"], stream_chunk_size=4), HI, purpose="answer")
    pieces = [piece async for piece in streamed]
    assert pieces == ["0123", "4567", "89"]
    assert streamed.call is not None and streamed.call.reply == "0123456789"
    with pytest.raises(TypeError):
        iter(streamed)


# --------------------------------------------------------------------------- complete_json


class Route(BaseModel):
    intent: str
    confidence: float


def test_complete_json_valid_first_time() -> None:
    fake = FakeLLM(['{"intent": "search", "confidence": 0.9}'])

    value, calls = complete_json(fake, HI, Route, purpose="route")

    assert value == Route(intent="search", confidence=0.9)
    assert len(calls) == 1
    assert calls[0].parsed == {"intent": "search", "confidence": 0.9}
    assert calls[0].error is None and calls[0].repair is False


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"intent": "chat", "confidence": 0.5}\n```',
        '```\n{"intent": "chat", "confidence": 0.5}\n```',
        'Sure! Here it is:\n{"intent": "chat", "confidence": 0.5}\nHope this helps {:',
        '  {"intent": "chat", "confidence": 0.5}  ',
    ],
)
def test_complete_json_tolerates_fences_and_prose(text: str) -> None:
    value, calls = complete_json(FakeLLM([text]), HI, Route, purpose="route")
    assert value == Route(intent="chat", confidence=0.5)
    assert len(calls) == 1


def test_complete_json_repairs_once() -> None:
    fake = FakeLLM(['{"intent": "search"}', '{"intent": "search", "confidence": 1}'])

    value, calls = complete_json(fake, HI, Route, purpose="route")

    assert value.confidence == 1.0
    assert [c.repair for c in calls] == [False, True]
    assert calls[0].error is not None and "confidence" in calls[0].error
    assert calls[1].error is None and calls[1].parsed == {"intent": "search", "confidence": 1.0}
    repair_messages = fake.calls[1]
    assert repair_messages[: len(HI)] == HI
    assert repair_messages[len(HI)] == {"role": "assistant", "content": '{"intent": "search"}'}
    assert repair_messages[-1]["role"] == "user"
    assert "confidence" in repair_messages[-1]["content"]
    assert repair_messages[-1]["content"].endswith(JSON_REPAIR_PROMPT.split("\n")[-1])


def test_complete_json_gives_up_after_one_repair() -> None:
    fake = FakeLLM(["I think it is a search.", "Still no JSON, sorry."])

    with pytest.raises(LLMOutputError) as caught:
        complete_json(fake, HI, Route, purpose="route")

    assert caught.value.raw == "Still no JSON, sorry."
    calls = caught.value.calls  # type: ignore[attr-defined]
    assert len(calls) == 2
    assert [c.repair for c in calls] == [False, True]
    assert all(c.error and c.error.startswith("LLMOutputError") for c in calls)
    assert fake.remaining == 0


def test_complete_json_llm_failure_carries_every_record() -> None:
    fake = FakeLLM(["not json", LLMTimeoutError("slow")])
    with pytest.raises(LLMTimeoutError) as caught:
        complete_json(fake, HI, Route, purpose="route")
    calls = caught.value.calls  # type: ignore[attr-defined]
    assert len(calls) == 2
    assert calls[1].repair is True and calls[1].error == "LLMTimeoutError: slow"


async def test_acomplete_json_repairs_and_fails_like_the_sync_one() -> None:
    value, calls = await acomplete_json(
        FakeLLM(['{"intent": 3}', '```json\n{"intent": "x", "confidence": 0}\n```']),
        HI,
        Route,
        purpose="route",
    )
    assert value == Route(intent="x", confidence=0.0)
    assert [c.repair for c in calls] == [False, True]

    with pytest.raises(LLMOutputError) as caught:
        await acomplete_json(FakeLLM(["", "[]"]), HI, Route, purpose="route")
    assert len(caught.value.calls) == 2  # type: ignore[attr-defined]
