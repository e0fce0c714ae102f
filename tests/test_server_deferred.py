"""The service's measurements recorded in batches, and the response body encoded from the proof.

``agentrag.server.deferred``: the service's histograms and counters queue their measurements and
record them, unchanged, when a reader collects or the queue is full (a real SDK ``MeterProvider``
here, and a real ``agentrag serve`` over HTTP for the counts).
``agentrag.server.query_routes.proof_bytes``: the same bytes as the JSON of ``proof.to_dict()``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.interfaces_support import make_corpus
from tests.server_support import auth

parser = pytest.importorskip("prometheus_client.parser")


def _readers_and_meter(limit: int | None = None) -> tuple[Any, Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from agentrag.server.deferred import BATCH_LIMIT, BatchingMeterProvider

    first, second = InMemoryMetricReader(), InMemoryMetricReader()
    provider = BatchingMeterProvider(
        MeterProvider(metric_readers=[first, second]), limit=limit or BATCH_LIMIT
    )
    return first, second, provider.get_meter("test")


def _points(reader: Any) -> dict[tuple[str, tuple[tuple[str, Any], ...]], Any]:
    data = reader.get_metrics_data()
    out = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    out[key] = (point.count, point.sum) if hasattr(point, "count") else point.value
    return out


def test_queued_measurements_reach_every_reader_at_its_collection_unchanged() -> None:
    first, second, meter = _readers_and_meter()
    histogram, counter = meter.create_histogram("h"), meter.create_counter("c")
    attributes = {"step": "search"}
    histogram.record(2.5, attributes)
    counter.add(1, {"mode": "hybrid"})
    attributes["step"] = "changed after the call"  # the queued measurement keeps what it was given
    counter.add(1, {"mode": "hybrid"})
    expected = {("h", (("step", "search"),)): (1, 2.5), ("c", (("mode", "hybrid"),)): 2}
    assert _points(first) == expected  # the queue is recorded before the reader reads
    assert _points(second) == expected  # and it reached the other reader too, once
    counter.add(3, {"mode": "hybrid"})
    assert _points(second)[("c", (("mode", "hybrid"),))] == 5
    assert _points(first)[("c", (("mode", "hybrid"),))] == 5


def test_a_full_queue_is_recorded_by_the_thread_that_filled_it_in_order() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from agentrag.server.deferred import BatchingMeterProvider

    reader = InMemoryMetricReader()
    sdk = MeterProvider(metric_readers=[reader])
    provider = BatchingMeterProvider(sdk, limit=3)
    seen: list[float] = []
    histogram = provider.get_meter("test").create_histogram("h")
    original = histogram._now
    histogram._now = lambda amount, attributes=None, context=None: (
        seen.append(amount),
        original(amount, attributes),
    )
    histogram.record(1.0)
    histogram.record(2.0)
    assert seen == [] and provider.batch.items  # below the limit: queued
    histogram.record(3.0)
    assert seen == [1.0, 2.0, 3.0] and not provider.batch.items
    histogram.record(4.0)
    assert seen == [1.0, 2.0, 3.0]
    assert _points(reader)[("h", ())] == (4, 10.0)


def test_a_measurement_with_an_explicit_context_is_recorded_at_once() -> None:
    from opentelemetry.context import Context

    first, _second, meter = _readers_and_meter()
    histogram = meter.create_histogram("h")
    histogram.record(1.5, {"k": "v"}, Context())
    assert meter._batch.items == []  # not queued
    assert ("h", (("k", "v"),)) in _points(first)


def test_measurements_queued_from_many_threads_are_all_recorded_once() -> None:
    first, _second, meter = _readers_and_meter(limit=7)  # several recordings race the queueing
    counter = meter.create_counter("calls")

    def work() -> None:
        for _ in range(500):
            counter.add(1, {"k": "v"})

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _points(first) == {("calls", (("k", "v"),)): 4000}


def _proofs() -> list[Any]:
    from agentrag.proof import Generation, Proof, ProofChunk

    chunk = ProofChunk(
        chunk_id="c1", doc_id="d1", collection="docs", original_filename="a.pdf", source="s",
        text="caf\u00e9 \u2603 \"quoted\"", page=3, section=None, start_char=0, end_char=12, rank=1,
        score=0.812345678901, similarity_score=None, classification="internal", embed_model="m",
        embed_version="1", source_sha256="ab" * 32, chunk_sha256="cd" * 32,
        locator={"page": 3, "page_end": 4, "sections": ["A", "B"]}, revision=2, grant="group:x",
    )  # fmt: skip
    plain = Proof(
        query_id="q", tenant_id="t", workspace_id=None, session_id=None, collections=("docs",),
        chunks=(chunk, chunk), timestamp="2026-12-03T07:00:00+00:00", model_version_match=True, mode=None,
    )  # fmt: skip
    generation = Generation(
        answer="yes [c1]", cited_chunks=("c1",), ungrounded_claims=("u",), invalid_citations=(),
        grounded=True, mode="extractive", model=None, context_chunks=("c1", "c2"), confidence=0.7,
        support=({"sentence": "yes", "chunk_id": "c1", "start": 0, "end": 3, "score": 0.5},),
    )  # fmt: skip
    answered = Proof(
        query_id="q2", tenant_id=None, workspace_id="w", session_id="s", collections=("docs", "more"),
        chunks=(), timestamp="2026-12-03T07:00:00+00:00", model_version_match=False, mode="hybrid",
        degradations=("lexical-only", "collections-skipped"), generation=generation,
        original_question="and that?", condensed_question="is it so?",
        skipped_collections=(("private", "it enforces document grants"),),
    )  # fmt: skip
    return [plain, answered]


def test_proof_bytes_are_the_json_of_the_proofs_dict_with_its_warnings() -> None:
    from agentrag.server.fastpath import json_bytes
    from agentrag.server.query_routes import _warnings, proof_bytes

    for proof in _proofs():
        expected = proof.to_dict()
        expected["warnings"] = _warnings(expected)
        assert proof_bytes(proof) == json_bytes(expected)
    assert b'"skipped_collections":[{"collection":"private","reason":"it enforces document grants"}]' in (
        proof_bytes(_proofs()[1])
    )


def test_each_served_search_records_its_measurements_once_by_the_time_metrics_is_scraped(
    client: Any, store: Any
) -> None:
    corpus = make_corpus(store, "dfr")

    def counts() -> tuple[float, float]:
        families = {f.name: f for f in parser.text_string_to_metric_families(client.get("/metrics").text)}

        def value(family: str, name: str, **labels: str) -> float:
            found = [
                s.value
                for s in families[family].samples
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
            ]
            return sum(found)

        calls = value("retriever_search_calls", "retriever_search_calls_total", mode="vector")
        steps = value("agentrag_step_duration", "agentrag_step_duration_count", step="search")
        return calls, steps

    body = {"query_text": "what is stored?", "collections": [corpus["collection"]], "mode": "vector"}
    client.post(f"/api/v1/query/{corpus['a']}/search", json=body, headers=auth(corpus["a"]))
    before = counts()
    for _ in range(3):
        r = client.post(f"/api/v1/query/{corpus['a']}/search", json=body, headers=auth(corpus["a"]))
        assert r.status_code == 200, r.text
    calls, steps = counts()
    assert (calls - before[0], steps - before[1]) == (3, 3)
