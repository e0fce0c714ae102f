"""``gate()``: does this message need retrieval at all?

Local strategy (no LLM): greetings, thanks and pure arithmetic skip retrieval; everything
else retrieves (a follow-up such as "and for Business?" is not small talk, so it retrieves).
With an LLM, ``prompts/gate.j2`` decides, seeing the last ``max_turns`` earlier turns of the
conversation (fenced) so that a follow-up is judged in context.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from agentrag.context import Context
from agentrag.errors import InvalidInputError
from agentrag.step import Outcome, Step
from agentrag.steps._common import ask_json, use_llm

_CHAT = re.compile(
    r"^(hi|hello|hey|hiya|yo|thanks|thank you|thx|cheers|good (morning|afternoon|evening|night)|"
    r"how are you( doing)?|bye|goodbye|see you|ok(ay)?|great|cool)[\s!.,?]*$",
    re.IGNORECASE,
)
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
    return Outcome(
        {"retrieve": retrieve, "gate_reasoning": why},
        strategy="local:chat-patterns",
        attributes={"retrieve": retrieve},
    )


gate = Step("gate", _gate)
