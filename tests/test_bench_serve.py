"""benchmarks/serve.py's pairing at one client: each query is asked of the two servers in both orders."""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchmarks.serve import AGAINST, FLOOR, HTTP, measure_level


def _sides(asked: list[tuple[str, int]]) -> dict[str, Any]:
    """Fake sides that record (side, request id) in the order asked; each request takes 1 ms, the
    server asked right after the floor 1 ms more (a cost of the turn, not of the server)."""

    def side(name: str) -> Any:
        def block(ids: range) -> tuple[list[float], float, int]:
            lat = []
            for i in ids:  # a request right after the floor's (not after its own side's) pays the turn
                lat.append(1.0 + (bool(asked) and asked[-1][0] == FLOOR != name))
                asked.append((name, i))
            return lat, 0.001 * len(ids), 0

        return block

    return {name: side(name) for name in (FLOOR, HTTP, AGAINST)}


def test_every_query_is_asked_of_the_two_servers_in_both_orders() -> None:
    asked: list[tuple[str, int]] = []
    queries = 300  # an even number of queries: flipping the order every other round alone kept each
    rows = measure_level(_sides(asked), 1, 600, 600, queries)  # query's order in both passes
    timed = [(name, i) for name, i in asked[3 * 50 :]]  # after the warm-up (50 requests a side)
    orders: dict[int, list[bool]] = {}
    for k in range(0, len(timed), 3):
        (first, i), (second, _), (third, _) = timed[k : k + 3]
        assert first == FLOOR and {second, third} == {HTTP, AGAINST}
        orders.setdefault(i % queries, []).append(second == AGAINST)
    assert len(orders) == queries
    assert all(sorted(o) == [False, True] for o in orders.values())
    assert Counter(o for v in orders.values() for o in v) == {False: 300, True: 300}
    # the turn's cost falls on each server alike: A/A is 0, the two orders +-1 ms
    row = next(r for r in rows if r["side"] == AGAINST)
    assert row["paired_this_minus_against"][0] == 0.0
    assert row["paired_by_order"] == [1.0, -1.0]


def test_runs_of_ten_pair_the_same_queries_and_leave_out_the_turns_cost() -> None:
    """``--c1-run 10``: each side sends ten requests per turn (the same ten queries as the others), so
    nine in ten follow the side's own request: the fake turn's cost (1 ms after the floor) drops out of
    the paired overhead, which request by request carries it."""
    asked: list[tuple[str, int]] = []
    rows = measure_level(_sides(asked), 1, 600, 60, 300)
    timed = asked[3 * 50 :]
    for k in range(0, len(timed), 30):
        run = timed[k : k + 30]
        ids = [i for _, i in run[:10]]
        assert [name for name, _ in run[:10]] == [FLOOR] * 10
        assert [i for _, i in run[10:20]] == ids == [i for _, i in run[20:30]]
    by_run = {r["side"]: r["paired"][0] for r in rows if "paired" in r}
    one_by_one = {
        r["side"]: r["paired"][0] for r in measure_level(_sides([]), 1, 600, 600, 300) if "paired" in r
    }
    assert by_run == {HTTP: 0.0, AGAINST: 0.0}
    assert one_by_one[HTTP] + one_by_one[AGAINST] == 1.0  # the side asked right after the floor pays it
