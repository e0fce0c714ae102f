"""Ingest on a real local Ray instance: the same documents, chunks and vectors as single-process.

One Ray session for the whole module (started by RayExecutor itself, 2 CPUs, no dashboard,
on 127.0.0.1), shut down after it; the CLI test joins that session through its address.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # offline: no usage report
import ray  # the ray extra, installed by `make setup`
from ray import cloudpickle

import agentrag as ar
from agentrag.errors import EmbeddingError
from agentrag.executors.ray import RayExecutor
from agentrag.testing import FakeEmbedder

pytestmark = pytest.mark.ray


class PoisonEmbedder(FakeEmbedder):
    """Fails on any batch holding a text with POISON in it (a bad document, not an outage)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any("POISON" in t for t in texts):
            raise EmbeddingError("the provider rejected an input")
        return super().embed(texts)


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get PoisonEmbedder by value


@pytest.fixture(scope="module")
def ray_session() -> Iterator[RayExecutor]:
    executor = RayExecutor("local", num_cpus=2, batch_documents=3)
    executor.connect()
    try:
        yield executor
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray-folder")
    (root / "guides").mkdir()
    (root / "guides" / "setup.md").write_text(
        "---\ntitle: Setup\nclassification: internal\n---\n# Setup\n\n"
        + "Install the package, then configure the database connection string. " * 30,
        encoding="utf-8",
    )
    (root / "guides" / "backup.md").write_text(
        "# Backups\n\nNightly snapshots are kept for thirty days.\n\n## Restore\n\n"
        + "Restoring a snapshot takes about ten minutes per gigabyte. " * 25,
        encoding="utf-8",
    )
    for i in range(5):
        (root / f"note{i}.txt").write_text(f"Note {i}: the Lumen lamp uses {i + 3} watts. " * (i + 2))
    (root / "empty.md").write_text("   \n", encoding="utf-8")
    (root / "binary.txt").write_bytes(b"abc\x00def")
    (root / "bad.md").write_text("---\ndate: someday\n---\nA bad date.\n", encoding="utf-8")
    return root


def _snapshot(store: ar.Store, collection: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.id, d.source, d.sha256, d.metadata, c.id AS chunk_id, c.chunk_index, c.text,"
                " c.start_char, c.end_char, c.section,"
                " coalesce(c.embedding::real[], c.embedding_half::real[]) AS vector"
                " FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :name"
                " ORDER BY d.source, c.chunk_index"
            ),
            {"name": collection},
        ).all()
    return [tuple(row) for row in rows]


def _same(ray_rows: list[tuple[Any, ...]], local_rows: list[tuple[Any, ...]]) -> None:
    assert len(ray_rows) == len(local_rows) > 0
    for got, want in zip(ray_rows, local_rows, strict=True):
        assert got[:-1] == want[:-1]  # document id, source, sha256, metadata, chunk id, index, text, ...
        np.testing.assert_allclose(got[-1], want[-1], rtol=0, atol=1e-6)


def _report(report: ar.IngestReport) -> dict[str, Any]:
    """The report without its timings."""
    return {k: v for k, v in report.to_dict().items() if k != "index_seconds"}


