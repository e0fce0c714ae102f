"""The quoted unit as a window: the best sentence and, when it lacks what the question asks for,
the neighbour that holds it (issue #36).

Encyclopaedic prose often states a fact across two sentences: the best-matching one repeats the
question's words ("He is also the oldest quarterback ever to play in a Super Bowl at age 39.") and
its neighbour holds the answer ("Peyton Manning became the first quarterback ..."). :func:`fills`
says whether a text holds something *new* of the kind the question asks for: a number, a date or
a duration the question does not already give, or, for "who" and "what is it called" questions, a
name the question does not already use (capitalised words in a row are one name: "Peyton Manning"
is the question's "Manning"; a year in prose, "in October 1954", is no amount). :func:`widen` adds,
for each question whose best unit does not fill its slot, the adjacent unit of the same chunk that
does (in English, from the best unit itself, not from an antecedent quoted beside it).

The signals are structural (answer type, capitalisation, digits), not words of any corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrag.answer_types import answer_type, type_fit

if TYPE_CHECKING:
    from agentrag.evidence import Scored, Unit

__all__ = ["fills", "prefer_typed", "slot", "widen"]

_WHO = re.compile(r"^\W*(?:who|whom|whose)\b|\b(?:called|named|name of|the name|titled)\b", re.IGNORECASE)
# "who" asking after an opening phrase ("Prior to Manning, who was ...?") or last ("... the example of who?")
_WHO_LATER = re.compile(
    r"^(?:(?!\b(?:what|which|who|whom|whose|when|where|why|how)\b)[^,?])+,\s*(?:who|whom|whose)\b"
    r"|\b(?:who|whom|whose)\s*\?\s*$",
    re.IGNORECASE,
)
# a name opening a sentence: a capitalised word in the possessive ("Gandhi's acts ...")
_NAME_OPENING = re.compile(r"^\W*([A-Z][a-z][\w-]*)['’]s\b")
_NAME_WORD = re.compile(r"(?<![.?!:;]\s)(?<!^)(?<![\"'“(])\b[A-Z][\w'’-]*[a-z][\w'’-]*|\b[A-Z]{2,}\b")
# a year as prose dates a fact ("in 1954", "since the 1990s", "October 1954"): no amount or count
_YEAR = re.compile(
    r"\b(?:in|since|until|by|from|before|after|during|around|January|February|March|April|May|June|July|"
    r"August|September|October|November|December)\s+(?:the\s+)?(?:early\s+|late\s+|mid-)?"
    r"(?:1[0-9]{3}|20[0-9]{2})s?\b(?![,.]?\d)"
)
_YEARLY = re.compile(r"\byears?\b|\bcentur", re.IGNORECASE)
_DIGITS = re.compile(r"\d(?:[\d,.]*\d)?")


def _english() -> bool:
    from agentrag.answer_languages import ANSWER_LANGUAGE

    return ANSWER_LANGUAGE.get() is None


def slot(question: str) -> str | None:
    """The kind of new fact ``question`` asks for: ``number``, ``duration``, ``time``, ``name``
    or None (a kind no structural signal reveals)."""
    kind = answer_type(question)
    if kind in ("number", "duration", "time"):
        return kind
    if _WHO.search(question) or (_english() and _WHO_LATER.search(question)):
        return "name"
    return None


def _new_names(question: str, text: str) -> bool:
    from agentrag.steps._common import terms

    asked = set(terms(question))

    def new(words: list[str]) -> bool:
        stems = [s for w in words for s in terms(w)]
        return bool(stems) and not any(s in asked or s + "s" in asked for s in stems)

    matches = list(_NAME_WORD.finditer(text))
    if not _english():
        return any(new([m.group(0)]) for m in matches)
    opening = _NAME_OPENING.match(text)
    if opening and new([opening.group(1)]):
        return True
    # capitalised words in a row are one name: "Peyton Manning" is the question's "Manning"
    names: list[list[str]] = []
    end = -1
    for m in matches:
        if names and not text[end : m.start()].strip():
            names[-1].append(m.group(0))
        else:
            names.append([m.group(0)])
        end = m.end()
    return any(new(name) for name in names)


def fills(question: str, text: str) -> bool | None:
    """Whether ``text`` holds something new of the kind ``question`` asks for (see the module
    docstring); None when the question's kind has no structural signal."""
    kind = slot(question)
    if kind is None:
        return None
    if kind == "name":
        return _new_names(question, text)
    if kind == "number" and _english() and not _YEARLY.search(question):
        text = _YEAR.sub(" ", text)
    if type_fit(kind, text, question=question) <= 0:
        return False
    given = set(_DIGITS.findall(question))
    numbers = _DIGITS.findall(text)
    return not numbers or any(n not in given for n in numbers)


def widen(
    selected: Sequence[Scored],
    units: Sequence[Unit],
    ranked: Sequence[Sequence[Scored]],
    questions: Sequence[str],
) -> tuple[list[Scored], set[int]]:
    """``selected`` with, for each question whose best selected unit does not fill its slot, the
    adjacent unit of the same chunk that does (the better scored of the two neighbours); in the
    order given, each neighbour beside its unit. Also the indices of the questions whose slot the
    window fills."""
    from agentrag.evidence import Scored as ScoredUnit

    out = list(selected)
    chosen = {id(s.unit) for s in out}
    index = {id(u): i for i, u in enumerate(units)}
    filled: set[int] = set()
    for qi, scored in enumerate(ranked):
        if qi >= len(questions) or not scored:
            continue
        question = questions[qi]
        mine = [s for s in out if s.question == qi]
        if not mine:
            continue
        best = max(mine, key=lambda s: s.score)
        if _english():  # the question's best unit, not an antecedent select() quoted at its score
            best = next((s for s in mine if s.unit is scored[0].unit), best)
        state = fills(question, best.unit.text)
        if state is not False:
            if state:
                filled.add(qi)
            continue
        i = index.get(id(best.unit))
        if i is None:
            continue
        score = {id(s.unit): s.score for s in scored}
        near = [
            units[j]
            for j in (i - 1, i + 1)
            if 0 <= j < len(units) and units[j].hit is best.unit.hit and fills(question, units[j].text)
        ]
        if any(id(u) in chosen for u in near):  # the window is quoted already
            filled.add(qi)
            continue
        if not near:
            continue
        neighbour = max(near, key=lambda u: score.get(id(u), 0.0))
        chosen.add(id(neighbour))
        filled.add(qi)
        extra = ScoredUnit(neighbour, best.score, best.semantic, best.lexical, best.type_fit, qi)
        at = out.index(best)
        out.insert(at + 1 if neighbour.start > best.unit.start else at, extra)
    return out, filled


def prefer_typed(ranked: Sequence[Sequence[Scored]], margin: float = 0.06) -> list[list[Scored]]:
    """Per question, the units best first, except that a best unit lacking the kind of answer asked
    for (``type_fit < 0``: no number for "what are the limits") yields to the best unit of that
    kind within ``margin`` of it."""
    from dataclasses import replace

    out = []
    for scored in ranked:
        order = list(scored)
        if order and order[0].type_fit < 0:
            typed = next((s for s in order if s.type_fit > 0 and order[0].score - s.score <= margin), None)
            if typed is not None:  # the untyped units above it fall just out of its margin
                below = typed.score - margin - 1e-6
                above = [s.score > typed.score and s.type_fit < 0 for s in order]
                order = [replace(s, score=below) if up else s for s, up in zip(order, above, strict=True)]
                order.sort(key=lambda s: (-s.score, s.unit.rank, s.unit.start))
        out.append(order)
    return out
