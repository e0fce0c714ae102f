"""``store.sync`` on a changing folder, beside its floor, a full ingest and LangChain's indexing API.

    .venv/bin/python -m benchmarks.sync [--files 10000] [--embedder local|fake] [--no-langchain]
                                        [--collection bench_sync]

A folder of ``--files`` Markdown files from BEIR SciFact abstracts (title + abstract; past the
5,183 abstracts, two neighbouring abstracts joined, so every file is distinct) is synced into an
empty collection (timed: that first sync is a full ingest of the folder). Then 1 % of the files
are modified, 0.5 % deleted, 0.5 % added and 0.5 % renamed, and the folder synced again (timed).

* floor: what any sync of this change set must do, measured in the same run: listing the folder
  and reading + hashing every file, plus embedding and writing only the added and modified files
  (``ingest_texts`` into a scratch collection);
* full ingest: the first sync, every file embedded and written;
* stale chunks after the sync, counted by query: chunks whose document's key is not in the folder
  or whose text is not the file's;
* LangChain (``langchain-classic`` + ``langchain-postgres``, when installed): ``index(...,
  cleanup="incremental")`` with ``SQLRecordManager`` and ``PGVector`` on the same PostgreSQL, the
  same chunks (agentrag's chunker) and the same embedder, on the same change set (timed: loading
  and chunking the folder, then ``index``), and its stale chunks by the same rule.

Embeddings: both systems embed through one wrapper around the same model that counts the chunks
it embeds. Its cache is on only while LangChain's untimed first load runs (the texts agentrag's
first sync embedded), so the first load does not cost a second full embedding; every timed phase
embeds for real.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._db import bench_store, bench_url
from benchmarks._paths import scifact_path

COLLECTION = "bench_sync"


class CountingEmbedder:
    """The store's embedder, counting document chunks embedded; a text cache that is off unless on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}
        self.caching = False
        self.embedded = 0

    model_id = property(lambda self: self.inner.model_id)
    version = property(lambda self: self.inner.version)
    dimensions = property(lambda self: self.inner.dimensions)
    document_backend = property(lambda self: getattr(self.inner, "document_backend", None))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.inner.embed(texts), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if not (self.caching and t in self.cache)]
        if missing:
            embed = getattr(self.inner, "embed_documents", self.inner.embed)
            vectors = np.asarray(embed(missing), dtype=np.float32)
            self.embedded += len(missing)
            self.cache.update(zip(missing, vectors, strict=True))
        return (
            np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dimensions), np.float32)
        )


def counting_embedder(kind: str) -> CountingEmbedder:
    """``--embedder``'s choice, counted: ``local`` (the real MiniLM) or ``fake`` (hashing, 384-d)."""
    if kind == "local":
        from agentrag.embedders import LocalEmbedder

        inner: Any = LocalEmbedder()
    else:
        from agentrag.testing import FakeEmbedder

        inner = FakeEmbedder(dimensions=384)
    return CountingEmbedder(inner)


def build_folder(folder: Path, count: int, data: Path) -> list[str]:
    """``count`` distinct files from SciFact; returns the spare texts (for the added files)."""
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    texts = [f"# {d['title']}\n\n{d['text']}\n" for d in corpus]
    joined = [texts[i] + "\n" + texts[i + 1] for i in range(len(texts) - 1)]
    pool = texts + joined
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"{i // 1000:02d}" / f"doc{i:05d}.md").parent.mkdir(exist_ok=True)
        (folder / f"{i // 1000:02d}" / f"doc{i:05d}.md").write_text(pool[i], encoding="utf-8")
    return pool[count:]


