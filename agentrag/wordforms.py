"""A question's word that the evidence writes in another form (issue #36): English evidence only.

The stemmer joins a word's inflections ("conquered" / "conquer"), not the other forms a writer may
give the same word, so the abstention's term signals (:mod:`agentrag.focus`,
:func:`agentrag.abstain.found_share`) read such a word as a qualifier the documents lack.
:func:`written_otherwise` finds, for the question's terms its best unit does not hold, a word of the
unit that is the same word in another form, each form a rule of the language, not a list of pairs:

* ``"spelling"``: British and American spellings ("utilised" / "utilized", "favour" / "favor",
  "centre" / "center", "travelled" / "traveled");
* ``"decade"``: a decade and a year in it ("the 80s" / "1981", "the 1990s" / "1994");
* ``"initials"``: an acronym and the capitalised words it abbreviates ("WWII" / "World War II",
  "EU" / "European Union");
* ``"number"``: a number word and its digits ("four" / "4", "fourth" / "4th");
* ``"name"``: a name the question misspells and the unit writes one edit away ("Sentanta" / "Setanta",
  "Raouliii" / "Raoulii", "Bedigo" / "Bendigo"): both of six letters or more, the same first letter,
  the only such name of the unit. A shorter name is too often another one ("Iran" / "Iraq"), and a
  word that is not a name stays as written (a misspelt common word is as often an unanswerable
  question's as an answerable one's: benchmarks/HISTORY.md, session 17's spelling rule).

A term so held counts as held by the unit, as a word it restates does (:mod:`agentrag.paraphrase`),
and the pair is recorded on the evidence (``Evidence.restated``) and the answer's span. Not a rule: a
derivational suffix ("administered" / "administration"): on the fit data it reached no refused right
answer and would hold adversarial questions' "significantly", "sedimentation", "canalization"
(benchmarks/RESULTS.md, session 22).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrag.evidence import Unit

__all__ = ["RULES", "root", "written_otherwise"]

#: the rules :func:`written_otherwise` applies (module docstring)
RULES: frozenset[str] = frozenset({"spelling", "decade", "initials", "number", "name"})

_INFLECTIONS = ("ies", "es", "s", "ed", "ing")
_MIN_ROOT = 4


def _spelled(word: str) -> str:
    """``word`` in one spelling of English (American): -our -> -or, -ise -> -ize, -yse -> -yze, -tre
    -> -ter, a doubled l before an ending single."""
    word = re.sub(r"our(?=s?$|ed$|ing$|ite|able|ful|ably)", "or", word)
    word = re.sub(r"([^aeiou])is(e|es|ed|ing|ation|ations)$", r"\1iz\2", word)
    word = re.sub(r"ys(e|es|ed|ing)$", r"yz\1", word)
    word = re.sub(r"([^aeiou])tre(s?)$", r"\1ter\2", word)
    return re.sub(r"([aeiou])ll(ed|ing|er|ers)$", r"\1l\2", word)


def _normal(stem: str) -> str:
    """A root's end as its forms share it: no final e, a doubled consonant single, y as i."""
    if stem.endswith("e"):
        stem = stem[:-1]
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
        stem = stem[:-1]
    return stem[:-1] + "i" if stem.endswith("y") else stem


def root(word: str) -> str:
    """An English ``word`` (lower-cased) under its inflection, spelled as American English writes it
    ("utilised" -> "utiliz", "favours" -> "favor"). ``""`` for a word too short to tell."""
    word = _spelled(word.lower().replace("’", "'").split("'")[0])
    for suffix in _INFLECTIONS:
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            continue  # "success", "status", "analysis": not a plural
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_ROOT:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    word = _normal(word)
    return word if len(word) >= _MIN_ROOT else ""


