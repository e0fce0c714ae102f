"""``condense(strategy="auto", max_turns=6)``: turn a conversational follow-up into a standalone question.

Runs after ``new(question, history=[...])`` and before rewrite / search. The user's own words
stay in ``ctx.original_question``; ``ctx.question`` becomes the standalone question that every
later step (rewrite, route, search, rerank, answer) works on. Without history there is nothing
to resolve: the question is kept and the step is marked skipped.

With an LLM, ``prompts/condense.j2`` rewrites the message from the last ``max_turns`` turns
(fenced: earlier replies may quote documents). If the model fails, the local strategy answers
and the fallback is recorded as a degradation.

Local strategy (deterministic, no model):

1. A message *depends on the conversation* when it refers back (``it``, ``they``, ``them``,
   ``its``, ``their``, a demonstrative ``this / that / these / those`` that is not a conjunction,
   ``which one``, ``the same``), opens elliptically (``and ...``, ``what about ...``, ``how about
   ...``, ``what if ...``, ``also ...``, ``or ...``, ``same for ...``) or has fewer than two content
   terms. Any other message is standalone and passes unchanged (``local:standalone``).
   A message of two content words or fewer with a definite reference and no name or number of
   its own ("how long until the money is back?", not "What's the capital of France?") depends on
   it too, and so does an attribute question (how many / how much / how long / when / who /
   where) of three content words or fewer that names nothing of its own (``is_topicless``: "how
   many attempts in total?").
2. It is resolved against the turn it follows, never a chain of rewrites: the previous user
   question (itself resolved one level) and the assistant's reply to it
   (:mod:`agentrag.steps.followup`): an elliptical message repeats the previous question with the
   new name swapped in or the new part added ("and what if ..." as "<previous> if ..."; a question
   of its own after the opener is resolved as one); ``it`` / ``they`` / ``them`` become the subject
   of a previous "what is / what are" question, else the noun phrase of the previous question they
   agree with; ``there`` becomes the place the reply ended on; else
   the noun phrase is added: ``"<message>, regarding <noun phrase>"``; a topicless message or a bare
   "that" gets the whole previous question: ``"<message>, regarding <previous question>"``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from agentrag.context import MAX_QUESTION_CHARS, Context, Degradation, Turn
from agentrag.errors import InvalidInputError, LLMError
from agentrag.llm import LLMCall
from agentrag.step import Outcome, Step, calls_of
from agentrag.steps._common import ask_json, terms, use_llm

__all__ = ["condense", "condense_local", "is_follow_up", "is_topicless"]

_BARE_PRONOUN = re.compile(r"\b(it|they|them)\b", re.IGNORECASE)
_POSSESSIVE = re.compile(r"\b(its|their|theirs)\b", re.IGNORECASE)
# "this / that / these / those", except "that" as a conjunction ("check that the key is valid")
_DEMONSTRATIVE = re.compile(
    r"\b(this|these|those|that(?!\s+(?:the|a|an|my|our|your|i|we|you|he|she|there|every|all|no)\b))\b",
    re.IGNORECASE,
)
_WHICH_ONE = re.compile(
    r"\b(which|the other|another|the same|same)\s+(ones?|thing|one|way)?\b", re.IGNORECASE
)
_ELLIPTICAL_OPENER = re.compile(
    r"^(and|also|or|but|so|plus|then|what about|how about|what if|and what about|and how about|"
    r"same for|same question for|is that also|does that also)\b",
    re.IGNORECASE,
)
_DEFINITE = re.compile(r"\bthe\s+[a-z]", re.IGNORECASE)
_OWN_NAME = re.compile(r"(?<!^)\b[A-Z][A-Za-z]+|\d")  # a name (not the first word) or a number
# a question about an attribute (an amount, a duration, a time, a person, a place) ...
_ATTRIBUTE = re.compile(
    r"^(?:how\s+(?:many|much|long|often|far|soon|old|big)|what\s+time|when|who|whom|where)\b", re.IGNORECASE
)
# ... that names nothing of its own: no determiner or possessive before a noun, no name, no number
_NAMES_SOMETHING = re.compile(
    r"\b(?:the|a|an|my|our|your|his|her|this|these|those)\s+[A-Za-z0-9]|\b[A-Z][A-Za-z]*[A-Z]|"
    r"(?<!^)\b[A-Z][a-z]+|\d",
)


class CondenseReply(BaseModel):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    reasoning: str = ""


def _has_anaphor(message: str) -> bool:
    return bool(
        _BARE_PRONOUN.search(message)
        or _POSSESSIVE.search(message)
        or _DEMONSTRATIVE.search(message)
        or _WHICH_ONE.search(message)
    )


def is_follow_up(message: str) -> bool:
    """Whether ``message`` leans on earlier turns (the local strategy's rule 1)."""
    text = message.strip()
    from agentrag.evidence import question_terms

    if _ELLIPTICAL_OPENER.match(text) or _has_anaphor(text):
        return True
    if len(set(terms(text))) < 2:
        return True
    # two content words or fewer, one of them a definite reference ("how long until the money is back?"),
    # and no name or number of its own ("What's the capital of France?" stands alone)
    if len(question_terms(text)) <= 2 and _DEFINITE.search(text) and not _OWN_NAME.search(text):
        return True
    return is_topicless(text)


def is_topicless(message: str) -> bool:
    """An attribute question (``how many / how much / how long / when / who / where ...``) of three
    content words or fewer that names nothing of its own ("how many attempts in total?", "how much
    difference is allowed?"): it asks about the thing the conversation is on."""
    from agentrag.evidence import question_terms

    text = message.strip()
    return (
        bool(_ATTRIBUTE.match(text)) and len(question_terms(text)) <= 3 and not _NAMES_SOMETHING.search(text)
    )


def condense_local(question: str, history: Sequence[Turn]) -> str:
    """The local strategy: ``question`` made standalone from the turn it follows (the previous
    user question, itself resolved one level, and the assistant's reply to it); see
    :mod:`agentrag.steps.followup`."""
    from agentrag.steps.followup import resolve

    standalone: str | None = None
    reply: str | None = None
    for turn in history:
        if turn.role == "user":
            if standalone is not None and is_follow_up(turn.content):
                standalone = resolve(turn.content, standalone, reply)
            else:
                standalone = turn.content
            reply = None
        elif turn.role == "assistant":
            reply = turn.content
    if standalone is None or not is_follow_up(question):
        return question
    return resolve(question, standalone, reply)


def _llm_condense(ctx: Context, question: str, turns: Sequence[Turn]) -> tuple[str, str, list[LLMCall]]:
    from agentrag.prompts import new_delimiter

    reply, calls = ask_json(
        ctx,
        "condense",
        CondenseReply,
        question=question,
        history=[{"role": t.role, "content": t.content} for t in turns],
        delimiter=new_delimiter(),
    )
    return " ".join(reply.question.split()), reply.reasoning, calls


def _condense(ctx: Context, *, strategy: str = "auto", max_turns: int = 6) -> Outcome:
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or not 1 <= max_turns <= 50:
        raise InvalidInputError(f"condense(): max_turns must be an integer from 1 to 50, got {max_turns!r}")
    llm = use_llm(ctx, strategy, "condense")
    original = ctx.original_question or ctx.question
    keep = {"original_question": original}
    if not ctx.history:
        return Outcome(keep, strategy="none", skipped="no earlier turns")
    if ctx.retrieve is False:
        return Outcome(keep, strategy="none", skipped="gate decided no retrieval is needed")
    turns = ctx.history[-max_turns:]
    calls: tuple[LLMCall, ...] = ()
    degradations: tuple[Degradation, ...] = ()
    reasoning = ""
    standalone, used = original, "local:standalone"
    if llm:
        try:
            standalone, reasoning, got = _llm_condense(ctx, original, turns)
            calls, used = tuple(got), "llm"
        except LLMError as exc:
            calls = calls_of(exc)
            degradations = (
                Degradation("condense", "local-condense", f"{type(exc).__name__}; using the local strategy"),
            )
            llm = False
    if not llm:
        standalone = condense_local(original, turns)
        used = "local:carry-topic" if standalone != original else "local:standalone"
    return Outcome(
        {"question": standalone, "original_question": original},
        strategy=used,
        attributes={"changed": standalone != original, "history_turns": len(turns)},
        content={"question": standalone, "reasoning": reasoning},
        llm_calls=calls,
        degradations=degradations,
    )


condense = Step("condense", _condense)
