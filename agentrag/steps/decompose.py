"""``decompose()``: split a complex question into independent sub-questions.

Local strategy (deterministic, no LLM):

1. several sentences ending in ``?`` become one sub-question each;
2. ``Compare A and B between/for X and Y`` becomes one question per aspect
   (``What are the A for X and Y?``);
3. ``... and what/how/why/when/where/which/who/can/does/is ...`` splits at that ``and``.

Anything else stays one question. With an LLM, ``prompts/decompose.j2`` decides.

Fan-out is bounded: ``max_sub_questions`` (default 5) is at most :data:`MAX_SUB_QUESTIONS` (10),
and either strategy keeps the first ``max_sub_questions`` sub-questions, so a question of 400
clauses is at most 10 searches per collection.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from agentrag.context import Context
from agentrag.errors import InvalidInputError
from agentrag.step import Outcome, Step
from agentrag.steps._common import ask_json, clean_list, use_llm

_COMPARE = re.compile(
    r"^(?:compare|contrast)\s+(?P<aspects>.+?)\s+(?:between|for|across|of|in)\s+(?P<targets>.+?)[.?!]*$",
    re.IGNORECASE,
)
_CLAUSE_SPLIT = re.compile(
    r",?\s+and\s+(?=(?:what|how|why|when|where|which|who|whom|whose|can|could|does|do|is|are|should|will)\b)",
    re.IGNORECASE,
)


class DecomposeReply(BaseModel):
    sub_questions: list[str] = Field(min_length=1)
    reasoning: str = ""


def _as_question(text: str) -> str:
    text = text.strip().rstrip(".!?,; ")
    return text[:1].upper() + text[1:] + "?"


def local_decompose(question: str) -> tuple[list[str], str]:
    questions = [q.strip() for q in re.findall(r"[^?]+\?", question) if q.strip()]
    if len(questions) > 1:
        return [_as_question(q) for q in questions], "local: several questions"
    compare = _COMPARE.match(question.strip())
    if compare:
        aspects = [a for a in re.split(r",\s*|\s+and\s+", compare.group("aspects")) if a.strip()]
        if len(aspects) > 1:
            targets = compare.group("targets").strip().rstrip(".?!")
            return [
                _as_question(f"What are the {a.strip()} for {targets}") for a in aspects
            ], "local: comparison"
        return [question], "local: comparison of one aspect"
    parts = _CLAUSE_SPLIT.split(question)
    if len(parts) > 1:
        return [_as_question(p) for p in parts], "local: conjunction of questions"
    return [question], "local: simple question"


#: The most sub-questions decompose() may produce (each is searched in every collection).
MAX_SUB_QUESTIONS = 10


def _decompose(ctx: Context, *, strategy: str = "auto", max_sub_questions: int = 5) -> Outcome:
    if (
        not isinstance(max_sub_questions, int)
        or isinstance(max_sub_questions, bool)
        or not 1 <= max_sub_questions <= MAX_SUB_QUESTIONS
    ):
        raise InvalidInputError(
            f"max_sub_questions must be an integer from 1 to {MAX_SUB_QUESTIONS}, got {max_sub_questions!r}"
        )
    if use_llm(ctx, strategy, "decompose"):
        reply, calls = ask_json(ctx, "decompose", DecomposeReply, question=ctx.question)
        subs = clean_list(reply.sub_questions, limit=max_sub_questions) or [ctx.question]
        return Outcome(
            {"sub_questions": tuple(subs), "decompose_reasoning": reply.reasoning},
            strategy="llm",
            attributes={"sub_question_count": len(subs)},
            content={"reasoning": reply.reasoning},
            llm_calls=tuple(calls),
        )
    subs, why = local_decompose(ctx.question)
    subs = clean_list(subs, limit=max_sub_questions)
    return Outcome(
        {"sub_questions": tuple(subs), "decompose_reasoning": why},
        strategy="local:conjunctions",
        attributes={"sub_question_count": len(subs)},
    )


decompose = Step("decompose", _decompose)
