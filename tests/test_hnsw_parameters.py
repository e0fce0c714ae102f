"""A collection's HNSW parameters: recorded, validated, used by the index build and by search."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from agentrag.errors import InvalidInputError
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

WORDS = ["alpha", "beta", "gamma", "delta", "orbit", "comet", "nebula", "quasar", "basalt", "quartz"]


def _texts(n: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (
            f"d{i}",
            f"record {i} " + " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(10)),
            {"k": i % 10},
        )
        for i in range(n)
    ]


def _reloptions(store: Store, index: str) -> tuple[int | None, list[str]]:
    with store.engine.connect() as conn:
        row = conn.execute(
            text("SELECT c.oid, c.reloptions FROM pg_class c WHERE c.oid = to_regclass(:name)"),
            {"name": f"agentrag.{index}"},
        ).first()
    return (None, []) if row is None else (int(row[0]), sorted(row[1] or []))


@pytest.fixture
def ef_settings(store: Store) -> Iterator[list[str]]:
    """Every hnsw.ef_search value the store's connections set, in order (observed on the engine)."""
    seen: list[str] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "hnsw.ef_search" in statement and isinstance(parameters, dict):
            seen.append(str(parameters.get("ef")))

    event.listen(store.engine, "before_cursor_execute", capture)
    yield seen
    event.remove(store.engine, "before_cursor_execute", capture)


def test_defaults_are_pgvectors_and_are_recorded(store: Store, collection_name: str) -> None:
    coll = store.create_collection(collection_name)
    assert (coll.hnsw_m, coll.hnsw_ef_construction, coll.hnsw_ef_search) == (16, 64, None)
    assert coll.to_dict()["hnsw"] == {"m": 16, "ef_construction": 64, "ef_search": None}


