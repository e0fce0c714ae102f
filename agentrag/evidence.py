"""Evidence selection: which sentences and table rows of the retrieved chunks answer a question.

Every retrieved chunk is cut into *units*: the complete prose sentences of :mod:`agentrag.sentences`
(one splitter for answers and for the grounding check) and the rows of its Markdown tables, each
row rendered with its header (``"Plan: Team; Seats: 2 to 50 seats"``) so that a row quoted alone
still says what its cells are. Text the document presents as a quoted example (a block quote) or
that addresses an assistant ("ignore previous instructions ...") is never a unit: it is not the
document's own statement and must not be lifted out of its context.

A unit is scored against each (sub-)question from four signals (:func:`score_units`):

* **semantic**: cosine similarity of the question's and the unit's vectors from the store's
  embedder (units embedded at answer time in one batch, cached by content; see :class:`VectorCache`);
* **lexical**: the share of the question's terms the unit contains, each term weighted by its
  rarity among the candidate units (IDF), with half credit for a term found only in the unit's
  local context (the sentence before it, the table's header, the section heading);
* **answer type** (:mod:`agentrag.answer_types`): what the question asks for (``how long`` -> a
  duration, ``how many`` / ``how much`` -> a number, of the thing a counting question names,
  ``where`` -> a place, address or menu path, ``how do I`` -> steps, ``when`` -> a time); a unit of
  the wanted kind gains, one without it loses;
* **retrieval**: the hit's rank among the answer's hits (a small prior).

A sentence that only points elsewhere ("see ...", "the exact numbers are in ...") loses a little, and
one that states the contrary of the question (:mod:`agentrag.contrast`: "largest" for "smallest",
"Henry III" for "Henry II") loses more. A
section heading (not the document's title) that restates the question ("What happens when you hit
the limit") counts as part of the section's first paragraph (``Unit.lead``).

:func:`select` keeps the units that clear a threshold near the best one (one is often right),
adds a unit's continuation when it starts with a back-reference ("This ...", "It ..."), for a
comparison ("the Team and Business plans") the quoted table's rows of each thing compared, and
orders them readably: the best unit's document first, document order within a document.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentrag.answer_types import answer_type, type_fit
from agentrag.contrast import contrast
from agentrag.focus import sibling, without_controls
from agentrag.hits import Hit
from agentrag.restated import first_steps, restated
from agentrag.unit_vectors import VectorCache  # re-exported: the cache moved there

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "EvidenceWeights",
    "Scored",
    "Unit",
    "VectorCache",
    "answer_type",
    "is_instruction_to_assistant",
    "plain",
    "score_units",
    "select",
    "units_of",
]

# ---- units --------------------------------------------------------------------------------------
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(the\s+)?(previous|prior|above|earlier)\s+"
    r"(instructions|prompts?|messages)|\bsystem prompt\b|\byou are (now )?an? (ai|assistant|language model)\b"
    r"|\b(as an ai|dear (ai|assistant|bot))\b",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")
_BACK_REFERENCE = re.compile(
    r"^[\"'“(*_]*(this|that|these|those|it|its|they|them|their|he|she|his|her|such|each|both|there|otherwise|"
    r"however|also|then|after that|in that case)\b",
    re.IGNORECASE,
)


# A sentence that sends the reader elsewhere instead of stating the fact.
_POINTER = re.compile(
    r"\b(see|refer to|are (?:documented|listed|described|explained|detailed) (?:in|on|under)|"
    r"is (?:documented|listed|described|explained|detailed) (?:in|on|under)|details are in|"
    r"(?:exact|full|complete|current|latest) \w+(?: \w+){0,3} (?:are|is) (?:in|on)|can be found (?:in|on)|"
    r"(?:are|is) covered (?:in|on))\b",
    re.IGNORECASE,
)


def plain(text: str) -> str:
    """``text`` without Markdown emphasis and code marks: what is embedded (the marks are noise to
    a sentence model), while answers quote the text as written."""
    return " ".join(_MARKUP.sub("", text).replace("`", "").split())


def is_instruction_to_assistant(text: str) -> bool:
    """Whether ``text`` addresses an assistant or model ("ignore previous instructions ...")."""
    return bool(_INSTRUCTION.search(text))


@dataclass(frozen=True, slots=True)
class Unit:
    """A quotable piece of a retrieved chunk: a sentence or a table row (with its header)."""

    text: str  # as quoted in an answer
    kind: str  # "sentence", "item" (a list item) or "row"
    hit: Hit
    rank: int  # the hit's rank among the answer's hits (0 = best)
    start: int  # offsets of the unit in its document
    end: int
    block: int  # units of one paragraph / list / table share a block number (per hit)
    context: str = ""  # the text around it that gives it meaning: previous sentence, header, section
    quote: str = ""  # a table row: the row's line as written (``text`` is it rendered with the header)
    header: str = ""  # a table row: the table's header line as written
    lead: str = ""  # the heading of the section whose first paragraph (or table) this unit is in
    section: str = ""  # the heading of the section it is in (the chunk's own section by default)
    first_step: bool = False  # its document's first list item, with the document's title as ``lead``

    @property
    def chunk_id(self) -> str:
        return self.hit.chunk_id

    @property
    def document_id(self) -> str:
        return self.hit.document_id


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [" ".join(_MARKUP.sub("", c).split()) for c in re.split(r"(?<!\\)\|", inner)]


def _row_text(header: list[str], cells: list[str]) -> str:
    """A table row as a sentence-like line: ``"Header: cell; Header: cell"``; a row whose first
    header cell is empty (a row label) reads ``"Label: Header cell; Header cell"``."""
    pairs = []
    label = ""
    for i, cell in enumerate(cells):
        name = header[i] if i < len(header) else ""
        if not cell or cell in ("-", "–", "—"):
            continue
        if i == 0 and not name:
            label = cell
            continue
        pairs.append(f"{name}: {cell}" if name else cell)
    body = "; ".join(pairs)
    return f"{label}: {body}" if label and body else (label or body)


def _table_units(hit: Hit, rank: int, first_block: int) -> list[Unit]:
    out: list[Unit] = []
    lines = hit.text.splitlines(keepends=True)
    offset = 0
    block = first_block
    header: list[str] | None = None
    header_line = ""
    previous_table = False
    heading = hit.section or ""
    lead = ""  # a heading line of this chunk with no paragraph after it yet
    # a chunk that starts below a Markdown table's header has it in its locator (readers.chunking)
    inherited = str((hit.locator or {}).get("table_header") or "").split("\n", 1)[0].strip()
    for i, raw in enumerate(lines):
        at = offset
        offset += len(raw)
        line = raw.rstrip("\r\n")
        if not _TABLE_LINE.match(line):
            previous_table = False
            header = None
            if line.lstrip().startswith("#"):
                heading = line.lstrip("# ").strip()
                lead = heading if line.lstrip().startswith("##") else ""
            elif line.strip():
                lead = ""
            continue
        if not previous_table:
            block += 1
            table_lead, lead = lead, ""
            following = lines[i + 1] if i + 1 < len(lines) else ""
            header = _cells(line) if _TABLE_RULE.match(following.rstrip("\r\n")) else []
            header_line = line.strip() if header else ""
            previous_table = True
            if header:
                continue
            if i == 0 and inherited:  # the chunk's first rows: their header is above the chunk
                header, header_line = _cells(inherited), inherited
        if _TABLE_RULE.match(line):
            continue
        cells = _cells(line)
        text = _row_text(header or [], cells)
        if len(text.split()) < 2 or is_instruction_to_assistant(text):
            continue
        context = " ".join(x for x in (heading, " ".join(header or [])) if x)
        start = hit.start_char + at + (len(line) - len(line.lstrip()))
        end = hit.start_char + at + len(line.rstrip())
        out.append(
            Unit(
                text,
                "row",
                hit,
                rank,
                start,
                end,
                block,
                context,
                line.strip(),
                header_line,
                table_lead,
                heading,
            )
        )
    return out


_HEADING_LINE = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def units_of(hits: Sequence[Hit]) -> list[Unit]:
    """Every quotable unit of ``hits``, hit by hit, in document order within a hit. A unit's context
    names the section it is in (the last heading above it in the chunk, else the chunk's section);
    the units of a section's first paragraph carry that heading as their ``lead``."""
    from agentrag.answer_languages import ANSWER_LANGUAGE
    from agentrag.sentences import sentences

    language = ANSWER_LANGUAGE.get()
    out: list[Unit] = []
    block = 0
    for rank, hit in enumerate(hits):
        previous = ""
        last_end = -10
        headings = [
            (m.start(), len(m.group(1)), _MARKUP.sub("", m.group(2)).strip())
            for m in _HEADING_LINE.finditer(hit.text)
        ]
        section, lead, lead_block = hit.section or "", "", -1
        for sentence in sentences(
            hit.text, cut_at_start=hit.start_char > 0, cut_at_end=True, language=language
        ):
            above = [(level, h) for at, level, h in headings if last_end <= at < sentence.start]
            if above:  # a heading between the previous sentence and this one: a new section
                # (a document's title names its topic; only a section's heading can restate a question)
                section, lead, lead_block = above[-1][1], above[-1][1] if above[-1][0] > 1 else "", -1
            if sentence.kind == "quote" or is_instruction_to_assistant(sentence.text):
                previous = ""
                continue
            if hit.text[last_end : sentence.start].count("\n") > 1 or sentence.kind == "item":
                block += 1  # a new paragraph (or list item)
                previous = previous if sentence.kind == "item" else ""
            if lead and lead_block < 0:
                lead_block = block
            last_end = sentence.end
            text = sentence.text  # verbatim: an answer quotes the document exactly
            if not sentence.complete or text.rstrip("*_\"')").endswith("?"):
                previous = text
                continue
            kind = "item" if sentence.kind == "item" else "sentence"
            context = " ".join(x for x in (section, previous) if x)
            start, end = hit.start_char + sentence.start, hit.start_char + sentence.end
            opens = lead if block == lead_block else ""
            out.append(Unit(text, kind, hit, rank, start, end, block, context, lead=opens, section=section))
            previous = text
        block += 1
        table = _table_units(hit, rank, block)
        out.extend(table)
        block = max([block, *(u.block for u in table)]) + 1
    return first_steps(out)


# ---- scoring ------------------------------------------------------------------------------------
_QUESTION_WORDS = frozenset(
    """what which who whom whose when where why how does do did can could should would will is are was
    were has have had may might must shall tell know explain get gets got go goes going there here about
    any some much many long way ways thing things happen happens i me my we our us you your he him his
    she her they them their its one ones also just only too very really please from into onto over
    under up down out off than then so yet still until""".split()  # noqa: SIM905
)
# what an answer need not say to answer: a light verb ("can an admin *make* that longer?") and the degrees
# of the question word "long"; dropped when evidence is scored, kept when a message is read ("more" and
# "most" stay: "*most* working children" qualifies)
_ANSWER_NEUTRAL = frozenset("make makes made making longer longest".split())  # noqa: SIM905
# a request's leading verb ("*Compare* the API rate limits ..."), which "tell" and "explain" already are
_REQUEST = re.compile(r"^\W*(compare|contrast|describe|summari[sz]e|list|outline|define|show|give)\b", re.I)


def question_terms(question: str, *, scoring: bool = False) -> list[str]:
    """The stemmed content terms of a question (question words and stop words removed); ``scoring``:
    as evidence is scored, without what an answer need not say (``_ANSWER_NEUTRAL``, a request's
    leading verb)."""
    from agentrag.answer_languages import ANSWER_LANGUAGE, QUESTION_WORDS
    from agentrag.steps._common import terms

    words = _QUESTION_WORDS | QUESTION_WORDS.get(ANSWER_LANGUAGE.get() or "", frozenset())
    english = scoring and ANSWER_LANGUAGE.get() is None
    words = words | _ANSWER_NEUTRAL if english else words
    request = _REQUEST.match(question) if english else None
    words = words | {request.group(1).lower()} if request else words
    drop = {t for w in words for t in terms(w)}
    return [t for t in dict.fromkeys(terms(question)) if t not in drop]


@dataclass(frozen=True, slots=True)
class EvidenceWeights:
    """How :func:`score_units` combines its signals (defaults calibrated on the sample corpus)."""

    semantic: float = 0.45
    passage: float = 0.12  # the similarity of the question and the unit's whole chunk (its units' mean)
    lexical: float = 0.35
    answer_type: float = 0.08
    retrieval: float = 0.06
    pointer: float = 0.05  # what a sentence that only points elsewhere ("see ...") loses
    restates: float = 0.75  # a heading this similar to the question restates it (see score_units)
    sibling: float = 0.15  # what a unit answering a sibling question loses (agentrag.focus.sibling)
    contrast: float = 0.3  # per pattern, what a unit stating the contrary loses (agentrag.contrast)


@dataclass(frozen=True, slots=True)
class Scored:
    """One unit's score for one question, with the signals it came from."""

    unit: Unit
    score: float
    semantic: float
    lexical: float
    type_fit: float
    question: int = 0  # which (sub-)question
    contrary: float = 0.0  # what it lost for stating the contrary of the question (agentrag.contrast)


@dataclass(slots=True)
class _Pool:
    units: list[Unit]
    unit_terms: list[set[str]]
    context_terms: list[set[str]]
    lead_terms: list[set[str]]
    idf: dict[str, float] = field(default_factory=dict)


def _pool(units: Sequence[Unit]) -> _Pool:
    from agentrag.steps._common import terms

    unit_terms = [set(terms(u.text)) for u in units]
    context_terms = [set(terms(u.context)) for u in units]
    lead_terms = [set(terms(u.lead)) for u in units]
    df: dict[str, int] = {}
    for ts in unit_terms:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    n = len(units)
    idf = {t: math.log(1.0 + (n + 1) / (c + 0.5)) for t, c in df.items()}
    return _Pool(list(units), unit_terms, context_terms, lead_terms, idf)


NAME_WEIGHT = 2.0


def has_term(present: set[str] | frozenset[str], term: str) -> bool:
    """Whether ``term`` or its plural (or singular) is in ``present``: the stemmer leaves some
    plurals whole ("DVDs" -> ``dvds``), so "a DVD" would miss them."""
    return term in present or term + "s" in present or (term.endswith("s") and term[:-1] in present)


_NAME = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][a-z][A-Za-z0-9-]*")


