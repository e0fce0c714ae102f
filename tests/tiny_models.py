"""Tiny BERT model directories built in the tests (random weights, a small vocabulary, no
download): a real model for sentence-transformers to load, in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def save_tiny_bert(
    path: Path, words: Sequence[str], *, seed: int, classifier: bool = False, max_positions: int = 64
) -> Path:
    """Save a one-layer BERT (``BertForSequenceClassification`` with one label when
    ``classifier``, else ``BertModel``) and its tokenizer over ``SPECIAL + words`` into ``path``.
    Large random weights (initializer_range 0.5) make different texts score clearly apart."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path.mkdir(parents=True, exist_ok=True)
    vocab = [*SPECIAL, *words]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_positions,
        initializer_range=0.5,
        **({"num_labels": 1} if classifier else {}),
    )
    torch.manual_seed(seed)
    model_class = transformers.BertForSequenceClassification if classifier else transformers.BertModel
    model_class(config).save_pretrained(path)
    transformers.BertTokenizer(str(path / "vocab.txt")).save_pretrained(path)
    return path
