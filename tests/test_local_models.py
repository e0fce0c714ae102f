"""Any sentence-transformers model directory for LocalEmbedder: a tiny bi-encoder built here (random
weights, no download), its directory version, and model_version_match when the weights change.
Real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agentrag.embedders import LocalEmbedder
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store
from tests.tiny_models import save_tiny_bert

WORDS = [
    "the",
    "a",
    "and",
    "of",
    "to",
    "rate",
    "limit",
    "api",
    "notes",
    "page",
    "cursor",
    "support",
    "plan",
    "team",
    "business",
    "comet",
    "nebula",
    "quasar",
    "star",
]


def build_bi_encoder(path: Path, seed: int) -> str:
    """A one-layer BERT with mean pooling, saved as a sentence-transformers model directory."""
    st = pytest.importorskip("sentence_transformers")
    raw = save_tiny_bert(path / f"raw-{seed}", WORDS, seed=seed)
    model_dir = path / "model"
    # a plain transformers directory loads with mean pooling; saved, it is a sentence-transformers model
    st.SentenceTransformer(str(raw), device="cpu").save(str(model_dir))
    return str(model_dir)


@pytest.fixture
def model_dir(tmp_path: Path) -> str:
    return build_bi_encoder(tmp_path, seed=0)


@pytest.fixture
def tiny_store(database_url: str, model_dir: str) -> Iterator[Store]:
    store = Store(database_url, embedder=LocalEmbedder(model_dir, backend="torch"))
    yield store
    store.close()


def test_a_model_directory_embeds_and_has_a_content_version(model_dir: str) -> None:
    embedder = LocalEmbedder(model_dir, backend="torch")
    assert (
        embedder.version.startswith("dir:")
        and embedder.version == LocalEmbedder(model_dir, backend="torch").version
    )
    vectors = embedder.embed(["comet nebula", "rate limit api", "comet nebula"])
    assert vectors.shape == (3, 16) and embedder.dimensions == 16
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])


def test_changed_weights_in_the_same_directory_are_flagged_by_model_version_match(
    tiny_store: Store, database_url: str, model_dir: str, tmp_path: Path
) -> None:
    name = f"tiny_{uuid.uuid4().hex[:8]}"
    tiny_store.create_collection(name)
    texts = ["comet nebula quasar", "rate limit api notes", "support plan team business"]
    report = ingest_texts(tiny_store, [(f"d{i}", t, {}) for i, t in enumerate(texts)], collection=name)
    assert report.ok
    same = tiny_store.search("comet star", collections=name, mode="vector", top_k=3)
    assert same.model_version_match and len(same) == 3
    before = tiny_store.embedder.version
    old = tiny_store.embedder.embed(["comet star"])

    # retrain (here: other random weights) and save to the same directory
    import shutil

    shutil.rmtree(model_dir)
    shutil.copytree(build_bi_encoder(tmp_path / "retrained", seed=1), model_dir)
    retrained = LocalEmbedder(model_dir, backend="torch")
    assert retrained.version != before
    assert not np.allclose(retrained.embed(["comet star"]), old)  # the new weights, not the cached model
    with Store(database_url, embedder=retrained) as other:
        result = other.search("comet star", collections=name, mode="hybrid", top_k=3)
    assert result.model_version_match is False
    assert any("version" in w and before in w for w in result.warnings)
    tiny_store.delete_collection(name)
