"""The local resolution of a follow-up into a question a person would type (``condense``'s local
strategy, step 3).

The follow-up is resolved against the turn it refers to, never against a chain of earlier
rewrites: the previous user question (itself resolved, one level) and the assistant's last reply.

* **Elliptical** follow-ups (``"and on Business?"``, ``"what about Enterprise?"``, ``"and if I pay
  monthly?"``) repeat the previous question with the new part: a name of the same kind replaces
  the one the previous question had (``"What are the API rate limits on the Team plan?"`` ->
  ``"What are the API rate limits on the Business plan?"``); otherwise the new part is added at
  the end (``"How much does the Team plan cost if I pay monthly?"``).
* **Pronouns** ``it / they / them`` are replaced by the final noun phrase of the previous question
  (``"How do I recover a deleted note?"`` -> ``"a deleted note"``); ``there`` by the place the
  assistant's last reply ended on (``"... restore it from the trash."`` -> ``"in the trash"``).
* Anything else that depends on the conversation gets that noun phrase after it:
  ``"how long until the money is back, regarding a refund?"``.
"""

from __future__ import annotations

import re

__all__ = ["REGARDING", "about", "asked", "final_noun_phrase", "place_of", "resolve"]

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’./+-]*[A-Za-z0-9]|[A-Za-z0-9]")
# Words that end a noun phrase when reading backwards: function words, question words, verbs of
# questions. Everything else is taken as part of the phrase.
_BOUNDARY = frozenset(
    """a an the my our your their his her its this that these those some any every each all no
    of on in at to for from with by about into onto over under after before during through via
    per as than and or but if when where while so is are was were be been being am do does did
    done can could should would will shall may might must have has had get gets got i we you they
    he she it them me us what which who whom whose how why there here work works working use uses
    used set make need needs not stay stays remain remains become becomes seem seems""".split()  # noqa: SIM905
)
_DETERMINERS = frozenset("a an the my our your their".split())  # noqa: SIM905
_PLACE_PREPOSITIONS = frozenset("in from to into at on inside under".split())  # noqa: SIM905
_OPENER = re.compile(
    r"^(?:and what about|and how about|and what if|what about|how about|what if|same for|same question for|"
    r"and|also|or|but|so|plus|then)\b[\s,]*",
    re.IGNORECASE,
)
_PRONOUN = re.compile(r"\b(it|they|them)\b", re.IGNORECASE)
_THERE = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )\bthere\b(?!\s+(?:is|are|was|were|be)\b)", re.I
)
_TITLE = re.compile(r"\b[A-Z][a-z]+\b")
_QUESTION_START = frozenset(
    "what which who how when where why can could do does did is are should would will".split()  # noqa: SIM905
)


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


def _phrases(text: str) -> list[str]:
    """The noun phrases of ``text`` in order: runs of words between function words, each with
    the determiner before it."""
    words = _words(text)
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i].group(0).lower() in _BOUNDARY:
            i += 1
            continue
        j = i
        while j < len(words) and words[j].group(0).lower() not in _BOUNDARY:
            j += 1
        start = words[i].start()
        if i > 0 and words[i - 1].group(0).lower() in _DETERMINERS:
            start = words[i - 1].start()
        out.append(text[start : words[j - 1].end()])
        i = j
    return out


def _plural(phrase: str) -> bool:
    head = phrase.split()[-1].lower()
    return len(head) > 3 and head.endswith("s") and not head.endswith(("ss", "us", "is"))


def final_noun_phrase(
    question: str, *, with_determiner: bool = True, plural: bool | None = None
) -> str | None:
    """The noun phrase a question ends on (``"How do I recover a deleted note?"`` -> ``"a deleted
    note"``), or None when it ends on a function word. ``plural``: the last phrase that is (or is
    not) plural, for ``they`` / ``it``, falling back to the final one."""
    phrases = _phrases(question)
    words = _words(question)
    if not phrases or not words or (words[-1].group(0).lower() in _BOUNDARY and plural is None):
        return None
    chosen = phrases[-1]
    if plural is not None:
        chosen = next((p for p in reversed(phrases) if _plural(p) == plural), chosen)
    if not with_determiner:
        first = chosen.split()[0].lower()
        chosen = chosen.split(" ", 1)[1] if first in _DETERMINERS and " " in chosen else chosen
    return chosen


# what a sentence ends up opening, emphasised as the interface names it: "click **Trash**", "go to *Settings*"
_OPENED = re.compile(
    r"\b(?:click|clicks|open|opens|tap|taps|visit|visits|(?:go|goes|navigate|navigates|switch|switches) to)"
    r"\s+(?:the\s+)?(\*\*|__|\*|_)([^*_\n]{1,60}?)\1\W*$",
    re.IGNORECASE,
)


