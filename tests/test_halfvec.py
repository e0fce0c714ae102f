"""halfvec storage (issue #39): a collection created with ``vector_type="halfvec"`` keeps its chunk
vectors as pgvector float16 in ``chunks.embedding_half`` (migration 0050) and searches, scopes, grants
and re-embeds like a float32 one.

Real PostgreSQL; the real all-MiniLM-L6-v2 embeds a small corpus of distinct topics, so the rankings
compared with the float32 twin's are not near a tie (float16 moves a cosine by about 1e-3).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import text

import agentrag as ar
from agentrag.errors import InvalidInputError
from agentrag.store.store import Store
from tests.conftest import REPO, run_cli

TEXTS = {
    "comets.md": "Comets are icy bodies that release gas and dust when they pass close to the Sun.",
    "tides.md": "Tides rise and fall twice a day, pulled by the gravity of the Moon and the Sun.",
    "bees.md": "Honey bees dance in the hive to tell the others where the flowers are.",
    "rust.md": "Iron rusts when oxygen and water reach its surface and form iron oxide.",
    "volcano.md": "A volcano erupts when molten magma rises through cracks in the crust.",
    "bread.md": "Bread dough rises because yeast ferments the sugars and releases carbon dioxide.",
    "chess.md": "In chess the knight moves in an L shape and can jump over other pieces.",
    "violin.md": "A violin has four strings tuned in fifths and is played with a bow.",
    "glacier.md": "Glaciers carve deep valleys as the ice slowly flows downhill under its weight.",
    "vaccine.md": "Vaccines train the immune system to recognise a virus before an infection.",
    "tax.md": "Income tax is withheld from each salary payment by the employer.",
    "coral.md": "Coral reefs bleach when the sea water gets too warm for the algae they host.",
}
QUERIES = ["why does the sea rise and fall", "how do volcanoes erupt", "what makes dough rise", "salary tax"]
MODES = ["vector", "hybrid", "lexical", "lexical_sql"]


@pytest.fixture(scope="module")
def lstore(database_url: str, local_embedder) -> Iterator[Store]:  # type: ignore[no-untyped-def]
    s = Store(database_url, embedder=local_embedder)
    yield s
    s.close()


def _fill(store: Store, name: str, vector_type: str, **options: object) -> None:
    store.create_collection(name, vector_type=vector_type, **options)  # type: ignore[arg-type]
    for i, (source, body) in enumerate(TEXTS.items()):
        tenant = ("t", "u")[i % 2] if options.get("scoped") else None
        store.ingest_text(body, collection=name, source=source, tenant=tenant, metadata={"topic": i % 3})


@pytest.fixture(scope="module")
def twins(lstore: Store) -> Iterator[tuple[str, str]]:
    """The same corpus as float32 and as halfvec, each with its HNSW index."""
    names = ("hv_float32", "hv_half")
    for name, vector_type in zip(names, ("vector", "halfvec"), strict=True):
        _fill(lstore, name, vector_type)
        lstore.ensure_vector_index(lstore.collection(name))
    yield names
    for name in names:
        lstore.delete_collection(name)


def _stored(store: Store, name: str) -> tuple[int, int, int]:
    """(rows with a float32 vector, rows with a halfvec, bytes of the largest halfvec)."""
    with store.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(c.embedding), count(c.embedding_half),"
                " coalesce(max(pg_column_size(c.embedding_half)), 0)"
                " FROM agentrag.chunks c JOIN agentrag.collections k ON k.id = c.collection_id"
                " WHERE k.name = :n"
            ),
            {"n": name},
        ).one()
    return int(row[0]), int(row[1]), int(row[2])


def _index_definition(store: Store, name: str) -> str:
    with store.engine.connect() as conn:
        return str(
            conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE schemaname = 'agentrag' AND indexname = :i"),
                {"i": store.collection(name).hnsw_index},
            ).scalar_one()
        )


def _ranked(result: ar.SearchResult) -> list[tuple[str | None, float]]:
    return [(h.source, h.score) for h in result.hits]


def _same_ranking(half: ar.SearchResult, full: ar.SearchResult) -> None:
    assert [s for s, _ in _ranked(half)] == [s for s, _ in _ranked(full)]
    for (_, a), (_, b) in zip(_ranked(half), _ranked(full), strict=True):
        assert a == pytest.approx(b, abs=5e-3)


def test_unknown_vector_type_is_refused_at_call_time(lstore: Store, collection_name: str) -> None:
    for bad in ("float16", "HALFVEC", None, 2):
        with pytest.raises(InvalidInputError, match="vector_type"):
            lstore.create_collection(collection_name, vector_type=bad)  # type: ignore[arg-type]
    assert collection_name not in {c.name for c in lstore.collections()}  # nothing half-written
    with pytest.raises(InvalidInputError, match="vector_type"):
        lstore.reembed("hv_any", vector_type="float16")


def test_a_halfvec_collection_stores_two_bytes_a_dimension(lstore: Store, twins: tuple[str, str]) -> None:
    full, half = twins
    coll = lstore.collection(half)
    assert coll.vector_type == "halfvec" and coll.to_dict()["vector_type"] == "halfvec"
    assert "halfvec" in repr(coll)
    assert lstore.collection(full).vector_type == "vector"
    assert _stored(lstore, half) == (0, len(TEXTS), 2 * 384 + 8)
    assert _stored(lstore, full)[:2] == (len(TEXTS), 0)
    definition = _index_definition(lstore, half)
    assert "embedding_half)::halfvec(384)" in definition and "halfvec_cosine_ops" in definition
    assert "vector_cosine_ops" in _index_definition(lstore, full)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_what_the_float32_twin_finds(
    lstore: Store, twins: tuple[str, str], mode: str
) -> None:
    full, half = twins
    for query in QUERIES:
        ours, theirs = (lstore.search(query, collections=n, mode=mode, top_k=5) for n in (half, full))
        if mode.startswith("lexical"):  # no vectors; equal ranks break ties by chunk id, which differ
            assert sorted(_ranked(ours), key=_tied) == sorted(_ranked(theirs), key=_tied)
        else:
            _same_ranking(ours, theirs)


def _tied(hit: tuple[str | None, float]) -> tuple[float, str]:
    return (-round(hit[1], 6), hit[0] or "")


def test_the_vector_leg_walks_the_halfvec_index(lstore: Store, twins: tuple[str, str]) -> None:
    _, half = twins
    coll = lstore.collection(half)
    from agentrag.retrieval.vector import configure_hnsw, vector_sql

    sql = "EXPLAIN " + vector_sql(coll.id, coll.dimensions, coll.distance, vector_type="halfvec")
    with lstore.engine.begin() as conn:
        configure_hnsw(conn, ef_search=40, iterative=False)
        for setting in ("enable_sort", "enable_seqscan", "enable_bitmapscan"):  # 12 rows: else a sort
            conn.execute(text(f"SET LOCAL {setting} = off"))
        plan = "\n".join(
            row[0]
            for row in conn.execute(text(sql), {"qvec": lstore.embed_queries(["tides"])[0], "depth": 5})
        )
    assert coll.hnsw_index in plan


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_filters_and_a_tenant_scope_exact_scans_agree(lstore: Store, mode: str) -> None:
    """A filter narrows the rows (a filtered walk or the exact re-run), a tenant's 6 chunks are scanned
    exactly (``vector=exact`` on the plan): the same rows as float32 either way."""
    names = ("hv_scoped_full", "hv_scoped_half")
    for name, vector_type in zip(names, ("vector", "halfvec"), strict=True):
        _fill(lstore, name, vector_type, scoped=True)
    try:
        scope = ar.Scope(tenant="t")
        for query in QUERIES:
            results = [
                lstore.search(query, collections=n, mode=mode, top_k=4, scope=scope, explain=True)
                for n in names
            ]
            assert results[1].plan[0].startswith(f"{names[1]}: vector=exact")
            _same_ranking(results[1], results[0])
            topic = {"metadata": {"topic": 1}}
            filtered = [
                lstore.search(query, collections=n, mode=mode, top_k=2, scope=scope, filters=topic)
                for n in names
            ]
            assert len(filtered[1]) == 2
            _same_ranking(filtered[1], filtered[0])
    finally:
        for name in names:
            lstore.delete_collection(name)


@pytest.mark.parametrize("mode", MODES)
def test_grants_decide_in_every_mode(store: Store, collection_name: str, mode: str) -> None:
    store.create_collection(collection_name, acl=True, vector_type="halfvec")
    for source, grants in (("pay.md", ["group:hr"]), ("ceo.md", ["user:ann"]), ("cal.md", ["everyone"])):
        store.ingest_text(f"salary {source}", collection=collection_name, source=source, grants=grants)
    store.ingest_text("salary secrets nobody reads", collection=collection_name, source="none.md")

    def found(user: str | None, *groups: str, admin: bool = False) -> set[str | None]:
        scope = ar.Scope(principal=ar.Principal(user=user, groups=list(groups), admin=admin))
        return {h.source for h in store.search("salary", collections=collection_name, mode=mode, scope=scope)}

    assert found("bob") == {"cal.md"}
    assert found("bob", "hr") == {"cal.md", "pay.md"}
    assert found("ann") == {"cal.md", "ceo.md"}
    assert found(None, admin=True) == {"cal.md", "ceo.md", "pay.md", "none.md"}


def test_reembed_converts_in_both_directions(lstore: Store, collection_name: str) -> None:
    _fill(lstore, collection_name, "vector")
    lstore.ensure_vector_index(lstore.collection(collection_name))
    before = {q: lstore.search(q, collections=collection_name, mode="vector", top_k=5) for q in QUERIES}

    report = lstore.reembed(collection_name, vector_type="halfvec")
    assert (report.previous_vector_type, report.vector_type) == ("vector", "halfvec")
    assert "stored as vector -> halfvec" in str(report)
    assert report.to_dict()["previous"]["vector_type"] == "vector"
    assert lstore.collection(collection_name).vector_type == "halfvec"
    assert _stored(lstore, collection_name)[:2] == (0, len(TEXTS))
    assert "halfvec_cosine_ops" in _index_definition(lstore, collection_name)
    for query, full in before.items():
        _same_ranking(lstore.search(query, collections=collection_name, mode="vector", top_k=5), full)
    # an ingest after the conversion writes halfvec too
    lstore.ingest_text("Penguins huddle together to keep warm.", collection=collection_name, source="p.md")
    assert _stored(lstore, collection_name)[:2] == (0, len(TEXTS) + 1)

    back = lstore.reembed(collection_name, vector_type="vector")
    assert (back.previous_vector_type, back.vector_type) == ("halfvec", "vector")
    assert _stored(lstore, collection_name)[:2] == (len(TEXTS) + 1, 0)
    assert "vector_cosine_ops" in _index_definition(lstore, collection_name)
    for query, full in before.items():  # the same chunk ids as before the round trip (beside the new one)
        after = lstore.search(query, collections=collection_name, mode="vector", top_k=5)
        assert [h.chunk_id for h in after.hits if h.source != "p.md"][:4] == full.chunk_ids[:4]
    same = lstore.reembed(collection_name)  # None: stored as it is
    assert same.vector_type == "vector" and "stored as" not in str(same)


def test_an_ingest_prepared_before_a_conversion_is_refused(store: Store, collection_name: str) -> None:
    """Its vectors were encoded for the old column: the write's recorded-model check names the type."""
    from agentrag.errors import EmbeddingMismatchError
    from agentrag.store.collections import check_recorded_model

    store.create_collection(collection_name)
    store.ingest_text("one chunk", collection=collection_name, source="a.md")
    prepared = store.collection(collection_name)
    store.reembed(collection_name, vector_type="halfvec")
    with store.engine.begin() as conn, pytest.raises(EmbeddingMismatchError, match="halfvec"):
        check_recorded_model(conn, prepared)