def named_terms(question: str) -> set[str]:
    """The stemmed terms of the names in ``question``: capitalised words after its first (not
    acronyms: "API" or "SSO" name the domain, not one thing in it)."""
    from agentrag.steps._common import terms

    return {t for m in _NAME.finditer(question.strip()) for t in terms(m.group(0))}


def lexical_scores(question: str, pool: _Pool, *, lead: bool = False) -> list[float]:
    """Per unit, the IDF-weighted share of the question's terms it contains (half credit for one
    only in its context); ``lead``: the heading a unit opens counts as part of the unit."""
    asked = question_terms(question, scoring=True)
    if not asked:
        return [0.0] * len(pool.units)
    rare = math.log(1.0 + (len(pool.units) + 1) / 0.5)  # a term in no unit is as rare as can be
    weights = {t: pool.idf.get(t, rare) for t in asked}
    from agentrag.focus import topic_acronyms

    for t in (named_terms(question) | topic_acronyms(question, pool.unit_terms)) & weights.keys():
        # a name the question gives ("on Enterprise", "at Northside") narrows what answers it,
        # however many units mention it
        weights[t] *= NAME_WEIGHT
    total = sum(weights.values())
    from agentrag.focus import kind_instances, names_one

    kind, names = kind_instances(question, pool.units)
    # in another language, a compound's part or another form of the term too (answer_languages)
    from agentrag.answer_languages import ANSWER_LANGUAGE, loosely_held

    loose = ANSWER_LANGUAGE.get() is not None

    def held(present: set[str], t: str) -> bool:
        return has_term(present, t) or (loose and loosely_held(present, t))

    out = []
    rows = zip(pool.units, pool.unit_terms, pool.context_terms, pool.lead_terms, strict=True)
    for unit, ts, cs, ls in rows:
        ts = ts | ls if lead else ts
        if kind and names_one(unit, names):
            ts = ts | {kind}  # "Team" answers "which plans"
        got = sum(w for t, w in weights.items() if held(ts, t)) + 0.5 * sum(
            w for t, w in weights.items() if not held(ts, t) and held(cs, t)
        )
        out.append(got / total)
    return out


