"""The local router with the real all-MiniLM-L6-v2 and the sample collections' descriptions: a
compound question is routed part by part, a simple one to its one collection. Real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentrag as ar
from agentrag.store.store import Store
from tests.pipeline_fixtures import Q_COMPARE

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@pytest.fixture
def described(database_url: str, local_embedder) -> Iterator[tuple[Store, dict[str, str]]]:  # type: ignore[no-untyped-def]
    """The three sample collections (descriptions only: routing reads nothing else), under fresh names."""
    store = Store(database_url, embedder=local_embedder)
    suffix = uuid.uuid4().hex[:6]
    names = {}
    for spec in json.loads((SAMPLES / "collections.json").read_text()):
        names[spec["name"]] = f"{spec['name']}_{suffix}"
        store.create_collection(names[spec["name"]], description=spec["description"])
    yield store, names
    for name in names.values():
        store.delete_collection(name)
    store.close()


def test_a_compound_question_keeps_the_collection_of_each_part(described) -> None:  # type: ignore[no-untyped-def]
    store, names = described
    ctx = ar.new(Q_COMPARE, store=store).route(collections=list(names.values()))
    # The blended question is nearest to the API reference; its support part to support.
    assert set(ctx.collections) == {names["support"], names["api"]}
    assert "part 'What are the support response times" in ctx.routing_reasoning


def test_route_after_decompose_routes_the_sub_questions(described) -> None:  # type: ignore[no-untyped-def]
    store, names = described
    ctx = ar.new(Q_COMPARE, store=store).decompose().route(collections=list(names.values()))
    assert set(ctx.collections) == {names["support"], names["api"]}


def test_a_simple_question_is_routed_whole(described) -> None:  # type: ignore[no-untyped-def]
    store, names = described
    ctx = ar.new("What are the support response times per plan?", store=store).route(
        collections=list(names.values())
    )
    assert ctx.collections == (names["support"],)
    assert "part " not in ctx.routing_reasoning


def test_a_question_searched_in_two_collections_ranks_by_evidence_not_by_collection(
    database_url: str, local_embedder
) -> None:  # type: ignore[no-untyped-def]
    """Each collection's own search gives its best hit the top fused score, however weak; the
    step fuses a question's hits again across its collections from the raw leg scores (as one
    store.search over both does), so a weak collection's best no longer ties a strong one's."""
    store = Store(database_url, embedder=local_embedder)
    suffix = uuid.uuid4().hex[:6]
    strong, weak = f"strong_{suffix}", f"weak_{suffix}"
    try:
        store.create_collection(strong)
        store.create_collection(weak)
        store.ingest_text(
            "When a client exceeds its rate limit the API answers HTTP 429 Too Many Requests with a "
            "Retry-After header; wait that many seconds before retrying.",
            collection=strong,
            source="rate-limits.md",
        )
        store.ingest_text(
            "Our office plants are watered every Monday.", collection=strong, source="plants.md"
        )
        store.ingest_text(
            "The cafeteria opens at eight and closes at three.", collection=weak, source="food.md"
        )
        store.ingest_text("Parking permits are renewed every January.", collection=weak, source="parking.md")
        question = "What happens when a client exceeds the API rate limit?"
        ctx = ar.new(question, store=store, limit=4).search(collections=[strong, weak])
        assert [r.collection for r in ctx.results] == [strong, weak]
        weak_alone = ctx.results[1].hits[0].score  # the weak collection's best, by its own search
        weak_fused = max(h.score for h in ctx.hits if h.collection == weak)
        assert ctx.hits[0].source == "rate-limits.md"
        assert weak_fused < weak_alone - 0.2  # fused against the strong collection's evidence
    finally:
        store.delete_collection(strong)
        store.delete_collection(weak)
        store.close()
