"""The focus of a question: what the quoted evidence must hold for the answer to be about *this*
question and not a neighbour of it (issue #36).

* :func:`focus`: how much of the question's rarity-weighted terms the best unit holds (with its
  heading and the sentence before it), and how much of it no candidate unit holds at all (a
  qualifier the documents never use: "sick days for *interns*");
* :func:`topic_acronyms`: the acronyms that are the question's topic ("SSO" in "Which plans
  include SSO?") rather than its domain ("API" over an API reference), weighed as names;
* :func:`kind_instances`: for "which <things> ...?", the names the candidate units give things
  of that kind ("Team plan", "Business plan"), so a unit naming one answers the kind asked for.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence, Set
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrag.evidence import Unit

__all__ = [
    "answer_terms",
    "category_terms",
    "focus",
    "held_anyway",
    "kind_instances",
    "names_one",
    "topic_acronyms",
    "unspaced",
]


def unspaced() -> bool:
    """Whether the answer's language is written without spaces (analysed as character bigrams:
    Chinese, Japanese, Korean, Thai). There a question bigram that no retrieved text holds is most
    often one that straddles two words, not a term the documents lack, so it says nothing."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.languages import LANGUAGES

    language = LANGUAGES.get(ANSWER_LANGUAGE.get() or "")
    return language is not None and language.segment == "bigrams"


# an acronym that heads its phrase ("include SSO?", "SSO on Team"), not a modifier ("SDK languages")
_ACRONYM = re.compile(
    r"\b[A-Z][A-Z0-9]{1,5}s?\b(?=\s*(?:[?.!,;:)]|$|\s(?:on|for|in|with|and|or|to|at|from|by|via|if|when)\b))"
)


def topic_acronyms(question: str, unit_terms: Sequence[set[str]]) -> set[str]:
    """The question's acronyms that are its topic, not its domain: "SSO" in "Which plans include
    SSO?" over chunks most of whose units do not say it ("API" over an API reference says it in
    most, so it narrows nothing; "SDK" in "Which SDK languages" qualifies the languages)."""
    from agentrag.steps._common import terms

    found = {t for m in _ACRONYM.finditer(question) for t in terms(m.group(0))}
    n = len(unit_terms)
    return {t for t in found if sum(1 for ts in unit_terms if t in ts) < n / 4}


_WHICH_KIND = re.compile(r"^\W*(?:which|what)\s+([a-z]{3,})s\b", re.IGNORECASE)
_NOT_NAMES = frozenset(
    "The A An This That These Those Each Every Your Our All Any Which What Its Their".split()  # noqa: SIM905
)


def kind_instances(question: str, units: Sequence[Unit]) -> tuple[str, frozenset[str]]:
    """For "which <things> ...?" (``"Which plans include SSO?"``): the stem of the thing and the
    names the candidate units give things of that kind ("Team plan", "Business plan": Team,
    Business), so a unit naming one answers the kind asked for without the word itself ("SSO is
    not available on Free or Team."). ``("", frozenset())`` for other questions."""
    from agentrag.steps._common import terms

    asked = _WHICH_KIND.match(question)
    if not asked:
        return "", frozenset()
    noun = asked.group(1).lower()
    stems = terms(noun)
    if not stems:
        return "", frozenset()
    named = re.compile(rf"\b([A-Z][A-Za-z0-9]+)\s+{re.escape(noun)}s?\b")
    names = {n for u in units for n in named.findall(f"{u.text} {u.context}")} - _NOT_NAMES
    return stems[0], frozenset(names)


def names_one(unit: Unit, names: frozenset[str]) -> bool:
    """Whether ``unit`` (its text) names one of ``names`` as a word."""
    return bool(names) and any(re.search(rf"\b{re.escape(n)}\b", unit.text) for n in names)


