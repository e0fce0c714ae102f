"""Spreadsheets: XLSX (openpyxl in read-only mode, the ``readers`` extra: rows streamed) and CSV
(the standard library). Each sheet is a table: its first non-empty row is the header, repeated
with every chunk; the locator is the sheet and the spreadsheet row numbers."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable
from typing import Any

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import (
    Block,
    Extracted,
    Source,
    check_text,
    check_zip,
    import_extra,
    table_header,
    table_line,
)

__all__ = ["CSVReader", "XlsxReader", "cell_text", "guess_delimiter"]


def cell_text(value: Any) -> str:
    """A cell as a person reads it: no ``.0`` on whole numbers, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ") if value.time() != dt.time() else value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def sheet_block(
    rows: Iterable[tuple[int, list[str]]], locator: dict[str, Any], source: Source, total: int
) -> tuple[Block | None, int]:
    """A table block from ``(row number, cells)`` pairs: the first non-empty row is the header."""
    header: list[str] | None = None
    lines: list[tuple[int, str]] = []
    width = 0
    for number, cells in rows:
        while cells and not cells[-1].strip():
            cells = cells[:-1]
        if not cells:
            continue
        if header is None:
            header, width = cells, len(cells)
            continue
        cells = cells + [""] * (width - len(cells))
        line = table_line(cells)
        lines.append((number, line))
        total += len(line) + 1
        check_text(source, total)
    if header is None:
        return None, total
    return Block("table", "", locator, table_header(header), tuple(lines)), total


class XlsxReader:
    name = "xlsx"
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm")
    extra: str | None = "readers"

    def read(self, source: Source) -> Extracted:
        check_zip(source, "XLSX")
        openpyxl = import_extra("openpyxl", "readers", "XLSX", source)
        try:
            with source.open() as f:
                workbook = openpyxl.load_workbook(f, read_only=True, data_only=True)
                try:
                    blocks: list[Block] = []
                    total = 0
                    for sheet in workbook.worksheets:
                        rows = (
                            (number, [cell_text(v) for v in values])
                            for number, values in enumerate(sheet.iter_rows(values_only=True), start=1)
                        )
                        block, total = sheet_block(rows, {"sheet": sheet.title}, source, total)
                        if block is not None:
                            blocks.append(block)
                finally:
                    workbook.close()
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse XLSX ({exc})", source=source.name
            ) from exc
        return Extracted(blocks, {"sheets": [b.locator["sheet"] for b in blocks]}, reader=self.name)


def guess_delimiter(sample: str, default: str) -> str:
    """The delimiter found the same number of times (at least once) on each of the first lines
    (outside quotes, roughly); the most frequent such; else ``default``. Far cheaper than
    ``csv.Sniffer``, which counts every character of the sample."""
    lines = [line for line in sample.split("\n")[:10] if line.strip()]
    if len(lines) > 1 and not sample.endswith("\n"):
        lines = lines[:-1]  # the sample may cut the last line
    best, best_count = default, 0
    for candidate in (",", ";", "\t", "|"):
        counts = {line.count(candidate) for line in lines if '"' not in line} or {0}
        if len(counts) == 1 and (count := counts.pop()) > best_count:
            best, best_count = candidate, count
    return best


class CSVReader:
    """``.csv`` / ``.tsv``: UTF-8, the delimiter sniffed from the first lines; streamed."""

    name = "csv"
    suffixes: tuple[str, ...] = (".csv", ".tsv")
    extra: str | None = None

    def read(self, source: Source) -> Extracted:
        try:
            with source.open() as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
                delimiter = guess_delimiter(f.read(4096), "\t" if source.suffix == ".tsv" else ",")
                f.seek(0)
                rows = ((n, list(r)) for n, r in enumerate(csv.reader(f, delimiter=delimiter), start=1))
                block, _ = sheet_block(rows, {}, source, 0)
        except UnicodeDecodeError as exc:
            raise UnreadableFileError(
                f"{source.name}: not valid UTF-8 text ({exc.reason})", source=source.name
            ) from exc
        except csv.Error as exc:
            raise UnreadableFileError(f"{source.name}: cannot parse CSV ({exc})", source=source.name) from exc
        return Extracted([block] if block else [], reader=self.name)
