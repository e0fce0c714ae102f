"""A unit that states the contrary of what the question asks (issue #36): English evidence only.

SQuAD 2.0's unanswerable questions are a catalogue of how a question can sit next to a sentence
that does not answer it while sharing almost every word with it. Two of its patterns are checked
here, because a word-overlap score and a sentence embedding both miss them:

* **an antonym in the question's place**: the question asks for the *smallest* inland port, the
  *Lower* Rhine, where the river flows *east*, and the unit says *largest*, *Upper*, *west*, without
  the question's own word (:data:`OPPOSITES`: a hand list of general English opposites; no
  preposition or comparative such as "before" / "after" or "more" / "less", which answers
  rephrase freely);
* **a changed number**: the question names a number (a year, a count, an ordinal such as "10th",
  a regnal numeral such as "Henry II") that neither the unit nor its context says, while the unit
  says another number of the same kind in its place ("Henry III", "in April 1191" for "in the
  11th century"); a count does not contradict a year ("the Panthers' interceptions in 2015" over
  "leading the NFL in interceptions with 24": the season is the passage's, not the sentence's).

:func:`contrast` returns how many of the two a unit shows (0, 1 or 2);
:func:`agentrag.evidence.score_units` subtracts ``EvidenceWeights.contrast`` per pattern. Other
languages: 0 (the lists are English).
"""

from __future__ import annotations

import functools
import re

__all__ = ["OPPOSITES", "contrast", "kinds", "numbers", "opposites"]

#: pairs of opposites, read both ways (stemmed as the answer step stems terms)
OPPOSITES = (
    "largest smallest|biggest smallest|large small|big small|first last|upper lower|higher lower|"
    "highest lowest|high low|north south|east west|northern southern|eastern western|northward southward|"
    "eastward westward|northeast southwest|northwest southeast|begin end|start end|beginning end|"
    "open close|opening closing|ancient modern|old new|oldest newest|earliest latest|early late|"
    "increase decrease|rise fall|longest shortest|long short|enter leave|import export|win lose|won lost|"
    "victory defeat|major minor|maximum minimum|positive negative|inner outer|internal external|"
    "top bottom|inside outside|private public|allow forbid|allowed prohibited|accept reject|"
    "include exclude|add remove|added removed|buy sell|bought sold|strong weak|success failure|hot cold|"
    "warm cold|wet dry|fast slow|cheap expensive|rich poor|peace war|friend enemy|ally enemy|"
    "merge diverge|merged diverged|join separate|born died|birth death|heavy light|wide narrow|"
    "deep shallow|thick thin|upstream downstream|enable disable|upload download|encrypt decrypt|"
    "install uninstall|connect disconnect|lock unlock|online offline|paid unpaid|full part|"
    "upward downward|min max|gain loss|attack defend|input output|inbound outbound|male female|"
    "men women|younger older|youngest oldest|minimum maximum|most least"
)

_SPELLED = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split(),  # noqa: SIM905
    )
}
_ORDINAL = {
    w: f"{i + 1}{'st' if i == 0 else 'nd' if i == 1 else 'rd' if i == 2 else 'th'}"
    for i, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split()  # noqa: SIM905
    )
}
# a yes/no question: the contrary is its answer ("Is the branch open on Saturdays?" over "Saturday: closed")
_POLAR = re.compile(
    r"^\W*(is|are|was|were|do|does|did|can|could|will|would|should|shall|has|have|had|may|must)\b", re.I
)
_NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th|s)?\b|(?<=[A-Za-z] )[IVX]{2,5}\b")
_WORD = re.compile(r"[a-z]+")


def opposites() -> dict[str, frozenset[str]]:
    """:data:`OPPOSITES` as a table: each stemmed term with the stems of its opposites."""
    return _opposites()


@functools.lru_cache(maxsize=1)
def _opposites() -> dict[str, frozenset[str]]:
    from agentrag.retrieval.tokenize import tokenize

    out: dict[str, set[str]] = {}
    for pair in OPPOSITES.split("|"):
        a, b = pair.split()
        for x, y in ((a, b), (b, a)):
            for tx in tokenize(x):
                out.setdefault(tx, set()).update(tokenize(y))
    return {k: frozenset(v) for k, v in out.items()}


# a negating prefix ("significant" / "insignificant", "legal" / "illegal"): the word without it, or with it
_NEGATING = ("un", "in", "im", "il", "ir", "non", "dis")


def _negations(term: str) -> frozenset[str]:
    """The stems that negate ``term`` or that it negates: a prefix of :data:`_NEGATING` added, or
    taken off when at least five letters remain ("insignific" / "signific"; not "cover" from
    "discover", which is read by the unit holding "cover" *without* "discover" only)."""
    out = {p + term for p in _NEGATING}
    out.update(term[len(p) :] for p in _NEGATING if term.startswith(p) and len(term) - len(p) >= 5)
    return frozenset(out)


