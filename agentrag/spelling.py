"""A question's misspelled words read as the documents spell them (session 17, issue #36).

People type questions fast: "parliment", "Ghandi", "Sentanta" for the "parliament", "Gandhi" and
"Setanta" of the text. Such a word is in no retrieved unit, so every term signal reads it as a
focus the documents lack (a near-miss's qualifier: "sick days for *interns*") and the answer
abstains. :func:`respelled` replaces a question word that no unit holds by the one word of the
units one edit away from it (a letter inserted, dropped, changed, or two neighbours swapped),
when exactly one such word exists. Short words (under five letters) are left alone: one edit
turns most of them into another word. English answers only: the rule was measured on English
corpora (benchmarks/RESULTS.md, session 17), the other languages' answers are as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["one_edit", "respelled"]

_WORD = re.compile(r"[^\W\d_]{5,}")
MIN_LENGTH = 5


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one edit: a letter inserted or dropped, a letter
    changed, or two neighbouring letters swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):  # one letter inserted into a
        return a[i:] == b[i + 1 :]
    if a[i + 1 :] == b[i + 1 :]:  # one letter changed
        return True
    return i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]


def respelled(question: str, texts: Iterable[str]) -> str:
    """``question`` with each word of five letters or more that no text holds (compared by its
    stemmed term) replaced by the one word of ``texts`` one edit away from it, matching case; the
    question as given when no word changes."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.steps._common import terms

    if ANSWER_LANGUAGE.get() is not None:
        return question  # measured on English only (other languages: issue #40's own benchmarks)
    texts = list(texts)
    whole = "\n".join(texts).lower()
    if all(re.search(rf"(?<!\w){re.escape(w.lower())}(?!\w)", whole) for w in _WORD.findall(question)):
        return question  # every long word is there as written: nothing to read
    vocabulary: set[str] = set()
    for text in texts:
        vocabulary.update(w.lower() for w in _WORD.findall(text))
    by_length: dict[int, list[str]] = {}
    for w in vocabulary:
        by_length.setdefault(len(w), []).append(w)

    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        lower = word.lower()
        if lower in vocabulary:
            return word
        near = [w for n in (-1, 0, 1) for w in by_length.get(len(lower) + n, ()) if one_edit(lower, w)]
        if len(near) != 1:
            return word
        stems = set(terms(lower))  # another form of a word the texts hold ("registered", "register")
        if any(stems & set(terms(w)) for w in vocabulary if w[:4] == lower[:4]):
            return word
        found = near[0]
        if word.isupper():
            return found.upper()
        return found[:1].upper() + found[1:] if word[:1].isupper() else found

    return _WORD.sub(fix, question)
