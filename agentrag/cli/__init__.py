"""The ``agentrag`` command line: the library's verbs, readable output, ``--json`` for scripts.

Exit codes: 0 success, 1 partial failure (some files failed to ingest), 2 an error.

One module per command group, each with ``register(sub, add)``: :data:`GROUPS` lists them in
the order ``agentrag --help`` shows them; shared options and opening the store are in
:mod:`agentrag.cli.common`. Extension packages add their commands the same way, through an
``agentrag.cli`` entry point. Building the parser imports no heavy library (each group imports
what its handler needs when it runs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from agentrag.cli import (
    acl,
    ask,
    chat_terminal,
    collections,
    db,
    demo,
    documents,
    ingest,
    log,
    relations,
    search,
    sync,
)
from agentrag.cli import eval as evaluation  # the `eval` group, not the builtin
from agentrag.cli.common import AddCommand, add_command, hint_for
from agentrag.errors import AgentragError

__all__ = ["GROUPS", "build_parser", "main"]

# The command groups, in the order of ``agentrag --help``; the extensions' commands come after.
GROUPS = (
    db,
    collections,
    ingest,
    sync,
    documents,
    acl,
    search,
    ask,
    chat_terminal,
    relations,
    log,
    evaluation,
    demo,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrag", description="Agentic RAG over PostgreSQL + pgvector.")
    parser.add_argument(
        "--database-url", help="PostgreSQL URL (default: $AGENTRAG_DATABASE_URL, else the embedded server)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub, add_command)
    _register_plugins(sub, add_command)  # e.g. serve, tenants, audit from the server extension
    return parser


def _register_plugins(sub: Any, add: AddCommand) -> None:
    """Commands of extension packages: ``register(sub, add)`` of each ``agentrag.cli`` entry point.

    The library never imports an extension (tests/test_layers.py); extensions declare their
    commands in pyproject.toml instead (``[project.entry-points."agentrag.cli"]``).
    """
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group="agentrag.cli"), key=lambda e: e.name):
        entry.load()(sub, add)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except AgentragError as exc:
        print(f"agentrag: error: {exc}{hint_for(args, exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
