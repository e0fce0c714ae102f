"""Markdown-aware sentence segmentation for extractive answers.

A chunk of Markdown is first cut into *blocks*: paragraphs (separated by blank lines),
headings, list items, block quotes, table rows and fenced or indented code. Hard-wrapped
lines inside a paragraph or a list item are joined with a space, so a sentence that
spans three lines of an 72-column file is one sentence. Prose blocks (paragraphs, list
items, quotes) are then split into sentences at ``.``, ``!`` or ``?`` followed by a space
and a capital, a digit or an opening mark, except after common abbreviations
(``e.g.``, ``i.e.``, ``Dr.``, ``vs.``, single initials) and inside inline code.

Each :class:`Sentence` keeps its offsets in the text it came from (``start``, ``end``:
the first and last character of the sentence, across the hard wraps it spans), so callers
can order sentences as the document does, and says whether it is *complete*:

* it starts a block, or follows a sentence end (the chunk did not cut it at the front);
* it starts with a capital letter, a digit, a quote, ``*``, ``_`` or a backtick;
* it ends with ``.``, ``!`` or ``?`` (optionally followed by a closing quote or
  parenthesis), or it is a list item of at least four words (list items need no full stop);
* it is not a lead-in to a list (ending with ``:``) and has at least four words.

Headings, code, tables and front-matter rules are never sentences.

``sentences(text, language=...)`` for a language other than English (:mod:`agentrag.languages`)
reads every script: a sentence also ends at ``。！？`` (no space needed after them) and at the
Devanagari ``।`` / ``॥``; it starts with any letter that is not lower case (capitals of any
cased script, and every letter of a script without case: Chinese, Arabic, Hindi, Thai ...) or a
digit; a run of characters of a script written without spaces counts one word per two characters.
Thai writes no full stop: a space between two Thai letters ends a sentence or a clause, so there a
sentence ends at such a space once it holds :data:`THAI_MIN_CHARS` characters (numbers and Latin runs
between spaces stay inside), and a sentence ending in a Thai letter ends well.
Without a language (or ``"en"``) the rules above apply unchanged.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

__all__ = ["Sentence", "blocks", "sentences"]

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE = re.compile(r"^\s*\|")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_INDENTED_CODE = re.compile(r"^( {4,}|\t)")
# A sentence ends at . ! ? (plus closing quotes / brackets / emphasis marks), then whitespace,
# then something that can start a sentence.
# A reference mark after the full stop belongs to the sentence it ends ("in 2010.[note 1]",
# "Galilee.[citation needed]", "[12]"), as a closing quote does.
_REFERENCE = r"\[[^\[\]\n]{1,30}\]"
_END = re.compile(rf"[.!?](?:[\"'”’)\]*_]|{_REFERENCE})*(?=\s+[\"'“‘(*_`\[]*[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al approx dr mr mrs ms prof fig eq inc ltd jr sr mt".split()  # noqa: SIM905
) | frozenset("st ave gen col lt sgt capt rev gov u.s u.k".split())  # noqa: SIM905  (Wikipedia's: "St. Gallen")
_STARTS_WELL = re.compile(r"^[\"'“‘(*_`\[]*[A-Z0-9]")
_ENDS_WELL = re.compile(rf"[.!?](?:[\"'”’)\]*_`]|{_REFERENCE})*$")
MIN_WORDS = 4
# Every script (a language other than English): see the module docstring.
_END_ANY = re.compile(r"[.!?\u0964\u0965][\"'”’)\]*_]*(?=\s+[\"'“‘(*_`\[]*\w)|[。！？][\"'”’)\]」』]*")
# Thai: a letter (or tone mark / vowel sign) of the Thai block, not ๆ (a repetition mark, written
# between spaces) nor a Thai digit. A space between two of them ends a sentence or clause.
_THAI = "\u0e01-\u0e3a\u0e40-\u0e45\u0e47-\u0e4e"
#: Characters a Thai sentence has at least: a space between Thai letters parts clauses as well as
#: sentences, and a clause alone seldom holds a question's answer with the words that find it. Chosen
#: on XQuAD-dev articles 0-11 among 0, 40, 80, 120, 160, 240 (fact hit 0.42 ... 0.82; benchmarks/
#: HISTORY.md, "Every language", session 14 langs4).
THAI_MIN_CHARS = 160
_THAI_SPACE = re.compile(f"(?<=[{_THAI}])[ \t]+(?=[{_THAI}])")
_ENDS_WELL_ANY = re.compile(f"[.!?。！？\u0964\u0965][\"'”’)\\]*_`」』]*$|[{_THAI}]$")
_OPENERS = "\"'“‘(*_`[「『"
_UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f]")


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence: its text (hard wraps joined), offsets in the source text, completeness."""

    text: str
    start: int
    end: int
    kind: str  # "paragraph", "item" or "quote"
    complete: bool


