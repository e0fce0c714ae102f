"""Ingest on Ray beside single-process ingest, on the same SciFact passages, in one run.

    .venv/bin/python -m benchmarks.ray_ingest [--passages 300] [--cpus 2] [--repeats 2]

The passages (``title + "\\n\\n" + text``) are written as ``.txt`` files into a temporary folder
and ingested with the real all-MiniLM-L6-v2 (ONNX backend) into a fresh collection per row:

* single-process: ``store.ingest(folder)`` (LocalExecutor: read, chunk, embed, write here).
* Ray, 1 actor / 2 actors: ``store.ingest(folder, executor=RayExecutor(...))`` on a local Ray
  instance with ``--cpus`` CPUs (started once, its start-up timed separately); with 2 actors
  each embedder runs one ONNX thread, so the actors do not oversubscribe the cores.
* floor: the bare ``LocalEmbedder.embed`` over the same chunk texts in this process (embedding
  is what a 2-core ingest spends its time on; the write path is measured in benchmarks.ingest).

The rows run interleaved, ``--repeats`` rounds, best of each (a shared machine's load moves
between rows). Every row writes the same chunks (checked). Wall times include reading, chunking, embedding,
writing and, for Ray, moving the documents through the object store and loading the model in
each actor.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._paths import scifact_path

DEFAULT_DATA = scifact_path()


def _write_passages(data: Path, n: int, folder: Path) -> None:
    with (data / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for i, line in enumerate(corpus):
            if i == n:
                break
            doc = json.loads(line)
            (folder / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}", encoding="utf-8")


def _run(store: Any, folder: Path, executor: Any) -> tuple[float, Any]:
    name = f"bench_ray_{uuid.uuid4().hex[:8]}"
    store.create_collection(name)
    t = time.perf_counter()
    report = store.ingest(folder, collection=name, executor=executor)
    elapsed = time.perf_counter() - t
    store.delete_collection(name)
    assert report.ok, report
    return elapsed, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every row (best of each)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import ray

    from agentrag import LocalEmbedder
    from agentrag.executors.ray import RayExecutor
    from agentrag.store.chunking import chunk_text
    from benchmarks._db import bench_store

    embedder = LocalEmbedder().load()
    store = bench_store(embedder)
    store_1t = bench_store(LocalEmbedder(threads=1))
    labels = [
        "single-process (LocalExecutor)",
        "Ray, 1 embedding actor",
        "Ray, 2 embedding actors (1 thread each)",
        "floor: bare embed of the same chunk texts, in this process",
    ]
    best: dict[str, float] = {}
    chunks: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write_passages(args.data, args.passages, folder)
        texts = [c.text for p in sorted(folder.iterdir()) for c in chunk_text(p.read_text(encoding="utf-8"))]
        t = time.perf_counter()
        RayExecutor("local", num_cpus=args.cpus).connect()
        startup = time.perf_counter() - t
        try:
            for _ in range(args.repeats):  # the rows interleaved, best of each: the load moves meanwhile
                runs = [
                    (labels[0], store, None),
                    (labels[1], store, RayExecutor(actors=1, progress=False)),
                    (labels[2], store_1t, RayExecutor(actors=2, progress=False)),
                ]
                for label, target, executor in runs:
                    seconds, report = _run(target, folder, executor)
                    chunks.add(report.chunks_written)
                    best[label] = min(seconds, best.get(label, float("inf")))
                t = time.perf_counter()
                embedder.embed(texts)
                best[labels[3]] = min(time.perf_counter() - t, best.get(labels[3], float("inf")))
        finally:
            ray.shutdown()
    store.close()
    store_1t.close()
    assert len(chunks) == 1, chunks  # every row wrote the same chunks
    single = best[labels[0]]

    print(
        f"{args.passages} SciFact passages, {len(texts)} chunks, {os.cpu_count()} CPUs, Ray {ray.__version__}"
    )
    print(f"best of {args.repeats}, rows interleaved; Ray start-up (once, not in the rows): {startup:.1f} s")
    print("| run | wall s | passages/s | x single-process |")
    print("|---|---:|---:|---:|")
    for label in labels:
        seconds = best[label]
        ratio = "-" if label == labels[3] else f"{single / seconds:.2f}"
        print(f"| {label} | {seconds:.1f} | {args.passages / seconds:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
