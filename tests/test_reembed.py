"""Store.reembed / `agentrag reembed`: a collection's vectors replaced by another embedder's, atomically.

Real PostgreSQL throughout; the embedders are agentrag.testing fakes except in the last test,
which converts an int8 collection to the float32 default with the real local model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from agentrag.errors import CollectionNotFoundError, EmbeddingError, EmbeddingMismatchError, InvalidInputError
from agentrag.store.prepare import LocalExecutor, PreparedDocument
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder

TEXTS = {
    "comets.md": "Comets are icy bodies that release gas when they pass close to the Sun.",
    "tides.md": "Tides rise and fall twice a day, pulled by the Moon and the Sun.",
    "bees.md": "Honey bees dance to tell the hive where the flowers are.",
    "rust.md": "Iron rusts when oxygen and water reach its surface.",
    "volcano.md": "A volcano erupts when magma rises through the crust.",
}


def _fill(store: Store, name: str) -> None:
    store.create_collection(name)
    for source, body in TEXTS.items():
        store.ingest_text(body, collection=name, source=source)


def _vectors(store: Store, name: str) -> dict[str, tuple[str, np.ndarray]]:
    """chunk id -> (text, stored vector)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.id, c.text, c.embedding FROM agentrag.chunks c JOIN agentrag.collections k"
                " ON k.id = c.collection_id WHERE k.name = :n"
            ),
            {"n": name},
        ).all()
    return {row.id: (row.text, np.asarray(row.embedding.to_numpy(), dtype=np.float32)) for row in rows}


def _index_definition(store: Store, name: str) -> str | None:
    coll = store.collection(name)
    with store.engine.connect() as conn:
        return conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE schemaname = 'agentrag' AND indexname = :i"),
            {"i": coll.hnsw_index},
        ).scalar()


def test_reembed_replaces_every_vector_and_the_record(database_url: str, collection_name: str) -> None:
    old = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    new = Store(database_url, embedder=FakeEmbedder(32, model_id="fake-other", version="7+int8"))
    try:
        _fill(old, collection_name)
        before = _vectors(old, collection_name)
        assert "vector(64)" in (_index_definition(old, collection_name) or "")
        # another model cannot ingest into it, and the error names the fix
        with pytest.raises(EmbeddingMismatchError, match=f"agentrag reembed {collection_name}"):
            new.ingest_text("Glaciers carve valleys.", collection=collection_name, source="ice.md")

        report = new.reembed(collection_name, page_size=2)  # three pages

        assert report.chunks == len(before) == len(TEXTS)
        assert (report.previous_model, report.previous_version, report.previous_dimensions) == (
            "fake-hashing",
            "1",
            64,
        )
        assert (report.embed_model, report.embed_version, report.dimensions) == ("fake-other", "7+int8", 32)
        assert report.late_chunks == 0
        coll = new.collection(collection_name)
        assert (coll.embed_model, coll.embed_version, coll.dimensions) == ("fake-other", "7+int8", 32)
        assert coll.version == old.collection(collection_name).version  # text caches stay valid
        after = _vectors(new, collection_name)
        assert after.keys() == before.keys()  # same chunks, same ids: citations stay valid
        ids = sorted(after)
        expected = new.embedder.embed([after[i][0] for i in ids])
        np.testing.assert_allclose(np.stack([after[i][1] for i in ids]), expected, atol=1e-6)
        assert "vector(32)" in (_index_definition(new, collection_name) or "")  # rebuilt for 32d

        # the new store searches and ingests; the old one is now the mismatched one
        result = new.search("comets icy gas", collections=collection_name, mode="vector")
        assert result.model_version_match is True and result.hits[0].original_filename is None
        assert result.hits[0].text == TEXTS["comets.md"]
        new.ingest_text("Glaciers carve valleys.", collection=collection_name, source="ice.md")
        with pytest.raises(EmbeddingMismatchError, match="reembed"):
            old.ingest_text("Deserts get little rain.", collection=collection_name, source="dry.md")
        with pytest.raises(EmbeddingMismatchError):
            old.search("comets", collections=collection_name, mode="vector")
        assert print(report) is None and "re-embedded 5 chunks" in str(report)
        assert report.to_dict()["previous"]["embed_version"] == "1"
    finally:
        old.close()
        new.close()


