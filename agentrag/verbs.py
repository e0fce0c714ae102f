"""The relation an English question asks about: its event verb (issue #36): English evidence only.

A question names things (the focus: "sick *days* for *interns*") and a relation between them (its
verb: "Who *sang* the national anthem?", "What were NTL's services *rebranded* as?"). Wikipedia
prose answers questions written by other people, who name the same things and say the relation in
their own words ("... who *performed* it", "... *renamed* Virgin Media"); a near-miss of a handbook
keeps the relation and changes a thing ("How many days of *unpaid* leave can I take?"). So a verb of
the question that no retrieved text says is read as the relation said in other words, not as a
qualifier the documents lack: :func:`event_verbs` finds the question's verbs by their form and place
(no parser: a past form, "-ing" after no determiner, an irregular past, a word after "to" or after
"who" / "what", the word after a modal and a pronoun), and :mod:`agentrag.focus` and
:func:`agentrag.abstain.found_share` leave such a verb out of what the evidence must hold when no
candidate unit holds it (:func:`said_otherwise`). A verb some unit holds still counts (a changed
event within the passage), and so does every verb of a question asking *when*: a time is the time of
one event, and a sentence dating another event of the same thing does not answer ("When was the
Treaty *written*?" over the sentence on when it was *signed*), and of a question asking for steps
(the task is what it asks: "How do I *reset* my password?").

The same holds for a question's general words (``_GENERAL``: "Who had the *most* sacks?", "What is
*usually* the goal?", "What *group* of *people* ...?"): they are how its writer phrased it, so where no
retrieved text holds one it is neither held nor missing, in questions asking when too (not in
how-to questions).
"""

from __future__ import annotations

import functools
import re

__all__ = ["asks_time", "event_verbs", "said_otherwise"]

_TIME = re.compile(
    r"^\W*(?:when|until when|by when|what time)\b|\b(?:what|which)\s+(?:year|years|century|centuries|decade|"
    r"period|era|date|month|day|age)\b|\bhow long ago\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_DETERMINERS = frozenset(
    "a an the this that these those my your our their its his her some any each every no".split()  # noqa: SIM905
)
# an English verb's past forms that do not end in "-ed" (their participles too)
_IRREGULAR = frozenset(
    """arose awoke bore borne beat beaten became began begun bent bet bit bitten bled blew blown broke
    broken bred brought built burnt bought caught chose chosen clung came dealt dug drew drawn dreamt
    drank drunk drove driven ate eaten fell fallen fed fought fled flung flew flown forbade forbidden
    forgot forgotten forgave forgiven froze frozen gave given went gone grew grown hung heard hid hidden
    held kept knelt knew known laid led leant leapt lent lit lost meant met mistook overcame overtook
    proved proven quit rode ridden rang rung rose risen ran sought sold sent shook shaken shone shot
    shown shrank sang sung sank sunk sat slept slid spoke spoken sped spent spun spread sprang stood
    stole stolen stuck stung struck sworn swept swam swum swung took taken taught tore torn told thought
    threw thrown understood undertook woke woken wore worn wove won withdrew wrote written""".split()  # noqa: SIM905
)
# "-ed" / "-ing" words that are not verb forms
_NOT_VERBS = frozenset(
    """hundred red bed bred shed sled need seed speed feed breed weed indeed naked sacred wicked kindred
    during something anything nothing everything morning evening building thing king ring spring string
    wing ceiling wedding meeting painting clothing""".split()  # noqa: SIM905
)
_FUNCTION = frozenset(
    """is are was were be been being am do does did have has had can could will would should shall may
    might must not the a an of in on at to for from by with about into over under as and or than that
    which who whom whose what when where why how there this these those it its""".split()  # noqa: SIM905
)
_BE = frozenset("is are was were be been am soon".split())  # noqa: SIM905
_MODALS = frozenset("do does did can could will would should may might must".split())  # noqa: SIM905
_PRONOUNS = frozenset("i you he she it we they one someone people".split())  # noqa: SIM905


