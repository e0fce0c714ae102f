"""The search's hand-off to worker threads (agentrag/server/handoff.py), alone and behind real HTTP."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentrag.server.handoff import Handoff
from tests.server_support import auth, new_tenant, start_server

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_the_call_runs_on_a_worker_thread_in_the_callers_context() -> None:
    handoff = Handoff(4)

    def work(x: int) -> tuple[int, str, str]:
        return x * 2, REQUEST.get(), threading.current_thread().name

    async def main() -> tuple[int, str, str]:
        REQUEST.set("r1")  # a request's span is set like this before the hand-off
        return await handoff.run(work, 21)

    try:
        value, seen, thread = asyncio.run(main())
    finally:
        handoff.close()
    assert value == 42 and seen == "r1"
    assert thread.startswith("agentrag-search_") and thread != threading.current_thread().name


def test_an_error_is_raised_where_the_call_is_awaited_and_the_worker_serves_on() -> None:
    handoff = Handoff(1)

    def fail() -> None:
        raise LookupError("no such tenant")

    async def main() -> str:
        with pytest.raises(LookupError, match="no such tenant"):
            await handoff.run(fail)
        return await handoff.run(lambda: threading.current_thread().name)

    try:
        assert asyncio.run(main()) == "agentrag-search_0"
        assert handoff.workers == 1
    finally:
        handoff.close()


def test_one_client_is_served_by_one_thread_and_many_by_at_most_max_workers() -> None:
    handoff = Handoff(3)
    running = 0
    most = 0
    lock = threading.Lock()

    def work(i: int) -> tuple[int, str]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return i, threading.current_thread().name

    async def main() -> tuple[list[str], list[tuple[int, str]]]:
        one = [(await handoff.run(work, i))[1] for i in range(5)]  # one at a time
        many = await asyncio.gather(*(handoff.run(work, i) for i in range(12)))  # 12 at once
        return one, list(many)

    try:
        one, many = asyncio.run(main())
    finally:
        handoff.close()
    assert len(set(one)) == 1  # the most recently idle worker takes the next call
    assert [i for i, _ in many] == list(range(12))  # every call answered, in its own future
    assert most == 3 and handoff.workers == 3  # the rest waited in the backlog
    assert len({name for _, name in many}) == 3


def test_closed_workers_exit_and_a_closed_handoff_refuses() -> None:
    handoff = Handoff(2)

    async def main() -> None:
        await asyncio.gather(*(handoff.run(time.sleep, 0.01) for _ in range(2)))

    asyncio.run(main())
    handoff.close()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("agentrag-search_") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the hand-off's workers did not exit"
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(handoff.run(len, ()))


def test_the_search_concurrency_sizes_the_hand_off_and_is_checked(store: Any) -> None:
    import os

    from agentrag.errors import InvalidInputError
    from agentrag.server.app import SEARCHES_PER_CORE, create_app
    from agentrag.server.config import ServerConfig
    from agentrag.server.fastpath import SearchFastPath

    def threads(config: ServerConfig) -> int:
        app = create_app(store, config=config)
        [layer] = [m for m in app.user_middleware if m.cls is SearchFastPath]
        return int(layer.kwargs["handoff"].max_workers)

    cores = len(os.sched_getaffinity(0))
    assert threads(ServerConfig(embedder="fake:64")) == SEARCHES_PER_CORE * cores
    assert threads(ServerConfig(embedder="fake:64", search_concurrency=5)) == 5
    env = ServerConfig(embedder="fake:64", search_concurrency=2).to_env()
    assert env["AGENTRAG_SEARCH_CONCURRENCY"] == "2"
    assert ServerConfig.from_env(env).search_concurrency == 2  # what each worker process reads
    with pytest.raises(InvalidInputError, match="search_concurrency must be >= 1"):
        ServerConfig(search_concurrency=-1)


def test_more_concurrent_searches_than_worker_threads_are_all_answered_over_http(
    database_url: str, store: Any, tmp_path: Path
) -> None:
    """A server running 2 searches at once (over a pool of 1): 24 searches at once all get their proof,
    the others waiting their turn."""
    import httpx

    collection = f"handoff_{int(time.time() * 1000)}"
    store.create_collection(collection)
    tenant = new_tenant(store, "h")
    store.ingest_text(
        "Invoices are paid within thirty days.", collection=collection, source="a.txt", tenant=tenant
    )
    server = start_server(database_url, tmp_path, "--pool-size", "1", "--search-concurrency", "2")
    try:

        def one(i: int) -> tuple[int, str, int]:
            r = httpx.post(
                f"{server.url}/api/v1/query/{tenant}/search",
                json={"query_text": f"when are invoices paid? ({i})", "collections": [collection]},
                headers=auth(tenant),
                timeout=120,
            )
            return r.status_code, r.headers.get("x-request-id", ""), len(r.json().get("chunks", []))

        with ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(one, range(24)))
    finally:
        server.stop()
    assert all(status == 200 and hits == 1 for status, _, hits in answers), answers
    assert len({request_id for _, request_id, _ in answers}) == 24
