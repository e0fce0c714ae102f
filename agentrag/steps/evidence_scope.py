"""What an extractive answer reads: which hits (:func:`hits_for_evidence`) and which questions
(:func:`evidence_questions`) its evidence is scored on."""

from __future__ import annotations

from collections.abc import Sequence

from agentrag.context import Context
from agentrag.hits import Hit

__all__ = ["EVIDENCE_HITS", "evidence_questions", "hits_for_evidence", "typed_questions"]

EVIDENCE_HITS = 20  # hits an extractive answer reads (an LLM reads what the token budget packs)


def evidence_questions(ctx: Context) -> tuple[str, ...]:
    """The questions evidence is scored on: ``ctx.questions``, a condensed follow-up's carried
    topic left out (:func:`agentrag.steps.followup.asked`)."""
    from agentrag.steps.followup import asked

    if ctx.original_question is None or ctx.sub_questions:
        return ctx.questions
    return (asked(ctx.question),)


def typed_questions(ctx: Context) -> tuple[str, ...] | None:
    """A condensed follow-up as the user typed it ("what happens when I exceed it?"), beside
    :func:`evidence_questions`; None when the question was not condensed."""
    original = ctx.original_question
    if original is None or ctx.sub_questions or original.strip() == ctx.question.strip():
        return None
    return (original,)


def hits_for_evidence(ctx: Context, hits: Sequence[Hit], count: int = EVIDENCE_HITS) -> list[Hit]:
    """The hits an extractive answer reads: the top ``count`` of ``hits``, or with sub-questions,
    each sub-question's own best hits in turn (each search's hits in their own order, taken
    search by search). A merged ranking puts every search's best hit near the top, the best of a
    collection that does not answer a sub-question included, and can leave another sub-question's
    answer below the cut."""
    questions = ctx.questions
    if len(questions) < 2:
        return list(hits[:count])
    by_id = {h.chunk_id: h for h in hits}
    queues: list[list[Hit]] = []
    for question in questions:
        records = [r.hits for r in ctx.results if r.question == question]
        order: list[Hit] = []
        for rank in range(max((len(r) for r in records), default=0)):
            order.extend(r[rank] for r in records if rank < len(r) and r[rank].chunk_id in by_id)
        queues.append(order)
    chosen: dict[str, Hit] = {}
    while len(chosen) < min(count, len(by_id)) and any(queues):
        for queue in queues:
            while queue and queue[0].chunk_id in chosen:
                queue.pop(0)
            if queue and len(chosen) < count:
                hit = queue.pop(0)
                chosen[hit.chunk_id] = by_id[hit.chunk_id]
    for hit in hits:  # searches that recorded no hits of their own: the merged order fills the rest
        if len(chosen) >= count:
            break
        chosen.setdefault(hit.chunk_id, hit)
    return list(chosen.values())
