"""Load a dataset in BEIR layout (e.g. SciFact) for retrieval evaluation.

A BEIR folder holds::

    corpus.jsonl        one {"_id", "title", "text", ...} object per line
    queries.jsonl       one {"_id", "text", ...} object per line (every split)
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score, with a header line

Files are read line by line (SciFact's 5,183 documents load in a fraction of a second).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrag.errors import InvalidInputError

__all__ = ["BeirDataset", "BeirDoc", "load_beir"]


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document. ``title`` is ``""`` when the corpus gives none."""

    doc_id: str
    title: str
    text: str

    @property
    def index_text(self) -> str:
        """The text to index: ``title + "\\n" + text``, or just ``text`` when there is no title.

        A blank title (empty or whitespace only) counts as no title, so no document starts with a
        stray newline.
        """
        title = self.title.strip()
        return f"{title}\n{self.text}" if title else self.text


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR dataset, restricted to one split.

    ``corpus`` is the whole corpus, ``queries`` only the queries that have qrels in the split (in
    qrels-file order), ``qrels`` maps query id -> {doc id -> grade} for those queries.
    """

    name: str
    corpus: dict[str, BeirDoc] = field(repr=False)
    queries: dict[str, str] = field(repr=False)
    qrels: dict[str, dict[str, int]] = field(repr=False)
    split: str = "test"

    def __repr__(self) -> str:  # the default would print the whole corpus
        rows = sum(len(docs) for docs in self.qrels.values())
        return (
            f"BeirDataset(name={self.name!r}, split={self.split!r}, docs={len(self.corpus)}, "
            f"queries={len(self.queries)}, qrels={rows})"
        )


def _require_file(path: Path) -> Path:
    if not path.is_file():
        raise InvalidInputError(f"not a BEIR dataset: missing file {path}")
    return path


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{path}:{line_no}: invalid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict) or "_id" not in obj:
                raise InvalidInputError(f"{path}:{line_no}: expected a JSON object with an '_id'")
            yield line_no, obj


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3:
                raise InvalidInputError(
                    f"{path}:{line_no}: expected 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(parts)}"
                )
            query_id, doc_id, raw_score = (part.strip() for part in parts)
            try:
                score = int(raw_score)
            except ValueError:
                if line_no == 1:  # the header, "query-id corpus-id score"
                    continue
                raise InvalidInputError(f"{path}:{line_no}: score {raw_score!r} is not an integer") from None
            qrels.setdefault(query_id, {})[doc_id] = score
    return qrels


def load_beir(
    path: str | os.PathLike[str], split: str = "test", *, sample: int | None = None, seed: int = 0
) -> BeirDataset:
    """Load the BEIR dataset in folder ``path`` for ``split`` (``qrels/<split>.tsv``).

    With ``sample=N``, keep N of the split's queries chosen at random with ``seed`` (the same
    ``N`` and ``seed`` always give the same queries; a larger ``N`` than there are queries keeps
    them all). The corpus is always kept whole, so the retrieval task stays as hard as the full one.

    Raises :class:`~agentrag.errors.InvalidInputError` naming the file when the folder is not
    BEIR-shaped (a missing file, a malformed line, a query id in the qrels with no query text, a
    duplicate document id).
    """
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int):
            raise TypeError(f"sample must be an int or None, got {type(sample).__name__}")
        if sample < 1:
            raise InvalidInputError(f"sample must be >= 1, got {sample}")
    root = Path(path)
    if not root.is_dir():
        raise InvalidInputError(f"not a BEIR dataset: no folder {root}")
    corpus_path = _require_file(root / "corpus.jsonl")
    queries_path = _require_file(root / "queries.jsonl")
    qrels_path = _require_file(root / "qrels" / f"{split}.tsv")

    qrels = _read_qrels(qrels_path)
    if sample is not None and sample < len(qrels):
        keep = set(random.Random(seed).sample(sorted(qrels), sample))
        qrels = {qid: docs for qid, docs in qrels.items() if qid in keep}

    texts: dict[str, str] = {}
    for line_no, obj in _read_jsonl(queries_path):
        query_id = str(obj["_id"])
        if query_id in qrels:
            text = obj.get("text")
            if not isinstance(text, str):
                raise InvalidInputError(f"{queries_path}:{line_no}: query {query_id!r} has no 'text' string")
            texts[query_id] = text
    missing = [qid for qid in qrels if qid not in texts]
    if missing:
        shown = ", ".join(repr(qid) for qid in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise InvalidInputError(
            f"{qrels_path} names {len(missing)} query id(s) absent from {queries_path}: {shown}"
        )
    queries = {qid: texts[qid] for qid in qrels}

    corpus: dict[str, BeirDoc] = {}
    for line_no, obj in _read_jsonl(corpus_path):
        doc_id = str(obj["_id"])
        if doc_id in corpus:
            raise InvalidInputError(f"{corpus_path}:{line_no}: duplicate document id {doc_id!r}")
        title = obj.get("title") or ""
        text = obj.get("text") or ""
        if not isinstance(title, str) or not isinstance(text, str):
            raise InvalidInputError(f"{corpus_path}:{line_no}: 'title' and 'text' must be strings")
        corpus[doc_id] = BeirDoc(doc_id, title, text)

    return BeirDataset(name=root.resolve().name, corpus=corpus, queries=queries, qrels=qrels, split=split)
