"""A chunk's locator as a person reads it: ``p. 3``, ``slide 2 "Pricing"``, ``sheet Q3 rows 2-40``,
``§ Security > Passwords``. Used by the CLI, the notebook display and the server's ``where``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["format_locator"]


def format_locator(
    locator: Mapping[str, Any] | None, *, page: int | None = None, section: str | None = None
) -> str:
    """The locator in words ("" when there is none); ``page`` / ``section``: a chunk's columns,
    used when it has no locator (chunks written before locators existed)."""
    loc = dict(locator or {})
    if not loc:  # a chunk from before locators: its columns as they are
        return ", ".join(p for p in (f"p. {page}" if page else "", section or "") if p)
    parts: list[str] = []
    if loc.get("attachment"):
        parts.append(f"attachment {loc['attachment']}")
    if loc.get("message"):
        parts.append(f"message {loc['message']}")
    if loc.get("chapter"):
        parts.append(f"chapter {loc['chapter']}")
    if loc.get("record"):
        parts.append(f"record {loc['record']}")
    if loc.get("slide"):
        title = f' "{loc["title"]}"' if loc.get("title") else ""
        parts.append(f"slide {loc['slide']}{title}")
    elif loc.get("page") or page:
        first = loc.get("page") or page
        parts.append(f"p. {first}-{loc['page_end']}" if loc.get("page_end") else f"p. {first}")
        if loc.get("ocr"):
            parts.append("OCR")
    if loc.get("sheet"):
        parts.append(f"sheet {loc['sheet']}")
    if loc.get("rows"):
        first, last = loc["rows"]
        parts.append(f"rows {first}-{last}" if last != first else f"row {first}")
    if loc.get("section"):
        parts.append("§ " + " > ".join(str(s) for s in loc["section"]))
    elif section and not loc.get("slide") and not loc.get("sheet"):
        parts.append(f"§ {section}")
    return ", ".join(parts)