def place_of(reply: str) -> str | None:
    """The place a reply's last sentence ends on (an aside in parentheses left out), as ``"in <noun
    phrase>"``: what the sentence ends up opening, emphasised as the interface names it (``"In the
    sidebar, click **Trash**."`` -> ``"in the Trash"``: the opening "In the sidebar" says where to
    click, not where the turn is), else a place phrase (``"restore it from the trash."`` -> ``"in the
    trash"``); else None."""
    reply = re.sub(r"\s*\[[^\[\]\n]*\]", "", reply).strip()
    last = re.split(r"(?<=[.!?])\s+", reply)[-1] if reply else ""
    last = re.sub(r"\s*\([^()]*\)", "", last).strip()
    return _opened(last) or _place_phrase(last)


def _opened(sentence: str) -> str | None:
    found = _OPENED.search(sentence)
    if not found:
        return None
    name = found.group(2).strip()
    return f"in the {name}" if len(name.split()) == 1 else f"in {name}"


def _place_phrase(last: str) -> str | None:
    words = _words(last)
    phrase = final_noun_phrase(last, with_determiner=True)
    if not phrase:
        return None
    n = len(_words(phrase))
    before = words[-n - 1].group(0).lower() if len(words) > n else ""
    if before in _DETERMINERS and len(words) > n + 1:
        before = words[-n - 2].group(0).lower()
        if not phrase.lower().startswith(tuple(_DETERMINERS)):
            phrase = f"{words[-n - 1].group(0)} {phrase}"
    if before not in _PLACE_PREPOSITIONS:
        return None
    return f"in {phrase}"


REGARDING = ", regarding "


_CLAUSE = re.compile(r"^(?:how|what|why|when|where|which|who|whether|if)\b", re.IGNORECASE)


def asked(question: str) -> str:
    """What a resolved follow-up asks, without the topic it carries for the search, when the ask is
    topicless (``"How many attempts in total, regarding how webhooks handle failed deliveries?"`` ->
    ``"How many attempts in total?"``) or the topic is the whole previous question (``"Can an admin
    make that longer, regarding how long do deleted notes stay in the trash?"`` -> ``"Can an admin
    make that longer?"``). The search needs the topic; the evidence is scored on the ask, among chunks
    the topic already retrieved (the topic's words would outweigh the ask's). A topic that is a noun
    phrase ("..., regarding a refund?") names what the ask is about and stays."""
    from agentrag.steps.condense import is_topicless

    head, sep, topic = question.rpartition(REGARDING)
    return head + "?" if sep and (is_topicless(head) or _CLAUSE.match(topic)) else question


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _content(text: str) -> set[str]:
    return {_stem(m.group(0)) for m in _words(text) if m.group(0).lower() not in _BOUNDARY}


_COPULAR = re.compile(r"^(?:what|which|who)\s+(?:is|are|was|were)\s+(?=(?:the|a|an|my|our|your)\b)", re.I)


def subject_of(previous: str) -> str | None:
    """The subject a "what is / what are ..." question asks about, with its complements and without
    a subordinate clause: ``"the API rate limits on the Team plan"`` in "What are the API rate
    limits on the Team plan?" (None for other questions)."""
    copula = _COPULAR.match(previous.strip())
    if not copula:
        return None
    rest = _SUBORDINATE.split(previous.strip()[copula.end() :], maxsplit=1)[0]
    rest = rest.strip().rstrip(" ?.!,")
    return rest if _phrases(rest) and len(_words(rest)) <= 10 else None


def referent(previous: str, reply: str | None, *, plural: bool) -> str | None:
    """What ``it`` (``plural=False``) or ``they`` / ``them`` refer to: the subject of a previous
    "what is / what are" question (:func:`subject_of`: "it" after "What are the API rate limits on
    the Team plan?" is the rate limits), else the noun phrase of the previous question the
    assistant's reply carried on (one sharing a content word with it), the last one that agrees
    in number, else the final one."""
    subject = subject_of(previous)
    if subject:
        return subject
    if reply:
        said = _content(reply)
        carried = [p for p in _phrases(previous) if _content(p) & said]
        agreeing = [p for p in carried if _plural(p) == plural]
        if agreeing:
            return agreeing[-1]
    main = _SUBORDINATE.split(previous, maxsplit=1)[0]
    if main != previous and any(_plural(p) == plural for p in _phrases(main)):
        # "a replacement", not "my card", in "Can I get a replacement if I lose my card?"
        return final_noun_phrase(main, plural=plural)
    return final_noun_phrase(previous, plural=plural)


