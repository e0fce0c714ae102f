"""The scope planner's count under grants on fresh connections: the tokens in the plan beside the tokens
behind a subquery (issue #39).

    .venv/bin/python -m benchmarks.scope_count [--groups 10,100,200] [--vector-types vector,halfvec]
        [--rounds 6] [--calls 16]

Reads the collections ``benchmarks.acl --keep`` left (100,000 chunks, 10,000 documents, 1,000 groups).
For each principal (a user in ``--groups`` of the 1,000 groups) and each round, both forms of
:func:`agentrag.retrieval.scoped.count_sql` run ``--calls`` times each on a fresh connection of their
own (the rounds alternate which goes first): "tokens in the plan" is the statement before issue #39
(``d.grants && CAST(:p_tokens AS text[])``, planned per call with the tokens until PostgreSQL's plan cache
switches the statement psycopg prepared at its 5th run to a generic plan, around the 11th),
"subquery" the library's (``d.grants && (SELECT CAST(:p_tokens AS text[]))``). Reported: the p50 of
calls 1-10 (a connection's first searches: a fresh process, a pool that recycles its connections) and of
calls 11 and later, and both forms' counts, which must be equal.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
from collections.abc import Sequence
from typing import Any


def _forms(cid: int, where: str) -> dict[str, str]:
    from agentrag.retrieval.predicate import grants_by_index
    from agentrag.retrieval.scoped import count_sql

    indexed = count_sql(cid, where)
    return {"tokens in the plan": indexed.replace(grants_by_index(where), where), "subquery": indexed}


def measure(engine: Any, cid: int, groups: int, rounds: int, calls: int) -> dict[str, Any]:
    import time

    from sqlalchemy import text

    import agentrag as ar
    from agentrag.retrieval.predicate import compile_predicate

    principal = ar.Principal(user="u", groups=[f"g{g:04d}" for g in range(groups)])
    predicate = compile_predicate(ar.Scope(principal=principal))
    forms = _forms(cid, predicate.where(acl=True))
    times: dict[str, list[list[float]]] = {f: [[] for _ in range(calls)] for f in forms}
    counts: dict[str, set[tuple[int, int]]] = {f: set() for f in forms}
    for r in range(rounds):
        order = random.Random(r).sample(list(forms), len(forms))
        for form in order:
            with engine.connect() as conn:
                for i in range(calls):
                    started = time.perf_counter()
                    row = conn.execute(text(forms[form]), predicate.params).one()
                    times[form][i].append((time.perf_counter() - started) * 1000)
                    counts[form].add((int(row.docs), int(row.chunks)))
                    conn.commit()
    if len({c for found in counts.values() for c in found}) != 1:
        raise SystemExit(f"the forms counted differently: {counts}")
    return {"times": times, "count": next(iter(counts["subquery"]))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scope_count", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups-total", type=int, default=1000)
    parser.add_argument("--groups", default="10,100,200", help="the principals: how many groups each is in")
    parser.add_argument("--vector-types", default="vector,halfvec")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=16)
    args = parser.parse_args(argv)

    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from benchmarks._db import bench_store, bench_url
    from benchmarks.acl import collection_name

    print(f"benchmarks.scope_count: load average {os.getloadavg()[0]:.1f} at the start (shared machine)")
    store = bench_store()
    engine = create_engine(bench_url(), poolclass=NullPool)  # every round on new connections
    print(
        "\n| storage | principal's groups | documents / chunks counted | form | p50 ms, calls 1-10"
        " | p50 ms, calls 11+ | max ms |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    for vt in [t.strip() for t in args.vector_types.split(",") if t.strip()]:
        cid = store.collection(collection_name(args.chunks, args.groups_total, vt)).id
        for groups in [int(g) for g in args.groups.split(",")]:
            got = measure(engine, cid, groups, args.rounds, args.calls)
            docs, chunks = got["count"]
            for form, by_call in got["times"].items():
                first = [t for call in by_call[:10] for t in call]
                later = [t for call in by_call[10:] for t in call]
                print(
                    f"| {vt} | {groups} | {docs:,} / {chunks:,} | {form} | {statistics.median(first):.2f} | "
                    f"{statistics.median(later) if later else float('nan'):.2f} | "
                    f"{max(first + later):.1f} |"
                )
    print(f"\nLoad average {os.getloadavg()[0]:.1f} at the end.")
    engine.dispose()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
