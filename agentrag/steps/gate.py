"""``gate()``: does this message need retrieval at all?

Local strategy (no LLM): greetings, thanks and pure arithmetic skip retrieval; everything
else retrieves. With an LLM, ``prompts/gate.j2`` decides.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from agentrag.context import Context
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


def _gate(ctx: Context, *, strategy: str = "auto") -> Outcome:
    if use_llm(ctx, strategy, "gate"):
        reply, calls = ask_json(ctx, "gate", GateReply, question=ctx.question)
        return Outcome(
            {"retrieve": reply.retrieve, "gate_reasoning": reply.reasoning},
            strategy="llm",
            attributes={"retrieve": reply.retrieve},
            content={"reasoning": reply.reasoning},
            llm_calls=tuple(calls),
        )
    if _CHAT.match(ctx.question):
        retrieve, why = False, "local: greeting or small talk"
    elif _ARITHMETIC.match(ctx.question) and any(ch.isdigit() for ch in ctx.question):
        retrieve, why = False, "local: arithmetic"
    else:
        retrieve, why = True, "local: a question for the documents"
    return Outcome(
        {"retrieve": retrieve, "gate_reasoning": why},
        strategy="local:chat-patterns",
        attributes={"retrieve": retrieve},
    )


gate = Step("gate", _gate)
