"""Reciprocal Rank Fusion, relative score fusion and score merges: pure functions, unit and property tests."""

from __future__ import annotations

import itertools
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
# scores and weights on a grid: no underflow (1e-308 * 1e-308) to muddle "matched something"
SCORE = st.floats(-50, 50, allow_nan=False).map(lambda x: round(x, 6))
SCORED = st.lists(st.tuples(IDS, SCORE), max_size=20)
WEIGHT = st.integers(0, 100).map(lambda i: i / 100)


def min_max_fusion(
    vector: list[tuple[str, float]], lexical: list[tuple[str, float]], w: float
) -> list[tuple[str, float]]:
    """The fusion that ranks (min-max per leg, absent 0), written out independently."""
    fused: dict[str, float] = {}
    for leg, weight in ((vector, w), (lexical, 1 - w)):
        best: dict[str, float] = {}
        for i, score in leg:
            best[i] = max(score, best.get(i, score))
        if best:
            low, high = min(best.values()), max(best.values())
            for i, score in best.items():
                fused[i] = fused.get(i, 0.0) + weight * ((score - low) / (high - low) if high > low else 1.0)
    return sorted(fused.items(), key=lambda p: (-p[1], p[0]))


def test_relative_score_ranks_by_min_max_and_shows_strength_against_the_best() -> None:
    vector = [("a", 0.9), ("b", 0.7), ("c", 0.5)]  # min-max: a 1, b 0.5, c 0; worst = 5/9 of best
    lexical = [("c", 30.0), ("d", 10.0)]  # min-max: c 1, d 0; worst = 1/3 of best
    # fused min-max a 0.5, b 0.25, c 0.5, d 0, mapped from [0, 1] onto [c, 1]; c is what d, the
    # hit at 0, is worth: the lexical leg's weakest (1/3 of its best), and nothing from the vector
    # leg, which did not find it (not that leg's weakest, 5/9: d is no vector candidate)
    floor = (1 / 3) / 2
    fused = relative_score(vector, lexical)
    assert [i for i, _ in fused] == ["a", "c", "b", "d"]  # tie a/c by id
    expected = {"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0}
    assert dict(fused) == pytest.approx({i: floor + (1 - floor) * v for i, v in expected.items()})
    heavy = relative_score(vector, lexical, vector_weight=0.8)
    assert [i for i, _ in heavy] == ["a", "b", "c", "d"]  # a 0.8, b 0.4, c 0.2, d 0 before mapping
    assert heavy[0][1] < 1  # a is best in one leg only


def test_the_weakest_candidate_of_both_legs_does_not_show_zero() -> None:
    # issue #30: min-max fusion gave the pool's weakest candidate 0, so a search returning every
    # candidate always showed 0.0000 on its last hit; it shows what it is worth against the best
    fused = relative_score([("a", 0.6), ("b", 0.3)], [("a", 5.0), ("b", 1.0)])
    assert fused == [("a", 1.0), ("b", pytest.approx(0.5 * 0.5 + 0.5 * 0.2))]


def test_a_hit_one_leg_did_not_find_gets_nothing_from_that_leg() -> None:
    # a leg that found one candidate makes it its weakest (worth all of its best); the hits it did
    # not find must not be lifted by that: "plants" has a negative similarity and no query term
    vector = [("limits", 0.74), ("parking", 0.09), ("food", 0.05), ("plants", -0.03)]
    fused = dict(relative_score(vector, [("limits", 1.33)]))
    assert fused["limits"] == 1.0 and fused["plants"] == 0.0
    assert fused["parking"] == pytest.approx(0.5 * (0.09 + 0.03) / (0.74 + 0.03))
    # with the floor found in the legs that found it, the vector leg's weakest shows its worth
    fused = dict(relative_score(vector[:3], [("limits", 1.33)]))
    assert fused["food"] == pytest.approx(0.5 * 0.05 / 0.74)


def test_only_a_hit_that_matched_nothing_shows_zero() -> None:
    # the vector leg's floor is a similarity of 0 (nothing in common with the query)
    fused = dict(relative_score([("a", 0.5), ("b", 0.0), ("c", -0.2)], []))
    assert fused == pytest.approx({"a": 0.5, "b": 0.5 * 0.2 / 0.7, "c": 0.0})
    assert dict(relative_score([("a", -0.1), ("b", -0.3)], [])) == {"a": 0.5, "b": 0.0}


def test_relative_score_uses_score_gaps_that_rrf_ignores() -> None:
    # Same ranks in both legs; only the vector leg's gap differs.
    lexical = [("x", 10.0), ("y", 9.0), ("z", 0.0)]
    close = relative_score([("y", 0.80), ("x", 0.79), ("z", 0.0)], lexical)
    far = relative_score([("y", 0.80), ("x", 0.10), ("z", 0.0)], lexical)
    assert close[0][0] == "x" and far[0][0] == "y"
    assert rrf([["y", "x", "z"], ["x", "y", "z"]])[0][0] == "x"  # ranks alone: a tie, broken by id


def test_relative_score_edge_cases() -> None:
    assert relative_score([], []) == []
    assert relative_score([("a", 3.0)], []) == [("a", 0.5)]  # one candidate: the leg's best
    assert relative_score([("a", 1.0), ("a", 2.0), ("b", 1.0)], []) == [("a", 0.5), ("b", 0.25)]
    assert relative_score([("a", 1.0)], [], vector_weight=0.0) == [("a", 0.0)]  # a leg weighing 0
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
    # the order is exactly min-max fusion's (so no quality figure moves), the scores a display
    assert ids == [i for i, _ in min_max_fusion(vector, lexical, w)]
    assert len(ids) == len(set(ids)) and set(ids) == {i for i, _ in vector} | {i for i, _ in lexical}
    assert all(-1e-9 <= score <= 1 + 1e-9 for _, score in fused)
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(fused))  # monotone in rank
    legs = [(dict(sorted(leg, key=lambda p: p[1])), wl) for leg, wl in ((vector, w), (lexical, 1 - w))]
    matched = {i for leg, wl in legs if wl > 0 for i, s in leg.items() if s > 0}
    at_zero = {i for i, v in min_max_fusion(vector, lexical, w) if v == 0}
    for item, score in fused:  # a hit that matched something (a positive score that counts) is > 0,
        # unless min-max fusion ties it at 0 with one that matched nothing (one order, one score)
        assert item not in matched or score > 0 or bool(at_zero - matched)
    for item in at_zero:  # a hit at the bottom shows no more than it is worth against the legs' best
        worth = sum(
            wl * max(leg[item], 0) / max(leg.values())
            for leg, wl in legs
            if item in leg and max(leg.values()) > 0
        )
        assert dict(fused)[item] <= worth + 1e-9
    bests = [max(leg, key=lambda p: p[1])[0] for leg in (vector, lexical) if leg]
    if len(bests) == 2 and bests[0] == bests[1]:  # the best of both legs shows 1
        assert dict(fused)[bests[0]] == pytest.approx(1.0) and fused[0][1] == pytest.approx(1.0)