def _passage_similarity(units: Sequence[Unit], vectors: np.ndarray, question: np.ndarray) -> list[float]:
    """Per unit, the question's similarity to the mean of its chunk's unit vectors: what the passage
    is about (a stray sentence in an unrelated chunk scores lower than one in a chunk on the topic)."""
    import numpy as np

    groups: dict[str, list[int]] = {}
    for i, unit in enumerate(units):
        groups.setdefault(unit.chunk_id, []).append(i)
    out = [0.0] * len(units)
    for rows in groups.values():
        centroid = vectors[rows].mean(axis=0)
        norm = float(np.linalg.norm(centroid))
        value = float(centroid @ question) / norm if norm else 0.0
        for i in rows:
            out[i] = value
    return out


def score_units(
    questions: Sequence[str],
    units: Sequence[Unit],
    *,
    question_vectors: np.ndarray | None = None,
    unit_vectors: np.ndarray | None = None,
    lead_vectors: np.ndarray | None = None,
    typed_vectors: np.ndarray | None = None,
    weights: EvidenceWeights = EvidenceWeights(),
) -> list[list[Scored]]:
    """Per question, every unit scored (best first). Without vectors the semantic signal is
    left out and the other weights are rescaled to the same total.

    ``lead_vectors`` (a row per unit: the vector of the heading it opens, zeros when none): when a
    section's heading restates the question ("What happens when you hit the limit" for "what
    happens when I hit the rate limit?"), the heading is evidence for the section's first
    paragraph: the unit is scored as if it said the heading too (the better of the two).
    ``typed_vectors`` (a row per question, optional): a condensed follow-up as the user typed it
    ("what happens when I exceed it?"), which a heading may restate when the resolved question,
    carrying the previous one's topic, no longer does."""
    pool = _pool(units)
    semantic_on = question_vectors is not None and unit_vectors is not None and len(units) > 0
    scale = 1.0
    if not semantic_on:
        scale = (weights.semantic + weights.passage + weights.lexical) / weights.lexical
    out: list[list[Scored]] = []
    for qi, question in enumerate(questions):
        lex = lexical_scores(question, pool)
        if semantic_on:
            assert question_vectors is not None and unit_vectors is not None
            sims = (unit_vectors @ question_vectors[qi]).tolist()
            passages = _passage_similarity(units, unit_vectors, question_vectors[qi])
            if lead_vectors is not None and len(lead_vectors) == len(units):
                leads = (lead_vectors @ question_vectors[qi]).tolist()
                if typed_vectors is not None and qi < len(typed_vectors):  # the follow-up as typed
                    typed = (lead_vectors @ typed_vectors[qi]).tolist()
                    leads = [max(a, b) for a, b in zip(leads, typed, strict=True)]
                which = restated(question, units, leads, weights.restates)
                if which:
                    with_lead = lexical_scores(question, pool, lead=True)
                    for i in which:
                        sims[i] = max(sims[i], leads[i])
                        lex[i] = max(lex[i], with_lead[i])
        else:
            sims = [0.0] * len(units)
            passages = [0.0] * len(units)
        kind = answer_type(question)
        scored = []
        for unit, lexical, sim, passage in zip(units, lex, sims, passages, strict=True):
            fit = type_fit(kind, without_controls(unit.text), question=question, row=unit.kind == "row")
            # a table row holds every value of its record: another cell's opposite is not in the term's place
            contrary = (
                0.0 if unit.kind == "row" else weights.contrast * contrast(question, unit.text, unit.context)
            )
            score = (
                -weights.pointer * bool(_POINTER.search(unit.text))
                - weights.sibling * sibling(question, unit.text, unit.context)
                - contrary
                + weights.semantic * max(sim, 0.0)
                + weights.passage * max(passage, 0.0)
                + weights.lexical * lexical * scale
                + weights.answer_type * fit
                + weights.retrieval / (1 + unit.rank)
            )
            scored.append(Scored(unit, score, sim, lexical, fit, qi, contrary))
        scored.sort(key=lambda s: (-s.score, s.unit.rank, s.unit.start))
        out.append(scored)
    return out


