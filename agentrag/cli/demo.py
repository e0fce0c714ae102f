"""``agentrag demo``: ingest the sample corpus and run the pipeline on two questions."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli.common import AddCommand

__all__ = ["register"]


def cmd_demo(args: argparse.Namespace) -> int:
    from agentrag.demo import run_demo

    return run_demo(args)


def register(sub: Any, add: AddCommand) -> None:
    p = add(
        sub,
        "demo",
        cmd_demo,
        "ingest the sample corpus and run the pipeline on two questions",
        json_flag=False,
    )
    p.add_argument("--samples", help="folder with collections.json and one folder per collection")