# the noun a wh-determiner asks about ("what *actress*", "in which *year*", "which *player*"), and the
# nouns that name an answer's form ("the *name* of", "what *type* of", "the last *name*")
_CATEGORY = re.compile(
    r"(?:^|[,;:]\s*|\b(?:in|on|at|to|from|by|for|during|of|with|under|after|before)\s+)(?:what|which)\s+"
    r"([a-z]{3,})\b(?!'s)|\b(type|kind|sort|form|name|nickname|term|title|word|translation|meaning)s?\s+(?:of|for)\b|"
    r"\b(?:last|first|full|family|given)\s+(name)s?\b",
    re.IGNORECASE,
)
# "What does Obersee *mean*?", "What does SSO *stand* for?": the meaning asked for, as "the meaning of"
_MEANS = re.compile(r"^\W*what\s+(?:does|do|did)\b.*\b(mean|stand)(?:\s+for)?\W*$", re.IGNORECASE)
_NOT_CATEGORY = frozenset(
    """is are was were be been did does do has have had can could will would should shall may might must
    about if when where who whom whose which what the a an this that these those""".split()  # noqa: SIM905
)


def category_terms(question: str) -> frozenset[str]:
    """The stems of the words of an English ``question`` that name the kind of its answer, not a
    fact the answer must restate: the noun a wh-determiner asks about ("What *actress* did the
    translation?" is answered by "Marlee Matlin provided the translation"), a form of answer ("the
    *name* of", "what *type* of", "the last *name*"). In another language, its "which" words and
    form nouns (:func:`agentrag.answer_languages.category_words`)."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.steps._common import terms

    language = ANSWER_LANGUAGE.get()
    if language is not None:  # the language's "which" words and form nouns
        from agentrag.answer_languages import category_words

        return frozenset(t for w in category_words(question, language) for t in terms(w))
    words = [w for m in _CATEGORY.finditer(question) for w in m.groups() if w]
    words += [m.group(1) for m in _MEANS.finditer(question)]
    return frozenset(t for w in words if w.lower() not in _NOT_CATEGORY for t in terms(w))


def answer_terms(question: str) -> list[str]:
    """The question's content terms a unit answering it should hold (:func:`focus`, the abstention's
    ``found``): its scoring terms without :func:`category_terms`, unless nothing else is left; in
    another language all its scoring terms (the kind asked for is :func:`held_anyway`)."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.evidence import question_terms

    asked = question_terms(question, scoring=True)
    if ANSWER_LANGUAGE.get() is not None:  # kept, and held where a text lacks it (held_anyway)
        return asked
    category = category_terms(question)
    rest = [t for t in asked if t not in category]
    return rest or asked