def test_the_cli_creates_and_converts(database_url: str, collection_name: str) -> None:
    import json

    env = {**os.environ, "AGENTRAG_DATABASE_URL": database_url, "PYTHONPATH": str(REPO)}
    created = run_cli(env, "collections", "create", collection_name, "--vector-type", "halfvec", "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["vector_type"] == "halfvec"
    refused = run_cli(env, "collections", "create", collection_name + "x", "--vector-type", "float16")
    assert refused.returncode != 0 and "float16" in refused.stderr
    converted = run_cli(
        env, "reembed", collection_name, "--vector-type", "vector", "--backend", "onnx", "--json"
    )
    assert converted.returncode == 0, converted.stderr
    assert json.loads(converted.stdout)["previous"]["vector_type"] == "halfvec"
    assert json.loads(converted.stdout)["vector_type"] == "vector"


def test_migration_0050_keeps_an_existing_collection(database_url: str, fake_embedder, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A database migrated up to 0047 with a collection in it: 0050 keeps its rows and records it as float32;
    it is then searched as before and can be converted."""
    import shutil
    import uuid

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from agentrag.store.migrate import resource_dir, upgrade

    base = make_url(database_url)
    name = f"agentrag_m50_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.set(database=name).render_as_string(hide_password=False)
    engine = create_engine(url)
    try:
        for migration in sorted(resource_dir("migrations").glob("*.sql")):
            if int(migration.name[:4]) < 50:
                shutil.copy(migration, tmp_path / migration.name)
        assert max(m.version for m in upgrade(engine, tmp_path)) == 47
        vector = "[" + ",".join(str(float(x)) for x in fake_embedder.embed(["tides of the sea"])[0]) + "]"
        with engine.begin() as conn:
            cid = conn.execute(
                text(
                    "INSERT INTO agentrag.collections (name, embed_model, embed_version, dimensions)"
                    " VALUES ('old', :m, :v, :d) RETURNING id"
                ),
                {"m": fake_embedder.model_id, "v": fake_embedder.version, "d": fake_embedder.dimensions},
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO agentrag.documents (id, collection_id, source, sha256, text, chunk_count)"
                    " VALUES ('doc_0123456789abcdef', :c, 'tides.md', 'x', 'tides of the sea', 1)"
                ),
                {"c": cid},
            )
            conn.execute(
                text(
                    "INSERT INTO agentrag.chunks (id, document_id, collection_id, chunk_index, text,"
                    " start_char, end_char, sha256, embedding) VALUES ('chk_0123456789abcdef',"
                    " 'doc_0123456789abcdef', :c, 0, 'tides of the sea', 0, 16, 'y', CAST(:e AS vector))"
                ),
                {"c": cid, "e": vector},
            )
        applied = [m.version for m in upgrade(engine)]
        assert applied[0] == 50 and all(version > 50 for version in applied[1:])
        with Store(url, embedder=fake_embedder) as store:
            assert store.collection("old").vector_type == "vector"
            assert _stored(store, "old")[:2] == (1, 0)
            hits = store.search("tides of the sea", collections="old", mode="vector", top_k=1)
            assert hits.chunk_ids == ["chk_0123456789abcdef"] and hits.hits[0].score == pytest.approx(1.0)
            store.reembed("old", vector_type="halfvec")
            assert _stored(store, "old")[:2] == (0, 1)
            with pytest.raises(Exception, match="chunks_one_embedding"), store.engine.begin() as conn:
                conn.execute(text("UPDATE agentrag.chunks SET embedding = embedding_half::vector"))
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