def _near_duplicate(a: str, b: str) -> bool:
    from agentrag.steps._common import terms

    ta, tb = set(terms(a)), set(terms(b))
    if not ta or not tb:
        return a.lower() == b.lower()
    return len(ta & tb) / len(ta | tb) >= 0.8


def _compared_rows(
    picked: Sequence[Scored], units: Sequence[Unit], questions: Sequence[str], chosen: set[int]
) -> list[Scored]:
    """For each quoted table row of a question naming two things or more, the first row of the same
    table for each named thing no quoted row of it names (both plans' rows for a comparison)."""
    from agentrag.steps._common import terms

    out: list[Scored] = []
    for p in picked:
        if p.unit.kind != "row" or p.question >= len(questions):
            continue
        names = named_terms(questions[p.question])
        if len(names) < 2:
            continue
        table = [u for u in units if u.kind == "row" and u.hit is p.unit.hit and u.block == p.unit.block]
        quoted = [u for u in table if id(u) in chosen]
        for name in sorted(names):
            if any(has_term(set(terms(u.quote or u.text)), name) for u in quoted):
                continue
            row = next((u for u in table if has_term(set(terms(u.quote or u.text)), name)), None)
            if row is not None and id(row) not in chosen:
                chosen.add(id(row))
                quoted.append(row)
                out.append(Scored(row, p.score, p.semantic, p.lexical, p.type_fit, p.question))
    return out


