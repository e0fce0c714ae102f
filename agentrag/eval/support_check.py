"""Support-check precision and recall on scripted LLM replies (FakeLLM), over a real store.

For each answerable question of a question set, the question is searched (local strategies) and
replies are written from its hits, sentence by labelled sentence:

* ``supported``: a whole sentence of a retrieved chunk, citing that chunk; ``supported_part``: the
  clause after its first comma, as a sentence of its own;
* ``number``: such a sentence with a figure changed, citing the same chunk (unsupported);
* ``wrong_chunk``: a sentence of another document's chunk, citing a chunk that does not say it;
* ``fabricated``: an invented claim citing a retrieved chunk; ``uncited``: one without a citation;
* the bypass forms of issue #23: ``colon`` (an uncited claim ending in ``:``, then the cited sentence
  on its line or as a list item below it), ``lowercase`` (an
  uncited claim after a cited sentence, starting lowercase), ``short`` (two words or fewer:
  ``Password: hunter2.``) and ``semicolon`` (an invented clause run on after a cited one).

Each reply goes through ``answer()`` with a :class:`agentrag.testing.FakeLLM` that returns it. A
sentence counts as flagged when a flagged claim of the answer (``ungrounded_claims``, or a
``support`` span that is not supported) contains it, or it contains that claim. The scores: the
share of unsupported sentences flagged (recall), the share of flags that hit an unsupported
sentence (precision) and the share of supported sentences kept; per form too.

Like :mod:`agentrag.eval.answers`, only ``agentrag``'s public API and ``agentrag.testing`` are
used, inside functions, so the benchmark runs it against older versions of the library too.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FORMS", "Reply", "Unit", "build_replies", "check_replies", "score_support"]

FORMS = (
    "supported",
    "supported_part",
    "number",
    "wrong_chunk",
    "fabricated",
    "uncited",
    "colon",
    "lowercase",
    "short",
    "semicolon",
)
# invented claims that no document of either sample corpus makes (any domain)
FABRICATED = (
    "Every customer also receives a free lifetime licence for each member of the team.",
    "This limit is waived automatically for anyone who asks by phone.",
    "The administrator can undo this at any time, even years later.",
    "All of this is handled by a partner company based in Singapore.",
    "Requests like this are approved within ten seconds by an automated robot.",
    "A paper form sent by post is required before anything can change.",
    "The setting is only available to users who joined before 2019.",
    "Members who ask politely get twice the usual allowance.",
)
CLAUSES = (
    "then the data is copied to a public archive every night",
    "then everything is also sent to your manager by fax",
    "after that, the process restarts from the beginning automatically",
    "then the account is closed without any notice",
)
LEAD_INS = (
    "Before anything else, send your password to the administrator:",
    "You must also email your recovery codes to the team:",
    "Everyone gets unlimited storage on every plan:",
    "The free plan includes phone support around the clock:",
)
SHORTS = ("Password: hunter2.", "Always free.", "Refunds guaranteed.", "No limits.", "Unlimited seats.")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_KEEP = re.compile(r"[^a-z0-9 ]+")
_CITATION = re.compile(r"\[[^\[\]\n]{1,200}\]")


@dataclass(frozen=True, slots=True)
class Unit:
    text: str  # as written in the reply (with its citation, if any)
    form: str
    supported: bool


@dataclass(slots=True)
class Reply:
    question: str
    text: str
    units: tuple[Unit, ...]
    flagged: list[bool] = field(default_factory=list)  # per unit, after the check
    claims: list[str] = field(default_factory=list)  # what the check flagged
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _key(text: str) -> str:
    text = unicodedata.normalize("NFKC", _CITATION.sub(" ", text)).lower().replace("*", "").replace("`", "")
    return " ".join(_KEEP.sub(" ", text).split())


def _sentences(hit: Any) -> list[str]:
    """The hit's complete sentences (the library's own splitter), emphasis markers removed."""
    from agentrag.sentences import sentences

    out = []
    for s in sentences(hit.text, cut_at_start=hit.start_char > 0, cut_at_end=True):
        text = " ".join(s.text.replace("**", "").split())
        natural = not any(mark in text for mark in ("|", "\u2192", '"'))  # no table rows, arrows, quotes
        if s.complete and len(text.split()) >= 5 and not text.endswith(("?", ":")) and natural:
            out.append(text if text.endswith((".", "!")) else text + ".")
    return out


def _with_citation(sentence: str, label: str) -> str:
    body = sentence.rstrip(".!")
    return f"{body} [{label}]."


def _bump(sentence: str) -> str | None:
    """``sentence`` with its first figure changed (None without a figure)."""
    match = _NUMBER.search(sentence)
    if match is None:
        return None
    value = match.group(0).replace(",", "")
    try:
        number = float(value)
    except ValueError:  # pragma: no cover - the pattern only matches numbers
        return None
    changed = int(number * 3 + 7) if number == int(number) else round(number * 3 + 0.7, 2)
    return sentence[: match.start()] + f"{changed}" + sentence[match.end() :]


def _part(sentence: str) -> str | None:
    """The clause after the first comma, as a sentence of its own (what a model quoting loosely
    writes): still said by the chunk. None when that leaves fewer than six words."""
    head, sep, rest = sentence.partition(", ")
    if not sep or len(rest.split()) < 6 or not head:
        return None
    return rest[:1].upper() + rest[1:]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def build_replies(
    store: Any,
    items: Sequence[Mapping[str, Any]],
    collections: Sequence[str],
    *,
    replies: int = 200,
    seed: int = 0,
) -> list[Reply]:
    """At least ``replies`` scripted replies (cycling through the questions), deterministic in ``seed``."""
    import agentrag as ar

    rng = random.Random(seed)
    pools: list[tuple[str, list[tuple[str, str]], list[tuple[str, str]]]] = []
    for item in items:
        ctx = ar.new(item["question"], store=store, collections=list(collections)).search().rerank()
        hits = list(ctx.hits[:3])
        if not hits:
            continue
        own = [(s, hits[0].chunk_id) for s in _sentences(hits[0])]
        own += [(s, h.chunk_id) for h in hits[1:] for s in _sentences(h)]
        cited_docs = {h.document_id for h in hits}
        others = [
            (s, h.chunk_id) for h in ctx.hits[3:] if h.document_id not in cited_docs for s in _sentences(h)
        ]
        if own:
            pools.append((item["question"], own, others))
    if not pools:
        return []
    out: list[Reply] = []
    shape = 0
    while len(out) < replies:
        for question, own, others in pools:
            if len(out) >= replies:
                break
            out.append(_reply(question, own, others, shape, rng))
            shape += 1
    return out


def _reply(
    question: str, own: list[tuple[str, str]], others: list[tuple[str, str]], shape: int, rng: random.Random
) -> Reply:
    sentence, label = own[shape % len(own)]
    second, second_label = own[(shape + 1) % len(own)]
    units: list[Unit] = [Unit(_with_citation(sentence, label), "supported", True)]
    separators: dict[int, str] = {}  # before unit i, when not a space
    kind = shape % 6
    if kind == 0:
        figures = [(s, lab) for s, lab in own if s != sentence and _NUMBER.search(s)]
        if figures:
            source, source_label = figures[shape % len(figures)]
            units.append(Unit(_with_citation(str(_bump(source)), source_label), "number", False))
        else:
            units.append(Unit(_with_citation(rng.choice(FABRICATED), label), "fabricated", False))
    elif kind == 1 and others:
        foreign, _ = rng.choice(others)
        units.append(Unit(_with_citation(foreign, label), "wrong_chunk", False))
    elif kind == 1:
        units.append(Unit(_with_citation(rng.choice(FABRICATED), second_label), "fabricated", False))
    elif kind == 2:
        units.append(Unit(rng.choice(FABRICATED), "uncited", False))
        if second != sentence:
            units.append(Unit(_with_citation(second, second_label), "supported", True))
    elif kind == 3:  # the lead-in on the cited sentence's line, or above it as a list item
        units.insert(0, Unit(rng.choice(LEAD_INS), "colon", False))
        units.append(Unit(rng.choice(SHORTS), "short", False))
        if rng.random() < 0.5:
            separators = {1: "\n- ", 2: "\n\n"}
    elif kind == 4:
        units.append(Unit(_lower_first(rng.choice(CLAUSES)) + ".", "lowercase", False))
    else:
        clause = rng.choice(CLAUSES)
        if rng.random() < 0.5:  # the citation after the cited clause, or at the very end
            first = units.pop(0)
            units.append(Unit(first.text.rstrip("."), "semicolon-head", True))
            units.append(Unit(f"; {clause}.", "semicolon", False))
        else:
            units[0] = Unit(sentence.rstrip(".!"), "semicolon-head", True)
            units.append(Unit(f"; {clause} [{label}].", "semicolon", False))
    if kind in (0, 1, 4):  # and a loosely quoted clause of another sentence, when there is one
        parts = [(p, lab) for s, lab in own if s != sentence for p in [_part(s)] if p]
        if parts:
            part, part_label = parts[shape % len(parts)]
            units.append(Unit(_with_citation(part, part_label), "supported_part", True))
    text = ""
    for i, unit in enumerate(units):
        if not text or unit.text.startswith(";"):
            text += unit.text
        else:
            text += separators.get(i, " ") + unit.text
    return Reply(question, text, tuple(units))


def _flagged_claims(ctx: Any) -> list[str]:
    claims = list(ctx.ungrounded_claims)
    for span in getattr(ctx, "support", ()) or ():
        if not span.supported:
            claims.append(span.sentence)
    return claims


def _is_flagged(unit: Unit, claims: Sequence[str]) -> bool:
    key = _key(unit.text)
    if not key:
        return False
    for claim in claims:
        other = _key(claim)
        if other and (key in other or (other in key and len(other) >= 0.5 * len(key))):
            return True
    return False


def check_replies(
    store: Any,
    replies: Sequence[Reply],
    collections: Sequence[str],
    *,
    answer_options: Mapping[str, Any] | None = None,
    on_progress: Callable[[Reply], None] | None = None,
) -> list[Reply]:
    """Send each reply through ``answer()`` (FakeLLM) and record which of its sentences were flagged."""
    import agentrag as ar
    from agentrag.testing import FakeLLM

    answer_step = ar.answer(**dict(answer_options or {}))
    for reply in replies:
        llm = FakeLLM([reply.text])
        ctx = ar.new(reply.question, store=store, llm=llm, collections=list(collections)).search().rerank()
        ctx = ctx | answer_step
        if ctx.error is not None:
            reply.error = f"{type(ctx.error).__name__}: {ctx.error}"
        reply.claims = _flagged_claims(ctx)
        reply.flagged = [_is_flagged(u, reply.claims) for u in reply.units]
        if on_progress is not None:
            on_progress(reply)
    return list(replies)


def score_support(replies: Sequence[Reply]) -> dict[str, Any]:
    """Recall (unsupported sentences flagged), precision (flags on unsupported sentences) and
    supported sentences kept, overall and per form. ``semicolon-head`` (the cited clause of a
    run-on) is not scored: flagging the whole run-on is right."""
    scored = [
        (u, f)
        for r in replies
        if r.error is None
        for u, f in zip(r.units, r.flagged, strict=True)
        if u.form != "semicolon-head"
    ]
    bad = [f for u, f in scored if not u.supported]
    good = [f for u, f in scored if u.supported]
    flags = [u for u, f in scored if f]

    def rate(hits: int, total: int) -> float | None:
        return None if total == 0 else round(hits / total, 4)

    per_form = {}
    for form in FORMS:
        flagged = [f for u, f in scored if u.form == form]
        if flagged:
            per_form[form] = {"sentences": len(flagged), "flagged": rate(sum(flagged), len(flagged))}
    return {
        "replies": len(replies),
        "errors": sum(1 for r in replies if r.error is not None),
        "unsupported_sentences": len(bad),
        "supported_sentences": len(good),
        "unsupported_flagged": rate(sum(bad), len(bad)),
        "supported_kept": rate(sum(1 for f in good if not f), len(good)),
        "flag_precision": rate(sum(1 for u in flags if not u.supported), len(flags)),
        "by_form": per_form,
    }