@dataclass(frozen=True, slots=True)
class _Block:
    kind: str  # paragraph, item, quote, heading, code, table, rule
    lines: tuple[tuple[int, str], ...]  # (offset of the line's content, content)
    first: bool  # the block starts where the text starts (it may be cut at the front)


def blocks(text: str) -> list[tuple[str, str]]:
    """``(kind, joined text)`` of every block, in order; for inspection and tests."""
    return [(b.kind, " ".join(content for _, content in b.lines)) for b in _blocks(text)]


_PROSE_END = re.compile(r"[.!?:][\"'”’)\]*_`]*\s*$")


def starts_in_fence(text: str) -> bool:
    """Whether ``text`` (a chunk) was cut inside a fenced code block: an odd number of fences, the
    first a bare one (a closing fence has no info string) after lines none of which reads as prose
    or a heading. Read from the start, such a chunk would take its prose for code and quote
    nothing of it."""
    fences = [i for i, line in enumerate(text.splitlines()) if _FENCE.match(line)]
    if len(fences) % 2 == 0:
        return False
    lines = text.splitlines()
    if lines[fences[0]].strip() not in ("```", "~~~"):
        return False
    before = [line for line in lines[: fences[0]] if line.strip()]
    return bool(before) and not any(_PROSE_END.search(line) or _HEADING.match(line) for line in before)


def _blocks(text: str) -> list[_Block]:
    out: list[_Block] = []
    kind: str | None = None
    lines: list[tuple[int, str]] = []
    first = True
    in_fence = starts_in_fence(text)  # the rest of a code block cut by the chunker
    item_indent = 0

    def flush() -> None:
        nonlocal kind, lines, first
        if kind == "paragraph" and _is_title_line(lines):  # "Code of conduct" over its first sentence
            out.append(_Block("heading", tuple(lines[:1]), first))
            first, lines = False, lines[1:]
        if kind is not None and lines:
            out.append(_Block(kind, tuple(lines), first))
            first = False
        elif kind is not None:
            first = False
        kind, lines = None, []

    offset = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        at = offset
        offset += len(raw)
        if in_fence:
            if _FENCE.match(line):
                in_fence = False
            continue
        if _FENCE.match(line):
            flush()
            kind = "code"
            lines = [(at, line)]
            flush()
            in_fence = True
            continue
        if not line.strip():
            flush()
            continue
        if _HEADING.match(line) or _RULE.match(line) or _TABLE.match(line):
            flush()
            kind = "heading" if _HEADING.match(line) else "table" if _TABLE.match(line) else "rule"
            lines = [(at, line)]
            flush()
            continue
        item = _ITEM.match(line)
        if item and _starts_item(item, kind, item_indent):
            flush()
            kind = "item"
            item_indent = item.end()
            lines = [(at + item.end(), line[item.end() :])]
            continue
        quote = _QUOTE.match(line)
        if quote and kind != "quote":
            flush()
            kind = "quote"
        if quote:
            lines.append((at + quote.end(), line[quote.end() :]))
            continue
        if kind is None and _INDENTED_CODE.match(line) and not first:
            kind = "code"
            lines = [(at, line)]
            flush()
            continue
        if kind is None:
            kind = "paragraph"
        stripped = line.lstrip()
        lines.append((at + len(line) - len(stripped), stripped))
    flush()
    return out


_TITLE_END = re.compile(r"[.!?,;:\-–—(\[]$")
_TITLE_MAX_WORDS = 8


def _is_title_line(lines: list[tuple[int, str]]) -> bool:
    """Whether a paragraph's first line is a title standing on the line above its text (a plain
    text file's or a slide's heading): a few words with no closing punctuation, shorter than
    half the next line, which starts a sentence. A hard wrap breaks a long line mid-sentence."""
    if len(lines) < 2:
        return False
    title, following = lines[0][1].strip(), lines[1][1].strip()
    return (
        0 < len(title.split()) <= _TITLE_MAX_WORDS
        and not _TITLE_END.search(title)
        and title[:1].isupper()
        and following[:1].isupper()
        and 2 * len(title) < len(following)
    )


def _starts_item(item: re.Match[str], kind: str | None, item_indent: int) -> bool:
    """Whether a line with a list marker starts an item, or continues the text before it.

    As in CommonMark, an ordered marker other than ``1.`` does not interrupt a paragraph (a
    hard wrap can put "200) of ..." at the start of a line), and a line indented to the current
    item's text continues that item.
    """
    if kind is None:
        return True
    indent = len(item.group(1))
    ordered = item.group(2)[0].isdigit()
    if kind == "item":
        if indent >= item_indent:
            return not ordered or item.group(2)[:-1] == "1"
        return True
    if kind == "paragraph" and ordered:
        return item.group(2)[:-1] == "1"
    return True