def _verb_like(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` reads as a verb by its form and the word before it."""
    word = words[i]
    low = word.lower()
    before = words[i - 1].lower() if i else ""
    if low in _FUNCTION or low in _NOT_VERBS or (i and word[0].isupper()) or before in _DETERMINERS:
        return False
    if low in _IRREGULAR:
        return True
    if len(low) > 3 and low.endswith("ed") and not low.endswith("eed"):
        return True
    if len(low) > 5 and low.endswith("ing"):
        # "is soon *losing*?", "were *being* held"; not "are *staging* backups" (a noun follows)
        after = words[i + 1] if i + 1 < len(words) else ""
        opens = not after or after.lower() in _FUNCTION or after.lower() in _DETERMINERS or after[0].isupper()
        return (before in _BE or before.endswith("ly")) and opens
    if before == "to":
        return True
    if i == 1 and before == "who":
        return True  # a subject question: "Who *sang* ..." ("What *party* ..." names a kind)
    return i >= 2 and before in _PRONOUNS and words[i - 2].lower() in _MODALS  # "can I *reserve*"


_STOPS = frozenset(
    """of in on at to for from by with about into over under as than that which who whom whose where when
    against through toward towards across after before during without within per like near off out up
    down the a an this these those and or but""".split()  # noqa: SIM905
)


def _after_auxiliary(words: list[str]) -> set[int]:
    """The verb after "do" or a modal and its subject ("What does the word Rheinrinne *translate*
    to?", "Which battle did Temüjin *lose* to ...?"): the last lower-case word of the run that follows
    the auxiliary up to the first preposition, article or conjunction past its first word."""
    out: set[int] = set()
    for i, word in enumerate(words):
        if word.lower() not in _MODALS:
            continue
        last = None
        for j in range(i + 1, len(words)):
            low = words[j].lower()
            if j > i + 1 and low in _STOPS:
                break
            if words[j][0].islower() and low not in _DETERMINERS and low not in _FUNCTION:
                last = j
        if last is not None and last > i + 1:
            out.add(last)
    return out


@functools.lru_cache(maxsize=512)
def _verbs(question: str) -> frozenset[str]:
    from agentrag.steps._common import terms

    words = _TOKEN.findall(question)
    found = {i for i in range(len(words)) if _verb_like(words, i)} | _after_auxiliary(words)
    return frozenset(t for i in sorted(found) for t in terms(words[i]))


def event_verbs(question: str) -> frozenset[str]:
    """The stems of an English ``question``'s verbs (module docstring). Empty in other languages."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    if ANSWER_LANGUAGE.get() is not None:
        return frozenset()
    return _verbs(question)


def asks_time(question: str) -> bool:
    """Whether ``question`` asks when something happened ("When ...", "What year / century / period
    ...", "how long ago")."""
    return bool(_TIME.search(question))


# general English words: the Glasgow IR stop list (as scikit-learn ships it) without its numbers,
# negations and personal pronouns, and a few general nouns ("people", "group", "thing", "way", "place")
# and adverbs of time beside its "already", "still", "yet", "once", "afterwards" ("soon", "later", "now",
# "today"; not "late", also an adjective: "a late fee").
# A question's "the *most* sacks", "*back*", "*toward*", "*name*", "*put*" are how its writer phrased it,
# not a thing the evidence must name; an opposite a unit states instead ("least") is still read by
# agentrag.contrast
_GENERAL = frozenset(
    """about above across after afterwards again against all almost alone along already also although
    always among amongst amount another any anyhow anyone anything anyway anywhere around back because
    become becomes becoming before beforehand behind below beside besides between beyond both call
    describe detail due during each either else elsewhere enough etc even ever every everyone everything
    everywhere except few fill find former formerly found further get give go hence here hereafter hereby
    herein hereupon however indeed interest keep latter latterly less made many meanwhile mill more
    moreover most mostly move much namely next often once only other others otherwise own part perhaps
    put rather same see seem seemed seeming seems several show side since some somehow someone something
    sometime sometimes somewhere still such system take than then thence there thereafter thereby
    therefore therein thereupon through throughout thru thus together toward towards upon very via well
    whatever whence whenever whereafter whereas whereby wherein whereupon wherever whether while whither
    whole within yet soon later now today name be been being am people person persons group groups thing
    things way ways place places""".split()  # noqa: SIM905
)


@functools.lru_cache(maxsize=512)
def _general(question: str) -> frozenset[str]:
    from agentrag.steps._common import terms

    words = [w for w in _TOKEN.findall(question) if w.lower() in _GENERAL or _manner(w)]
    return frozenset(t for w in words for t in terms(w))


# an adverb of manner or degree ("*usually*", "*generally*", "*shortly* after"): how it is said, not what
_NOT_MANNER = frozenset(
    "daily weekly monthly yearly hourly quarterly early family italy july supply apply reply assembly".split()  # noqa: SIM905
)


def _manner(word: str) -> bool:
    low = word.lower()
    return word.islower() and len(low) >= 6 and low.endswith("ly") and low not in _NOT_MANNER


def said_otherwise(question: str) -> frozenset[str]:
    """The terms of ``question`` that may be said in other words where no retrieved text says them:
    its verbs (:func:`event_verbs`), not for a question asking when (module docstring), and its
    general words (``_GENERAL``); none for a question asking how to do something ("How do I *reset*
    my password?": the task is what is asked). English only."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.answer_types import answer_type

    if ANSWER_LANGUAGE.get() is not None or answer_type(question) == "steps":
        return frozenset()
    general = _general(question)
    return general if asks_time(question) else event_verbs(question) | general
