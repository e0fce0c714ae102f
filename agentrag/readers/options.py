"""Checking a caller's reader choice at call time (before any file is read)."""

from __future__ import annotations

from collections.abc import Mapping

from agentrag.errors import InvalidInputError
from agentrag.readers.base import Reader
from agentrag.readers.registry import READERS, ReaderChoice

__all__ = ["check_reader"]


def check_reader(choice: ReaderChoice) -> ReaderChoice:
    """``choice`` if it names known readers (a name, a Reader, or ``{".ext": name or Reader}``)."""
    if choice is None:
        return None
    values = list(choice.values()) if isinstance(choice, Mapping) else [choice]
    if isinstance(choice, Mapping) and not all(isinstance(k, str) and k.startswith(".") for k in choice):
        raise InvalidInputError(f"reader mapping keys must be extensions such as '.txt', got {list(choice)}")
    for value in values:
        if isinstance(value, str):
            if value not in READERS:
                raise InvalidInputError(
                    f"unknown reader {value!r}: choose one of {', '.join(sorted(READERS))}"
                )
        elif not isinstance(value, Reader):
            raise InvalidInputError(
                f"reader must be a reader name ({', '.join(sorted(READERS))}) or a Reader,"
                f" got {type(value).__name__}"
            )
    if isinstance(choice, Mapping):
        return {k.lower(): v for k, v in choice.items()}
    return choice
