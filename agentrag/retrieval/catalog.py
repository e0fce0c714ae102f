"""The allow-lists retrieval builds SQL from: collection names and distance metrics.

They live here, below :mod:`agentrag.store`, because retrieval needs them and never imports the
store; :mod:`agentrag.store.collections` re-exports them for the store's own use.
"""

from __future__ import annotations

import re

from agentrag.errors import InvalidInputError

__all__ = ["DISTANCES", "NAME", "is_valid_unicode", "validate_name"]

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")

# distance -> (pgvector operator class, operator, SQL turning the distance into a similarity)
DISTANCES: dict[str, tuple[str, str, str]] = {
    "cosine": ("vector_cosine_ops", "<=>", "1 - ({d})"),
    "l2": ("vector_l2_ops", "<->", "1 / (1 + ({d}))"),
    "inner_product": ("vector_ip_ops", "<#>", "-({d})"),
}


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidInputError(
            f"invalid collection name {name!r}: use 1-63 letters, digits, '_', '.' or '-', "
            "starting with a letter, digit or '_'"
        )
    return name


def is_valid_unicode(value: str) -> bool:
    """False for a string PostgreSQL cannot take: one holding a lone surrogate."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