def test_a_version_mismatch_warns_with_the_fix_and_reembed_clears_it(
    database_url: str, collection_name: str
) -> None:
    fp32 = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    int8 = Store(database_url, embedder=FakeEmbedder(64, version="1+int8"))
    try:
        _fill(fp32, collection_name)
        result = int8.search("tides moon", collections=collection_name, mode="hybrid")
        assert result.model_version_match is False
        assert any(f"agentrag reembed {collection_name}" in w for w in result.warnings)
        with pytest.raises(EmbeddingMismatchError, match="1\\+int8"):
            int8.ingest_text("x y z", collection=collection_name, source="new.md")
        int8.reembed(collection_name)
        result = int8.search("tides moon", collections=collection_name, mode="hybrid")
        assert result.model_version_match is True and not result.warnings
        assert fp32.search("tides moon", collections=collection_name).model_version_match is False
    finally:
        fp32.close()
        int8.close()


class _FailingEmbedder(FakeEmbedder):
    """Fails on its ``fail_on``-th embed call."""

    def __init__(self, fail_on: int, **options: Any) -> None:
        super().__init__(**options)
        self.fail_on = fail_on

    def embed(self, texts: Any) -> np.ndarray:
        if len(self.calls) + 1 == self.fail_on:
            self.calls.append(list(texts))
            raise EmbeddingError("simulated failure")
        return super().embed(texts)


def test_a_failed_reembed_changes_nothing(database_url: str, collection_name: str) -> None:
    old = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    try:
        _fill(old, collection_name)
        before = _vectors(old, collection_name)
        index = _index_definition(old, collection_name)
        for broken in (
            _FailingEmbedder(2, dimensions=64, version="2"),  # the second page
            FakeEmbedder(64, version="2", fail=True),  # the first
        ):
            with pytest.raises(EmbeddingError):
                old.reembed(collection_name, embedder=broken, page_size=2)
            coll = old.collection(collection_name)
            assert coll.embed_version == "1"
            after = _vectors(old, collection_name)
            assert all(np.array_equal(after[i][1], before[i][1]) for i in before)
            assert _index_definition(old, collection_name) == index
        # and nothing was left behind: a later re-embed works
        assert old.reembed(collection_name, embedder=FakeEmbedder(64, version="2")).chunks == len(TEXTS)
    finally:
        old.close()


def test_chunks_written_during_the_first_pass_are_embedded_in_the_swap(database_url: str) -> None:
    # A fixed name: chunk ids are content-addressed, so which new chunks sort before the last one
    # read (the pass then misses them, and the swap must find them) is the same on every run.
    name = "reembed_late_chunks"
    old = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    new = Store(database_url, embedder=FakeEmbedder(64, model_id="fake-two", version="2"))
    try:
        _fill(old, name)
        deleted = old.documents(name)[0]
        late = {f"late{i}.md": f"Late note {i} about glaciers and valleys." for i in range(3)}

        def meanwhile(done: int, total: int) -> None:  # other writers, with the old model, mid-pass
            if done == 2:
                old.delete_document(deleted.id)
            if done == total:
                for source, body in late.items():
                    old.ingest_text(body, collection=name, source=source)

        report = new.reembed(name, page_size=2, on_progress=meanwhile)
        assert report.late_chunks >= 1
        vectors = _vectors(new, name)
        assert report.chunks == len(vectors) == len(TEXTS) - 1 + len(late)
        ids = sorted(vectors)
        expected = new.embedder.embed([vectors[i][0] for i in ids])
        np.testing.assert_allclose(np.stack([vectors[i][1] for i in ids]), expected, atol=1e-6)
        assert new.search("glaciers", collections=name, mode="vector").model_version_match is True
    finally:
        old.close()
        new.close()


