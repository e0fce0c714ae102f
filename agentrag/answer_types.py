"""Answer types: what kind of fact a question asks for, and whether a unit of evidence states one.

:func:`answer_type` reads the question (``how long`` -> a duration, ``how many`` / ``how much`` ->
a number, ``where`` -> a place, address or menu path, ``how do I`` -> steps, ``when`` -> a time);
:func:`type_fit` says whether a unit holds that kind of fact: +1 when it does, -1 (or -0.5) when it
cannot, 0 when nobody knows. A counting question ("how many guests", "the number of notebooks")
names what it counts (:func:`counted`): a number in the unit answers it only when it counts that
thing ("up to 20 guests"), not when it counts something else the unit also names ("books ... up to
two boxes"); a unit that never names it may say it in other words ("10 digital titles" for
"e-books"), so its number is neither a match nor a miss.
"""

from __future__ import annotations

import re

__all__ = ["answer_type", "counted", "type_fit"]

_MARKUP = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")

_NUMBER_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty)"
_UNIT_OF_TIME = r"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|business days?|ms|milliseconds?)"
_DURATION = re.compile(
    rf"\b(?:\d[\d,.]*|{_NUMBER_WORDS}|a|an)[\s-]*{_UNIT_OF_TIME}\b|\b(?:unlimited|indefinitely|forever|"
    r"immediately|no (?:time )?limit|without limit)\b|\b\d+/\d+\b|\b24/[57]\b",
    re.IGNORECASE,
)
# a title, not a duration: a number word and a unit of time both capitalised ("Seven Days to the River
# Rhine", "the Thirty Years' War"); a sentence opening "Seven days ..." still states one
_TITLED_DURATION = re.compile(
    r"\b(?:"
    + "|".join(w.title() for w in _NUMBER_WORDS[3:-1].split("|"))
    + r"|Hundred)[\s-]+(?:Seconds?|Minutes?|Hours?|Days?|Weeks?|Months?|Years?)\b"
)
# a quantity, not a digit inside a name or a path ("/v2/", "OAuth2", "sha256" state no amount)
_NUMBER = re.compile(rf"(?<![A-Za-z/_-])\d|\b{_NUMBER_WORDS}\b|\bunlimited\b|\bnone\b", re.IGNORECASE)
# a ratio states how two amounts compare, not an amount: "four times the Team limit", "twice as long"
_MULTIPLIER = re.compile(
    rf"\b(?:\d[\d,.]*|{_NUMBER_WORDS})\s+times\s+(?:the|as|more|less|higher|lower|larger|smaller|longer)\b"
    r"|\btwice\s+(?:the|as)\b",
    re.IGNORECASE,
)
_PLACE = re.compile(r"@|://|→|->|`|\b[A-Z][a-z]+,? [A-Z][a-z]+\b|\bSettings\b|\bmenu\b", re.UNICODE)
_TIME = re.compile(
    # a date, a year ("in 1066", "the 1990s"), a century, an era
    r"\b\d{4}-\d\d|\b(?:1\d{3}|20\d\d)s?\b|\b\d{1,2}(?:st|nd|rd|th)[\s-]+century\b|\b\d+\s*(?:BC|AD|BCE|CE)\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
    rf"april|may|june|july|august|september|october|november|december|utc|midnight|noon|daily|weekly|"
    rf"monthly|annually|hourly|quarterly|after|before|within|until)\b|{_DURATION.pattern}",
    re.IGNORECASE,
)
_STEP_VERB = re.compile(
    r"^[\"'“(*_`]*(?:click|open|go|choose|select|enter|use|press|type|contact|forward|change|set|add|"
    r"remove|create|send|sign|log|find|check|install|run|call|pass|turn|enable|disable|ask|restore|"
    r"delete|export|import|upload|download|copy|paste|wait|retry|follow|visit|navigate|tap|reset)\b",
    re.IGNORECASE,
)
_QUESTION_TYPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\bhow (long|soon|quickly|fast|often|late|early)\b|\bfor how long\b|\bhow many "
            r"(seconds|minutes|hours|days|weeks|months|years)\b|\b(retention|expir\w*|valid)\b.*\?$",
            re.IGNORECASE,
        ),
        "duration",
    ),
    # not "When the Rhine emerges from Lake Constance, which way does it flow?": the clause sets the scene
    (
        re.compile(
            r"^\s*(?:until when|by when|what time|when(?!\s+(?!(?:is|are|was|were|does|do|did|can|could|will|"
            r"would|has|have|had|should|may|might|must)\b)\w+[^?]*\b(?:which|what|where|who|whom|how)\b))\b",
            re.IGNORECASE,
        ),
        "time",
    ),
    (
        re.compile(
            r"^\s*(?:in |by |since |until )?(?:what|which) (?:year|century|decade|date)\b", re.IGNORECASE
        ),
        "time",
    ),
    (
        re.compile(
            r"\bhow (many|much|big|large|high|low)\b|^\s*(?:what|which)(?:'s| is| are| was| were)?\b"
            r"(?!\s+happens)[^?]*\b(maximum|minimum|max|min|limits?|sizes?|prices?|costs?|numbers? of|amount|"
            r"percentage|rates?|quotas?|fees?)\b",
            re.IGNORECASE,
        ),
        "number",
    ),
    (re.compile(r"^\s*(where|to which|to what) ", re.IGNORECASE), "place"),
    (
        re.compile(r"\bhow (do|can|should|would) (i|we|you|one)\b|\bhow to\b|\bsteps? to\b", re.IGNORECASE),
        "steps",
    ),
)