def numbers(text: str, *, spelled: bool = True) -> set[str]:
    """The numbers ``text`` states: digits (commas dropped, "1990s" as "1990"), ordinals as
    written ("10th"), regnal numerals after a word ("Henry II"), and (``spelled``) "one" to
    "twelve" as digits and "first" to "twelfth" as ordinals ("tenth" as "10th")."""
    return {n for kind in kinds(text, spelled=spelled).values() for n in kind}


_YEAR = re.compile(r"^(?:1\d{3}|20\d\d)$")
_CENTURY = re.compile(r"^\W*(?:century|centuries|millenni)", re.IGNORECASE)


def kinds(text: str, *, spelled: bool = True) -> dict[str, set[str]]:
    """:func:`numbers` by kind: ``time`` (a year "1191", a decade "1190s", a century "11th
    century"), ``ordinal`` ("10th", "tenth"), ``regnal`` ("Henry II") and ``count`` (any other
    amount). A changed number is one of the same kind in its place: a question's year is not
    contradicted by a sentence's count ("in 2015" over "leading the NFL with 24")."""
    out: dict[str, set[str]] = {}
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        value = raw.replace(",", "").removesuffix("s")
        if raw[0].isalpha():
            kind = "regnal"
        elif _YEAR.match(value) and "," not in raw:
            kind = "time"
        elif value[-2:] in ("st", "nd", "rd", "th"):
            kind = "time" if _CENTURY.match(text[m.end() :]) else "ordinal"
        else:
            kind = "count"
        out.setdefault(kind, set()).add(value)
    if spelled:
        for m in _WORD.finditer(text.lower()):
            w = m.group(0)
            if w in _SPELLED:
                out.setdefault("count", set()).add(_SPELLED[w])
            elif w in _ORDINAL:
                kind = "time" if _CENTURY.match(text[m.end() :]) else "ordinal"
                out.setdefault(kind, set()).add(_ORDINAL[w])
    return out


# the question word with its degree ("how *long*", "how *old*"): what is asked for, not a term to hold
_HOW = re.compile(r"\bhow\s+\w+", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def _asked(
    question: str,
) -> tuple[tuple[tuple[str, frozenset[str]], ...], tuple[tuple[str, frozenset[str]], ...]]:
    """``(the question's terms that have opposites, with them; the numbers it names, by kind)``."""
    from agentrag.steps._common import terms

    table = _opposites()
    asked = dict.fromkeys(terms(_HOW.sub(" ", question)))
    flips = tuple((t, table.get(t, frozenset()) | _negations(t)) for t in asked)
    flips = tuple((t, o) for t, o in flips if o)
    named = kinds(question, spelled=False)
    return flips, tuple((kind, frozenset(values)) for kind, values in sorted(named.items()))


def contrast(question: str, text: str, context: str = "") -> int:
    """How many of the two patterns (module docstring) ``text`` shows against ``question``:
    an opposite of a question term in the place of the term, a question number the unit and
    its ``context`` do not state while the unit states another. 0 outside English, and for a
    yes/no question, which the contrary answers ("Is the branch open on Saturdays?" over
    "Saturday: closed")."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    if ANSWER_LANGUAGE.get() is not None or _POLAR.match(question):
        return 0
    from agentrag.evidence import has_term
    from agentrag.steps._common import terms

    flips, asked_numbers = _asked(question)
    found = 0
    if flips:
        held = set(terms(text))
        found += any(not has_term(held, t) and opposite & held for t, opposite in flips)
    if asked_numbers:
        stated, around = kinds(text), numbers(text) | numbers(context)
        # a number of the question's kind in its place: a year for a year, a count for a count
        found += any((values - around) and stated.get(kind, set()) - values for kind, values in asked_numbers)
    swapped = _stranded(question)
    if swapped is not None and swapped.search(text):
        found += 1
    return found


# "What does the Atlantic Ocean flow *into*?": a do-question whose preposition waits for the answer
_STRANDED = re.compile(
    r"\b(?:do|does|did)\s+(?:the\s+|a\s+|an\s+)?(?P<x>[\w'’-]+(?:\s+[A-Z][\w'’-]*)*)\s+[a-z][\w'’-]*\b"
    r"[^?]*?\s(?P<p>into|to|onto|on|upon|from|at|in|for)\s*\?\s*$"
)
_SAME_PLACE = {
    "into": "into|to|onto",
    "to": "into|to|onto",
    "onto": "into|to|onto",
    "on": "on|upon",
    "upon": "on|upon",
}


@functools.lru_cache(maxsize=512)
def _stranded(question: str) -> re.Pattern[str] | None:
    """For a do-question ending on its preposition ("What does the Atlantic Ocean flow into?"), a
    pattern of a text that puts the question's own subject after that preposition ("... to the
    Atlantic Ocean"): the subject is what the relation reaches, not where it starts; roles swapped."""
    asked = _STRANDED.search(question)
    if asked is None:
        return None
    place = _SAME_PLACE.get(asked.group("p"), asked.group("p"))
    return re.compile(rf"\b(?:{place})\s+(?:the\s+)?{re.escape(asked.group('x'))}\b", re.IGNORECASE)