_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|\d+(?:st|nd|rd|th|'?s)?")
_DECADE = re.compile(r"^'?(\d{2}|\d{3}0)'?s$")
_YEAR = re.compile(r"(?<![\d.,])(\d{4})(?![\d.,]\d)")
_ACRONYM = re.compile(r"^[A-Z]{2,6}(?:[IVX]{1,4}|\d)?s?$")
_ROMAN = re.compile(r"^(?:[IVX]{1,4}|\d{1,2})$")
_NUMBERS = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty""".split()  # noqa: SIM905
_ORDINALS = """zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth
    thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth""".split()  # noqa: SIM905


def _digits(word: str) -> str | None:
    """A number word's digits ("four" -> "4", "fourth" -> "4th"), or a number's word; else None."""
    low = word.lower()
    if low in _NUMBERS:
        return str(_NUMBERS.index(low))
    if low in _ORDINALS:
        n = _ORDINALS.index(low)
        end = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{end}"
    m = re.fullmatch(r"(\d{1,2})(st|nd|rd|th)?", low)
    if m and int(m.group(1)) <= 20:
        return (_ORDINALS if m.group(2) else _NUMBERS)[int(m.group(1))]
    return None


def _decade(word: str) -> range | None:
    """The years of a decade ("1980s", "1980's", "80s", "'80s": 1980-1989; two digits: the 1900s)."""
    m = _DECADE.match(word.lower().replace("’", "'"))
    if not m:
        return None
    digits = m.group(1)
    start = 1900 + int(digits) if len(digits) == 2 else int(digits)
    return range(start, start + (100 if start % 100 == 0 else 10))  # "the 1100s": the century


def _initials(text: str) -> dict[str, str]:
    """The acronyms ``text``'s runs of capitalised words spell, each with its words: a word's
    initial, a numeral whole ("World War II": WWII), "of" / "and" / "for" / "the" / "on" / "in"
    inside a run skipped ("United States of America": USA)."""
    out: dict[str, str] = {}
    run: list[tuple[str, str]] = []  # (letters, word)
    for token in [*re.findall(r"[A-Za-z][\w'’-]*|\d+|[^\w\s]", text), "."]:
        if token[0].isupper() or (run and _ROMAN.match(token)):
            run.append((token if _ROMAN.match(token) else token[0], token))
            continue
        if run and token in ("of", "and", "for", "the", "on", "in"):
            run.append(("", token))
            continue
        for i in range(len(run)):
            for j in range(i + 2, min(len(run), i + 8) + 1):
                if run[i][0] and run[j - 1][0]:
                    out.setdefault("".join(r[0] for r in run[i:j]).upper(), " ".join(r[1] for r in run[i:j]))
        run = []
    return out


def written_otherwise(
    question: str, unit: Unit, missing: Collection[str], rules: Collection[str] = RULES
) -> dict[str, str]:
    """The stems of ``missing`` (terms of ``question`` that ``unit`` does not hold) that the unit
    writes in another form (module docstring), each with the unit's word. Empty outside English."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    if not missing or ANSWER_LANGUAGE.get() is not None:
        return {}
    from agentrag.steps._common import terms

    asked: dict[str, list[str]] = {}
    for word in _WORD.findall(question):
        for stem in terms(word):
            if stem in missing:
                asked.setdefault(stem, []).append(word)
    if not asked:
        return {}
    text = f"{unit.text} {unit.lead}"
    words = list(dict.fromkeys(_WORD.findall(text)))
    lower = [w for w in words if not w[0].isupper()]
    found: dict[str, str] = {}
    for stem, forms in asked.items():
        for word in forms:
            hit = _another_form(word, lower, words, text, rules)
            if hit:
                found[stem] = hit
                break
    return found


def _another_form(
    word: str, lower: list[str], words: list[str], text: str, rules: Collection[str]
) -> str | None:
    """The word of the unit (``lower``: its lower-case words, ``words``: all) that is ``word`` in
    another form, by the first of ``rules`` that finds one."""
    if "decade" in rules and (years := _decade(word)):
        return next((y for y in _YEAR.findall(text) if int(y) in years), None)
    if "initials" in rules and _ACRONYM.match(word):
        letters = word[:-1] if word.endswith("s") and not word.endswith("SS") else word
        return _initials(text).get(letters)
    if "number" in rules and (other := _digits(word)) is not None:
        return next((w for w in words if w.lower() == other), None)
    if word[0].isupper() and word.lower() != word:
        # a name is its own, unless the unit writes it one letter away (a misspelling)
        return _misspelt(word, words) if "name" in rules else None
    if not word.isalpha():
        return None
    mine = root(word) if "spelling" in rules else ""
    if not mine:
        return None
    return next((o for o in lower if o.isalpha() and o.lower() != word.lower() and root(o) == mine), None)


_MIN_NAME = 6


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one edit: a letter added, dropped, changed, or two neighbours
    swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:  # a letter changed
            return True
        if len(diff) != 2 or diff[1] != diff[0] + 1:
            return False
        i, j = diff  # two neighbours swapped
        return a[i] == b[j] and a[j] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1 :]


def _misspelt(word: str, words: list[str]) -> str | None:
    """The name of the unit (a capitalised word) that ``word``, a name of the question the unit does
    not write, misspells: one edit away, the same first letter, both of :data:`_MIN_NAME` letters or
    more, and the only such name of the unit ("Sentanta" / "Setanta", "Bedigo" / "Bendigo"); a
    possessive's "'s" is not part of the name ("the Nederrikn's name" / "the Nederrijn")."""
    word = _bare(word)
    if len(word) < _MIN_NAME or not word.isalpha() or word.isupper():
        return None
    low = word.lower()
    near = {
        w
        for w in map(_bare, words)
        if w[0] == word[0] and w.isalpha() and len(w) >= _MIN_NAME and _one_edit(low, w.lower())
    }
    return next(iter(near)) if len(near) == 1 else None


def _bare(word: str) -> str:
    """``word`` without a possessive's ending ("Nederrijn's" -> "Nederrijn")."""
    return re.sub(r"['’]s?$", "", word)
