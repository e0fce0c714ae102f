"""The fix a command's error suggests beyond the library's message (which names what is wrong)."""

from __future__ import annotations

import argparse

from agentrag.errors import AgentragError, CollectionNotFoundError

__all__ = ["hint_for"]


def hint_for(args: argparse.Namespace, exc: AgentragError) -> str:
    """A sentence appended to the error line, or ``""``."""
    if isinstance(exc, CollectionNotFoundError):
        name = getattr(args, "collection", None) or "NAME"
        if args.command == "ingest":
            return f"\n  create it as you ingest: agentrag ingest ... -c {name} --create --description '...'"
        if args.command not in ("collections",):
            return (
                "\n  create one with: agentrag collections create NAME --description '...'"
                " (or point AGENTRAG_DATA_DIR / --database-url at the database that holds it)"
            )
    return ""
