"""Abstention placed by the collection's own statistics (issue #36 item 2, issue #40): a threshold
that needs no labelled questions. Measured, and **not the default** (``_THRESHOLD_SOURCE`` in
:mod:`agentrag.answer_languages` is ``"table"``; set it to ``"collection"`` to use it): on XQuAD-dev
it answers fewer unanswerable questions in another language but refuses more answerable ones in
Chinese and Thai, and on English corpora of other styles the null swings from 0.0 (a handbook of
distinct policies: near-misses answered) to 0.98 (product docs that restate each other: right answers
refused). benchmarks/HISTORY.md, "Every language", session 15.

A collection's *null*: pseudo-questions its documents cannot answer, scored by the answer step
itself. From up to :data:`SAMPLES` documents (spread over the collection), :data:`PER_DOCUMENT`
sentences each, cut to the first :data:`QUESTION_SHARE` of their characters (a question is shorter
than the sentence it asks about), are searched in the collection with their own document's hits
removed; the answer step's confidence for each, with no threshold, is one null value: the
confidence a question reaches in *this* collection, with *its* embedder, language and writing
style, when its own document is not there.

:func:`placed_threshold` puts the threshold at a quantile of that null (:data:`NULL_QUANTILE`),
cached per store, collection, embedder model and collection version (a write bumps the version,
so the next question gathers the statistics again). A collection that offers fewer than
:data:`MIN_DOCUMENTS` pseudo-questions, or one searched in a scope (``scoped`` / ACL collections: the
statistics would read documents the question's scope may not), has no null: the caller keeps its
table and records why (:class:`Placement`). The constants were chosen on XQuAD-dev articles 0-11
alone (benchmarks/multilingual_null.py: of four settings, the one of least refused + unanswerable
answered summed over eleven languages).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.store.store import Store

__all__ = [
    "MIN_DOCUMENTS",
    "NULL_QUANTILE",
    "PER_DOCUMENT",
    "QUESTION_SHARE",
    "SAMPLES",
    "CollectionNull",
    "Placement",
    "clear_cache",
    "collection_null",
    "null_confidences",
    "placed_threshold",
    "pseudo_questions",
]

#: documents sampled for the null (one pseudo-question each)
SAMPLES = 40
#: pseudo-questions per sampled document (sentences spread over it)
PER_DOCUMENT = 3
#: below this many documents a collection has no null (too few to tell a scale)
MIN_DOCUMENTS = 8
#: a pseudo-question is this share of its sentence's characters, cut at a space when there is one
QUESTION_SHARE = 0.5
#: the quantile of the null where the threshold sits
NULL_QUANTILE = 0.8
#: documents listed to sample from (the first ones of a larger collection)
LISTED = 2000
_CACHED = 256  # collections whose null is kept


@dataclass(frozen=True, slots=True)
class CollectionNull:
    """The null confidences of one collection at one version, read with one embedder model."""

    collection: str
    version: int
    model: str | None
    confidences: tuple[float, ...]

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the null (linear between the two nearest values)."""
        values = sorted(self.confidences)
        if not values:
            return 0.0
        position = max(0.0, min(1.0, q)) * (len(values) - 1)
        low = int(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the threshold came from: ``"collection"`` (its null, ``threshold`` set) or ``None``
    with ``reason`` saying why the caller's table decides."""

    threshold: float | None
    source: str | None
    reason: str | None = None
    null: CollectionNull | None = None


class _Discard:
    """An audit sink that keeps nothing: the pseudo-questions are not anyone's questions."""

    def emit(self, event: Any) -> None:
        return None


_cache: OrderedDict[tuple[int, str, str | None], CollectionNull] = OrderedDict()
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget every collection's null."""
    with _lock:
        _cache.clear()


def pseudo_questions(text: str, language: str | None, *, share: float = QUESTION_SHARE) -> list[str]:
    """The pseudo-questions one document offers: its complete sentences, each cut to ``share`` of
    its characters (at the last space before the cut when the text has spaces)."""
    from agentrag.sentences import sentences

    out = []
    for sentence in sentences(text, language=language):
        words = sentence.text.strip()
        if not sentence.complete or len(words) < 20:
            continue
        cut = max(8, int(len(words) * share))
        head = words[:cut]
        if not head.endswith(" ") and words[cut : cut + 1] not in ("", " ") and " " in head.strip():
            head = head[: head.rstrip().rfind(" ")]  # not mid-word
        out.append(head.strip())
    return out


def null_confidences(
    store: Store,
    collection: str,
    *,
    language: str | None = None,
    samples: int = SAMPLES,
    per_document: int = PER_DOCUMENT,
    share: float = QUESTION_SHARE,
) -> list[float]:
    """The answer step's confidence for pseudo-questions of ``collection`` asked without their
    own document (see the module docstring), in the order of the sampled documents: from each,
    ``per_document`` sentences spread over it (one: the middle one), each cut to ``share``."""
    documents = store.documents(collection, limit=LISTED)
    if len(documents) < MIN_DOCUMENTS:
        return []
    step = max(1, len(documents) // samples)
    chosen = sorted(documents, key=lambda d: d.id)[::step][:samples]
    out = []
    for doc in chosen:
        text = store.document(doc.id).text or ""
        asked = pseudo_questions(text, language or doc.language, share=share)
        for question in _spread(asked, per_document):
            out.append(_confidence_without(store, collection, question, doc.id))
    return out


def _spread(items: list[str], count: int) -> list[str]:
    """``count`` of ``items`` spread over them (one: the middle one)."""
    if count <= 1 or len(items) <= 1:
        return items[len(items) // 2 :][:1]
    picks = sorted({round(i * (len(items) - 1) / (count - 1)) for i in range(count)})
    return [items[i] for i in picks]


def _confidence_without(store: Store, collection: str, question: str, document_id: str) -> float:
    """The answer step's confidence for ``question`` over ``collection``'s hits of other documents."""
    from agentrag.abstain import Calibration
    from agentrag.steps.answer import prepare
    from agentrag.steps.new import new
    from agentrag.steps.rerank import rerank
    from agentrag.steps.search import search

    ctx = search(new(question, store=store, collections=[collection], audit=_Discard()))
    kept = tuple(
        replace(r, hits=tuple(h for h in r.hits if h.document_id != document_id)) for r in ctx.results
    )
    ctx = rerank(ctx.evolve(results=kept))
    if not ctx.hits:
        return 0.0
    plan = prepare(ctx, strategy="local", abstain=False, calibration=Calibration(abstain_below=0.0))
    return float(plan.base.get("answer_confidence") or 0.0)


def collection_null(store: Store, collection: str, *, language: str | None = None) -> CollectionNull:
    """The collection's null at its current version, gathered on first use and cached (one cheap
    query per call reads the version: a write since gathers it again)."""
    (found,) = store.describe([collection])
    model = getattr(store.answer_embedder(collection), "model_id", None)
    key = (id(store), f"{collection}\x00{found.version}", model)
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            return cached
    null = CollectionNull(
        collection, found.version, model, tuple(null_confidences(store, collection, language=language))
    )
    with _lock:
        _cache[key] = null
        while len(_cache) > _CACHED:
            _cache.popitem(last=False)
    return null


def placed_threshold(
    store: Store | None,
    collections: Sequence[str],
    *,
    language: str | None = None,
    quantile: float = NULL_QUANTILE,
) -> Placement:
    """The threshold of an answer from ``collections`` (the best hit's first): ``quantile`` of
    its null, or why there is none."""
    if store is None or not collections:
        return Placement(None, None, "no store to read the collection's statistics from")
    name = collections[0]
    (found,) = store.describe([name])
    if found.scoped or found.acl:
        return Placement(None, None, f"collection {name!r} is scoped: its statistics are not gathered")
    null = collection_null(store, name, language=language)
    if len(null.confidences) < MIN_DOCUMENTS:
        return Placement(
            None,
            None,
            f"collection {name!r} offered {len(null.confidences)} pseudo-questions, fewer than"
            f" {MIN_DOCUMENTS} for its statistics",
        )
    return Placement(round(null.quantile(quantile), 4), "collection", None, null)
