"""Grounding: pack retrieved chunks into a bounded, delimited context; check citations.

* :func:`pack_context` formats chunks with their chunk-id labels inside per-request random
  delimiters, merges adjacent chunks of the same document and drops the lowest-ranked
  chunks until the context fits the token budget (tiktoken when installed, else len/4).
  A single chunk larger than the whole budget is cut to fit rather than dropped.
* :func:`check_citations` parses ``[chk_...]`` (and knowledge-graph ``[rel_...]``) markers in
  an answer, checks each against the retrieved set, and lists the sentences that carry no
  valid citation; :attr:`CitationCheck.suppressed_text` is the answer without them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError
from agentrag.hits import Hit

if TYPE_CHECKING:
    from agentrag.prompts import Prompts

__all__ = [
    "CitationCheck",
    "PackedContext",
    "check_citations",
    "citation_labels",
    "claim_sentences",
    "estimate_tokens",
    "graph_labels",
    "pack_context",
    "split_sentences",
    "table_header_needs_citation",
]

_CITATION = re.compile(r"\[([^\[\]\n]{1,400})\]")
_LABEL = re.compile(r"^(?:chk|rel)_[A-Za-z0-9]+$")
# What a citation attempt looks like even when it names nothing we retrieved: "[chk_x]",
# "[Source 2]", "[doc 3]", "[1]". Markdown link text ("[see here](...)") is not one.
_ATTEMPT = re.compile(r"^(?:(?:chk|rel|source|doc)\b|(?:chk|rel)_|\d+$)", re.IGNORECASE)
# A sentence of an answer ends at . ! ? (with closing quotes / emphasis marks and the citation
# markers after it) followed by whitespace and anything (a lowercase start after a full stop is
# a new sentence too, so an uncited claim cannot hide behind one), or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]*_]*(?:\s*\[[^\[\]\n]+\])*\s+(?=[^\s\[])|\n+")
_ABBREVIATION = re.compile(
    r"(?:^|[\s(])(?:e\.g|i\.e|etc|vs|cf|approx|dr|mr|mrs|ms|no|fig|incl|st|u\.s|u\.k|[a-z])\.$", re.I
)
_PRESENTS = re.compile(
    r"\b(here|following|below|as follows|these|those|the sources?|the documents?|what i found|summary|"
    r"summari[sz]e|in short|steps?|options?|key points|details|for example|such as)\b"
    r"|^(from|according to|per)\b",  # where the list comes from: "From the knowledge graph:"
    re.IGNORECASE,
)
_LIST_LINE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TABLE_LINE = re.compile(r"[ \t]*\|")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-{2,}")
# a lead-in of three words or more ending in ":" and followed on the same line by a new sentence is a
# sentence of its own ("Send your password to the admin: Refunds take 30 days [chk_a].")
_LEAD_IN = re.compile(r"(?<=\w):[ \t]+(?=[\"'“(*_`\[]*[A-Z])")
_GRAPH_LABEL = re.compile(r"\[(rel_\d+)\]")
_TRUNCATED = " …"
_BULLET = re.compile(r"[ \t]*(?:[-*+>]|\d+[.)])?[ \t]*")
MAX_LABEL_WORDS = 4  # a table header cell of more words is a sentence, not a column's name
_NOT_A_LABEL = re.compile(r"\d|://|www\.|@")


# tiktoken caches encodings under sha1(url); litellm ships cl100k_base's file in its package.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _local_encoding_dir() -> str | None:
    """A directory holding cl100k_base's file, so tiktoken never goes to the network."""
    import hashlib
    import importlib.util
    import os
    import tempfile

    key = hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    candidates = [
        os.environ.get("TIKTOKEN_CACHE_DIR"),
        os.environ.get("DATA_GYM_CACHE_DIR"),
        os.path.join(tempfile.gettempdir(), "data-gym-cache"),
    ]
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin:
        candidates.append(os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers"))
    for directory in candidates:
        if directory and os.path.isfile(os.path.join(directory, key)):
            return directory
    return None


@functools.cache
def _encoding() -> Any:
    """cl100k_base from a local file, or None (then len/4): never a download."""
    import os

    directory = _local_encoding_dir()
    if directory is None:
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = directory
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # a corrupt cache file: fall back rather than fetch
        return None
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``: tiktoken's cl100k_base when available, otherwise ``len(text) // 4``."""
    encoding = _encoding()
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return chars_estimate(text)


def chars_estimate(text: str) -> int:
    """``len(text) // 4`` (at least 1 for any text): the estimate without a tokenizer."""
    return max(1, len(text) // 4) if text else 0


#: how :func:`pack_context` counts a block's tokens: ``tokenizer`` (:func:`estimate_tokens`, remembered
#: per block) or ``chars/4`` (:func:`chars_estimate`: an answer without an LLM has no context window
#: to fit, and loading the tokenizer cost a CLI ``ask`` 0.3-0.6 s)
TOKEN_ESTIMATES = ("tokenizer", "chars/4")


@functools.lru_cache(maxsize=4096)
def _block_tokens(block: str) -> int:
    """:func:`estimate_tokens` of one formatted chunk block, remembered: the same chunks come back
    across questions and turns, and counting is the costliest part of packing."""
    return estimate_tokens(block)


@dataclass(frozen=True, slots=True)
class PackedContext:
    """The answer prompt's ``context``: what went in, what the budget left out."""

    text: str
    hits: tuple[Hit, ...]  # what went in, merged, in rank order
    dropped: tuple[Hit, ...]  # what the budget left out
    tokens: int  # budgeted size of ``text``: at least its real token count
    delimiter: str
    aliases: tuple[tuple[str, str], ...] = ()  # merged chunk id -> the label it appears under
    truncated: bool = False  # the only chunk left was cut to fit the budget

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(h.chunk_id for h in self.hits)

    @property
    def valid_ids(self) -> frozenset[str]:
        return frozenset(self.labels) | {alias for alias, _ in self.aliases}


def _joined_locator(kept: Hit, first: Hit) -> dict[str, Any] | None:
    """The merged chunk's locator: the kept chunk's, with the table header of the chunk its text
    now starts with (a chunk starting below a Markdown table's header carries it, readers.chunking)."""
    header = (first.locator or {}).get("table_header")
    if first is kept or (kept.locator or {}).get("table_header") == header:
        return kept.locator
    locator = {k: v for k, v in (kept.locator or {}).items() if k != "table_header"}
    return {**locator, "table_header": header} if header else locator or None


def _merge_adjacent(hits: Sequence[Hit]) -> tuple[list[Hit], list[tuple[str, str]]]:
    """Merge chunks of one document whose spans overlap or touch, keeping the better rank.

    The merged chunk keeps the better-ranked chunk's id (its citation label); the other
    id becomes an alias of it, so a citation of either counts.
    """
    out: list[Hit] = []
    aliases: list[tuple[str, str]] = []
    for hit in hits:
        for i, kept in enumerate(out):
            if kept.document_id != hit.document_id:
                continue
            if hit.start_char <= kept.end_char + 1 and kept.start_char <= hit.end_char + 1:
                first, second = (kept, hit) if kept.start_char <= hit.start_char else (hit, kept)
                if second.end_char <= first.end_char:
                    joined = first.text  # contained
                else:
                    overlap = first.end_char - second.start_char
                    joined = first.text + (second.text[overlap:] if overlap >= 0 else " " + second.text)
                out[i] = replace(
                    kept,
                    text=joined,
                    start_char=first.start_char,
                    end_char=max(first.end_char, second.end_char),
                    chunk_sha256=None,  # no longer one stored chunk
                    locator=_joined_locator(kept, first),
                )
                aliases.append((hit.chunk_id, kept.chunk_id))
                break
        else:
            out.append(hit)
    return out, aliases


def _stand_in(delimiter: str, count: Callable[[str], int] = estimate_tokens) -> tuple[str, int]:
    """The fixed stand-in counted in place of ``delimiter``, and the tokens to allow per block.

    A delimiter is ``SOURCE-`` and random hex digits; the stand-in has zeros in their place.
    Both sit between ``<<<``/``<<</`` and ``>>>``, so the tokenizer's pre-split gives the
    ``-`` and the digits pieces of their own, and a byte-level BPE spends at most one token per
    byte on them: at most ``1 + n`` tokens for the real ``-`` + ``n`` digits, against the
    stand-in's own count of ``-`` + ``n`` zeros. The allowance is that difference for the
    delimiter's two occurrences, plus 1 for the blank line between blocks (17 with cl100k:
    the zeros take 5 tokens, random hex up to 13, measured over 200,000 delimiters).
    """
    digits = max(0, len(delimiter) - len("SOURCE-"))
    stand_in = "SOURCE-" + "0" * digits
    counted = count("-" + "0" * digits)
    return stand_in, 1 + 2 * max(0, 1 + digits - counted)


def _truncate_to_budget(
    hit: Hit, delimiter: str, budget_tokens: int, prompts: Prompts | None, count: Callable[[str], int]
) -> Hit:
    """``hit`` with its text cut (binary search on characters) so its block fits the budget."""
    from agentrag.prompts import chunk_views, format_chunks

    low, high = 0, len(hit.text)
    while low < high:
        mid = (low + high + 1) // 2
        candidate = replace(hit, text=hit.text[:mid] + _TRUNCATED)
        if count(format_chunks(chunk_views([candidate]), delimiter, prompts=prompts)) <= budget_tokens:
            low = mid
        else:
            high = mid - 1
    return replace(hit, text=hit.text[:low] + _TRUNCATED)


def _stand_in_text(delimiter: str) -> str:
    return "SOURCE-" + "0" * max(0, len(delimiter) - len("SOURCE-"))


def _bound_of_all(blocks: Sequence[str], delimiter: str) -> int:
    """An upper bound of what counting ``blocks`` would budget, without the tokenizer: each block's
    UTF-8 bytes (a byte-level BPE spends at least one byte per token, and ``len // 4`` is below it
    too) plus the widest allowance :func:`_stand_in` can give (its count of the stand-in's digits is
    at least 1 token)."""
    digits = max(0, len(delimiter) - len("SOURCE-"))
    return sum(len(block.encode("utf-8")) for block in blocks) + len(blocks) * (1 + 2 * digits)


def _fit(
    merged: Sequence[Hit],
    blocks: Sequence[str],
    allowance: int,
    budget: int,
    count: Callable[[str], int] = _block_tokens,
) -> tuple[list[Hit], int]:
    """Count blocks best first, each once, until the budget is full: the rest is dropped
    (lowest-ranked first), so blocks after the cut are never counted."""
    kept: list[Hit] = []
    tokens = 0
    for hit, block in zip(merged, blocks, strict=True):
        cost = count(block) + allowance
        if kept and tokens + cost > budget:
            break
        kept.append(hit)
        tokens += cost
    return kept, tokens


def pack_context(
    hits: Sequence[Hit],
    *,
    delimiter: str,
    budget_tokens: int = 3000,
    prompts: Prompts | None = None,
    estimate: str = "tokenizer",
) -> PackedContext:
    """Format ``hits`` (best first) for the answer prompt within ``budget_tokens``.

    Costs are counted once per block with a fixed stand-in of the delimiter's shape, so
    which chunks fit does not depend on the random delimiter of this request, and remembered
    per block (the same chunks come back across questions). ``tokens`` is the budgeted cost:
    those counts plus an allowance per block for the blank line and the random delimiter (see
    :func:`_stand_in`), so it is never below the real count of ``text`` (counting ``text``
    again would double the tokenizer's work). When the blocks' UTF-8 bytes (an upper bound of
    any count) fit the budget, nothing is counted and ``tokens`` is that bound. ``estimate``: one of
    :data:`TOKEN_ESTIMATES`.
    """
    from agentrag.prompts import chunk_views, format_chunk, format_chunks

    if estimate not in TOKEN_ESTIMATES:
        raise InvalidInputError(f"estimate must be one of {TOKEN_ESTIMATES}, got {estimate!r}")
    count = _block_tokens if estimate == "tokenizer" else chars_estimate

    merged, aliases = _merge_adjacent(hits)
    stand_in = _stand_in_text(delimiter)
    blocks = [format_chunk(view, stand_in, prompts=prompts) for view in chunk_views(merged)]
    tokens = _bound_of_all(blocks, delimiter)
    if tokens <= budget_tokens:  # every block fits whatever the tokenizer counts: none counted
        kept, allowance = list(merged), 0
    else:
        allowance = _stand_in(delimiter, count)[1]
        kept, tokens = _fit(merged, blocks, allowance, budget_tokens, count)
    dropped = list(merged[len(kept) :])
    truncated = False
    if kept and tokens > budget_tokens:
        # the best chunk alone is over budget: cut it rather than answer from nothing
        exact = estimate_tokens if estimate == "tokenizer" else chars_estimate  # not remembered per cut
        kept = [_truncate_to_budget(kept[0], stand_in, budget_tokens - allowance, prompts, exact)]
        truncated = True
    text = format_chunks(chunk_views(kept), delimiter, prompts=prompts)
    if truncated:
        tokens = count(format_chunk(chunk_views(kept)[0], stand_in, prompts=prompts)) + allowance
    kept_ids = {h.chunk_id for h in kept}
    return PackedContext(
        text,
        tuple(kept),
        tuple(dropped),
        tokens,
        delimiter,
        tuple(a for a in aliases if a[1] in kept_ids),
        truncated,
    )


def graph_labels(graph_context: str | None) -> frozenset[str]:
    """The ``rel_<id>`` labels of a graph context (see :func:`agentrag.store.relations.format_triples`)."""
    return frozenset(_GRAPH_LABEL.findall(graph_context or ""))


# ---- sentences and citations ------------------------------------------------------------------
def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence; a sentence keeps the citation markers after its full stop."""
    spans: list[tuple[int, int]] = []
    start = 0

    def add(begin: int, end: int) -> None:
        piece = text[begin:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((begin + lead, begin + len(piece.rstrip())))

    ends = sorted(
        [
            *_SENTENCE_END.finditer(text),
            *(m for m in _LEAD_IN.finditer(text) if _long_lead_in(text, m.start())),
        ],
        key=lambda m: m.start(),
    )
    for match in ends:
        if match.start() < start:
            continue  # inside what an earlier end already took
        if not match.group(0).startswith("\n") and _ABBREVIATION.search(
            text[max(start, match.start() - 8) : match.start()]
        ):
            continue  # "e.g." and friends end no sentence
        if not match.group(0).startswith("\n") and _TABLE_LINE.match(
            text, text.rfind("\n", 0, match.start()) + 1
        ):
            continue  # a table row is one claim, whatever full stops its cells hold
        end = match.start() if match.group(0).startswith("\n") else match.end()
        add(start, end)
        start = match.end()
    add(start, len(text))
    return spans


def _long_lead_in(text: str, colon: int) -> bool:
    """Whether the text before the ``:`` at ``colon`` (since the last sentence end) has 3+ words."""
    start = max(text.rfind(". ", 0, colon), text.rfind("\n", 0, colon), text.rfind("] ", 0, colon))
    piece = text[start + 1 : colon]
    if piece.count("(") > piece.count(")") or piece.count("`") % 2:
        return False  # inside parentheses or code: a label, not a lead-in
    return len(_CITATION.sub("", piece).split()) >= 3


def claim_sentences(text: str) -> list[str]:
    """The sentences of an answer that state something (see :func:`check_citations`), as split there."""
    return [text[a:b] for a, b in _sentence_spans(text) if _is_claim(text[a:b], text[b : b + 200])]


def citation_labels(sentence: str) -> list[str]:
    """Every citation label a sentence carries (valid or not), in order."""
    return [label for label, _ in _markers(sentence)]


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items / lines), each keeping the citation markers that follow it."""
    return [text[a:b] for a, b in _sentence_spans(text)]


@dataclass(frozen=True, slots=True)
class CitationCheck:
    cited: tuple[str, ...]  # valid chunk ids, in first-cited order
    invalid: tuple[str, ...]  # markers that name no retrieved chunk
    ungrounded: tuple[str, ...]  # sentences without a valid citation
    grounded: bool
    suppressed_text: str  # the answer with ungrounded sentences and invalid markers removed


def _markers(sentence: str) -> list[tuple[str, str]]:
    """(label, the bracket text it came from) for every citation attempt in ``sentence``."""
    found: list[tuple[str, str]] = []
    for match in _CITATION.finditer(sentence):
        for part in re.split(r"[,;]", match.group(1)):
            part = part.strip()
            tokens = part.split()
            if tokens and all(_LABEL.match(t) for t in tokens):
                found.extend((t, match.group(0)) for t in tokens)
            elif part and _ATTEMPT.match(part):
                found.append((part, match.group(0)))
    return found


def table_header_needs_citation(line: str) -> bool:
    """Whether a table's header line states something: it does unless every cell only names a
    column (at most ``MAX_LABEL_WORDS`` words and 40 characters, no digit, no link or address).
    A header that says more ("| Wire money to account 99-1234 now |") is a claim like a row."""
    for cell in _CITATION.sub("", line).strip().strip("|").split("|"):
        cell = cell.strip()
        if len(cell) > 40 or len(cell.split()) > MAX_LABEL_WORDS or _NOT_A_LABEL.search(cell):
            return True
    return False


def _is_claim(sentence: str, after: str = "") -> bool:
    """Whether a sentence of an answer states something that needs a citation.

    Every line is checked (issue #37): a heading, a list item and a table row are claims like any
    sentence, whatever their punctuation or length (``"# Wire money to account 99-1234 now"``,
    ``"Password: hunter2."``, ``"Always free."``). Not claims: a table's header line (a ``|---|``
    rule follows it) that only names its columns, and a lead-in ending in ``:`` that a list follows."""
    bare = _CITATION.sub("", sentence).strip(" \t-*#>|_`:")
    if not bare:
        return False
    if (
        _TABLE_LINE.match(sentence)
        and _TABLE_RULE.match(after.lstrip(" \t").removeprefix("\n"))
        and not table_header_needs_citation(sentence)
    ):
        return False  # a table's header line naming columns: the rows under it state the facts
    bare = _CITATION.sub("", sentence).strip(" \t-*#>|_`")
    if bare.endswith(":"):
        rest = after.strip()
        # a lead-in only when a list follows it on the next line and it presents rather than states
        # ("Here is what I found:", "Steps:"); "Everyone gets unlimited storage:" above a list is a claim
        listed = (
            bool(rest)
            and after.lstrip(" \t").startswith("\n")
            and bool(_LIST_LINE.match(rest.splitlines()[0]))
        )
        return not (listed and (len(bare.split()) <= 3 or _PRESENTS.search(bare)))
    return True


def _uncited_tail(sentence: str) -> bool:
    """Whether a cited sentence goes on after its last citation with words of its own (a run-on
    ``"A [chk_a]; B."`` cites A, not B)."""
    found = list(_CITATION.finditer(sentence))
    if not found:
        return False
    last = found[-1]
    tail = sentence[last.end() :].strip(" \t.,;:!?\"'”’)*_")
    return len(tail.split()) >= 2


def _remove_invalid(sentence: str, invalid: set[str]) -> str:
    def fix(match: re.Match[str]) -> str:
        parts = [p.strip() for p in re.split(r"[,;]", match.group(1))]
        labels = [t for p in parts for t in (p.split() if all(_LABEL.match(x) for x in p.split()) else [p])]
        if not any(label in invalid for label in labels):
            return match.group(0)
        keep = [label for label in labels if label not in invalid]
        return f"[{', '.join(keep)}]" if keep else ""

    cleaned = _CITATION.sub(fix, sentence)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned)).strip()


