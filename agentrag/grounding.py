"""Grounding: pack retrieved chunks into a bounded, delimited context; check citations.

* :func:`pack_context` formats chunks with their chunk-id labels inside per-request random
  delimiters, merges adjacent chunks of the same document and drops the lowest-ranked
  chunks until the context fits the token budget (tiktoken when installed, else len/4).
* :func:`check_citations` parses ``[chk_...]`` markers in an answer, checks each against
  the retrieved set, and lists the sentences that carry no valid citation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrag.hits import Hit

if TYPE_CHECKING:
    from agentrag.context import Context
    from agentrag.prompts import Prompts

__all__ = [
    "PackedContext",
    "CitationCheck",
    "pack_context",
    "check_citations",
    "estimate_tokens",
    "split_sentences",
    "Proof",
    "build_proof",
]

_CITATION = re.compile(r"\[([^\[\]\n]{1,400})\]")
_LABEL = re.compile(r"^chk_[A-Za-z0-9]+$")
_SENTENCE_END = re.compile(r"(?<=[.!?])(?:\s*\[[^\[\]\n]+\])*\s+(?=[A-Z0-9\"'(*_-])|\n+")


@functools.cache
def _encoding() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or its data file cannot be loaded offline
        return None


def estimate_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return max(1, len(text) // 4) if text else 0


@dataclass(frozen=True, slots=True)
class PackedContext:
    text: str
    hits: tuple[Hit, ...]  # what went in, merged, in rank order
    dropped: tuple[Hit, ...]  # what the budget left out
    tokens: int
    delimiter: str
    aliases: tuple[tuple[str, str], ...] = ()  # merged chunk id -> the label it appears under

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(h.chunk_id for h in self.hits)

    @property
    def valid_ids(self) -> frozenset[str]:
        return frozenset(self.labels) | {alias for alias, _ in self.aliases}


def _merge_adjacent(hits: Sequence[Hit]) -> tuple[list[Hit], list[tuple[str, str]]]:
    """Merge chunks of one document whose spans overlap or touch, keeping the better rank."""
    out: list[Hit] = []
    aliases: list[tuple[str, str]] = []
    for hit in hits:
        for i, kept in enumerate(out):
            if kept.document_id != hit.document_id:
                continue
            if hit.start_char <= kept.end_char + 1 and kept.start_char <= hit.end_char + 1:
                first, second = (kept, hit) if kept.start_char <= hit.start_char else (hit, kept)
                overlap = first.end_char - second.start_char
                joined = first.text + (second.text[overlap:] if overlap >= 0 else " " + second.text)
                end = max(first.end_char, second.end_char)
                out[i] = replace(kept, text=joined if second.end_char > first.end_char else first.text,
                                 start_char=first.start_char, end_char=end)
                aliases.append((hit.chunk_id, kept.chunk_id))
                break
        else:
            out.append(hit)
    return out, aliases


def pack_context(
    hits: Sequence[Hit], *, delimiter: str, budget_tokens: int = 3000, prompts: Prompts | None = None
) -> PackedContext:
    from agentrag.prompts import format_chunks

    from agentrag.steps._common import chunk_views

    merged, aliases = _merge_adjacent(hits)
    kept = list(merged)
    dropped: list[Hit] = []
    while True:
        text = format_chunks(chunk_views(kept), delimiter, prompts=prompts)
        tokens = estimate_tokens(text)
        if tokens <= budget_tokens or not kept:
            break
        dropped.insert(0, kept.pop())  # the lowest-ranked goes first
    kept_ids = {h.chunk_id for h in kept}
    return PackedContext(
        text, tuple(kept), tuple(dropped), tokens, delimiter, tuple(a for a in aliases if a[1] in kept_ids)
    )


def split_sentences(text: str) -> list[str]:
    """Sentences, each keeping the citation markers that follow its full stop."""
    parts, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        end = match.start() if match.group(0).startswith("\n") else match.end()
        piece = text[start:end].strip()
        if piece:
            parts.append(piece)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


@dataclass(frozen=True, slots=True)
class CitationCheck:
    cited: tuple[str, ...]  # valid chunk ids, in first-cited order
    invalid: tuple[str, ...]  # markers that name no retrieved chunk
    ungrounded: tuple[str, ...]  # sentences without a valid citation
    grounded: bool
    suppressed_text: str  # the answer with ungrounded sentences and invalid markers removed


def _markers(sentence: str) -> list[str]:
    labels = []
    for match in _CITATION.finditer(sentence):
        for part in re.split(r"[,;\s]+", match.group(1)):
            part = part.strip()
            if part and (_LABEL.match(part) or part.lower().startswith(("chk", "source", "doc"))):
                labels.append(part)
    return labels


def _is_claim(sentence: str) -> bool:
    bare = _CITATION.sub("", sentence).strip(" -*#>:")
    return len(bare.split()) >= 3


def check_citations(answer: str, valid: Collection[str], *, aliases: dict[str, str] | None = None) -> CitationCheck:
    aliases = aliases or {}
    cited: dict[str, None] = {}
    invalid: dict[str, None] = {}
    ungrounded: list[str] = []
    kept: list[str] = []
    for sentence in split_sentences(answer):
        labels = _markers(sentence)
        good = [aliases.get(label, label) for label in labels if label in valid or label in aliases]
        for label in labels:
            if label not in valid and label not in aliases:
                invalid[label] = None
        for label in good:
            cited[label] = None
        if good or not _is_claim(sentence):
            clean = sentence
            for label in labels:
                if label not in valid and label not in aliases:
                    clean = re.sub(r"\s*\[" + re.escape(label) + r"\]", "", clean)
            kept.append(clean)
        else:
            ungrounded.append(sentence)
    grounded = bool(cited) and not ungrounded and not invalid
    return CitationCheck(tuple(cited), tuple(invalid), tuple(ungrounded), grounded, " ".join(kept))


def build_proof(ctx: Context) -> Proof:  # pragma: no cover - replaced by the proof module
    raise NotImplementedError


class Proof:  # pragma: no cover - placeholder type until the proof lands
    pass
