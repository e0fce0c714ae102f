"""Extractive answers: the evidence units that answer, quoted with their citations, or an abstention.

:func:`gather` runs :mod:`agentrag.evidence` over the hits (units, vectors from the embedder when
there is one, scores, selection) and :mod:`agentrag.abstain` over the result (signals, confidence).
:func:`render` prints the selected units in reading order, each followed by its chunk's citation
marker; a table row reads ``"Header: cell; Header: cell."``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrag.abstain import DEFAULT_CALIBRATION, Calibration, Signals, confidence, signals
from agentrag.answer_window import prefer_typed, widen
from agentrag.context import SupportSpan
from agentrag.errors import AgentragError
from agentrag.evidence import Scored, Unit, plain, score_units, select, units_of
from agentrag.hits import Hit
from agentrag.unit_vectors import DEFAULT_CACHE, VectorCache

__all__ = ["Evidence", "cited_as_shown", "extractive_answer", "gather", "labelled", "render", "spans_of"]


@dataclass(frozen=True, slots=True)
class Evidence:
    """What :func:`gather` found for one answer."""

    units: tuple[Unit, ...]
    ranked: tuple[tuple[Scored, ...], ...]  # per question, every unit, best first
    selected: tuple[Scored, ...]  # what answers, in reading order
    signals: Signals
    confidence: float
    semantic: bool  # whether unit vectors were used
    fallback: str | None = None  # why they were not, when an embedder failed
    restated: tuple[str, ...] = ()  # "term -> the unit's word" said otherwise (paraphrase, wordforms)

    def closest(self, count: int = 3) -> list[Unit]:
        """The best unit of each of the ``count`` closest documents (for an abstention's pointer)."""
        seen: dict[str, Unit] = {}
        for ranked in self.ranked:
            for s in ranked:
                seen.setdefault(s.unit.document_id, s.unit)
                if len(seen) == count:
                    return list(seen.values())
        return list(seen.values())


def gather(
    questions: Sequence[str],
    hits: Sequence[Hit],
    *,
    embedder: Any = None,
    cache: VectorCache = DEFAULT_CACHE,
    calibration: Calibration | None = None,
    max_units: int = 3,
    typed: Sequence[str] | None = None,
) -> Evidence:
    """Score every unit of ``hits`` against ``questions``, select the answer, measure confidence.

    ``embedder`` (anything with ``embed``, ``model_id`` and ``version``; usually the store's):
    questions and units are embedded in one batch, units through ``cache``. When it fails the
    evidence is lexical only and ``fallback`` says why. ``typed``: per question, a condensed
    follow-up as the user typed it (a heading may restate that, see :func:`score_units`)."""
    import numpy as np

    calibration = calibration or DEFAULT_CALIBRATION
    units = units_of(hits)
    question_vectors = unit_vectors = lead_vectors = typed_vectors = None
    fallback = None
    if embedder is not None and units:
        try:
            question_vectors = cache.vectors(embedder, list(questions))
            leads = list(dict.fromkeys(u.lead for u in units if u.lead))
            vectors = cache.vectors(embedder, [plain(u.text) for u in units] + leads)
            unit_vectors = vectors[: len(units)]
            if question_vectors.shape[1] != unit_vectors.shape[1]:
                raise ValueError("question and unit vectors differ in size")
            question_vectors = np.asarray(question_vectors)
            row = {lead: vectors[len(units) + i] for i, lead in enumerate(leads)}
            zero = np.zeros(unit_vectors.shape[1], dtype=np.float32)
            lead_vectors = np.stack([row.get(u.lead, zero) for u in units])
            if typed and any(u.lead for u in units):
                typed_vectors = np.asarray(cache.vectors(embedder, list(typed)))
        except (AgentragError, ValueError) as exc:
            question_vectors = unit_vectors = lead_vectors = typed_vectors = None
            fallback = f"{type(exc).__name__}: evidence scored without the embedder (lexical only)"
    ranked = score_units(
        questions,
        units,
        question_vectors=question_vectors,
        unit_vectors=unit_vectors,
        lead_vectors=lead_vectors,
        typed_vectors=typed_vectors,
    )
    ranked = prefer_typed(ranked)
    chosen = select(ranked, units, threshold=calibration.select, max_units=max_units, questions=questions)
    chosen, filled = widen(chosen, units, ranked, questions)
    vector = max((h.vector_score for h in hits if h.vector_score is not None), default=None)
    missing = _missing(questions, ranked)
    said = _written_otherwise(questions, missing)
    if question_vectors is not None and missing:
        try:
            for qi, found in _restated(questions, missing, embedder, cache, said).items():
                said[qi] = {**said.get(qi, {}), **found}
        except (AgentragError, ValueError) as exc:
            fallback = f"{type(exc).__name__}: question words said otherwise in the evidence not checked"
    again = {qi: frozenset(found) for qi, found in said.items()}
    sig = signals(questions, ranked, [h.text for h in hits], vector, filled=filled, restated=again)
    return Evidence(
        tuple(units),
        tuple(tuple(r) for r in ranked),
        tuple(chosen),
        sig,
        confidence(sig, calibration),
        question_vectors is not None,
        fallback,
        tuple(f"{term} -> {word}" for found in said.values() for term, word in found.items()),
    )


def _missing(
    questions: Sequence[str], ranked: Sequence[Sequence[Scored]]
) -> dict[int, tuple[Unit, list[str]]]:
    """Per question with a best unit, that unit and the question's terms it (with its context and
    heading) does not hold; English only (empty with an answer language set)."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    if ANSWER_LANGUAGE.get() is not None:
        return {}
    from agentrag.evidence import has_term
    from agentrag.focus import answer_terms
    from agentrag.steps._common import terms

    out: dict[int, tuple[Unit, list[str]]] = {}
    for qi, (question, scored) in enumerate(zip(questions, ranked, strict=False)):
        if scored:
            best = scored[0].unit
            held = set(terms(best.text)) | set(terms(best.context)) | set(terms(best.lead))
            out[qi] = best, [t for t in answer_terms(question) if not has_term(held, t)]
    return out


def _written_otherwise(
    questions: Sequence[str], missing: dict[int, tuple[Unit, list[str]]]
) -> dict[int, dict[str, str]]:
    """Per question, the ``missing`` terms its best unit writes in another form, each with the unit's
    word (:func:`agentrag.wordforms.written_otherwise`)."""
    from agentrag.wordforms import written_otherwise

    out: dict[int, dict[str, str]] = {}
    for qi, (best, terms) in missing.items():
        if found := written_otherwise(questions[qi], best, terms):
            out[qi] = found
    return out


def _restated(
    questions: Sequence[str],
    missing: dict[int, tuple[Unit, list[str]]],
    embedder: Any,
    cache: VectorCache,
    written: dict[int, dict[str, str]],
) -> dict[int, dict[str, str]]:
    """Per question, the ``missing`` terms its best unit says in other words, each with the unit's word
    (:func:`agentrag.paraphrase.restated`); ``written``: per question the terms already found in
    another form (:func:`_written_otherwise`), not looked for again."""
    from agentrag.paraphrase import restated

    out: dict[int, dict[str, str]] = {}
    for qi, (best, terms) in missing.items():
        known = written.get(qi, {})
        if found := restated(questions[qi], best, [t for t in terms if t not in known], embedder, cache):
            out[qi] = found
    return out


_ENDED = re.compile(r"[.!?。！？\u0964][\"'”’)\]*_`」』]*$")


def _sentence(text: str) -> str:
    text = text.rstrip()
    return text if _ENDED.search(text) else text + "."


def _rule(header: str) -> str:
    cells = header.strip().strip("|").split("|")
    return "|" + "|".join("---" for _ in cells) + "|"


def _header(header: str, label: str) -> str:
    """A quoted table's header line, cited like its rows when it states more than column names
    (grounding checks every line: :func:`agentrag.grounding.table_header_needs_citation`)."""
    from agentrag.grounding import table_header_needs_citation

    return _cited_row(header, label) if table_header_needs_citation(header) else header


def _cited_row(row: str, label: str) -> str:
    row = row.rstrip()
    return f"{row[:-1].rstrip()} [{label}] |" if row.endswith("|") else f"{row} [{label}]"


def _lines(selected: Sequence[Scored]) -> list[tuple[str, str]]:
    """(answer sentence, the unit's text) per cited line or sentence of :func:`render`, in order."""
    from agentrag.grounding import split_sentences

    out: list[tuple[str, str]] = []
    for s in selected:
        if s.unit.kind == "row" and s.unit.quote:
            out.append((_cited_row(s.unit.quote, s.unit.chunk_id), s.unit.quote))
        else:
            pieces = split_sentences(_sentence(s.unit.text))
            out.extend((f"{piece} [{s.unit.chunk_id}]", s.unit.text) for piece in pieces)
    return out


def render(selected: Sequence[Scored]) -> str:
    """The selected units, each with its citation marker, in the order given: sentences run on as
    prose; table rows are quoted as written, under their table's header line (a small Markdown
    table, the marker in the row's last cell)."""
    from agentrag.grounding import split_sentences

    blocks: list[str] = []
    prose: list[str] = []
    items = list(selected)
    i = 0
    while i < len(items):
        unit = items[i].unit
        if unit.kind == "row" and unit.quote:
            group = [unit]
            while (
                i + 1 < len(items)
                and items[i + 1].unit.kind == "row"
                and items[i + 1].unit.hit is unit.hit
                and items[i + 1].unit.block == unit.block
            ):
                i += 1
                group.append(items[i].unit)
            if prose:
                blocks.append(" ".join(prose))
                prose = []
            lines = [_header(unit.header, unit.chunk_id), _rule(unit.header)] if unit.header else []
            lines.extend(_cited_row(u.quote, u.chunk_id) for u in group)
            blocks.append("\n".join(lines))
        else:
            # a unit with sentences inside cites each, as the grounding check splits
            prose.extend(f"{piece} [{unit.chunk_id}]" for piece in split_sentences(_sentence(unit.text)))
        i += 1
    if prose:
        blocks.append(" ".join(prose))
    return "\n\n".join(blocks)


def spans_of(selected: Sequence[Scored]) -> tuple[SupportSpan, ...]:
    """Each quoted unit is its own support: the span it was taken from."""
    out = []
    by_text: dict[str, Scored] = {}
    for s in selected:
        by_text.setdefault(s.unit.quote or s.unit.text, s)
    for sentence, text in _lines(selected):
        s = by_text[text]
        out.append(
            SupportSpan(
                sentence=sentence,
                chunk_id=s.unit.chunk_id,
                document_id=s.unit.document_id,
                start=s.unit.start,
                end=s.unit.end,
                text=s.unit.quote or s.unit.text,
                score=1.0,
                supported=True,
                method="quoted",
            )
        )
    return tuple(out)


def extractive_answer(
    question: str | Sequence[str],
    hits: Sequence[Hit],
    *,
    max_sentences: int = 3,
    embedder: Any = None,
    calibration: Calibration | None = None,
) -> str:
    """The sentences and table rows that answer ``question`` (or each sub-question), each cited
    with its chunk id, in reading order. When nothing clears the threshold the best unit is
    quoted; when the hits hold no quotable unit, the best hit's text as an excerpt."""
    questions = [question] if isinstance(question, str) else list(question)
    found = gather(questions, hits, embedder=embedder, calibration=calibration, max_units=max_sentences)
    if found.selected:
        return render(found.selected)
    best = [r[0] for r in found.ranked if r]
    if best:
        return render(best[:1])
    top = hits[0]
    return f'Excerpt: "{" ".join(top.text.split())[:300]}" [{top.chunk_id}]'


def cited_as_shown(chosen: Sequence[Scored], shown: Sequence[Hit]) -> tuple[Scored, ...]:
    """Each quoted unit cited under the chunk the context shows its text in.

    The evidence reads more hits than the context packs, and both merge adjacent chunks of one
    document, each keeping its best-ranked chunk's id: a unit read from one merged chunk may sit,
    in the context, inside another id's merged chunk. Cited under its own id, the answer's marker
    would name a chunk the citations list only under the other (an alias); cited under the shown
    chunk that covers it, the marker, ``ctx.citations``, the support span and ``context_used``
    name the same chunk. A unit no shown chunk covers keeps its own (its hit is added to
    ``context_used``)."""
    out = []
    for s in chosen:
        unit = s.unit
        cover = next(
            (
                h
                for h in shown
                if h.chunk_id != unit.chunk_id
                and h.document_id == unit.document_id
                and h.start_char <= unit.start
                and unit.end <= h.end_char
            ),
            None,
        )
        if cover is not None and all(h.chunk_id != unit.chunk_id for h in shown):
            s = dataclasses.replace(s, unit=dataclasses.replace(unit, hit=cover))
        out.append(s)
    return tuple(out)


def labelled(hits: Sequence[Hit], chosen: Sequence[Scored]) -> tuple[Hit, ...]:
    """``hits`` with each quoted chunk's section label set to the section its quoted units are in.

    A chunk's section is the one holding most of its text: a one-chunk file's quoted sentence may
    sit under another heading ("Limits" inside a chunk labelled "How long does reimbursement
    take?"). When every unit quoted from a chunk is under one heading, the citation names it."""
    sections: dict[str, set[str]] = {}
    for s in chosen:
        sections.setdefault(s.unit.chunk_id, set()).add(s.unit.section)
    out = []
    for hit in hits:
        named = sections.get(hit.chunk_id, set())
        if len(named) == 1 and (section := next(iter(named))) and section != hit.section:
            locator = dict(hit.locator or {})
            if isinstance(locator.get("section"), list) and locator["section"]:
                path = [p for p in locator["section"] if p != section]
                parent = path[:-1] if hit.section in path else path
                locator["section"] = [*parent, section]
            hit = dataclasses.replace(hit, section=section, locator=locator or hit.locator)
        out.append(hit)
    return tuple(out)