def change(folder: Path, spare: list[str], seed: int = 7) -> dict[str, list[str]]:
    """1 % modified, 0.5 % deleted, 0.5 % renamed, 0.5 % added (disjoint, seeded)."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    rng = random.Random(seed)
    picked = rng.sample(files, len(files) * 2 // 100)
    n = len(files) // 200
    modified, deleted, renamed = picked[: 2 * n], picked[2 * n : 3 * n], picked[3 * n : 4 * n]
    for key in modified:
        path = folder / key
        path.write_text(
            path.read_text(encoding="utf-8") + "\nUpdated: a corrected sentence.\n", encoding="utf-8"
        )
    for key in deleted:
        (folder / key).unlink()
    for key in renamed:
        (folder / key).rename(folder / key.replace("doc", "moved"))
    added = [f"new/added{i:04d}.md" for i in range(n)]
    (folder / "new").mkdir()
    for key, text in zip(added, spare, strict=False):
        (folder / key).write_text(text, encoding="utf-8")
    return {"modified": modified, "deleted": deleted, "renamed": renamed, "added": added}


def list_and_hash(folder: Path) -> dict[str, str]:
    out = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[Path(path).relative_to(folder).as_posix()] = hashlib.sha256(f.read()).hexdigest()
    return out


def text_sha(folder: Path) -> dict[str, str]:
    from agentrag.store.readers import read_file

    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(read_file(p).text.encode()).hexdigest()
        for p in folder.rglob("*.md")
    }


def stale_chunks(store: Any, collection: str, expected: dict[str, str]) -> int:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                    " JOIN agentrag.collections k ON k.id = c.collection_id"
                    " LEFT JOIN unnest(CAST(:keys AS text[]), CAST(:shas AS text[])) AS f(key, sha)"
                    " ON f.key = d.source WHERE k.name = :n AND (f.sha IS NULL OR f.sha <> d.sha256)"
                ),
                {"n": collection, "keys": list(expected), "shas": list(expected.values())},
            ).scalar_one()
        )


def langchain_run(
    folder: Path, embedder: CountingEmbedder, expected: dict[str, str], first: bool
) -> dict[str, Any]:
    from langchain_classic.indexes import SQLRecordManager, index
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_postgres import PGVector
    from sqlalchemy import text

    from agentrag.store.chunking import chunk_text
    from agentrag.store.readers import read_file

    class Wrapped(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed_documents(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed([text])[0].tolist()

    url = bench_url()
    store = PGVector(Wrapped(), collection_name="bench_sync_lc", connection=url, pre_delete_collection=first)
    manager = SQLRecordManager("pgvector/bench_sync_lc", db_url=url)
    if first:
        manager.create_schema()
        with manager.engine.begin() as conn:
            conn.execute(text("DELETE FROM upsertion_record WHERE namespace = 'pgvector/bench_sync_lc'"))
    before = embedder.embedded
    start = time.perf_counter()
    docs = []
    for path in sorted(folder.rglob("*.md")):
        key = path.relative_to(folder).as_posix()
        docs += [Document(c.text, metadata={"source": key}) for c in chunk_text(read_file(path).text)]
    result = index(docs, manager, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    seconds = time.perf_counter() - start
    with manager.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT e.cmetadata->>'source' FROM langchain_pg_embedding e JOIN langchain_pg_collection c"
                " ON c.uuid = e.collection_id WHERE c.name = 'bench_sync_lc'"
            )
        ).scalars()
        stale = sum(1 for source in rows if source not in expected)
    return {"seconds": seconds, "result": result, "embedded": embedder.embedded - before, "stale": stale}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=None, help="BEIR SciFact folder")
    parser.add_argument("--embedder", choices=["local", "fake"], default="local")
    parser.add_argument("--no-langchain", action="store_true")
    parser.add_argument(
        "--collection", default=COLLECTION, help="the collection (dropped first): two runs at once use two"
    )
    args = parser.parse_args()
    embedder = counting_embedder(args.embedder)
    store = bench_store(embedder)
    for name in (args.collection, args.collection + "_floor"):  # (_floor: earlier runs' scratch collection)
        if any(c.name == name for c in store.collections()):
            store.delete_collection(name)
    store.create_collection(args.collection, embedder=embedder)
    work = Path(tempfile.mkdtemp(prefix="agentrag-bench-sync-"))
    folder = work / "kb"
    try:
        spare = build_folder(folder, args.files, args.data or scifact_path())
        time.sleep(2.5)  # files written 2 s before a listing have trusted mtimes, as in a daily sync
        from agentrag.store.ingest import ingest_texts

        embedder.embed_documents(["Warm up the model."])
        before = embedder.embedded
        t = time.perf_counter()
        assert store.sync(folder, collection=args.collection).ok
        full_s, full_chunks = time.perf_counter() - t, embedder.embedded - before
        lc_first = None
        langchain = not args.no_langchain
        if langchain:
            try:
                embedder.caching = True
                lc_first = langchain_run(folder, embedder, text_sha(folder), first=True)
            except ImportError as exc:
                print(
                    f"LangChain left out: {exc} (langchain-classic and langchain-postgres, in a separate"
                    " venv: langchain-postgres pins the pgvector package to 0.3.6, which agentrag's venv"
                    " must not get)"
                )
                langchain = False
            finally:
                embedder.caching = False
        changes = change(folder, spare)
        expected = text_sha(folder)

        before = embedder.embedded
        events: list[tuple[float, str]] = []
        t = time.perf_counter()
        report = store.sync(
            folder,
            collection=args.collection,
            on_progress=lambda e: events.append((time.perf_counter(), e.step)),
        )
        sync_s, sync_chunks = time.perf_counter() - t, embedder.embedded - before
        phases: dict[str, float] = {}
        last = t
        for at, step in events:  # the time up to each event, charged to its step
            phases[step] = phases.get(step, 0.0) + at - last
            last = at
        stale = stale_chunks(store, args.collection, expected)

        t = time.perf_counter()
        hashed = list_and_hash(folder)
        hash_s = time.perf_counter() - t
        from agentrag.store.readers import read_file

        changed = [(k, read_file(folder / k).text, {}) for k in changes["modified"] + changes["added"]]
        floor_before = embedder.embedded
        t = time.perf_counter()
        ingest_texts(store, changed, collection=args.collection, tenant="floor")  # same collection and index
        write_s = time.perf_counter() - t
        floor_chunks = embedder.embedded - floor_before
        floor_s = hash_s + write_s

        print(f"\nstore.sync of {len(hashed):,} files (SciFact abstracts), embedder {args.embedder}")
        print(f"change set: {', '.join(f'{len(v)} {k}' for k, v in changes.items())}")
        print(f"sync report: {report!r}; {report.read} files read")
        print("\n| run | seconds | chunks embedded | stale chunks after |\n|---|---:|---:|---:|")
        print(f"| full ingest (first sync, empty collection) | {full_s:.2f} | {full_chunks:,} | |")
        print(f"| **store.sync of the change set** | **{sync_s:.2f}** | {sync_chunks:,} | {stale} |")
        print(
            f"| floor: list + hash every file ({hash_s:.2f} s) + embed and write the changed"
            f" ({write_s:.2f} s) | {floor_s:.2f} | {floor_chunks:,} | |"
        )
        if langchain and lc_first is not None:
            lc = langchain_run(folder, embedder, expected, first=False)
            print(
                "| LangChain index(cleanup='incremental') + SQLRecordManager + PGVector"
                f" | {lc['seconds']:.2f} | {lc['embedded']:,} | {lc['stale']} |"
            )
            print(f"\nLangChain: {lc['result']}")
        print(
            "\nwhere the sync's time went (up to each progress event): "
            + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        )
        print(f"\nfull ingest / sync: {full_s / sync_s:.1f}x; sync / floor: {sync_s / floor_s:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        store.close()


if __name__ == "__main__":
    main()
