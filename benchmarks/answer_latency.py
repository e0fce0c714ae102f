"""The answer step's latency offline (issue #23): 10 hits, the real local embedder, no LLM.

    .venv/bin/python -m benchmarks.answer_latency [--questions 40]

For each question of ``samples/answers/samples.jsonl`` (answerable ones) the sample corpus is
searched once (10 hits) and ``answer()`` is timed three ways on the same hits:

* **cold**: the process-wide unit-vector cache emptied first, so every sentence and table row of
  the 10 hits is embedded (in one batch) as part of the answer;
* **floor**: the same unit texts embedded once with the bare embedder (``embedder.embed``), the
  work the cold answer cannot avoid;
* **warm**: the answer again, its units' vectors cached (a chatbot's chunks come back).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import agentrag as ar
from agentrag.embedders import LocalEmbedder
from agentrag.evidence import plain, units_of
from agentrag.unit_vectors import DEFAULT_CACHE
from benchmarks._db import bench_url

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=40)
    args = parser.parse_args()
    store = ar.Store(bench_url(), embedder=LocalEmbedder())
    names = []
    for spec in json.loads((SAMPLES / "collections.json").read_text()):
        name = "answers_" + spec["name"]
        store.create_collection(name, description=spec["description"], exist_ok=True)
        store.ingest(SAMPLES / spec["name"], collection=name)
        names.append(name)
    items = [json.loads(line) for line in (SAMPLES / "answers" / "samples.jsonl").read_text().splitlines()]
    questions = [i["question"] for i in items if i.get("kind") == "answerable"][: args.questions]
    store.embedder.embed(["warm up"])  # model load outside the timings
    cold, floor, warm, units = [], [], [], []
    for n, question in enumerate(questions):
        ctx = ar.new(question, store=store, collections=names, limit=10).search(collections=names)
        hits = ctx.hits[:10]
        ctx = ctx.evolve(ranked=hits)
        texts = [plain(u.text) for u in units_of(hits)]
        DEFAULT_CACHE.clear()
        t = time.perf_counter()
        ctx.answer()
        cold_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        store.embedder.embed([question, *texts])
        floor_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ctx.answer()
        warm_ms = (time.perf_counter() - t) * 1000
        if n < 2:
            continue  # warm-up
        cold.append(cold_ms)
        floor.append(floor_ms)
        warm.append(warm_ms)
        units.append(len(texts))

    def p(values: list[float], q: float) -> float:
        values = sorted(values)
        return values[min(len(values) - 1, int(len(values) * q))]

    print(
        f"{len(warm)} questions, 10 hits each, {statistics.mean(units):.0f} units (sentences, rows) an answer"
    )
    print("| answer step | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    print(f"| warm (unit vectors cached) | {p(warm, 0.5):.1f} | {p(warm, 0.95):.1f} |")
    print(f"| cold (every unit embedded) | {p(cold, 0.5):.1f} | {p(cold, 0.95):.1f} |")
    print(f"| floor: the bare embedder on the same texts | {p(floor, 0.5):.1f} | {p(floor, 0.95):.1f} |")
    store.close()


if __name__ == "__main__":
    main()
