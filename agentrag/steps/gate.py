"""``gate()``: does this message need retrieval at all?

Local strategy (no LLM): greetings, thanks and pure arithmetic skip retrieval; so does, when the
context has a store, a question none of whose content words occurs in the searched collections (one
lexical lookup: "What is the capital of France?" over a product handbook); ``answer()`` then says
the knowledge base does not cover it. Everything else retrieves (a follow-up such as "and for
Business?" is not small talk, so it retrieves).
With an LLM, ``prompts/gate.j2`` decides, seeing the last ``max_turns`` earlier turns of the
conversation (fenced) so that a follow-up is judged in context.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from agentrag.context import Context
from agentrag.errors import AgentragError, InvalidInputError
from agentrag.step import Outcome, Step
from agentrag.steps._common import UNRELATED_REASON, ask_json, use_llm

_CHAT = re.compile(
    r"^((hi|hello|hey|hiya|yo|thanks|thank you|thx|cheers|good (morning|afternoon|evening|night)|"
    r"how are you( doing)?|bye|goodbye|see you|ok(ay)?|great|cool|perfect|got it|nice|awesome)[\s!.,?]*)+"
    r"((that'?s|that is) (all|it|great|helpful)|(you'?re|you are) (great|helpful)|have a nice day)?"
    r"[\s!.,?]*$",
    re.IGNORECASE,
)
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
_ARITHMETIC = re.compile(r"^(what is |what's |calculate )?[\d\s+\-*/^().,=x%]+\??$", re.IGNORECASE)


class GateReply(BaseModel):
    retrieve: bool
    reasoning: str = ""


def _gate(ctx: Context, *, strategy: str = "auto", max_turns: int = 6) -> Outcome:
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or not 1 <= max_turns <= 50:
        raise InvalidInputError(f"gate(): max_turns must be an integer from 1 to 50, got {max_turns!r}")
    if use_llm(ctx, strategy, "gate"):
        history: dict[str, object] = {}
        if ctx.history:
            from agentrag.prompts import new_delimiter

            turns = ctx.history[-max_turns:]
            history = {
                "history": [{"role": t.role, "content": t.content} for t in turns],
                "delimiter": new_delimiter(),
            }
        question = ctx.original_question or ctx.question
        reply, calls = ask_json(ctx, "gate", GateReply, question=question, **history)
        return Outcome(
            {"retrieve": reply.retrieve, "gate_reasoning": reply.reasoning},
            strategy="llm",
            attributes={"retrieve": reply.retrieve},
            content={"reasoning": reply.reasoning},
            llm_calls=tuple(calls),
        )
    message = ctx.original_question or ctx.question
    if _CHAT.match(message):
        retrieve, why = False, "local: greeting or small talk"
    elif _ARITHMETIC.match(message) and any(ch.isdigit() for ch in message):
        retrieve, why = False, "local: arithmetic"
    else:
        retrieve, why = True, "local: a question for the documents"
    warnings: tuple[str, ...] = ()
    if retrieve and ctx.deps.store is not None and ctx.history == ():
        try:
            if _no_word_occurs(ctx, message):
                retrieve, why = False, UNRELATED_REASON
        except AgentragError as exc:
            warnings = (f"gate: the vocabulary check failed ({type(exc).__name__}); retrieving",)
    return Outcome(
        {"retrieve": retrieve, "gate_reasoning": why},
        strategy="local:chat-patterns",
        attributes={"retrieve": retrieve},
        warnings=warnings,
    )


def _no_word_occurs(ctx: Context, message: str) -> bool:
    """Whether none of ``message``'s content words occurs in the collections it would search
    (one lexical lookup of those words; a follow-up is never judged alone: gate skips the check
    when there is history)."""
    from agentrag.evidence import question_terms

    store = ctx.deps.store
    assert store is not None
    words = [w for w in _WORDS.findall(message) if question_terms(w)]
    if not words:
        return False
    collections = ctx.collections or ctx.options.collections
    if not collections:
        from agentrag.retrieval.predicate import may_search

        scope = ctx.options.scope
        collections = tuple(
            c.name for c in store.collections() if may_search(scope, acl=c.acl, tenant=c.tenant)
        )
    if not collections:
        return False
    found = store.search(
        " ".join(words),
        collections=list(collections),
        mode="lexical",
        top_k=1,
        filters=ctx.options.filters,
        scope=ctx.options.scope,
    )
    return len(found.hits) == 0


gate = Step("gate", _gate)
