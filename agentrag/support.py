"""Support-checked citations: does the chunk an answer sentence cites actually say it?

:func:`check_support` finds, for every claim of an answer (the sentences
:func:`agentrag.grounding.check_citations` checks, from the same splitter), its best supporting
span in the chunks it cites: a sentence or table row of the chunk (or two adjacent ones), with
its document offsets. The local score (0-1) is deterministic:

* **lexical**: the share of the claim's content terms the span contains (a claim that adds
  words of its own is less supported);
* **semantic**: cosine similarity of claim and span from the store's embedder, when there is one
  (it can raise a paraphrase's score, averaged with the lexical one, never lower it);
* **figures**: every number of the claim must appear in the span (``"30 days"`` is not
  supported by a span that says ``"14 days"``, nor ``"ninety days"`` by ``"30 days"``); a claim that
  negates what the clause of the span it matches affirms (or makes a negation the span never makes)
  is not supported either; each clause of a run-on (``;``) needs its own support.

A claim is supported when its score reaches ``threshold``. With ``judge="llm"`` (opt-in), an LLM
reads each claim beside its best span through ``prompts/support.j2`` (spans fenced with a random
delimiter: retrieved text is untrusted) and its verdict decides; the local score stays on the span.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrag.context import SupportSpan
from agentrag.errors import AgentragError
from agentrag.evidence import plain, question_terms, units_of
from agentrag.grounding import citation_labels, claim_sentences
from agentrag.hits import Hit
from agentrag.unit_vectors import DEFAULT_CACHE, VectorCache

if TYPE_CHECKING:
    from agentrag.context import Context
    from agentrag.llm import LLMCall

__all__ = ["DEFAULT_THRESHOLD", "SupportCheck", "check_support", "judge_with_llm"]

DEFAULT_THRESHOLD = 0.5
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(r"\b(not|no|never|cannot|can't|isn't|aren't|doesn't|don't|won't|without|none)\b", re.I)
_CITATION = re.compile(r"\[[^\[\]\n]{1,400}\]")


@dataclass(frozen=True, slots=True)
class SupportCheck:
    """Per claim, its best span; ``by_sentence`` maps the sentence text (as split) to it."""

    spans: tuple[SupportSpan, ...]

    @property
    def by_sentence(self) -> dict[str, SupportSpan]:
        return {s.sentence: s for s in self.spans}

    @property
    def unsupported(self) -> tuple[str, ...]:
        return tuple(s.sentence for s in self.spans if not s.supported)


@dataclass(frozen=True, slots=True)
class _Candidate:
    hit: Hit
    text: str
    start: int
    end: int


def _candidates(hit: Hit) -> list[_Candidate]:
    units = [u for u in units_of([hit])]
    out = [_Candidate(hit, u.text, u.start, u.end) for u in units]
    for a, b in itertools.pairwise(units):  # a claim may merge two adjacent sentences
        if a.block == b.block or b.start - a.end < 4:
            out.append(_Candidate(hit, f"{a.text} {b.text}", a.start, b.end))
    if not out:  # no complete sentence: the chunk itself
        out.append(_Candidate(hit, " ".join(hit.text.split()), hit.start_char, hit.end_char))
    return out


_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {w: str(10 * (i + 3)) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split())}  # noqa: SIM905
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)


def _figures(text: str) -> set[str]:
    """The numbers of ``text``, digits or words ("thirty" is 30)."""
    found = {n.replace(",", "") for n in _NUMBER.findall(text)}
    found.update(_NUMBER_WORDS[w.lower()] for w in _NUMBER_WORD.findall(text))
    return found


def _negated_where_it_matters(claim: str, span: str) -> bool:
    """Whether the claim and the clause of the span that matches it best disagree on negation."""
    clauses = [c for c in re.split(r"[;,:()]|\s[-–—]\s", span) if c.strip()] or [span]
    best = max(clauses, key=lambda c: _lexical(claim, c))
    if _NEGATION.search(claim):
        return not _NEGATION.search(span)  # a negation the span never makes
    return bool(_NEGATION.search(best))  # the span negates what the claim affirms


def _lexical(claim: str, span: str) -> float:
    from agentrag.steps._common import terms

    wanted = question_terms(claim)
    if not wanted:
        return 1.0
    have = set(terms(span))
    return sum(1 for t in wanted if t in have) / len(wanted)


def _local_score(claim: str, span: str, semantic: float | None) -> float:
    lexical = _lexical(claim, span)
    # the semantic signal can only help (a paraphrase), never sink a claim the words support
    score = lexical if semantic is None else max(lexical, 0.5 * lexical + 0.5 * max(0.0, semantic))
    missing = _figures(claim) - _figures(span)
    if missing:
        score *= 0.4
    if _negated_where_it_matters(claim, span):
        score *= 0.45
    return score


def check_support(
    answer: str,
    hits: Sequence[Hit],
    *,
    aliases: Mapping[str, str] | None = None,
    embedder: Any = None,
    cache: VectorCache = DEFAULT_CACHE,
    threshold: float = DEFAULT_THRESHOLD,
) -> SupportCheck:
    """The best supporting span of every cited claim of ``answer`` in the chunks it cites."""
    import numpy as np

    aliases = dict(aliases or {})
    by_id = {h.chunk_id: h for h in hits}
    claims: list[tuple[str, str, list[_Candidate]]] = []
    for sentence in claim_sentences(answer):
        labels = [aliases.get(label, label) for label in citation_labels(sentence)]
        cited = [by_id[label] for label in dict.fromkeys(labels) if label in by_id]
        bare = " ".join(_CITATION.sub("", sentence).split())
        if not cited:
            continue  # uncited or invalid: check_citations flags it
        claims.append((sentence, bare, [c for hit in cited for c in _candidates(hit)]))
    if not claims:
        return SupportCheck(())
    sims: list[list[float | None]] = [[None] * len(c[2]) for c in claims]
    if embedder is not None:
        try:
            claim_vectors = cache.vectors(embedder, [plain(bare) for _, bare, _ in claims])
            texts = sorted({plain(c.text) for _, _, cands in claims for c in cands})
            span_vectors = cache.vectors(embedder, texts)
            row = {t: i for i, t in enumerate(texts)}
            for i, (_, _, cands) in enumerate(claims):
                values = span_vectors[[row[plain(c.text)] for c in cands]] @ np.asarray(claim_vectors[i])
                sims[i] = [float(v) for v in values]
        except (AgentragError, ValueError):  # the lexical score decides; gather() records the failure
            sims = [[None] * len(c[2]) for c in claims]
    spans = []
    for (sentence, bare, cands), claim_sims in zip(claims, sims, strict=True):
        scored = [(_local_score(bare, c.text, s), c) for c, s in zip(cands, claim_sims, strict=True)]
        score, best = max(scored, key=lambda item: item[0])
        clauses = [c for c in re.split(r";\s+", bare) if len(c.split()) >= 3]
        if len(clauses) > 1:  # a run-on: every clause needs the support of a cited span
            score = min(score, *(max(_local_score(c, cand.text, None) for cand in cands) for c in clauses))
        spans.append(
            SupportSpan(
                sentence=sentence,
                chunk_id=best.hit.chunk_id,
                document_id=best.hit.document_id,
                start=best.start,
                end=best.end,
                text=best.text,
                score=round(min(1.0, score), 4),
                supported=score >= threshold,
                method="local",
            )
        )
    return SupportCheck(tuple(spans))


def judge_with_llm(ctx: Context, check: SupportCheck) -> tuple[SupportCheck, list[LLMCall]]:
    """The LLM's verdict on every claim beside its best span (``prompts/support.j2``, one call)."""
    from pydantic import BaseModel, Field

    from agentrag.prompts import new_delimiter
    from agentrag.steps._common import ask_json

    class Verdict(BaseModel):
        index: int = Field(ge=0)
        supported: bool

    class Verdicts(BaseModel):
        verdicts: list[Verdict]

    if not check.spans:
        return check, []
    items = [
        {"index": i, "claim": " ".join(_CITATION.sub("", s.sentence).split()), "span": s.text}
        for i, s in enumerate(check.spans)
    ]
    reply, calls = ask_json(ctx, "support", Verdicts, claims=items, delimiter=new_delimiter())
    verdicts = {v.index: v.supported for v in reply.verdicts}
    spans = tuple(
        replace(s, supported=verdicts.get(i, s.supported), method="llm" if i in verdicts else s.method)
        for i, s in enumerate(check.spans)
    )
    return SupportCheck(spans), calls
