"""Abstention: a calibrated decision, from retrieval and evidence signals, that the retrieved
chunks do not answer the question.

:func:`signals` gathers, per answer:

* ``evidence``: the best evidence score (:mod:`agentrag.evidence`: semantic + rarity-weighted
  lexical + answer type + rank) of the question's best unit (with sub-questions, the mean of each
  one's best);
* ``semantic``: that unit's cosine similarity with the question (None without vectors);
* ``found``: the share of the question's content terms, weighted by rarity, that occur anywhere in
  the retrieved chunks (a question about "PayPal" over chunks that never say it scores low);
* ``mismatch``: whether the best unit lacks the kind of answer the question asks for;
* ``vector``: the best raw cosine similarity of the vector leg (relative-score fusion rescales
  the fused score so that the best hit always looks strong; the raw leg score does not);
* ``covered``: the question's *focus* held by the best unit: the share of its content terms, each
  weighted by its rarity among the candidate units (IDF), that the unit, its heading or the
  sentence before it contains ("How many days of *sick* leave do *interns* get?" over "Every
  full-time employee receives 25 days of paid annual leave" covers little of what is rare in it);
* ``unknown``: the IDF-weighted share of the question's terms that no candidate unit contains
  (a qualifier the retrieved documents never use: "interns", "staging", "grandparents").
* ``contrary``: whether the unit that would be best but for :mod:`agentrag.contrast` states the
  contrary of the question (its opposite term, another number): the documents say otherwise.

:func:`confidence` maps them to 0-1 with a logistic curve centred on ``Calibration.center``:
``0.5`` is the point where answering and abstaining are equally likely to be right on the
calibration set. ``answer()`` abstains below ``Calibration.abstain_below`` (the answer then says
the knowledge base does not cover the question and names the closest documents, ``grounded`` is
False and ``mode`` is ``abstained``) and marks the answer ``low-confidence`` below
``Calibration.low_below``. :func:`calibrate` refits the centre and scale on labelled questions of
your own (``agentrag eval answers --calibrate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace

from agentrag.errors import InvalidInputError
from agentrag.evidence import Scored, Unit, has_term
from agentrag.focus import focus

__all__ = [
    "DEFAULT_CALIBRATION",
    "Calibration",
    "Signals",
    "abstention_message",
    "calibrate",
    "confidence",
    "signals",
]


@dataclass(frozen=True, slots=True)
class Calibration:
    """Thresholds of the abstention decision, chosen on six corpora in different styles
    (benchmarks/answers_loco.py: product docs, a library's policies, SQuAD 2.0 and XQuAD Wikipedia
    paragraphs, an HR handbook, a runbook; each corpus weighing the same) with the default local
    embedder, and reported leave-one-corpus-out; ``abstain_below`` is 0.5, where the curve says
    an answer is as likely right as wrong. :func:`calibrate` fits ``center`` and ``scale`` to
    labelled questions of yours.

    * ``center``: the combined evidence score at which confidence is 0.5;
    * ``scale``: how fast confidence rises around it (larger: steeper);
    * ``missing_penalty``: what a question's terms absent from every chunk cost the combined score;
    * ``type_penalty``: what it costs when the best unit lacks the kind of answer asked for (a number
      for "how many", a duration for "how long");
    * ``cover_weight``: what the best unit's coverage of the question's focus adds (``covered``);
    * ``unknown_penalty``: what the question's terms unknown to every candidate unit cost;
    * ``contrary_penalty``: what it costs when the unit that would be best states the contrary of
      the question (``contrary``, :mod:`agentrag.contrast`);
    * ``abstain_below``: abstain when confidence is below this;
    * ``low_below``: answer, but as ``low-confidence``, below this;
    * ``select``: the evidence score a unit must reach to be quoted.
    """

    center: float = 0.59
    scale: float = 12.0
    missing_penalty: float = 0.25
    type_penalty: float = 0.08
    cover_weight: float = 0.2
    unknown_penalty: float = 0.1
    contrary_penalty: float = 0.1
    abstain_below: float = 0.5
    low_below: float = 0.64  # the low-confidence band as wide in the combined score as before (0.047)
    select: float = 0.40

    def __post_init__(self) -> None:
        for name in (
            "center",
            "scale",
            "missing_penalty",
            "type_penalty",
            "cover_weight",
            "unknown_penalty",
            "contrary_penalty",
            "abstain_below",
            "low_below",
            "select",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InvalidInputError(f"Calibration.{name} must be a finite number, got {value!r}")
        if self.scale <= 0:
            raise InvalidInputError(f"Calibration.scale must be > 0, got {self.scale!r}")
        if not 0.0 <= self.abstain_below <= self.low_below <= 1.0:
            raise InvalidInputError(
                "Calibration: need 0 <= abstain_below <= low_below <= 1, got "
                f"{self.abstain_below!r} and {self.low_below!r}"
            )


DEFAULT_CALIBRATION = Calibration()


@dataclass(frozen=True, slots=True)
class Signals:
    """What the abstention decision sees (see the module docstring)."""

    evidence: float
    semantic: float | None
    found: float
    vector: float | None
    mismatch: float = 0.0  # the share of questions whose best unit lacks the kind of answer asked for
    covered: float = 0.0  # the question's focus held by the best unit and its context (IDF-weighted)
    unknown: float = 0.0  # the question's terms no candidate unit contains (IDF-weighted share)
    contrary: float = 0.0  # the share of questions whose best unit but for the contrary stated it

    def combined(self, calibration: Calibration) -> float:
        return (
            self.evidence
            + calibration.cover_weight * self.covered
            - calibration.missing_penalty * (1.0 - self.found)
            - calibration.type_penalty * self.mismatch
            - calibration.unknown_penalty * self.unknown
            - calibration.contrary_penalty * self.contrary
        )


def found_share(question: str, texts: Sequence[str], restated: Set[str] = frozenset()) -> float:
    """The share of ``question``'s content terms (rarer terms weigh more) found in ``texts``
    (``restated``: terms the best unit says in other words, :mod:`agentrag.paraphrase`, found)."""
    from agentrag.focus import answer_terms, held_anyway
    from agentrag.steps._common import terms

    asked = answer_terms(question)
    if not asked:
        return 1.0
    restated = restated | held_anyway(question)  # the kind of the answer, in another language
    present: set[str] = set()
    for text in texts:
        present.update(terms(text))
    # the rarer a term among the chunks, the more its absence says: weigh by 1 + length (a proxy
    # for specificity that needs no corpus statistics); found terms count fully
    weights = {t: 1.0 + min(len(t), 10) / 10 for t in asked}
    from agentrag.answer_languages import loosely_held
    from agentrag.verbs import said_otherwise

    held = {t for t in weights if has_term(present, t) or loosely_held(present, t) or t in restated}
    held -= _not_surface_held(question, texts, held - restated)
    # a verb no text says is the relation said in other words (agentrag.verbs): neither found nor not
    weights = {t: w for t, w in weights.items() if t in held or t not in said_otherwise(question)}
    if not weights:
        return 1.0
    return sum(weights[t] for t in held) / sum(weights.values())


def _not_surface_held(question: str, texts: Sequence[str], held: Set[str]) -> set[str]:
    """The terms of ``held`` the stemmer cut short from a word of ``question`` that no word of
    ``texts`` begins as that word does (:func:`agentrag.answer_languages.cut_short`): "ye" of
    "yeni" (new) held by a text that says only "yendi" (defeated). Empty in English."""
    from agentrag.answer_languages import asked_cut_short, says_as_asked

    cut = asked_cut_short(question, held)
    return {t for t, prefixes in cut.items() if not any(says_as_asked(text, prefixes) for text in texts)}


def signals(
    questions: Sequence[str],
    ranked: Sequence[Sequence[Scored]],
    texts: Sequence[str],
    vector: float | None,
    *,
    filled: Set[int] = frozenset(),
    restated: Mapping[int, Set[str]] | None = None,
) -> Signals:
    """The signals of one answer: ``ranked`` from :func:`agentrag.evidence.score_units`, ``texts``
    the retrieved chunks' texts, ``vector`` the best raw vector-leg similarity (None if none),
    ``filled`` the questions whose quoted window holds the kind of answer asked for
    (:func:`agentrag.answer_window.widen`: the best unit's neighbour may hold it), ``restated`` per
    question the terms its best unit says in other words (:func:`agentrag.paraphrase.restated`)."""
    bests = [r[0] for r in ranked if r]
    if not bests:
        return Signals(0.0, None, 0.0, vector)
    evidence = sum(b.score for b in bests) / len(bests)
    semantic = sum(b.semantic for b in bests) / len(bests)
    again = restated or {}
    found = sum(found_share(q, texts, again.get(i, frozenset())) for i, q in enumerate(questions))
    found /= max(1, len(questions))
    mismatch = sum(1.0 for qi, b in enumerate(bests) if b.type_fit < 0 and qi not in filled) / len(bests)
    units = [s.unit for s in ranked[0]] if ranked else []
    foci = [
        focus(questions[b.question], b.unit, units, again.get(b.question, frozenset()))
        for b in bests
        if b.question < len(questions)
    ]
    covered, unknown = (sum(f[i] for f in foci) / max(1, len(foci)) for i in range(2))
    contrary = sum(_contrary(r) for r in ranked if r) / len(bests)
    return Signals(evidence, semantic, found, vector, mismatch, covered, unknown, contrary)


def _contrary(ranked: Sequence[Scored]) -> bool:
    """Whether the unit that would have been best but for stating the contrary of the question
    (:mod:`agentrag.contrast`) states it: the documents say the opposite of what is asked."""
    best = ranked[0].score
    return any(s.contrary > 0 and s.score + s.contrary >= best for s in ranked)


def confidence(sig: Signals, calibration: Calibration | None = None) -> float:
    """0-1: how likely the selected evidence answers the question."""
    calibration = calibration or DEFAULT_CALIBRATION
    z = calibration.scale * (sig.combined(calibration) - calibration.center)
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def calibrate(
    labelled: Sequence[tuple[Signals, bool]], calibration: Calibration | None = None, *, steps: int = 400
) -> Calibration:
    """Refit ``center`` and ``scale`` by logistic regression on ``(signals, answerable)`` pairs
    (plain gradient descent; deterministic). Needs both kinds of question."""
    calibration = calibration or DEFAULT_CALIBRATION
    if not any(y for _, y in labelled) or all(y for _, y in labelled):
        raise InvalidInputError("calibrate() needs both answerable and unanswerable questions")
    xs = [s.combined(calibration) for s, _ in labelled]
    ys = [1.0 if y else 0.0 for _, y in labelled]
    a, b = calibration.scale, -calibration.scale * calibration.center
    rate = 0.5
    for _ in range(steps):
        ga = gb = 0.0
        for x, y in zip(xs, ys, strict=True):
            p = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, a * x + b))))
            ga += (p - y) * x
            gb += p - y
        a -= rate * ga / len(xs) * 10
        b -= rate * gb / len(xs)
    a = max(a, 1e-3)
    return replace(calibration, scale=a, center=-b / a)


def abstention_message(
    closest: Sequence[Unit | str], *, reason: str | None = None, language: str | None = None
) -> str:
    """What an abstaining answer says: the knowledge base does not cover it (``reason``: why; by
    default no retrieved passage answers it), and the closest documents. ``language``: the answer's
    (:mod:`agentrag.answer_languages`), in which the default message is said when it has a template."""
    names: list[str] = []
    for item in closest:
        name = item if isinstance(item, str) else (item.hit.source or item.hit.document_id)
        name = name.rsplit("/", 1)[-1]
        if name not in names:
            names.append(name)
    if reason is None and language is not None:
        from agentrag.answer_languages import abstention_text

        translated = abstention_text(language, names)
        if translated is not None:
            return translated
    why = reason or "no passage of the retrieved documents answers it"
    text = f"The knowledge base does not seem to cover this question: {why}."
    if names:
        text += " The closest documents were " + ", ".join(names[:3]) + "."
    return text