def select(
    ranked: Sequence[Sequence[Scored]],
    units: Sequence[Unit],
    *,
    threshold: float,
    margin: float = 0.06,
    max_units: int = 3,
    questions: Sequence[str] = (),
) -> list[Scored]:
    """The units that answer: per question, the best one when it clears ``threshold``, and the
    others within ``margin`` of it (another document's within half the margin), at most
    ``max_units`` in all; then back-reference continuations and, for a question that names two
    things or more (a comparison: "the Team and Business plans"), the rows of a quoted table for the
    named things its quoted rows leave out; in reading order."""
    picked: list[Scored] = []
    per_question = max(1, -(-max_units // max(1, len(ranked))))  # ceil: every part gets its share
    for scored in ranked:
        if not scored or scored[0].score < threshold:
            continue
        best = scored[0]
        taken = 0
        for candidate in scored:
            if taken == per_question:
                break
            gap = best.score - candidate.score
            allowed = margin if candidate.unit.document_id == best.unit.document_id else margin / 2
            if candidate.score < threshold or gap > margin:
                break  # best first: every later one is further off
            if gap > allowed:
                continue
            if any(_near_duplicate(candidate.unit.text, p.unit.text) for p in picked):
                continue
            picked.append(candidate)
            taken += 1
    chosen = {id(p.unit) for p in picked}
    extra: list[Scored] = []
    index = {id(u): i for i, u in enumerate(units)}
    for p in picked:
        i = index.get(id(p.unit))
        if i is None:
            continue
        around = []
        if _BACK_REFERENCE.match(p.unit.text) and i > 0:
            around.append(units[i - 1])  # the sentence the unit refers back to
        if i + 1 < len(units) and _BACK_REFERENCE.match(units[i + 1].text):
            around.append(units[i + 1])  # its continuation
        for unit in around:
            if unit.hit is p.unit.hit and unit.block == p.unit.block and id(unit) not in chosen:
                chosen.add(id(unit))
                extra.append(Scored(unit, p.score, p.semantic, p.lexical, p.type_fit, p.question))
    extra.extend(_compared_rows(picked, units, questions, chosen))
    everything = picked + extra
    first_doc: dict[str, int] = {}
    for order, p in enumerate(picked):
        first_doc.setdefault(p.unit.document_id, order)
    everything.sort(key=lambda s: (first_doc.get(s.unit.document_id, 99), s.unit.start))
    return everything
