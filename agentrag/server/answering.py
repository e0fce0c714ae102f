"""What the OpenAI endpoint, the MCP tools and the playground share: the shapes of a result
(numbered citations, sources, each answer sentence's supporting span). The run itself is the
gateway's (:mod:`agentrag.server.gateway`), the same for every interface.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MARKER", "MarkerNumbering", "numbered", "sources", "supporting_spans"]

# one citation group as the answer step writes it: "[chk_0123abcd]" or "[chk_1, chk_2]"
MARKER = re.compile(r"\[((?:chk_[0-9a-f]+)(?:\s*[,;]\s*chk_[0-9a-f]+)*)\]")
_GROUP = re.compile(r"(?:\s*\[(?:chk_[0-9a-f]+)(?:\s*[,;]\s*chk_[0-9a-f]+)*\])+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")


class MarkerNumbering:
    """Rewrites ``[chk_...]`` markers as ``[1]``, ``[2]``, ... in first-cited order, also in a stream
    (:meth:`feed` holds back an unclosed ``[`` until its ``]`` arrives)."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self._pending = ""

    def number(self, chunk_id: str) -> int:
        if chunk_id not in self.order:
            self.order.append(chunk_id)
        return self.order.index(chunk_id) + 1

    def _replace(self, match: re.Match[str]) -> str:
        ids = [part.strip() for part in re.split(r"[,;]", match.group(1))]
        return "".join(f"[{self.number(i)}]" for i in ids)

    def rewrite(self, text: str) -> str:
        return MARKER.sub(self._replace, text)

    def feed(self, piece: str) -> str:
        text = self._pending + piece
        cut = text.rfind("[")
        if cut >= 0 and "]" not in text[cut:] and len(text) - cut < 200:
            self._pending, text = text[cut:], text[:cut]
        else:
            self._pending = ""
        return self.rewrite(text)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return self.rewrite(text)


def numbered(answer: str | None) -> tuple[str, list[str]]:
    """The answer with numbered citations, and the chunk ids in citation-number order."""
    numbering = MarkerNumbering()
    return numbering.rewrite(answer or ""), numbering.order


def sources(proof: Mapping[str, Any], order: Sequence[str]) -> list[dict[str, Any]]:
    """The cited chunks of ``proof`` in citation-number order (``n`` is the number in the text)."""
    by_id = {c["chunk_id"]: c for c in proof.get("chunks", [])}
    out = []
    for n, chunk_id in enumerate(order, 1):
        chunk = by_id.get(chunk_id)
        if chunk is None:
            continue
        out.append(
            {
                "n": n,
                "chunk_id": chunk_id,
                "doc_id": chunk["doc_id"],
                "collection": chunk["collection"],
                "source": chunk["original_filename"] or chunk["source"],
                "section": chunk["section"],
                "page": chunk["page"],
                "locator": chunk.get("locator"),
                "start_char": chunk["start_char"],
                "end_char": chunk["end_char"],
                "revision": chunk["source_sha256"],
                "text": chunk["text"],
            }
        )
    return out


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def supporting_spans(
    answer: str | None,
    chunks: Sequence[Mapping[str, Any]],
    support: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """For each cited sentence of ``answer``: the span of a cited chunk that supports it.

    ``support`` is the answer step's own per-sentence check (the proof's ``generation.support``:
    ``sentence``, ``chunk_id``, document offsets ``start`` / ``end``, ``text``, ``score``,
    ``method``); a sentence it supported with a span inside a retrieved chunk takes that span
    (``method`` and ``score`` carried along). Any other sentence is located here:

    ``index`` is the sentence's place among the answer's citation groups (a run of markers such
    as ``[chk_a] [chk_b]`` ends one sentence), the same in the numbered text.
    ``start`` / ``end`` are offsets in the chunk's text (``doc_start`` / ``doc_end`` in the
    document's). ``exact`` when the sentence is quoted verbatim (extractive answers) in a cited chunk
    or a retrieved neighbour of it in the same document; otherwise the sentence of the first cited
    chunk sharing the most words with it.
    """
    by_id = {c["chunk_id"]: c for c in chunks}
    spans: list[dict[str, Any]] = []
    position = 0
    groups = list(_GROUP.finditer(answer or ""))
    for index, match in enumerate(groups):
        sentence = (answer or "")[position : match.start()].strip()
        position = match.end()
        if not sentence:
            continue
        checked = _checked_span(sentence, support, by_id)
        if checked is not None:
            spans.append({"index": index, "sentence": sentence, **checked})
            continue
        ids = [i for m in MARKER.finditer(match.group(0)) for i in re.split(r"\s*[,;]\s*", m.group(1))]
        cited = [by_id[i] for i in ids if i in by_id]
        if not cited:
            continue
        # a cited chunk may stand for its merged neighbours (adjacent chunks of one document are
        # packed as one block under the first one's id): a verbatim quote is looked for there too
        neighbours = [c for c in chunks if c["doc_id"] == cited[0]["doc_id"] and c not in cited]
        quoted = next((c for c in [*cited, *neighbours] if sentence in c["text"]), None)
        chunk = quoted or cited[0]
        start, end, exact = _locate(sentence, chunk["text"])
        if start < 0:
            continue
        spans.append(
            {
                "index": index,
                "sentence": sentence,
                "chunk_id": chunk["chunk_id"],
                "start": start,
                "end": end,
                "doc_start": chunk["start_char"] + start,
                "doc_end": chunk["start_char"] + end,
                "exact": exact,
            }
        )
    return spans


def _checked_span(
    sentence: str, support: Sequence[Mapping[str, Any]], by_id: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The answer step's span for ``sentence``, in chunk offsets, when it supported it in a chunk here."""
    bare = " ".join(MARKER.sub("", sentence).split())
    for span in support:
        if (
            not span.get("supported")
            or " ".join(MARKER.sub("", str(span.get("sentence", ""))).split()) != bare
        ):
            continue
        chunk = by_id.get(str(span.get("chunk_id")))
        if chunk is None:
            continue
        start, end = int(span["start"]) - chunk["start_char"], int(span["end"]) - chunk["start_char"]
        if 0 <= start < end <= len(chunk["text"]) and chunk["text"][start:end] == span.get("text"):
            return {
                "chunk_id": chunk["chunk_id"],
                "start": start,
                "end": end,
                "doc_start": int(span["start"]),
                "doc_end": int(span["end"]),
                "exact": span.get("method") == "quoted",
                "method": span.get("method"),
                "score": span.get("score"),
            }
    return None


def _locate(sentence: str, text: str) -> tuple[int, int, bool]:
    found = text.find(sentence)
    if found >= 0:
        return found, found + len(sentence), True
    wanted = _words(sentence)
    best, best_score, offset = (-1, -1), 0.0, 0
    for piece in _SENTENCE_END.split(text):
        start = text.find(piece, offset)
        offset = start + len(piece)
        score = len(wanted & _words(piece)) / (len(wanted) or 1)
        if score > best_score:
            best, best_score = (start, start + len(piece)), score
    return (best[0], best[1], False) if best_score > 0 else (-1, -1, False)