def _whole_line(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a removed sentence to its whole line (bullet and newline) when it is the line's only content."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if _BULLET.fullmatch(text[line_start:start]) and not text[end:line_end].strip():
        return line_start, min(line_end + 1, len(text))
    return start, end


def check_citations(
    answer: str,
    valid: Collection[str],
    *,
    aliases: Mapping[str, str] | None = None,
    supported: Callable[[str], bool] | None = None,
) -> CitationCheck:
    """Check every citation of ``answer`` against ``valid`` (the retrieved chunk ids).

    A sentence is grounded when it carries at least one valid citation; sentences that
    state nothing (headings, lead-ins ending in ``:``, under three words) need none.
    ``aliases`` maps a merged chunk's id to the label it was shown under. ``supported``, when
    given, is asked about every cited claim (the sentence's text): ``False`` makes it ungrounded
    although its citation is valid (the cited chunk does not say it; see :mod:`agentrag.support`).
    A cited sentence that goes on after its last citation (``"A [chk_a]; B."``) is ungrounded.
    """
    aliases = dict(aliases or {})
    cited: dict[str, None] = {}
    invalid: dict[str, None] = {}
    ungrounded: list[str] = []
    edits: list[tuple[int, int, str]] = []
    for start, end in _sentence_spans(answer):
        sentence = answer[start:end]
        labels = [label for label, _ in _markers(sentence)]
        good = [aliases.get(label, label) for label in labels if label in valid or label in aliases]
        bad = [label for label in labels if label not in valid and label not in aliases]
        for label in bad:
            invalid[label] = None
        for label in good:
            cited[label] = None
        claim = _is_claim(sentence, answer[end : end + 200])
        if (
            good
            and claim
            and (_uncited_tail(sentence) or (supported is not None and not supported(sentence)))
        ):
            good = []
        if good or not claim:
            if bad:
                edits.append((start, end, _remove_invalid(sentence, set(bad))))
        else:
            ungrounded.append(sentence)
            edits.append((*_whole_line(answer, start, end), ""))
    suppressed = answer
    for start, end, replacement in reversed(edits):
        suppressed = suppressed[:start] + replacement + suppressed[end:]
    suppressed = re.sub(r"[ \t]{2,}", " ", suppressed)
    suppressed = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", suppressed))
    grounded = bool(cited) and not ungrounded and not invalid
    return CitationCheck(tuple(cited), tuple(invalid), tuple(ungrounded), grounded, suppressed.strip())
