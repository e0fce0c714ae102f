"""JSON and JSON Lines: each record's ``text_field`` (default ``text``) is a block; a record
without it is written as ``key: value`` lines. The locator is the record number (the line for
JSONL). ``JSONReader(text_field="body")`` reads another field."""

from __future__ import annotations

import json
import re
from typing import Any

from agentrag.errors import FileTooLargeError, UnreadableFileError
from agentrag.readers.base import LIMITS, Block, Extracted, Source, check_text

__all__ = ["JSONReader", "check_depth"]

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def check_depth(source: Source, text: str, where: str = "") -> None:
    """Refuse JSON nested deeper than ``LIMITS.max_json_depth`` before parsing it (the parser
    would exhaust the stack): FileTooLargeError naming the limit. Brackets inside strings are
    text; the scan stops at the first bracket past the limit."""
    limit = LIMITS.max_json_depth
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for match in _BRACKETS.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                raise FileTooLargeError(
                    f"{source.name}: JSON nested more than {limit} levels deep{where}: refused unparsed"
                    " (agentrag.readers.LIMITS.max_json_depth)",
                    source=source.name,
                )
        elif depth:
            depth -= 1


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
                        check_depth(source, line, f" at line {number}")
                        blocks.append(self._block(json.loads(line), number))
                        total += len(blocks[-1].text)
                        check_text(source, total)
            else:
                check_depth(source, text)
                data = json.loads(text)
                records = data if isinstance(data, list) else [data]
                blocks = [self._block(r, n) for n, r in enumerate(records, start=1)]
        except json.JSONDecodeError as exc:
            where = f"line {number}" if lines else f"line {exc.lineno}"
            raise UnreadableFileError(
                f"{source.name}: not valid JSON at {where} ({exc.msg})", source=source.name
            ) from exc
        return Extracted(blocks, {"records": len(blocks)}, reader=self.name)
