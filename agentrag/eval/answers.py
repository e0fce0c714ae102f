"""The answer benchmark: labelled questions, the pipeline run on each, and what the answers score.

A question set is a JSON Lines file (``samples/answers/*.jsonl``), one object per line:

* ``{"kind": "meta", "collections": [...], "corpus": "..."}``: optional, first; the collections the
  questions are about (``agentrag eval answers`` uses them unless ``--collections`` is given);
* ``answerable``: ``question``, ``expected`` (alternative substrings, any one of which in the answer
  is the fact), ``sources`` (``collection/file.md``: the documents that state it), ``fact``
  (``prose``, ``list`` or ``table``: where the fact is written);
* ``unanswerable``: about the corpus's subject, but the documents do not say;
* ``out_of_domain``: unrelated to the corpus;
* ``small_talk``: greetings and thanks;
* ``followup``: ``history`` (the earlier turns, user and assistant), ``question`` (the elliptical
  follow-up), ``expected`` and ``sources`` as for answerable questions.

:func:`run_answers` runs the chat pipeline (``new -> gate -> condense -> search -> rerank ->
answer``, local strategies, the library's defaults) on each and keeps, per question, a JSON-ready
:class:`Outcome`; :func:`score` turns outcomes into the metrics (fact hit, right source cited,
abstention precision / recall, false-grounded rates, follow-up fact hit), and :func:`calibrate`
sweeps the abstention threshold over outcomes recorded without abstaining.

Only the public API is used, through ``import agentrag`` inside functions, and the fields the
answer step added later (``answer_confidence``, ``support``, mode ``abstained``) are read when
present: the benchmark runs this module against older versions of the library too.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrag.errors import InvalidInputError

__all__ = [
    "ANSWERABLE_KINDS",
    "KINDS",
    "UNANSWERABLE_KINDS",
    "AnswerSet",
    "Outcome",
    "abstained",
    "calibrate",
    "fact_hit",
    "load_answer_set",
    "outcome_of",
    "run_answers",
    "score",
    "source_key",
]

KINDS = ("answerable", "unanswerable", "out_of_domain", "small_talk", "followup")
ANSWERABLE_KINDS = ("answerable", "followup")
UNANSWERABLE_KINDS = ("unanswerable", "out_of_domain")
FACT_TYPES = ("prose", "list", "table")
_CITATION = re.compile(r"\[[^\[\]\n]{1,200}\]")
_MARKUP = re.compile(r"[*_`]+")


@dataclass(frozen=True, slots=True)
class AnswerSet:
    """A loaded question set: its items (dicts, as written) and the collections its meta line names."""

    path: str
    items: tuple[dict[str, Any], ...]
    collections: tuple[str, ...] = ()
    corpus: str | None = None

    def of_kind(self, *kinds: str) -> list[dict[str, Any]]:
        return [item for item in self.items if item["kind"] in kinds]

    def source_collections(self) -> tuple[str, ...]:
        """The collections named by the expected sources (``collection/file.md``), in order of use."""
        names: dict[str, None] = {}
        for item in self.items:
            for source in item.get("sources", ()):
                head, sep, _ = source.partition("/")
                if sep:
                    names.setdefault(head, None)
        return tuple(names)


def _check_item(item: Any, line: int, path: str, seen: set[str]) -> dict[str, Any]:
    where = f"{path}:{line}"
    if not isinstance(item, dict):
        raise InvalidInputError(f"{where}: expected a JSON object, got {type(item).__name__}")
    kind = item.get("kind")
    if kind not in KINDS:
        raise InvalidInputError(f"{where}: kind must be one of {', '.join(KINDS)} (or meta), got {kind!r}")
    for key in ("id", "question"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise InvalidInputError(f"{where}: {key!r} must be a non-empty string")
    if item["id"] in seen:
        raise InvalidInputError(f"{where}: duplicate id {item['id']!r}")
    seen.add(item["id"])
    if kind in ANSWERABLE_KINDS:
        expected, sources = item.get("expected"), item.get("sources")
        if (
            not isinstance(expected, list)
            or not expected
            or not all(isinstance(e, str) and e for e in expected)
        ):
            raise InvalidInputError(f"{where}: {kind} needs 'expected', a non-empty list of strings")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s for s in sources):
            raise InvalidInputError(
                f"{where}: {kind} needs 'sources', a non-empty list of collection/file paths"
            )
        if item.get("fact", "prose") not in FACT_TYPES:
            raise InvalidInputError(
                f"{where}: fact must be one of {', '.join(FACT_TYPES)}, got {item['fact']!r}"
            )
    if kind == "followup":
        history = item.get("history")
        if (
            not isinstance(history, list)
            or not history
            or not all(isinstance(t, dict) and t.get("role") in ("user", "assistant") for t in history)
        ):
            raise InvalidInputError(f"{where}: followup needs 'history', a list of user/assistant turns")
    return item


def load_answer_set(path: str | Path) -> AnswerSet:
    """Read and check a question set (see the module docstring); a bad line raises InvalidInputError."""
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"no question set at {str(file)!r}")
    items: list[dict[str, Any]] = []
    collections: tuple[str, ...] = ()
    corpus = None
    seen: set[str] = set()
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{file}:{number}: not JSON: {exc.msg}") from None
        if isinstance(data, dict) and data.get("kind") == "meta":
            names = data.get("collections", [])
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise InvalidInputError(f"{file}:{number}: meta 'collections' must be a list of names")
            collections, corpus = tuple(names), data.get("corpus")
            continue
        items.append(_check_item(data, number, str(file), seen))
    if not items:
        raise InvalidInputError(f"{file}: no questions")
    return AnswerSet(str(file), tuple(items), collections, corpus)


# ---- one question -------------------------------------------------------------------------------
def normalize(text: str) -> str:
    """Lowercase, citation markers and Markdown emphasis removed, dashes and spaces unified."""
    text = unicodedata.normalize("NFKC", text)
    text = _CITATION.sub(" ", text)
    text = _MARKUP.sub("", text)
    text = text.replace("\u2013", "-").replace("\u2014", "-").replace("\u2212", "-")
    return " ".join(text.lower().split())


def fact_hit(answer: str, expected: Iterable[str]) -> bool:
    """Whether any expected alternative occurs in ``answer`` (normalized both sides)."""
    said = normalize(answer)
    return any(normalize(alt) in said for alt in expected if normalize(alt))


def source_key(hit: Any) -> str:
    """``collection/file.md`` of a hit: its source file's name under its collection (the BEIR id, a
    text's source, or the document id when there is no file)."""
    source = getattr(hit, "source", None) or getattr(hit, "document_id", "")
    name = str(source).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{hit.collection}/{name}"