def test_the_index_is_built_with_the_collections_parameters(store: Store, collection_name: str) -> None:
    coll = store.create_collection(collection_name, hnsw_m=8, hnsw_ef_construction=40, ef_search=60)
    assert (coll.hnsw_m, coll.hnsw_ef_construction, coll.hnsw_ef_search) == (8, 40, 60)
    assert store.describe([collection_name])[0].hnsw_m == 8
    ingest_texts(store, _texts(30), collection=collection_name)
    _oid, options = _reloptions(store, coll.hnsw_index)
    assert options == ["ef_construction=40", "m=8"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hnsw_m": 1}, r"hnsw_m must be in \[2, 100\], got 1"),
        ({"hnsw_m": 101, "hnsw_ef_construction": 400}, r"hnsw_m must be in \[2, 100\]"),
        ({"hnsw_m": True}, r"hnsw_m must be an int"),
        ({"hnsw_m": "16"}, r"hnsw_m must be an int"),
        ({"hnsw_ef_construction": 3}, r"hnsw_ef_construction must be in \[4, 1000\]"),
        ({"hnsw_m": 32, "hnsw_ef_construction": 63}, r"at least 2 \* hnsw_m \(64\), got 63"),
        ({"ef_search": 0}, r"ef_search must be in \[1, 1000\]"),
        ({"ef_search": 1001}, r"ef_search must be in \[1, 1000\]"),
        ({"ef_search": 50.0}, r"ef_search must be an int"),
    ],
)
def test_bad_parameters_are_refused_and_nothing_is_created(
    store: Store, collection_name: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.create_collection(collection_name, **options)
    assert collection_name not in [c.name for c in store.collections()]


def test_tuning_ef_search_keeps_the_index_and_tuning_m_rebuilds_it(
    store: Store, collection_name: str
) -> None:
    coll = store.create_collection(collection_name)
    ingest_texts(store, _texts(40), collection=collection_name)
    oid, options = _reloptions(store, coll.hnsw_index)
    assert oid is not None and options == ["ef_construction=64", "m=16"]

    tuned = store.tune_vector_index(collection_name, ef_search=250)
    assert (tuned.hnsw_m, tuned.hnsw_ef_construction, tuned.hnsw_ef_search) == (16, 64, 250)
    assert _reloptions(store, coll.hnsw_index) == (oid, options)  # no rebuild for a search setting

    tuned = store.tune_vector_index(collection_name, hnsw_m=24, hnsw_ef_construction=96)
    assert (tuned.hnsw_m, tuned.hnsw_ef_construction, tuned.hnsw_ef_search) == (24, 96, 250)
    new_oid, new_options = _reloptions(store, coll.hnsw_index)
    assert new_oid is not None and new_oid != oid and new_options == ["ef_construction=96", "m=24"]

    assert store.tune_vector_index(collection_name, ef_search=None).hnsw_ef_search is None
    with pytest.raises(InvalidInputError, match=r"at least 2 \* hnsw_m \(48\)"):
        store.tune_vector_index(collection_name, hnsw_ef_construction=47)
    assert store.collection(collection_name).hnsw_ef_construction == 96  # nothing changed
    assert _reloptions(store, coll.hnsw_index)[0] == new_oid


def test_search_uses_the_call_then_the_collection_then_the_default_ef_search(
    store: Store, collection_name: str, ef_settings: list[str]
) -> None:
    store.create_collection(collection_name)
    ingest_texts(store, _texts(40), collection=collection_name)
    store.search("comet nebula", collections=collection_name, mode="vector", top_k=3)
    store.search("comet nebula", collections=collection_name, mode="vector", top_k=3, depth=150)
    store.tune_vector_index(collection_name, ef_search=333)
    store.search("comet nebula", collections=collection_name, mode="vector", top_k=3)
    store.search("comet nebula", collections=collection_name, mode="vector", top_k=3, ef_search=77)
    assert ef_settings == ["100", "150", "333", "77"]


def test_two_collections_in_one_search_each_get_their_own_ef_search(
    store: Store, collection_name: str, ef_settings: list[str]
) -> None:
    other = collection_name + "_b"
    store.create_collection(collection_name, ef_search=120)
    store.create_collection(other, ef_search=240)
    ingest_texts(store, _texts(20), collection=collection_name)
    ingest_texts(store, _texts(20), collection=other)
    result = store.search("comet", collections=[collection_name, other], mode="vector", top_k=5)
    assert len(result.hits) == 5
    assert ef_settings == ["120", "240"]


@pytest.mark.parametrize("ef_search", [1, 5, 1000])
def test_filtered_search_returns_exactly_min_k_matches_at_any_ef_search(
    store: Store, collection_name: str, ef_search: int
) -> None:
    store.create_collection(collection_name, ef_search=ef_search)
    ingest_texts(store, _texts(200), collection=collection_name)
    for k_value, top_k in ((3, 10), (3, 25), (7, 1)):
        matches = sum(1 for _s, _t, meta in _texts(200) if meta["k"] == k_value)
        for mode in ("vector", "hybrid"):
            result = store.search(
                "comet nebula quartz",
                collections=collection_name,
                mode=mode,
                top_k=top_k,
                filters={"metadata": {"k": k_value}},
            )
            assert len(result.hits) == min(top_k, matches)
            assert all(
                re.fullmatch(r"d\d+", h.source) and int(h.source[1:]) % 10 == k_value for h in result.hits
            )


def test_the_cli_creates_and_tunes_with_the_same_checks(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    argv = ["collections", "create", collection_name, "--hnsw-m", "8", "--hnsw-ef-construction", "32"]
    assert cli.main([*argv, "--ef-search", "150", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hnsw"] == {"m": 8, "ef_construction": 32, "ef_search": 150}
    assert cli.main(["collections", "tune", collection_name, "--ef-search", "default"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{collection_name}: HNSW m=8 ef_construction=32, ef_search max(100, depth)"
    )
    assert cli.main(["collections", "tune", collection_name, "--hnsw-m", "20"]) == 2
    assert "at least 2 * hnsw_m (40), got 32" in capsys.readouterr().err
    assert cli.main(["collections", "tune", collection_name, "--ef-search", "lots"]) == 2
    assert "--ef-search must be an integer or 'default'" in capsys.readouterr().err
    assert store.collection(collection_name).hnsw_m == 8


def test_the_default_ef_search_grows_with_the_index() -> None:
    from agentrag.retrieval.search import default_ef_search

    assert default_ef_search(100, -1) == 100  # unknown size: small
    assert default_ef_search(100, 5_183) == 100  # SciFact
    assert default_ef_search(150, 5_183) == 150  # never below depth
    assert default_ef_search(100, 200_000) == 100  # recall@10 0.97 measured here
    assert default_ef_search(100, 250_001) == 200
    assert default_ef_search(100, 1_000_000) == 400  # 0.968 measured at 1M (0.858 at 100)
    assert default_ef_search(100, 1e9) == 1000  # pgvector's ceiling


def test_search_reads_the_index_size_from_the_catalogue(store: Store, collection_name: str) -> None:
    from sqlalchemy import text

    from agentrag.retrieval.sources import load_collections

    coll = store.create_collection(collection_name)
    with store.engine.connect() as conn:
        (before,) = load_collections(conn, (collection_name,))
    assert before.indexed_rows == -1  # no index yet
    ingest_texts(store, _texts(30), collection=collection_name)
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.chunks"))
        (after,) = load_collections(conn, (collection_name,))
        chunks = conn.execute(
            text("SELECT count(*) FROM agentrag.chunks WHERE collection_id = :c"), {"c": coll.id}
        ).scalar()
        reltuples = conn.execute(
            text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:index)"),
            {"index": f"agentrag.{coll.hnsw_index}"},
        ).scalar()
    # ANALYZE estimates a partial index's rows from its sample of the whole (shared) table: the
    # catalogue's figure is read as it is, and it is near the true count, not always equal to it
    assert chunks == 30
    assert after.indexed_rows == reltuples
    assert abs(after.indexed_rows - chunks) <= 3
