"""benchmarks/scale_tenants.py's tenant sizes have the issue's shape: a long tail that sums to the corpus."""

from __future__ import annotations

import statistics

from benchmarks.scale_tenants import CHUNKS_PER_DOC, class_tenants, tenant_sizes


def test_a_thousand_tenants_of_a_million_chunks_follow_a_long_tail() -> None:
    sizes = tenant_sizes(1_000_000, 1000)
    assert sum(sizes) == 1_000_000 and len(sizes) == 1000
    assert all(s % CHUNKS_PER_DOC == 0 and s >= CHUNKS_PER_DOC for s in sizes)
    assert sizes == sorted(sizes, reverse=True)
    assert sum(s >= 100_000 for s in sizes) >= 1  # a few with 100k+
    assert 100 <= statistics.median(sizes) < 1000  # most with hundreds


def test_size_classes_take_tenants_from_each_end() -> None:
    sizes = tenant_sizes(200_000, 1000)
    classes = class_tenants(sizes)
    assert classes["large"] == ["t0000", "t0001", "t0002"]
    assert len(classes["medium"]) == 40 and classes["medium"][0] == "t0010"
    assert len(classes["small"]) == 500 and classes["small"][-1] == "t0999"


def test_a_halfvec_run_has_its_own_collection_and_states_the_halfvec_expression() -> None:
    from benchmarks.scale_tenants import collection_name, vector_sql

    assert collection_name(1_000_000, 1000) == "bench_tenants_1000000_1000"
    assert collection_name(1_000_000, 1000, "halfvec") == "bench_tenants_1000000_1000_halfvec"
    # the floor and the exact truth order by the expression the collection's (and its tenants') HNSW
    # indexes are built on, with the query cast to the same type
    assert vector_sql("vector") == ("c.embedding::vector(384)", "%(q)s::vector(384)::vector(384)")
    assert vector_sql("halfvec") == ("c.embedding_half::halfvec(384)", "%(q)s::vector(384)::halfvec(384)")