def _matches(key: str, expected: str) -> bool:
    return key == expected or key.rsplit("/", 1)[-1] == expected or key.endswith("/" + expected)


@dataclass(slots=True)
class Outcome:
    """What one question's answer was, JSON-ready (see :func:`outcome_of`)."""

    id: str
    kind: str
    question: str
    searched: str = ""
    answer: str = ""
    mode: str | None = None
    grounded: bool | None = None
    confidence: float | None = None
    cited: list[str] = field(default_factory=list)  # collection/file of each cited chunk
    retrieved: list[str] = field(default_factory=list)  # collection/file of the answer's context
    unsupported: int = 0  # answer sentences the support check (or citation check) flagged
    support_spans: int = 0
    answer_ms: float = 0.0
    total_ms: float = 0.0
    error: str | None = None
    fact: str | None = None
    fact_hit: bool | None = None
    source_hit: bool | None = None
    fact_retrieved: bool | None = None  # the fact is in the retrieved chunks (an upper bound)

    abstained: bool = False  # said it cannot answer (see :func:`abstained`)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_DECLINED = ("no-results", "no-retrieval", "abstained")


def abstained(ctx: Any) -> bool:
    """Whether the answer declined: mode ``abstained``, or an answer step that found nothing to
    answer from (strategy ``no-results``, ``local:no-retrieval``: what older versions did), with
    no citation. An uncited reply of an LLM is not an abstention: it answered, ungrounded."""
    if ctx.mode == "abstained":
        return True
    step = next((s for s in reversed(ctx.steps) if s.name == "answer"), None)
    strategy = (step.strategy or "") if step is not None else ""
    return not ctx.citations and strategy.rsplit(":", 1)[-1] in _DECLINED