def _ingest_both(
    store: ar.Store, folder: Path, collection: str, executor: RayExecutor, vector_type: str = "vector"
) -> tuple[ar.IngestReport, ar.IngestReport, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Single-process, then (same collection name, recreated, so the same ids) on Ray."""
    store.create_collection(collection, vector_type=vector_type)
    local = store.ingest(folder, collection=collection, chunk_size=400, chunk_overlap=40)
    local_rows = _snapshot(store, collection)
    store.delete_collection(collection)
    store.create_collection(collection, vector_type=vector_type)
    on_ray = store.ingest(folder, collection=collection, chunk_size=400, chunk_overlap=40, executor=executor)
    return local, on_ray, local_rows, _snapshot(store, collection)


def test_ray_ingest_equals_single_process_with_the_local_model(
    ray_session: RayExecutor, folder: Path, database_url: str, collection_name: str
) -> None:
    # Pinned to float32 ONNX for queries and documents: it gives the same vectors whatever the batch
    # (within 1e-6), so Ray's different batches do not move them (onnx-int8 runs one text per pass, so it
    # would not either). The default's documents run on torch-bf16 where the CPU has native bfloat16, whose
    # vectors move by up to about 1e-3 with the batch beside them (the kernels block by batch shape), beyond
    # this comparison's 1e-6; and torch would load in every actor. The same code path (embed_documents
    # on the actors, via embed_batched) runs either way.
    embedder = ar.LocalEmbedder(backend="onnx")
    with ar.Store(database_url, embedder=embedder) as store:
        local, on_ray, local_rows, ray_rows = _ingest_both(store, folder, collection_name, ray_session)
        _same(ray_rows, local_rows)
        assert _report(on_ray) == _report(local)  # same ids, same order, same failures
        assert len(on_ray.added) == 7 and on_ray.chunks_written == len(ray_rows)
        assert sorted(s for s, _ in on_ray.failed) == ["bad.md", "binary.txt", "empty.md"]
        # a second run on Ray skips every unchanged document on the workers, before embedding
        again = store.ingest(
            folder, collection=collection_name, chunk_size=400, chunk_overlap=40, executor=ray_session
        )
        assert len(again.unchanged) == 7 and not again.added and again.chunks_written == 0
        assert _snapshot(store, collection_name) == ray_rows


def test_ray_ingest_into_a_halfvec_collection(
    ray_session: RayExecutor, folder: Path, database_url: str, collection_name: str
) -> None:
    """Issue #39: the actors' vectors go in as float16 (embedding_half), as a single process writes them."""
    from sqlalchemy import text

    with ar.Store(database_url, embedder=ar.LocalEmbedder(backend="onnx")) as store:
        local, on_ray, local_rows, ray_rows = _ingest_both(
            store, folder, collection_name, ray_session, "halfvec"
        )
        _same(ray_rows, local_rows)
        assert _report(on_ray) == _report(local)
        with store.engine.connect() as conn:
            stored = conn.execute(
                text(
                    "SELECT count(embedding), count(embedding_half) FROM agentrag.chunks"
                    " WHERE collection_id = :c"
                ),
                {"c": store.collection(collection_name).id},
            ).one()
        assert tuple(stored) == (0, len(ray_rows))


def test_a_document_failing_on_a_ray_actor_fails_alone(
    ray_session: RayExecutor, folder: Path, database_url: str, collection_name: str, tmp_path: Path
) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            target = tmp_path / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (tmp_path / "note2.txt").write_text("POISON: the provider rejects this one.", encoding="utf-8")
    with ar.Store(database_url, embedder=PoisonEmbedder(64)) as store:
        local, on_ray, local_rows, ray_rows = _ingest_both(store, tmp_path, collection_name, ray_session)
        _same(ray_rows, local_rows)
        assert _report(on_ray) == _report(local)
        assert ("note2.txt", "note2.txt: the provider rejected an input") in on_ray.failed
        assert "note2.txt" not in on_ray.document_ids and len(on_ray.added) == 6
    with ar.Store(database_url, embedder=FakeEmbedder(64, fail=True)) as broken:
        broken.create_collection(collection_name + "_x")
        with pytest.raises(EmbeddingError, match="outage"):  # an outage is raised, as single-process
            broken.ingest(folder, collection=collection_name + "_x", executor=ray_session)
        assert broken.documents(collection_name + "_x") == []


def test_cli_ingest_on_ray(
    ray_session: RayExecutor, folder: Path, database_url: str, collection_name: str
) -> None:
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "AGENTRAG_DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "agentrag", "ingest", str(folder), "-c", collection_name, "--create", "--json",
         "--ray", address, "--ray-actors", "1"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # 1: some files failed (the three bad ones), the rest went in
    report = json.loads(done.stdout)
    assert len(report["added"]) == 7
    assert sorted(f["source"] for f in report["failed"]) == ["bad.md", "binary.txt", "empty.md"]
    with ar.Store(database_url) as store:
        assert sorted(d.source for d in store.documents(collection_name)) == sorted(report["added"])


def test_a_pool_this_instance_cannot_host_is_refused_before_it_starts(
    ray_session: RayExecutor, store: ar.Store, collection_name: str, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("some text", encoding="utf-8")
    store.create_collection(collection_name)
    with pytest.raises(ar.InvalidInputError, match=r"1 GPUs; this Ray instance has 0"):
        store.ingest(tmp_path, collection=collection_name, executor=RayExecutor(gpus_per_actor=1))
    with pytest.raises(ar.InvalidInputError, match=r"3 CPUs; this Ray instance has 2"):
        store.ingest(tmp_path, collection=collection_name, executor=RayExecutor(actors=3))
    assert store.documents(collection_name) == []