def test_an_ingest_prepared_before_a_reembed_is_refused_at_its_write(
    database_url: str, collection_name: str, tmp_path: Path
) -> None:
    old = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    new = Store(database_url, embedder=FakeEmbedder(64, version="2"))
    try:
        _fill(old, collection_name)

        class ReembedMeanwhile:
            """Prepares with the old model, then the collection is re-embedded before the write."""

            def run(
                self, documents: Iterable[PreparedDocument], **options: Any
            ) -> Iterator[PreparedDocument]:
                prepared = list(LocalExecutor().run(documents, **options))
                new.reembed(collection_name)
                yield from prepared

        (tmp_path / "ice.md").write_text("Glaciers carve valleys.")
        with pytest.raises(EmbeddingMismatchError, match="re-embedded"):
            old.ingest(tmp_path, collection=collection_name, executor=ReembedMeanwhile())
        assert len(new.documents(collection_name)) == len(TEXTS)  # nothing of it
        assert len(_vectors(new, collection_name)) == len(TEXTS)
    finally:
        old.close()
        new.close()


def test_reembed_refuses_bad_input(store: Store, collection_name: str) -> None:
    with pytest.raises(CollectionNotFoundError):
        store.reembed("no_such_collection")
    store.create_collection(collection_name)
    with pytest.raises(InvalidInputError, match="page_size"):
        store.reembed(collection_name, page_size=0)
    with pytest.raises(InvalidInputError, match="embedder"):
        store.reembed(collection_name, embedder=object())  # type: ignore[arg-type]
    report = store.reembed(collection_name)  # an empty collection: just the record
    assert report.chunks == 0 and _index_definition(store, collection_name) is not None


@pytest.mark.slow
def test_cli_converts_an_int8_collection_to_the_float32_default(
    database_url: str, collection_name: str
) -> None:
    """The real model: a collection embedded by the int8 backend (the default for a few hours of
    2026-11-23), re-embedded by the CLI with the default (float32) backend, whose vectors are
    close to, and not the same as, int8's."""
    import contextlib
    import io

    from agentrag.cli import main
    from agentrag.embedders import LocalEmbedder

    int8 = LocalEmbedder(backend="onnx-int8")
    fp32 = LocalEmbedder()  # the CLI's default: float32 queries, documents by its document_backend
    assert fp32.backend == "onnx" and int8.version == fp32.version + "+int8"
    old = Store(database_url, embedder=int8)
    try:
        _fill(old, collection_name)
        with pytest.raises(EmbeddingMismatchError, match="agentrag reembed"):
            Store(database_url, embedder=fp32, migrate=False).ingest_text(
                "x", collection=collection_name, source="x.md"
            )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--database-url", database_url, "reembed", collection_name, "--json"])
        assert code == 0
        report = json.loads(out.getvalue())
        assert report["embed_version"] == fp32.version and report["chunks"] == len(TEXTS)
        vectors = _vectors(old, collection_name)
        ids = sorted(vectors)
        stored = np.stack([vectors[i][1] for i in ids])
        texts = [vectors[i][0] for i in ids]
        # re-embedding embeds documents: the default's documents' path (torch-bf16 on a CPU with native
        # bfloat16, else onnx), within cosine 0.9999 of float32 onnx's vectors
        np.testing.assert_allclose(stored, fp32.embed_documents(texts), atol=2e-3)
        assert np.sum(stored * fp32.embed(texts), axis=1).min() > 0.9995
        cosines = np.sum(stored * int8.embed(texts), axis=1)
        assert cosines.min() > 0.97 and not np.allclose(cosines, 1.0, atol=1e-5)
    finally:
        old.close()


def test_the_demo_re_embeds_a_sample_collection_from_an_older_default(
    database_url: str, collection_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag.demo import ingest_samples

    (tmp_path / "collections.json").write_text(
        json.dumps([{"name": collection_name, "description": "notes"}])
    )
    (tmp_path / collection_name).mkdir()
    for source, body in TEXTS.items():
        (tmp_path / collection_name / source).write_text(body)
    older = Store(database_url, embedder=FakeEmbedder(64, version="1"))
    newer = Store(database_url, embedder=FakeEmbedder(64, version="1+int8"))
    try:
        ingest_samples(older, tmp_path)
        capsys.readouterr()
        ingest_samples(newer, tmp_path)  # no EmbeddingMismatchError: converted, and said so
        out = capsys.readouterr().out
        assert "re-embedding it" in out and "re-embedded 5 chunks" in out
        assert newer.collection(f"demo_{collection_name}").embed_version == "1+int8"  # the demo's own
    finally:
        older.close()
        newer.close()