def answer_type(question: str) -> str | None:
    """What kind of answer ``question`` wants: duration, time, number, place, steps or None."""
    for pattern, kind in _QUESTION_TYPES:
        if pattern.search(question):
            return kind
    return None


_COUNTING = re.compile(
    r"\bhow many\s+(?:of\s+(?:the|my|our|your|their|these|those)\s+)?|\bnumber of\s+", re.I
)
_WORD = re.compile(r"\d[\d,.]*\d|\d|[A-Za-z][\w'-]*")
# what ends the noun phrase after "how many": a verb, a preposition, a pronoun, an article
_PHRASE_END = frozenset(
    """can could do does did are is was were will would should may might must per in on at for of to
    from with by i we you they he she it my our your their a an the have has had get gets and or""".split()  # noqa: SIM905
)
_OCCURRENCES = frozenset("times time ways way kinds kind types type sorts sort".split())  # noqa: SIM905
_COUNT_WINDOW = (4, 3)  # a number this many words before (after) the counted word counts it


def counted(question: str) -> tuple[str, ...]:
    """The stemmed words of what a counting question counts ("how many search requests per
    minute" -> the stems of "search requests"); () when it counts occurrences ("how many times")
    or counts nothing."""
    from agentrag.steps._common import terms

    match = _COUNTING.search(question)
    if not match:
        return ()
    words: list[str] = []
    for word in _WORD.findall(question[match.end() :]):
        if word.lower() in _PHRASE_END or len(words) == 3:
            break
        words.append(word)
    if not words or all(w.lower() in _OCCURRENCES for w in words):
        return ()
    return tuple(dict.fromkeys(t for w in words for t in terms(w)))


def _counts(text: str, focus: tuple[str, ...], row: bool) -> float:
    """+1 when a number in ``text`` counts a word of ``focus``; 0 when ``text`` never names it;
    -0.5 when it names it but its numbers count something else; -1 without a number."""
    from agentrag.steps._common import terms

    words = _WORD.findall(text)
    # a number word heading a compound counts too: "Six-time Grammy winner", "a two-year contract"
    numeric = [bool(_NUMBER.fullmatch(w.split("-")[0]) or w[0].isdigit()) for w in words]
    if not any(numeric):
        return -1.0
    named = [i for i, w in enumerate(words) if any(t in focus or t + "s" in focus for t in terms(w))]
    if not named:
        return 0.0
    if row:  # a table row's cells sit under its header: a number in the row counts what it names
        return 1.0
    before, after = _COUNT_WINDOW
    for i in named:
        if any(numeric[max(0, i - before) : i + after + 1]):
            return 1.0
    return -0.5


def type_fit(kind: str | None, text: str, *, question: str = "", row: bool = False) -> float:
    """+1 when ``text`` holds the wanted kind of answer, -1 (or -0.5) when it cannot, 0 when nobody
    knows. ``question`` (for ``number``): a counting question's counted words are checked too;
    ``row``: ``text`` is a table row rendered with its header."""
    if kind is None:
        return 0.0
    if kind == "duration":
        return 1.0 if _DURATION.search(_TITLED_DURATION.sub(" ", text)) else -1.0
    if kind == "number":
        text = _MULTIPLIER.sub(" ", text)
        focus = counted(question) if question else ()
        if focus:
            return _counts(text, focus, row)
        return 1.0 if _NUMBER.search(text) else -1.0
    if kind == "time":
        return 1.0 if _TIME.search(text) else -0.5
    if kind == "place":
        return 1.0 if _PLACE.search(text) else -0.5
    if kind == "steps":
        return 1.0 if _STEP_VERB.match(_MARKUP.sub("", text)) or "→" in text else 0.0
    return 0.0
