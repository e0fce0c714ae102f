"""Reciprocal Rank Fusion, relative score fusion and score merges: pure functions, unit and property tests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.errors import InvalidInputError
from agentrag.retrieval.fusion import merge_by_score, relative_score, rrf

IDS = st.sampled_from([f"c{i:02d}" for i in range(30)])
RANKING = st.lists(IDS, max_size=20, unique=True)


def test_single_ranking_keeps_its_order() -> None:
    assert [i for i, _ in rrf([["b", "a", "c"]])] == ["b", "a", "c"]
    assert rrf([["b", "a"]], k=60) == [("b", 1 / 61), ("a", 1 / 62)]


def test_agreement_beats_a_single_first_place() -> None:
    fused = rrf([["a", "x"], ["b", "x"]])
    assert fused[0][0] == "x" and fused[0][1] == pytest.approx(2 / 62)


def test_ties_are_broken_by_id() -> None:
    assert [i for i, _ in rrf([["b"], ["a"]])] == ["a", "b"]
    assert [i for i, _ in rrf([["z", "m"], ["m", "z"]])] == ["m", "z"]


def test_rrf_k_changes_the_winner() -> None:
    # "solo" is first in one ranking only; "both" is third in both.
    rankings = [["solo", "p", "both"], ["q", "r", "both"]]

    def order(k: float) -> list[str]:
        return [i for i, _ in rrf(rankings, k=k) if i in ("solo", "both")]

    assert order(0) == ["solo", "both"]  # 1/1 > 2/3: with a small k the first place dominates
    assert order(60) == ["both", "solo"]  # 2/63 > 1/61: with a large k agreement dominates


def test_repeated_ids_count_once_and_empty_rankings_are_fine() -> None:
    assert rrf([["a", "a", "b"]]) == [("a", 1 / 61), ("b", 1 / 63)]
    assert rrf([[], []]) == [] and rrf([]) == []


@pytest.mark.parametrize("k", [-1, float("nan"), float("inf")])
def test_bad_k(k: float) -> None:
    with pytest.raises(InvalidInputError):
        rrf([["a"]], k=k)


def test_k_must_be_a_number() -> None:
    with pytest.raises(TypeError):
        rrf([["a"]], k="60")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rrf([["a"]], k=True)


@settings(max_examples=200)
@given(rankings=st.lists(RANKING, max_size=4), k=st.integers(min_value=0, max_value=200))
def test_rrf_properties(rankings: list[list[str]], k: int) -> None:
    fused = rrf(rankings, k=k)
    ids = [i for i, _ in fused]
    assert sorted(ids) == sorted({i for r in rankings for i in r})  # every id once
    for item, score in fused:
        expected = sum(1 / (k + r.index(item) + 1) for r in rankings if item in r)
        assert math.isclose(score, expected, rel_tol=1e-12)
    keys = [(-s, i) for i, s in fused]
    assert keys == sorted(keys)  # score descending, ties by id ascending
    assert rrf(rankings, k=k) == fused  # deterministic


@settings(max_examples=100)
@given(a=RANKING, b=RANKING, k=st.integers(min_value=0, max_value=200))
def test_rrf_of_two_legs_ignores_their_order(a: list[str], b: list[str], k: int) -> None:
    assert rrf([a, b], k=k) == rrf([b, a], k=k)


@settings(max_examples=100)
@given(ranking=RANKING, other=RANKING, k=st.integers(min_value=0, max_value=200))
def test_rising_in_a_ranking_never_hurts(ranking: list[str], other: list[str], k: int) -> None:
    if len(ranking) < 2:
        return
    promoted = [ranking[-1], *ranking[:-1]]  # the last one moves to the top
    item = ranking[-1]
    before = dict(rrf([ranking, other], k=k))[item]
    after = dict(rrf([promoted, other], k=k))[item]
    assert after >= before


@settings(max_examples=100)
@given(
    lists=st.lists(st.lists(st.tuples(IDS, st.floats(-10, 10, allow_nan=False)), max_size=10), max_size=3),
    limit=st.none() | st.integers(min_value=0, max_value=20),
)
def test_merge_by_score(lists: list[list[tuple[str, float]]], limit: int | None) -> None:
    merged = merge_by_score(lists, limit)
    best: dict[str, float] = {}
    for pairs in lists:
        for item, score in pairs:
            best[item] = max(score, best.get(item, -math.inf))
    expected = sorted(best.items(), key=lambda p: (-p[1], p[0]))
    assert merged == (expected if limit is None else expected[:limit])


# ---- relative score fusion --------------------------------------------------------------------
# scores and weights on a grid: no underflow (1e-308 * 1e-308) to muddle "0 iff nothing matched"
SCORE = st.floats(-50, 50, allow_nan=False).map(lambda x: round(x, 6))
SCORED = st.lists(st.tuples(IDS, SCORE), max_size=20)
WEIGHT = st.integers(0, 100).map(lambda i: i / 100)


def test_relative_score_normalises_each_leg_against_its_best_and_zero() -> None:
    vector = [("a", 0.9), ("b", 0.6), ("c", 0.45)]  # normalised: a 1, b 2/3, c 1/2
    lexical = [("c", 30.0), ("d", 10.0)]  # normalised: c 1, d 1/3
    fused = dict(relative_score(vector, lexical))
    assert fused == pytest.approx({"a": 0.5, "b": 1 / 3, "c": 0.75, "d": 1 / 6})
    assert [i for i, _ in relative_score(vector, lexical)] == ["c", "a", "b", "d"]
    heavy = dict(relative_score(vector, lexical, vector_weight=0.8))
    assert heavy["a"] == pytest.approx(0.8) and heavy["c"] == pytest.approx(0.8 * 0.5 + 0.2)


def test_the_weakest_candidate_of_both_legs_does_not_score_zero() -> None:
    # issue #30: min-max normalisation gave the pool's weakest candidate 0 in each leg, so a
    # search returning every candidate always showed 0.0000 on its last hit
    fused = relative_score([("a", 0.6), ("b", 0.3)], [("a", 5.0), ("b", 1.0)])
    assert fused == [("a", 1.0), ("b", pytest.approx(0.5 * 0.5 + 0.5 * 0.2))]
    # and a candidate's score does not depend on which weaker candidates the pool holds
    more = dict(relative_score([("a", 0.6), ("b", 0.3), ("z", 0.1)], [("a", 5.0), ("b", 1.0), ("y", 0.5)]))
    assert more["b"] == pytest.approx(dict(fused)["b"]) and more["z"] > 0 and more["y"] > 0


def test_only_a_hit_that_matched_nothing_scores_zero() -> None:
    # a similarity at or below 0 is the vector leg's floor: nothing in common with the query
    fused = dict(relative_score([("a", 0.5), ("b", 0.0), ("c", -0.2)], [("d", 2.0)]))
    assert fused == pytest.approx({"a": 0.5, "b": 0.0, "c": 0.0, "d": 0.5})
    assert dict(relative_score([("a", -0.1), ("b", -0.3)], [])) == {"a": 0.0, "b": 0.0}


def test_relative_score_uses_score_gaps_that_rrf_ignores() -> None:
    # Same ranks in both legs; only the vector leg's gap differs.
    lexical = [("x", 10.0), ("y", 9.0), ("z", 0.0)]
    close = relative_score([("y", 0.80), ("x", 0.79), ("z", 0.0)], lexical)
    far = relative_score([("y", 0.80), ("x", 0.10), ("z", 0.0)], lexical)
    assert close[0][0] == "x" and far[0][0] == "y"
    assert rrf([["y", "x", "z"], ["x", "y", "z"]])[0][0] == "x"  # ranks alone: a tie, broken by id


def test_relative_score_edge_cases() -> None:
    assert relative_score([], []) == []
    assert relative_score([("a", 3.0)], []) == [("a", 0.5)]  # one candidate: normalised to 1
    assert relative_score([("a", 1.0), ("a", 2.0), ("b", 1.0)], []) == [("a", 0.5), ("b", 0.25)]
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(InvalidInputError, match="vector_weight"):
            relative_score([("a", 1.0)], [], vector_weight=bad)
    with pytest.raises(TypeError):
        relative_score([("a", 1.0)], [], vector_weight="0.5")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(SCORED, SCORED, WEIGHT)
def test_relative_score_properties(
    vector: list[tuple[str, float]], lexical: list[tuple[str, float]], w: float
) -> None:
    fused = relative_score(vector, lexical, vector_weight=w)
    ids = [i for i, _ in fused]
    assert len(ids) == len(set(ids)) and set(ids) == {i for i, _ in vector} | {i for i, _ in lexical}
    assert all(-1e-9 <= score <= 1 + 1e-9 for _, score in fused)
    assert fused == sorted(fused, key=lambda pair: (-pair[1], pair[0]))
    positive = {i for leg, wl in ((vector, w), (lexical, 1 - w)) if wl > 0 for i, s in leg if s > 0}
    for item, score in fused:  # 0 exactly when the hit matched nothing (no positive leg score)
        assert (score > 0) == (item in positive)
    if w == 1.0 and positive:  # only the vector leg counts: a best-scored vector id wins, at 1
        assert fused[0][1] == pytest.approx(1.0) and fused[0][0] in {i for i, _ in vector}
    bests = [max(leg, key=lambda p: p[1]) for leg in (vector, lexical) if leg]
    if len(bests) == 2 and bests[0][0] == bests[1][0] and min(bests[0][1], bests[1][1]) > 0:
        # the same id is the (positive) best of both legs: it leads at exactly 1
        assert fused[0] == (bests[0][0], pytest.approx(1.0))


@settings(max_examples=200, deadline=None)
@given(SCORED, SCORED, WEIGHT, SCORE)
def test_a_hits_score_ignores_weaker_candidates_added_to_a_leg(
    vector: list[tuple[str, float]], lexical: list[tuple[str, float]], w: float, extra: float
) -> None:
    fused = dict(relative_score(vector, lexical, vector_weight=w))
    if not vector or extra > max(s for _, s in vector):
        return
    grown = dict(relative_score([*vector, ("new", extra)], lexical, vector_weight=w))
    assert all(grown[i] == pytest.approx(score) for i, score in fused.items() if i != "new")