_SUBORDINATE = re.compile(r"\b(?:if|when|whenever|because|unless|while|although|once|after|before)\b", re.I)


def about(previous: str) -> str:
    """The previous question as a clause to carry its topic along: ``"how webhooks handle failed
    deliveries"`` (``do`` dropped after the question word), else the question lower-cased."""
    text = previous.strip().rstrip(" ?.!")
    text = re.sub(r"^(how|why|what|when|where|which|who)\s+do\s+", r"\1 ", text, flags=re.IGNORECASE)
    return text[:1].lower() + text[1:] if not _TITLE_START.match(text) else text


_TITLE_START = re.compile(r"^(?:[A-Z]{2}|[A-Z][a-z]+[A-Z])")  # "SSO ...", "GitHub ...": kept as written


_DEMONSTRATIVE_NOUN = re.compile(r"\b(?:this|that|these|those)\s+([A-Za-z][A-Za-z-]*)\b", re.IGNORECASE)
_DEMONSTRATIVE_LAST = re.compile(r"\b(?:this|that|these|those)$", re.IGNORECASE)  # "the rate limit for that?"


def _named_before(head: str, *texts: str | None) -> str | None:
    """The noun phrase of ``texts`` (latest first) whose last word is ``head``, with ``the``."""
    for text in texts:
        for phrase in reversed(_phrases(text or "")):
            words = phrase.split()
            if _stem(words[-1]) == _stem(head) and len(words) > 1:
                body = words[1:] if words[0].lower() in _DETERMINERS else words
                if len(body) > 1:
                    return "the " + " ".join(body)
    return None


def _titles(text: str, *, skip_first: bool) -> list[re.Match[str]]:
    found = list(_TITLE.finditer(text))
    if skip_first and found and found[0].start() == len(text) - len(text.lstrip()):
        found = found[1:]
    return [m for m in found if m.group(0).lower() not in _QUESTION_START]


_PREPOSITION = re.compile(r"^(on|for|in|at|from|with|during|by)\s+\S", re.IGNORECASE)


def _phrase_end(words: list[re.Match[str]], i: int) -> int:
    """The index after the noun phrase starting at word ``i`` (a determiner, then content words)."""
    if i < len(words) and words[i].group(0).lower() in _DETERMINERS:
        i += 1
    start = i
    while i < len(words) and words[i].group(0).lower() not in _BOUNDARY:
        i += 1
    return i if i > start else -1


def _prepositional(prev: str, rest: str) -> tuple[int, int] | None:
    """Where ``prev``'s last phrase led by the preposition ``rest`` starts with is, if any."""
    lead = _PREPOSITION.match(rest)
    if not lead:
        return None
    words = _words(prev)
    for i in range(len(words) - 1, -1, -1):
        if words[i].group(0).lower() == lead.group(1).lower():
            end = _phrase_end(words, i + 1)
            return (words[i].start(), words[end - 1].end()) if end > 0 else None
    return None


def _is_phrase(text: str) -> bool:
    """A short noun phrase: up to three words, none a function word after a leading determiner."""
    words = [w.group(0).lower() for w in _words(text)]
    if words and words[0] in _DETERMINERS:
        words = words[1:]
    return 0 < len(words) <= 3 and not any(w in _BOUNDARY for w in words)


def _final_span(prev: str) -> tuple[int, int] | None:
    """Where the short noun phrase ``prev`` ends on starts, if it ends on one."""
    phrase = final_noun_phrase(prev)
    if not phrase or not prev.endswith(phrase) or not _is_phrase(phrase):
        return None
    return (len(prev) - len(phrase), len(prev))


def _same_head(prev: str, rest: str) -> tuple[int, int] | None:
    """Where the noun phrase of ``prev`` with the head word of the short noun phrase ``rest`` is
    (its determiner and the words before the head included), if ``rest`` is one and ``prev`` has it."""
    if not _is_phrase(rest) or len(_words(rest)) < 2:
        return None
    head = _stem(_words(rest)[-1].group(0))
    words = _words(prev)
    for i in range(len(words) - 1, 0, -1):
        if _stem(words[i].group(0)) == head and words[i].group(0).lower() not in _BOUNDARY:
            j = i
            while j > 0 and words[j - 1].group(0).lower() not in _BOUNDARY:
                j -= 1
            if j > 0 and words[j - 1].group(0).lower() in _DETERMINERS:
                j -= 1
            return (words[j].start(), words[i].end()) if j > 0 else None
    return None