def held_anyway(question: str) -> frozenset[str]:
    """The terms of a question in another language than English that count as held by any text:
    the words that name the kind of its answer (:func:`category_terms`; "Welcher *Spieler* ...?" is
    answered by "Kurt Coleman ..."). A text that says one holds it as any term; one that does not
    is not the worse for it. Empty in English, whose :func:`answer_terms` leave them out."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    return category_terms(question) if ANSWER_LANGUAGE.get() is not None else frozenset()


def focus(
    question: str, best: Unit, units: Sequence[Unit], restated: Set[str] = frozenset()
) -> tuple[float, float]:
    """``(covered, unknown)`` of ``question`` against its best unit among ``units``
    (see the module docstring): the question's terms weighted by their rarity among the units.
    ``restated``: terms the best unit says in other words (:mod:`agentrag.paraphrase`), held."""
    from agentrag.evidence import has_term
    from agentrag.steps._common import terms

    asked = answer_terms(question)
    if not asked:
        return 1.0, 0.0
    df: dict[str, int] = {}
    for unit in units:
        for t in set(terms(unit.text)):
            df[t] = df.get(t, 0) + 1
    if unspaced():  # straddling bigrams step aside (see unspaced); a word no unit holds stays
        from agentrag.answer_languages import ANSWER_LANGUAGE, unknown_bigrams

        asked = unknown_bigrams(asked, df, ANSWER_LANGUAGE.get())
        if not asked:
            return 0.0, 0.0
    from agentrag.answer_languages import asked_cut_short, loosely_held, says_as_asked
    from agentrag.verbs import said_otherwise

    cut = asked_cut_short(question, asked)
    for t, prefixes in cut.items():  # held only where a word begins as the question's word does
        df[t] = sum(1 for unit in units if says_as_asked(unit.text, prefixes))
        if not df[t]:
            del df[t]
    n = len(units)
    rare = math.log(1.0 + (n + 1) / 0.5)
    verbs = said_otherwise(question)
    weights = {}
    for t in asked:
        count = df.get(t, 0) or df.get(t + "s", 0) or (df.get(t[:-1], 0) if t.endswith("s") else 0)
        count = count or int(loosely_held(df.keys(), t))  # a compound's part, another form
        if not count and t in verbs and t not in restated:
            continue  # the relation said in other words (agentrag.verbs), not a missing qualifier
        weights[t] = math.log(1.0 + (n + 1) / (count + 0.5)) if count else rare
    if not weights:
        return 1.0, 0.0
    total = sum(weights.values())
    # a document's title on its first step restates a task, not a fact (see evidence.score_units)
    from agentrag.answer_types import answer_type

    lead = best.lead if not best.first_step or answer_type(question) == "steps" else ""
    held = set(terms(best.text)) | set(terms(best.context)) | set(terms(lead))
    kind, names = kind_instances(question, units)
    if kind and names_one(best, names):
        held.add(kind)  # "which plans": a unit naming plans holds them
    anyway = held_anyway(question)
    inside = {
        t for t in weights if has_term(held, t) or loosely_held(held, t) or t in restated or t in anyway
    }
    around = f"{best.text} {best.context} {lead}"
    inside -= {
        t
        for t in inside & cut.keys()
        if t not in restated and t not in anyway and not says_as_asked(around, cut[t])
    }
    covered = sum(weights[t] for t in inside) / total
    unknown = sum(w for t, w in weights.items() if w == rare and t not in inside) / total
    return covered, unknown


# an emphasised span: **bold**, __bold__, *italic*, _italic_ (what the interface names, or the word
# a sentence sets apart from its siblings: "A deleted **workspace** is kept for 30 days")
_EMPHASIS = re.compile(r"(\*\*|__|(?<!\w)[*_])(?=\S)(.+?)(?<=\S)\1")
# a control's label: an emphasised imperative ("**Delete forever**", "**Empty trash**")
_CONTROL = re.compile(
    r"^(?:add|archive|cancel|change|choose|close|copy|create|delete|disable|download|edit|empty|enable|"
    r"export|import|invite|leave|log|move|open|remove|report|request|reset|restore|save|send|share|sign|"
    r"turn|upload)\b",
    re.IGNORECASE,
)


# what may stand between a modifier and its head ("reset *my* password"): a determiner or a possessive
_BETWEEN = frozenset("a an the my your our their its his her this that these those".split())  # noqa: SIM905


def phrase_pairs(question: str) -> dict[str, str]:
    """The question's content terms paired with the one that follows it in a phrase: adjacent
    words, or with only a determiner or possessive between ("deleted note", "reset my password";
    not "limits on the Team plan": a preposition ends the phrase)."""
    return dict(_asked(question, _language())[1])


def _language() -> str:
    from agentrag.answer_languages import ANSWER_LANGUAGE

    return ANSWER_LANGUAGE.get() or ""


@functools.lru_cache(maxsize=512)
def _asked(
    question: str, language: str
) -> tuple[frozenset[str], tuple[tuple[str, str], ...], frozenset[str]]:
    """``(content terms, phrase pairs, acronyms)`` of ``question`` (``language``: the answer's, which
    its terms depend on), once per question: every unit is checked against them."""
    from agentrag.evidence import question_terms
    from agentrag.steps._common import terms

    content = set(question_terms(question, scoring=True))
    pairs: dict[str, str] = {}
    previous: str | None = None
    for word in re.findall(r"[\w'’-]+", question):
        if word.lower() in _BETWEEN:
            continue
        stems = terms(word)
        term = stems[0] if stems else None
        if previous and term and previous in content and term in content and previous != term:
            pairs.setdefault(previous, term)
        previous = term if term in content else None
    # an acronym of the question may be written out in a text ("2FA": "two-factor authentication")
    acronyms = {t for w in re.findall(r"\b[A-Z0-9]*[A-Z][A-Z0-9]+s?\b", question) for t in terms(w)}
    return frozenset(content), tuple(pairs.items()), frozenset(acronyms)


def without_controls(text: str) -> str:
    """``text`` without the labels of the controls it names (an emphasised imperative of two words
    or more: "someone chose **Delete forever**"): a label names a button, it states no duration,
    amount or time."""

    def label(match: re.Match[str]) -> str:
        inner = match.group(2)
        return " " if _CONTROL.match(inner) and len(inner.split()) > 1 else match.group(0)

    return _EMPHASIS.sub(label, text)


# a pronoun in the place of a thing ("to reset *it*"): what it stands for was named before the unit
_PRONOUN = re.compile(r"([\w'’-]+)\s+(?:it|them)\b(?!['’])", re.IGNORECASE)


def sibling(question: str, text: str, context: str = "") -> bool:
    """Whether ``text`` sets apart another thing in the place of the question's own: a term of the
    question followed by an emphasised word the question does not use, while the term that follows
    it in the question is not in the text ("A deleted **workspace** is kept for 30 days" for "How long
    is a deleted note kept?"; "chooses **Reset two-factor authentication**" for "How do I reset my
    password?"); or followed by a pronoun ("reset it") when neither the text nor its ``context`` (the
    sentence before it and its heading, where the pronoun's antecedent is) names the question's thing
    ("Contact your IT department to reset it." after a sentence about 2FA, for "How do I reset my
    password?"). Without a context the pronoun's antecedent is unknown and is not judged. The unit
    answers a sibling question, not this one."""
    from agentrag.steps._common import terms

    asked, pairs_of, acronyms = _asked(question, _language())
    after = dict(pairs_of)
    if not after:
        return False
    held = set(terms(text))
    if context and _pronoun_for_another(after, acronyms, text, held | set(terms(context))):
        return True
    if "*" not in text and "_" not in text:
        return False
    for match in _EMPHASIS.finditer(text):
        if len(match.group(2).split()) > 4 or re.search(r"\d", match.group(2)):
            continue  # a statement or an amount set apart (the answer itself), not a thing's name
        inner = terms(match.group(2))
        before = terms(text[max(0, match.start() - 40) : match.start()])
        pairs = [(before[-1], inner[0])] if before and inner else []
        pairs += [(inner[0], inner[1])] if len(inner) > 1 else []
        for first, then in pairs:
            follows = after.get(first)
            if (
                follows
                and follows not in acronyms
                and then not in asked
                and follows != then
                and follows not in held
            ):
                return True
    return False


def _pronoun_for_another(after: dict[str, str], acronyms: frozenset[str], text: str, named: set[str]) -> bool:
    """Whether a term of the question stands before a pronoun in ``text`` ("reset it") while the term
    that follows it in the question is named neither in the text nor around it (``named``): the
    pronoun stands for another thing. An acronym of the question may be written out around it."""
    from agentrag.evidence import has_term
    from agentrag.steps._common import terms

    for match in _PRONOUN.finditer(text):
        stems = terms(match.group(1))
        follows = after.get(stems[-1]) if stems else None
        if follows and follows not in acronyms and not has_term(named, follows):
            return True
    return False
