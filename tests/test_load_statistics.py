"""A load that builds a collection's HNSW index refreshes the planner statistics (ANALYZE).

Without them a freshly loaded collection looks nearly empty to the planner, which then sorts
every chunk instead of using the HNSW index (benchmarks/scale.py measured seconds per query).
"""

from __future__ import annotations

from agentrag.store.store import Store


def _analyzed(store: Store) -> int:
    """Manual ANALYZE runs (autovacuum's are counted apart) of the chunks and documents tables."""
    with store.engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT coalesce(sum(analyze_count), 0) FROM pg_stat_user_tables"
                " WHERE schemaname = 'agentrag' AND relname IN ('chunks', 'documents')"
            ).scalar()
        )


def test_the_load_that_builds_the_index_analyzes_and_later_ones_do_not(
    store: Store, collection_name: str
) -> None:
    store.create_collection(collection_name)
    before = _analyzed(store)
    assert store.ingest_text("Comets have icy nuclei.", collection=collection_name, source="a").ok
    assert _analyzed(store) == before + 2  # both tables, once, with the index build
    assert store.ingest_text("Nebulae are clouds of gas.", collection=collection_name, source="b").ok
    assert _analyzed(store) == before + 2  # the index existed: rows were added to it, no build
