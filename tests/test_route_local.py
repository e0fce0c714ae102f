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
