"""JSON and JSON Lines: each record's ``text_field`` (default ``text``) is a block; a record
without it is written as ``key: value`` lines. The locator is the record number (the line for
JSONL). ``JSONReader(text_field="body")`` reads another field."""

from __future__ import annotations

import json
from typing import Any

from agentrag.errors import FileTooLargeError, UnreadableFileError
from agentrag.readers.base import LIMITS, Block, Extracted, Source, check_text

__all__ = ["JSONReader", "check_depth"]


def check_depth(source: Source, value: Any, where: str = "") -> None:
    """Refuse a parsed JSON value nested deeper than ``LIMITS.max_json_depth``: FileTooLargeError
    naming the limit. Level by level (no recursion of its own; one list comprehension per level,
    so a few levels for ordinary records), stopping at the first level past the limit."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > LIMITS.max_json_depth:
            raise _too_deep(source, where)
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) is dict or type(child) is list
        ]


def _too_deep(source: Source, where: str) -> FileTooLargeError:
    return FileTooLargeError(
        f"{source.name}: JSON nested more than {LIMITS.max_json_depth} levels deep{where}: refused"
        " (agentrag.readers.LIMITS.max_json_depth)",
        source=source.name,
    )


def _loads(source: Source, text: str, where: str = "") -> Any:
    """``json.loads``, its nesting bounded: deeper than the parser's own recursion limit is the same
    typed refusal as deeper than ``max_json_depth`` (checked after, when the text has that many
    brackets at all)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(source, where) from None
    if isinstance(value, dict | list) and text.count("[") + text.count("{") > LIMITS.max_json_depth:
        check_depth(source, value, where)
    return value


class JSONReader:
    name = "json"
    suffixes: tuple[str, ...] = (".json", ".jsonl", ".ndjson")
    extra: str | None = None

    def __init__(self, text_field: str = "text", *, title_field: str | None = "title") -> None:
        self.text_field = text_field
        self.title_field = title_field

    def __repr__(self) -> str:
        return f"JSONReader(text_field={self.text_field!r})"

    def _block(self, record: Any, number: int) -> Block:
        locator: dict[str, Any] = {"record": number}
        if isinstance(record, dict):
            if self.title_field and isinstance(record.get(self.title_field), str):
                locator["title"] = record[self.title_field]
            value = record.get(self.text_field)
            if isinstance(value, str):
                return Block("text", value, locator)
            text = "\n".join(
                f"{k}: {json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                for k, v in record.items()
            )
            return Block("text", text, locator)
        return Block(
            "text", record if isinstance(record, str) else json.dumps(record, ensure_ascii=False), locator
        )

    def read(self, source: Source) -> Extracted:
        text = source.read_text()
        blocks: list[Block] = []
        total = 0
        lines = source.suffix in (".jsonl", ".ndjson")
        try:
            if lines:
                for number, line in enumerate(text.split("\n"), start=1):
                    if line.strip():
                        blocks.append(self._block(_loads(source, line, f" at line {number}"), number))
                        total += len(blocks[-1].text)
                        check_text(source, total)
            else:
                data = _loads(source, text)
                records = data if isinstance(data, list) else [data]
                blocks = [self._block(r, n) for n, r in enumerate(records, start=1)]
        except json.JSONDecodeError as exc:
            where = f"line {number}" if lines else f"line {exc.lineno}"
            raise UnreadableFileError(
                f"{source.name}: not valid JSON at {where} ({exc.msg})", source=source.name
            ) from exc
        return Extracted(blocks, {"records": len(blocks)}, reader=self.name)