def outcome_of(item: Mapping[str, Any], ctx: Any, total_ms: float) -> Outcome:
    """The :class:`Outcome` of ``item`` from the Context its pipeline returned."""
    hits = {h.chunk_id: h for h in (*getattr(ctx, "hits", ()), *getattr(ctx, "context_used", ()))}
    cited = list(dict.fromkeys(source_key(hits[c]) for c in ctx.citations if c in hits))
    used = list(dict.fromkeys(source_key(h) for h in getattr(ctx, "context_used", ())))
    support = tuple(getattr(ctx, "support", ()) or ())
    unsupported = {s.sentence for s in support if not s.supported} | set(ctx.ungrounded_claims)
    answer_ms = sum(s.duration_ms for s in ctx.steps if s.name == "answer")
    out = Outcome(
        id=item["id"],
        kind=item["kind"],
        question=item["question"],
        searched=ctx.question,
        answer=ctx.answer_text or "",
        mode=ctx.mode,
        grounded=ctx.grounded,
        confidence=getattr(ctx, "answer_confidence", None),
        cited=cited,
        retrieved=used,
        unsupported=len(unsupported),
        support_spans=len(support),
        answer_ms=round(answer_ms, 3),
        total_ms=round(total_ms, 3),
        error=None if ctx.error is None else f"{type(ctx.error).__name__}: {ctx.error}",
        fact=item.get("fact", "prose") if item["kind"] in ANSWERABLE_KINDS else None,
        abstained=abstained(ctx),
    )
    if item["kind"] in ANSWERABLE_KINDS:
        expected, sources = item["expected"], item["sources"]
        out.fact_hit = not out.abstained and fact_hit(out.answer, expected)
        out.source_hit = any(_matches(k, s) for k in cited for s in sources)
        texts = " ".join(h.text for h in getattr(ctx, "context_used", ()))
        out.fact_retrieved = fact_hit(texts, expected)
    return out


