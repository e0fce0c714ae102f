"""``store.sync`` when the chunk layout changes (migration 0054), each run beside its floor.

    .venv/bin/python -m benchmarks.sync_layout [--files 1000] [--embedder local|fake]
                                               [--collection bench_layout]

A folder of ``--files`` SciFact files (``benchmarks.sync.build_folder``) is synced with the
default layout (1000 / 150), then synced again four ways, each timed:

* unchanged: the same settings (the pre-check: nothing read);
* after the upgrade: every document's layout set to NULL (as migration 0054 leaves the rows
  written before it), the same settings: every file read once and its chunks compared, nothing
  re-embedded. Floor: listing, reading and hashing every file (``benchmarks.sync.list_and_hash``);
* a new overlap (100): the files rechunked; a chunk whose text is unchanged keeps its vector;
* a new chunk size (500): the files rechunked.

The floor of each new layout: a full ingest of the folder with it into a scratch collection
(what the user did before: drop the collection and ingest again).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._db import bench_store
from benchmarks._paths import scifact_path
from benchmarks.sync import CountingEmbedder, build_folder, counting_embedder, list_and_hash

COLLECTION = "bench_layout"


def _timed(embedder: CountingEmbedder, run: Any) -> tuple[float, int, Any]:
    before = embedder.embedded
    t = time.perf_counter()
    result = run()
    return time.perf_counter() - t, embedder.embedded - before, result


def _chunks(store: Any, collection: str) -> int:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM agentrag.chunks c JOIN agentrag.collections k"
                    " ON k.id = c.collection_id WHERE k.name = :n"
                ),
                {"n": collection},
            ).scalar_one()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=None, help="BEIR SciFact folder")
    parser.add_argument("--embedder", choices=["local", "fake"], default="local")
    parser.add_argument("--collection", default=COLLECTION)
    args = parser.parse_args()
    embedder = counting_embedder(args.embedder)
    store = bench_store(embedder)
    coll, floor = args.collection, args.collection + "_floor"
    for name in (coll, floor):
        if any(c.name == name for c in store.collections()):
            store.delete_collection(name)
        store.create_collection(name, embedder=embedder)
    work = Path(tempfile.mkdtemp(prefix="agentrag-bench-layout-"))
    folder = work / "kb"
    try:
        build_folder(folder, args.files, args.data or scifact_path())
        time.sleep(2.5)  # trusted mtimes, as in a daily sync
        embedder.embed_documents(["Warm up the model."])
        rows: list[tuple[str, float, int, str]] = []
        s, n, report = _timed(embedder, lambda: store.sync(folder, collection=coll))
        rows.append(("first sync (a full ingest, 1000 / 150)", s, n, f"{len(report.added)} added"))
        s, n, report = _timed(embedder, lambda: store.sync(folder, collection=coll))
        rows.append(("unchanged, same settings", s, n, f"{report.read} read"))

        from sqlalchemy import text

        with store.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE agentrag.documents SET chunk_size = NULL, chunk_overlap = NULL,"
                    " chunker_version = NULL WHERE collection_id = (SELECT id FROM agentrag.collections"
                    " WHERE name = :n)"
                ),
                {"n": coll},
            )
        s, n, report = _timed(embedder, lambda: store.sync(folder, collection=coll))
        rows.append(
            (
                "after the upgrade (layout NULL), same settings",
                s,
                n,
                f"{report.read} read, {len(report.rechunked)} rechunked",
            )
        )
        t = time.perf_counter()
        list_and_hash(folder)
        rows.append(("floor: list + read + hash every file", time.perf_counter() - t, 0, ""))

        total = _chunks(store, coll)
        s, n, report = _timed(embedder, lambda: store.sync(folder, collection=coll, chunk_overlap=100))
        rows.append(
            (
                "overlap 150 -> 100",
                s,
                n,
                f"{len(report.rechunked)} rechunked; {_chunks(store, coll) - n:,} of"
                f" {_chunks(store, coll):,} chunks kept their vector (was {total:,} chunks)",
            )
        )
        s, n, _ = _timed(embedder, lambda: store.ingest(folder, collection=floor, chunk_overlap=100))
        rows.append(("floor: a full ingest with overlap 100 (scratch collection)", s, n, ""))
        store.delete_collection(floor)
        store.create_collection(floor, embedder=embedder)
        s, n, report = _timed(embedder, lambda: store.sync(folder, collection=coll, chunk_size=500))
        rows.append(
            (
                "**chunk size 1000 -> 500**",
                s,
                n,
                f"{len(report.rechunked)} rechunked, {_chunks(store, coll):,} chunks",
            )
        )
        s, n, _ = _timed(embedder, lambda: store.ingest(folder, collection=floor, chunk_size=500))
        rows.append(("floor: a full ingest with size 500 (scratch collection)", s, n, ""))

        print(f"\nstore.sync and the chunk layout: {args.files:,} SciFact files, embedder {args.embedder}")
        print("\n| run | seconds | chunks embedded | |\n|---|---:|---:|---|")
        for name, seconds, embedded, note in rows:
            print(f"| {name} | {seconds:.2f} | {embedded:,} | {note} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for name in (coll, floor):
            store.delete_collection(name)
        store.close()


if __name__ == "__main__":
    main()