def _is_abbreviation(joined: str, dot: int) -> bool:
    """The ``.`` at ``dot`` ends an abbreviation (``e.g.``, ``Dr.``, an initial), not a sentence."""
    if joined[dot] != ".":
        return False
    start = dot
    while start > 0 and (joined[start - 1].isalpha() or joined[start - 1] == "."):
        start -= 1
    word = joined[start:dot].lower()
    if start > 0 and joined[start - 1].isdigit():
        return False  # "finished 1st." ends a sentence
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha() and word.isupper() is False)


def _in_code(joined: str, position: int) -> bool:
    return joined.count("`", 0, position) % 2 == 1


def _starts_any(text: str) -> bool:
    """A sentence start in any script: a digit, or a letter that is not lower case."""
    head = text.lstrip(_OPENERS)[:1]
    return bool(head) and (head.isdigit() or (head.isalpha() and not head.islower()))


def _words_any(piece: str) -> int:
    return len(piece.split()) + len(_UNSPACED.findall(piece)) // 2


def _thai_cuts(joined: str, cuts: list[int]) -> list[int]:
    """Where a space between Thai letters ends a sentence: the first such space after at least
    :data:`THAI_MIN_CHARS` characters since the last cut (a space also parts clauses of one sentence)."""
    out: list[int] = []
    last = 0
    for match in _THAI_SPACE.finditer(joined):
        last = max([last, *(c for c in cuts if c <= match.start())])
        if match.start() - last >= THAI_MIN_CHARS and not _in_code(joined, match.start()):
            out.append(match.end())
            last = match.end()
    return out


def _split(block: _Block, any_script: bool = False) -> list[Sentence]:
    # Join the hard-wrapped lines, remembering where each joined character came from.
    joined_parts: list[str] = []
    where: list[int] = []
    for i, (at, content) in enumerate(block.lines):
        if i:
            joined_parts.append(" ")
            where.append(where[-1] if where else at)
        joined_parts.append(content)
        where.extend(range(at, at + len(content)))
    joined = "".join(joined_parts)
    cuts = [0]
    for match in (_END_ANY if any_script else _END).finditer(joined):
        dot = match.start()
        if _is_abbreviation(joined, dot) or _in_code(joined, dot):
            continue
        if any_script and joined[dot] not in "。！？" and not _starts_any(joined[match.end() :].lstrip()):
            continue
        cuts.append(match.end())
    if any_script:
        cuts = sorted({*cuts, *_thai_cuts(joined, cuts)})
    cuts.append(len(joined))
    out: list[Sentence] = []
    for n, (a, b) in enumerate(itertools.pairwise(cuts)):
        piece = joined[a:b]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        if not piece:
            continue
        begin = where[a + lead]
        finish = where[a + lead + len(piece) - 1] + 1
        cut_front = n == 0 and block.first and block.kind == "paragraph"
        words = _words_any(piece) if any_script else len(piece.split())
        ends_well = (_ENDS_WELL_ANY if any_script else _ENDS_WELL).search(piece)
        ends = bool(ends_well) or (block.kind == "item" and not piece.endswith(":"))
        starts = _starts_any(piece) if any_script else bool(_STARTS_WELL.match(piece))
        complete = (
            not cut_front and starts and ends and not piece.rstrip("*_").endswith(":") and words >= MIN_WORDS
        )
        out.append(Sentence(" ".join(piece.split()), begin, finish, block.kind, complete))
    return out


def sentences(
    text: str, *, cut_at_start: bool = False, cut_at_end: bool = False, language: str | None = None
) -> list[Sentence]:
    """Every prose sentence of ``text`` in order (see the module docstring).

    ``cut_at_start``: the text is a chunk that may begin mid-sentence (it does not start its
    document), so a first paragraph that does not look like a sentence start is a fragment.
    ``cut_at_end``: the text may end mid-sentence, so a last sentence without a full stop is one.
    ``language``: another than English reads every script (see the module docstring).
    """
    any_script = language not in (None, "en")
    ends_well = _ENDS_WELL_ANY if any_script else _ENDS_WELL
    out: list[Sentence] = []
    for block in _blocks(text):
        if block.kind not in ("paragraph", "item", "quote"):
            continue
        if not cut_at_start:
            block = _Block(block.kind, block.lines, False)
        out.extend(_split(block, any_script))
    if cut_at_end and out and not ends_well.search(out[-1].text) and out[-1].end >= len(text.rstrip()):
        last = out[-1]
        out[-1] = Sentence(last.text, last.start, last.end, last.kind, False)
    return out
