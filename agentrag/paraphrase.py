"""A question's word that the evidence says in other words (issue #36): English evidence only.

Wikipedia prose answers questions written by other people in other words: "Who *sang* the national
anthem?" over "... who *sung* it", "What were NTL's services *rebranded* as?" over "... *renamed*
Virgin Media", "Where did the monks *flee* to?" over "the monks *fled* to ...". The abstention's term
signals (:mod:`agentrag.focus`, :func:`agentrag.abstain.found_share`) read such a word as a
qualifier the documents lack, as they read a near-miss's "*sick* days" over "vacation days".

:func:`restated` tells them apart with the embedder the answer already uses: a question word the best
unit does not hold is *restated* there when one of the unit's own words is its near neighbour in the
embedder's space (cosine >= :data:`THRESHOLD`: another form of the word or a close synonym; "sick"
and "vacation", "interns" and "employees", "grandparents" and "parents" stay well apart). Never
for a name or a number (a changed entity or number is SQuAD's catalogue of unanswerable questions;
"Monday" and "Tuesday" are neighbours), nor for an opposite (:data:`agentrag.contrast.OPPOSITES`)
or a negated form ("legal" / "illegal"). Word vectors go through the answer step's vector cache.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.evidence import Unit
    from agentrag.unit_vectors import VectorCache

__all__ = ["THRESHOLD", "restated"]

#: the cosine (the embedder's, between two single words) at which a unit's word restates the question's
THRESHOLD = 0.65

_WORD = re.compile(r"(?<![\w'’-])[a-z][a-z'’-]*[a-z](?![\w'’-])")
_QUESTION_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[a-z]")
_NEGATION = ("un", "in", "im", "il", "ir", "non", "dis", "non-")


def _negated(a: str, b: str) -> bool:
    """Whether one word is the other with a negating prefix ("legal" / "illegal")."""
    return any(a == p + b or b == p + a for p in _NEGATION)


def _candidates(question: str, missing: Collection[str]) -> dict[str, list[str]]:
    """The question's words (as written, lower case) for each ``missing`` stem: never a name (a
    capitalised word after the first) nor a number."""
    from agentrag.steps._common import terms

    out: dict[str, list[str]] = {}
    for i, match in enumerate(_QUESTION_WORD.finditer(question)):
        word = match.group(0)
        if i > 0 and word[0].isupper():
            continue
        for stem in terms(word):
            if stem in missing and word.lower() not in out.setdefault(stem, []):
                out[stem].append(word.lower())
    return {stem: words for stem, words in out.items() if words}


def restated(
    question: str,
    unit: Unit,
    missing: Collection[str],
    embedder: Any,
    cache: VectorCache,
    *,
    threshold: float = THRESHOLD,
) -> dict[str, str]:
    """The stems of ``missing`` (terms of ``question`` that ``unit`` does not hold) that the unit
    restates in a word of its own, each with that word (see the module docstring). Empty outside
    English or without an embedder; the embedder's errors are the caller's to record."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    if not missing or embedder is None or ANSWER_LANGUAGE.get() is not None:
        return {}
    asked = _candidates(question, missing)
    if not asked:
        return {}
    from agentrag.contrast import opposites
    from agentrag.steps._common import terms

    # a word of the unit that is the question's own stands for that word, not for another one
    # ("dinners" over "The *meal* allowance ..." for "the *meal* allowance for team dinners")
    said = set(terms(question))
    own = [
        w
        for w in dict.fromkeys(_WORD.findall(f"{unit.text} {unit.lead}"))
        if terms(w) and not set(terms(w)) & said
    ]
    if not own:
        return {}
    words = [w for ws in asked.values() for w in ws]
    vectors = cache.vectors(embedder, words + own)
    import numpy as np

    found: dict[str, str] = {}
    at = {w: i for i, w in enumerate(words)}
    theirs = np.asarray(vectors[len(words) :])
    table = opposites()
    for stem, forms in asked.items():
        for word in forms:
            sims = theirs @ vectors[at[word]]
            for j in np.argsort(-sims):
                if float(sims[j]) < threshold:
                    break
                other = own[j]
                other_stems = set(terms(other))
                if _negated(word, other) or other_stems & table.get(stem, frozenset()):
                    continue
                found[stem] = other
                break
            if stem in found:
                break
    return found
