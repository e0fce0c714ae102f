"""E-mail: EML (one message) and MBOX (many), with the standard library. Headers become
metadata (``date`` as an ISO date, so it fills the document's date), the body is read as text
(or through the HTML reader), and attachments go through the other readers (their locators
carry ``attachment``). An attachment that cannot be read is noted, not fatal."""

from __future__ import annotations

import email
import email.policy
import email.utils
import mailbox
from typing import Any

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import Block, Extracted, Source, check_text
from agentrag.readers.markup import html_to_markdown, markdown_blocks

__all__ = ["EmailReader", "MboxReader"]

_HEADERS = ("from", "to", "cc", "subject", "message-id")


def _headers(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _HEADERS:
        value = message.get(name)
        if value:
            out[name.replace("-", "_")] = str(value)
    if message.get("date"):
        try:
            out["date"] = email.utils.parsedate_to_datetime(str(message["date"])).date().isoformat()
        except (TypeError, ValueError):
            out["sent"] = str(message["date"])
    return out


def message_blocks(message: Any, base: dict[str, Any], notes: list[str]) -> list[Block]:
    """A message's blocks: a header line and its body, then each attachment's blocks."""
    from agentrag.readers.registry import read

    heads = _headers(message)
    top = "\n".join(f"{k.capitalize()}: {heads[k]}" for k in ("from", "to", "subject") if k in heads)
    content = ""
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        content = body.get_content()
        if body.get_content_type() == "text/html":
            content = html_to_markdown(content)[1]
    # the header lines open the first block, so a short message is one chunk with who and what
    blocks = markdown_blocks((top + "\n\n" + content).replace("\r\n", "\n").strip("\n"), base)
    for part in message.iter_attachments():
        filename = part.get_filename()
        if not filename:
            continue
        try:
            payload = part.get_payload(decode=True) or b""
            inner = read(Source(filename, data=payload))
        except IngestError as exc:
            notes.append(f"attachment {filename} not read: {type(exc).__name__}: {exc}")
            continue
        notes.extend(f"{filename}: {note}" for note in inner.notes)
        for block in inner.blocks:
            blocks.append(
                Block(
                    block.kind,
                    block.text,
                    {**base, "attachment": filename, **block.locator},
                    block.header,
                    block.rows,
                    block.markdown,
                    block.page_starts,
                )
            )
    return blocks


class EmailReader:
    name = "eml"
    suffixes: tuple[str, ...] = (".eml",)
    extra: str | None = None

    def read(self, source: Source) -> Extracted:
        try:
            message = email.message_from_bytes(source.read_bytes(), policy=email.policy.default)
            if not message.keys():
                raise UnreadableFileError(
                    f"{source.name}: not an e-mail message (no headers)", source=source.name
                )
            notes: list[str] = []
            blocks = message_blocks(message, {}, notes)
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse e-mail ({exc})", source=source.name
            ) from exc
        return Extracted(blocks, _headers(message), reader=self.name, notes=notes)


class MboxReader:
    """``.mbox``: every message, in order; locator ``message`` (1-based) and ``subject``."""

    name = "mbox"
    suffixes: tuple[str, ...] = (".mbox",)
    extra: str | None = None

    def read(self, source: Source) -> Extracted:
        import tempfile
        from pathlib import Path

        blocks: list[Block] = []
        notes: list[str] = []
        with tempfile.TemporaryDirectory() as tmp:
            path = source.path
            if path is None:  # mailbox reads files only
                path = Path(tmp) / "in.mbox"
                path.write_bytes(source.data or b"")
            box = mailbox.mbox(str(path), factory=None, create=False)
            try:
                total = 0
                for number, raw in enumerate(box, start=1):
                    message = email.message_from_bytes(raw.as_bytes(), policy=email.policy.default)
                    base: dict[str, Any] = {"message": number}
                    if message.get("subject"):
                        base["subject"] = str(message["subject"])
                    found = message_blocks(message, base, notes)
                    total += sum(len(b.text) for b in found)
                    check_text(source, total)
                    blocks.extend(found)
            except IngestError:
                raise
            except Exception as exc:
                raise UnreadableFileError(
                    f"{source.name}: cannot parse mbox ({exc})", source=source.name
                ) from exc
            finally:
                box.close()
        if not blocks:
            raise UnreadableFileError(f"{source.name}: no messages found", source=source.name)
        return Extracted(
            blocks,
            {"messages": max(b.locator.get("message", 0) for b in blocks)},
            reader=self.name,
            notes=notes,
        )
