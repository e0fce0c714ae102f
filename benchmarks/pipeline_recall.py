"""Pipeline recall@5 over several collections: what routing and the merge of the searches cost.

    .venv/bin/python -m benchmarks.pipeline_recall [--margins 0.05,0.1,0.15,1.0]

The 36 conversations of ``samples/conversations.jsonl`` (the chat benchmark's set: each ends with a
follow-up, condensed here by the local strategy, and names the documents that answer it) over the
three sample collections, with the real all-MiniLM-L6-v2. recall@5 = share of the expected
documents among the documents of ``ctx.hits[:5]``, averaged. Rows, in one run:

* the floor: one ``store.search(top_k=5)`` over the three collections (one fusion over all);
* the search step over the three collections (one search per collection, merged by the step);
* with ``decompose`` first;
* ``route`` at each ``--margins`` value (the local router keeps the best collection and those
  within the margin), then the search step, with the collections searched per question.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import agentrag as ar
from benchmarks._db import bench_url
from benchmarks.chat import load_conversations, queries

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _found(hits: Any, prefix: str) -> set[str]:
    return {f"{h.collection.removeprefix(prefix)}/{h.source.split('/')[-1]}" for h in hits}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--margins", default="0.05,0.1,0.15,1.0")
    args = parser.parse_args()
    store = ar.Store(bench_url())
    prefix = "recall_"
    names = []
    for spec in json.loads((SAMPLES / "collections.json").read_text()):
        name = prefix + spec["name"]
        store.create_collection(name, description=spec["description"], exist_ok=True)
        store.ingest(SAMPLES / spec["name"], collection=name)
        names.append(name)
    systems: dict[str, Any] = {
        "floor: store.search over the three (one fusion)": None,
        "search step over the three": lambda c: c | ar.search(collections=names),
        "decompose, then the search step over the three": lambda c: (
            c | ar.decompose() | ar.search(collections=names)
        ),
    }
    for margin in (float(m) for m in args.margins.split(",")):
        systems[f"route (margin {margin}), then the search step"] = lambda c, m=margin: (
            c | ar.route(collections=names, margin=m) | ar.search()
        )
    scores: dict[str, list[float]] = {k: [] for k in systems}
    searched: dict[str, list[int]] = {k: [] for k in systems}
    for conv in load_conversations():
        query = queries(conv)["condensed (local)"]
        expected = set(conv["expected"])
        for label, run in systems.items():
            if run is None:
                hits = store.search(query, collections=names, top_k=5).hits
                searched[label].append(len(names))
            else:
                ctx = run(ar.new(query, store=store, limit=5))
                hits = ctx.hits[:5]
                searched[label].append(len({r.collection for r in ctx.results}))
            scores[label].append(len(_found(hits, prefix) & expected) / len(expected))
    print(f"\n{len(scores[next(iter(scores))])} conversations, 3 collections, hybrid, all-MiniLM-L6-v2\n")
    print("| system | recall@5 | collections searched per question |")
    print("|---|---:|---:|")
    for label in systems:
        s, n = scores[label], searched[label]
        print(f"| {label} | {sum(s) / len(s):.3f} | {sum(n) / len(n):.2f} |")
    store.close()


if __name__ == "__main__":
    main()
