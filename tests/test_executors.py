"""The prepare stage's seam without Ray: LocalExecutor, prepare_documents, embed_documents, options.

The Ray executor runs on a real Ray instance in tests/test_ray_executor.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import agentrag as ar
from agentrag.errors import EmbeddingError, InvalidInputError
from agentrag.testing import FakeEmbedder


class PoisonEmbedder(FakeEmbedder):
    """Fails on any batch holding a text with POISON in it (one bad document, not an outage)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any("POISON" in t for t in texts):
            raise EmbeddingError("the provider rejected an input")
        return super().embed(texts)


def _docs(*texts: str) -> list[ar.PreparedDocument]:
    return [ar.PreparedDocument(f"d{i}.md", text, {}) for i, text in enumerate(texts)]


def test_prepare_documents_reads_validates_and_chunks(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\n# Alpha\n\n" + "word " * 400, encoding="utf-8")
    (tmp_path / "nul.txt").write_bytes(b"text\x00with nul")
    docs = [
        ar.PreparedDocument("a.md", "", {"team": "x"}, path=str(tmp_path / "a.md")),
        ar.PreparedDocument("nul.txt", "", {}, path=str(tmp_path / "nul.txt")),
        ar.PreparedDocument("gone.md", "", {}, path=str(tmp_path / "gone.md")),
        ar.PreparedDocument("empty", "   ", {}),
        ar.PreparedDocument("baddate", "text", {"date": "yesterday"}),
    ]
    out = ar.prepare_documents(docs, chunk_size=500, chunk_overlap=50)
    a = out[0]
    assert a.error is None and a.metadata == {"title": "A", "team": "x"} and a.original_filename == "a.md"
    assert len(a.chunks) > 1 and all(a.text[c.start_char : c.end_char] == c.text for c in a.chunks)
    assert a.path is None  # read on the prepare stage: the text travels back, not the path
    assert "NUL bytes" in (out[1].error or "")
    assert "no such file" in (out[2].error or "")
    assert "no text" in (out[3].error or "")
    assert "ISO date" in (out[4].error or "")


def test_a_known_unchanged_document_is_not_chunked() -> None:
    (doc,) = ar.prepare_documents(_docs("same text"))
    again = ar.PreparedDocument("d0.md", "same text", {}, known=(doc.sha256, "{}"))
    (prepared,) = ar.prepare_documents([again])
    assert prepared.unchanged and prepared.chunks == []
    changed = ar.PreparedDocument("d0.md", "same text", {"v": 2}, known=(doc.sha256, "{}"))
    assert not ar.prepare_documents([changed])[0].unchanged


def test_embed_documents_isolates_a_bad_document() -> None:
    docs = ar.prepare_documents(_docs("good one", "POISON here", "good two"))
    out = ar.embed_documents(docs, PoisonEmbedder(8))
    assert [d.error is None for d in out] == [True, False, True]
    assert out[1].error == "d1.md: the provider rejected an input"
    assert out[0].vectors is not None and out[0].vectors.shape == (1, 8)
    np.testing.assert_array_equal(out[2].vectors, FakeEmbedder(8).embed(["good two"]))  # type: ignore[arg-type]


def test_embed_documents_raises_an_outage() -> None:
    docs = ar.prepare_documents(_docs("one", "two"))
    with pytest.raises(EmbeddingError, match="outage"):
        ar.embed_documents(docs, FakeEmbedder(8, fail=True))
    assert all(d.error is None and d.vectors is None for d in docs)  # nothing blamed on a document


def test_local_executor_yields_every_document_in_order() -> None:
    docs = _docs(*(f"text number {i}" for i in range(7)))
    out = list(
        ar.LocalExecutor(batch_documents=3).run(
            docs, embedder=FakeEmbedder(8), chunk_size=100, chunk_overlap=10
        )
    )
    assert [d.source for d in out] == [d.source for d in docs]
    assert all(d.vectors is not None and d.vectors.shape == (1, 8) for d in out)


def test_store_ingest_reports_a_poisoned_document_and_writes_the_others(
    database_url: str, collection_name: str
) -> None:
    with ar.Store(database_url, embedder=PoisonEmbedder(64)) as store:
        store.create_collection(collection_name)
        report = store.ingest_text("fine", collection=collection_name, source="a")
        assert report.added == ("a",)
        from agentrag.store.ingest import ingest_texts

        report = ingest_texts(
            store,
            [("b", "fine too", {}), ("c", "POISON", {}), ("d", "and this", {})],
            collection=collection_name,
        )
        assert report.added == ("b", "d") and [s for s, _ in report.failed] == ["c"]
        assert sorted(d.source for d in store.documents(collection_name)) == ["a", "b", "d"]


def test_bad_executors_and_options_raise_at_call_time(store: ar.Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    with pytest.raises(InvalidInputError, match="executor must have a run"):
        store.ingest([], collection=collection_name, executor="ray")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="batch_documents"):
        ar.LocalExecutor(batch_documents=0)
    from agentrag.executors.ray import RayExecutor

    with pytest.raises(TypeError, match=r"unknown option\(s\) actor, gpus; it takes: actors"):
        RayExecutor(actor=2, gpus=1)
    with pytest.raises(InvalidInputError, match="actors must be an integer >= 1"):
        RayExecutor(actors=0)
    with pytest.raises(InvalidInputError, match="gpus_per_actor"):
        RayExecutor(gpus_per_actor=-1)
    with pytest.raises(InvalidInputError, match="runtime_env"):
        RayExecutor(runtime_env="pip")
    assert isinstance(RayExecutor(actors=2), ar.Executor)


def test_the_ray_executor_does_not_import_ray_until_it_runs() -> None:
    code = (
        "import sys, agentrag; from agentrag.executors.ray import RayExecutor; RayExecutor(actors=2);"
        " import agentrag.executors.cli; print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
