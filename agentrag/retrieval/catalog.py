"""The allow-lists retrieval builds SQL from: collection names, distance metrics and vector storage.

They live here, below :mod:`agentrag.store`, because retrieval needs them and never imports the
store; :mod:`agentrag.store.collections` re-exports them for the store's own use.
"""

from __future__ import annotations

import re

from agentrag.errors import InvalidInputError

__all__ = [
    "DISTANCES",
    "NAME",
    "VECTOR_TYPES",
    "is_valid_unicode",
    "opclass",
    "validate_name",
    "validate_vector_type",
    "vector_expr",
]

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")

# distance -> (pgvector operator class, operator, SQL turning the distance into a similarity)
DISTANCES: dict[str, tuple[str, str, str]] = {
    "cosine": ("vector_cosine_ops", "<=>", "1 - ({d})"),
    "l2": ("vector_l2_ops", "<->", "1 / (1 + ({d}))"),
    "inner_product": ("vector_ip_ops", "<#>", "-({d})"),
}

# How a collection stores its chunk vectors (migration 0050) -> the chunks column holding them:
# float32 ``vector`` (4 bytes a dimension) or pgvector's float16 ``halfvec`` (2 bytes a dimension).
VECTOR_TYPES: dict[str, str] = {"vector": "embedding", "halfvec": "embedding_half"}


def validate_vector_type(vector_type: object) -> str:
    if not isinstance(vector_type, str) or vector_type not in VECTOR_TYPES:
        raise InvalidInputError(f"unknown vector_type {vector_type!r}; use one of {sorted(VECTOR_TYPES)}")
    return vector_type


def opclass(distance: str, vector_type: str = "vector") -> str:
    """The HNSW operator class of ``distance`` over ``vector_type`` (``halfvec_cosine_ops``, ...)."""
    return vector_type + DISTANCES[distance][0].removeprefix("vector")


def vector_expr(dimensions: int, vector_type: str = "vector", alias: str = "") -> str:
    """The indexed expression of a collection's vectors (``embedding::vector(384)``): every HNSW
    index (the collection's, its tenants') is built on it and every vector leg states it."""
    column = VECTOR_TYPES[validate_vector_type(vector_type)]
    return f"{alias}{column}::{vector_type}({int(dimensions)})"


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
