"""Hard-wrap Markdown the way many editors save it: prose and list items filled at a width,
headings, code blocks, tables and front matter untouched."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

_ITEM = re.compile(r"^(\s*(?:[-*+]|\d{1,9}[.)])\s+)")


def hard_wrap(text: str, width: int = 72) -> str:
    out: list[str] = []
    in_fence = False
    in_front = text.startswith("---\n")
    for number, line in enumerate(text.splitlines()):
        if in_front:
            out.append(line)
            if number > 0 and line.strip() == "---":
                in_front = False
            continue
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence or not line.strip() or line.lstrip().startswith(("#", "|", ">")) or len(line) <= width:
            out.append(line)
            continue
        item = _ITEM.match(line)
        lead = item.group(1) if item else ""
        out.append(
            textwrap.fill(
                line[len(lead) :],
                width=width,
                initial_indent=lead,
                subsequent_indent=" " * len(lead),
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def wrap_tree(source: Path, target: Path, width: int = 72) -> Path:
    """Copy every ``.md`` file of ``source`` to ``target``, hard-wrapped."""
    for path in sorted(source.rglob("*.md")):
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(hard_wrap(path.read_text(encoding="utf-8"), width), encoding="utf-8")
    return target