def run_answers(
    store: Any,
    items: Sequence[Mapping[str, Any]],
    collections: Sequence[str],
    *,
    answer_options: Mapping[str, Any] | None = None,
    limit: int = 5,
    llm: Any = None,
    strategy: str = "auto",
    on_progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run the chat pipeline on every item; ``answer_options`` go to ``answer()``. With ``llm``,
    ``strategy="local"`` keeps gate and condense local (only ``answer()`` then uses the LLM)."""
    import agentrag as ar

    answer_step = ar.answer(**dict(answer_options or {}))  # an unknown option raises here, once
    outcomes = []
    for item in items:
        started = time.perf_counter()
        ctx = ar.new(
            item["question"],
            store=store,
            llm=llm,
            collections=list(collections),
            history=item.get("history") or None,
            limit=limit,
        )
        ctx = ctx | ar.gate(strategy=strategy) | ar.condense(strategy=strategy) | ar.search() | ar.rerank()
        ctx = ctx | answer_step
        outcome = outcome_of(item, ctx, (time.perf_counter() - started) * 1000.0)
        outcomes.append(outcome)
        if on_progress is not None:
            on_progress(outcome)
    return outcomes


# ---- metrics -------------------------------------------------------------------------------------
def _rate(hits: int, total: int) -> float | None:
    return None if total == 0 else round(hits / total, 4)


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def score(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The metrics of a run (None where a metric has no question to count).

    * ``fact_hit`` / ``source_hit``: answerable questions whose answer states an expected fact /
      cites an expected source; ``fact_hit_by_type`` per fact type; ``fact_retrieved``: the fact
      is in the answer's context (what an answer could reach);
    * ``abstention_precision`` / ``abstention_recall``: over the unanswerable questions (in-domain
      and out-of-domain), an abstention being a positive;
    * ``false_grounded_in_domain`` / ``_out_of_domain``: unanswerable questions answered with
      ``grounded=True``; ``answerable_abstained``: answerable questions that abstained;
    * ``small_talk_grounded``: small talk answered as grounded or in mode ``full``;
    * ``followup_fact_hit``, ``followup_source_hit``;
    * ``answer_ms_p50`` / ``_p95``: the answer step alone.
    """
    by_kind: dict[str, list[Outcome]] = {k: [o for o in outcomes if o.kind == k] for k in KINDS}
    answerable, followups = by_kind["answerable"], by_kind["followup"]
    unanswerable = by_kind["unanswerable"] + by_kind["out_of_domain"]
    declined = [o for o in outcomes if o.abstained and o.kind != "small_talk"]
    true_abstentions = sum(1 for o in declined if o.kind in UNANSWERABLE_KINDS)
    by_type = {
        t: _rate(
            sum(1 for o in answerable if o.fact == t and o.fact_hit),
            sum(1 for o in answerable if o.fact == t),
        )
        for t in FACT_TYPES
    }
    ms = [o.answer_ms for o in outcomes if o.error is None]
    return {
        "questions": len(outcomes),
        "counts": {k: len(v) for k, v in by_kind.items()},
        "fact_hit": _rate(sum(1 for o in answerable if o.fact_hit), len(answerable)),
        "source_hit": _rate(sum(1 for o in answerable if o.source_hit), len(answerable)),
        "fact_retrieved": _rate(sum(1 for o in answerable if o.fact_retrieved), len(answerable)),
        "fact_hit_by_type": by_type,
        "answerable_abstained": _rate(sum(1 for o in answerable if o.abstained), len(answerable)),
        "abstention_precision": _rate(true_abstentions, len(declined)),
        "abstention_recall": _rate(sum(1 for o in unanswerable if o.abstained), len(unanswerable)),
        "false_grounded_in_domain": _rate(
            sum(1 for o in by_kind["unanswerable"] if o.grounded is True and not o.abstained),
            len(by_kind["unanswerable"]),
        ),
        "false_grounded_out_of_domain": _rate(
            sum(1 for o in by_kind["out_of_domain"] if o.grounded is True and not o.abstained),
            len(by_kind["out_of_domain"]),
        ),
        "small_talk_grounded": _rate(
            sum(1 for o in by_kind["small_talk"] if o.grounded is True or o.mode == "full"),
            len(by_kind["small_talk"]),
        ),
        "followup_fact_hit": _rate(sum(1 for o in followups if o.fact_hit), len(followups)),
        "followup_source_hit": _rate(sum(1 for o in followups if o.source_hit), len(followups)),
        "errors": sum(1 for o in outcomes if o.error is not None),
        "answer_ms_p50": _percentile(ms, 0.5),
        "answer_ms_p95": _percentile(ms, 0.95),
    }


def calibrate(outcomes: Sequence[Outcome], *, step: float = 0.01) -> dict[str, Any]:
    """The abstention threshold on ``answer_confidence`` that fits these labelled questions best.

    ``outcomes`` must come from a run that never abstained (``answer(abstain=False)``), so every
    answerable question's answer and confidence are known. For each threshold ``t`` an answer is
    kept when its confidence is at least ``t``; ``t`` maximises the balanced accuracy: the mean of
    the answerable questions answered with their fact and the unanswerable questions not answered
    grounded. Ties go to the middle of the best range. Returns the threshold and the metrics there.
    """
    labelled = [o for o in outcomes if o.kind in (*ANSWERABLE_KINDS, *UNANSWERABLE_KINDS)]
    if any(o.confidence is None for o in labelled):
        raise InvalidInputError("calibration needs answer_confidence on every answer: this answer() has none")
    good = [o for o in labelled if o.kind in ANSWERABLE_KINDS]
    bad = [o for o in labelled if o.kind in UNANSWERABLE_KINDS]
    if not good or not bad:
        raise InvalidInputError("calibration needs answerable and unanswerable questions")

    def at(t: float) -> tuple[float, float, float]:
        kept = sum(1 for o in good if o.fact_hit and (o.confidence or 0.0) >= t) / len(good)
        refused = sum(1 for o in bad if not (o.grounded is True and (o.confidence or 0.0) >= t)) / len(bad)
        return (kept + refused) / 2, kept, refused

    grid = [round(i * step, 4) for i in range(round(1 / step) + 1)]
    values = [at(t)[0] for t in grid]
    best = max(values)
    best_ts = [t for t, v in zip(grid, values, strict=True) if v >= best - 1e-12]
    threshold = best_ts[len(best_ts) // 2]
    balanced, kept, refused = at(threshold)
    return {
        "abstain_below": threshold,
        "balanced_accuracy": round(balanced, 4),
        "answerable_fact_hit": round(kept, 4),
        "unanswerable_refused": round(refused, 4),
        "best_range": [best_ts[0], best_ts[-1]],
        "questions": {"answerable": len(good), "unanswerable": len(bad)},
    }
