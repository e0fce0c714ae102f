"""Headings and titles that restate the question (issue #36): where a section's heading or a
document's title says what the question asks, the unit under it answers even when it does not repeat
the question's words.

* a section's heading is the *lead* of the units of its first paragraph (set by
  :func:`agentrag.evidence.units_of`);
* :func:`first_steps`: a document's title is the lead of its first list item, the first step of
  the task the title names ("How to recover a deleted note"); it restates only a question asking
  for steps ("How do I recover a deleted note?"), never a question about a fact;
* :func:`restated`: the units whose lead restates the question (a similarity at or above the
  threshold), computed by :func:`agentrag.evidence.score_units`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrag.answer_types import answer_type

if TYPE_CHECKING:
    from agentrag.evidence import Unit
    from agentrag.hits import Hit

__all__ = ["first_steps", "restated", "title_of"]

_TITLE_LINE = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def title_of(hit: Hit) -> str:
    """The document's title: its metadata's, else a level-1 heading in the chunk."""
    from agentrag.evidence import plain

    title = hit.metadata.get("title") if isinstance(hit.metadata, dict) else None
    found = _TITLE_LINE.search(hit.text) if not title else None
    return plain(str(title or (found.group(1) if found else "")))


def first_steps(units: list[Unit]) -> list[Unit]:
    """``units`` with each document's first list item (the first step of what its title names:
    "How to recover a deleted note") carrying the title as its ``lead``, so that a "how do I" question
    the title restates is answered by the procedure's first step (see :func:`restated`)."""
    from dataclasses import replace

    first: dict[str, int] = {}
    for i, unit in enumerate(units):
        if unit.kind == "item" and not unit.lead:
            at = first.get(unit.document_id)
            if at is None or unit.start < units[at].start:
                first[unit.document_id] = i
    out = list(units)
    for i in first.values():
        title = title_of(units[i].hit)
        if title:
            out[i] = replace(units[i], lead=title, first_step=True)
    return out


def restated(
    question: str, units: Sequence[Unit], similarity: Sequence[float], threshold: float
) -> list[int]:
    """The indices of ``units`` whose lead restates ``question``: ``similarity`` (the question's to
    each unit's lead) at or above ``threshold``; a title on a first step only for a question asking
    for steps (a title restates a task, not a fact)."""
    steps = answer_type(question) == "steps"
    return [
        i for i, value in enumerate(similarity) if value >= threshold and (steps or not units[i].first_step)
    ]