def _same_kind_of_word(prev: str, rest: str) -> tuple[int, int] | None:
    """Where the one ``-ly`` word of ``prev`` is when ``rest`` is a single ``-ly`` word
    ("monthly" for "annually")."""
    if not re.fullmatch(r"[A-Za-z]+ly", rest):
        return None
    found = [w for w in _words(prev) if w.group(0).lower().endswith("ly") and len(w.group(0)) > 4]
    found = [w for w in found if w.group(0).lower() not in {"only", "early", "daily", "really", "apply"}]
    return (found[0].start(), found[0].end()) if len(found) == 1 else None


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text else text


def resolve(message: str, previous: str, reply: str | None = None) -> str:
    """``message`` (a follow-up) made standalone from ``previous`` (the question it follows,
    already standalone) and ``reply`` (the assistant's answer to it, if any)."""
    text = message.strip()
    mark = "?" if text.endswith("?") or not text else ""
    body = text.rstrip(" ?.!")
    prev = previous.strip().rstrip(" ?.!")
    opener = _OPENER.match(body)
    if opener and opener.end() < len(body):
        rest = body[opener.end() :].strip(" ,")
        if _words(rest)[0].group(0).lower() in _QUESTION_START:
            # "and how long does it take?": a question of its own after the opener, resolved as one
            # (or kept as it is when it stands alone: "and how long do deleted notes stay in the trash?")
            from agentrag.steps.condense import is_follow_up

            own = _sentence(rest) + mark
            return resolve(own, previous, reply) if is_follow_up(own) else own
        if opener.group(0).lower().rstrip(" ,").endswith("what if"):
            rest = "if " + rest  # "and what if I don't get the email?": the previous question, if ...
        new_names = _titles(rest, skip_first=False)
        old_names = _titles(prev, skip_first=True)
        same = _same_head(prev, rest) or _same_kind_of_word(prev, rest)
        if same:
            # "the refresh tokens" after "How long are OAuth access tokens valid?": the phrase with
            # that head word; "monthly" after "... billed annually?": the word of that kind
            return _sentence(prev[: same[0]] + rest + prev[same[1] :]) + "?"
        span = _prepositional(prev, rest)
        if span and not (new_names and _titles(prev[span[0] : span[1]], skip_first=False)):
            # "on Saturday" after "... open on weekdays": the phrase of the same preposition
            return _sentence(prev[: span[0]] + rest + prev[span[1] :]) + "?"
        final = _final_span(prev)
        if final and not new_names and _is_phrase(rest) and _plural(rest) == _plural(prev[final[0] :]):
            # "laptops" after "... fines on books": a noun phrase of the same number replaces it
            return _sentence(prev[: final[0]] + rest) + "?"
        if new_names and old_names:  # a name of the same kind: swap it
            old = old_names[-1]
            swapped = prev[: old.start()] + new_names[0].group(0) + prev[old.end() :]
            return _sentence(swapped) + "?"
        rest = re.sub(r"^(?:on|for|in|with|about)\s+", "", rest, flags=re.IGNORECASE) if new_names else rest
        joiner = (
            " for "
            if new_names and not re.match(r"^(if|when|while|with|without|on|in|for)\b", rest, re.I)
            else " "
        )
        return _sentence(f"{prev}{joiner}{rest}") + "?"
    resolved = body
    changed = False
    place = place_of(reply) if reply else None
    if place and _THERE.search(resolved):
        resolved = _THERE.sub(place, resolved, count=1)
        changed = True
    phrase = final_noun_phrase(prev)
    named = _DEMONSTRATIVE_NOUN.search(resolved)
    bare_demonstrative = False
    if named and named.group(1).lower() not in _BOUNDARY:
        # "those codes" after "... your recovery codes ...": the phrase with that head word
        found = _named_before(named.group(1), reply, prev)
        if found:
            resolved = resolved[: named.start()] + found + resolved[named.end() :]
            changed = True
        else:  # "make that longer": "that" is what the previous question asked about
            bare_demonstrative = True
    elif _DEMONSTRATIVE_LAST.search(resolved):
        bare_demonstrative = True  # "what's the rate limit for that?": the previous question's topic
    pronoun = _PRONOUN.search(resolved)
    if pronoun:
        plural = pronoun.group(0).lower() != "it"
        meant = referent(prev, reply, plural=plural)
        if meant:
            resolved = resolved[: pronoun.start()] + meant + resolved[pronoun.end() :]
            changed = True
    if not changed:
        from agentrag.steps.condense import is_topicless

        if bare_demonstrative or is_topicless(body):
            # "how many attempts in total?": the whole previous question is the topic
            resolved = f"{resolved}{REGARDING}{about(prev)}"
        elif phrase:
            resolved = f"{resolved}{REGARDING}{phrase}"
    return _sentence(resolved) + mark
