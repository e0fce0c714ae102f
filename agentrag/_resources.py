"""Locate data folders shipped with agentrag (prompt templates, SQL migrations, the sample corpus).

In an installed wheel they live inside the package at ``agentrag/_data/<name>``
(``pyproject.toml`` force-includes them there); in a source checkout or an editable
install they are the top-level folders ``<repo>/<name>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = ["RESOURCE_NAMES", "resource_dir"]

RESOURCE_NAMES: tuple[str, ...] = ("prompts", "migrations", "samples")

ResourceName = Literal["prompts", "migrations", "samples"]

_PACKAGE_DIR = Path(__file__).resolve().parent


def _candidates(name: str) -> tuple[Path, Path]:
    return _PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name


def resource_dir(name: ResourceName | str) -> Path:
    """Return the folder holding the ``name`` resources (``"prompts"``, ``"migrations"``, ``"samples"``).

    The installed-wheel location is checked first, then the source-checkout location.
    Raises :class:`ValueError` for an unknown name and :class:`FileNotFoundError` when
    neither location exists.
    """
    if name not in RESOURCE_NAMES:
        raise ValueError(f"unknown resource {name!r}; expected one of {', '.join(RESOURCE_NAMES)}")
    wheel_dir, source_dir = _candidates(name)
    for candidate in (wheel_dir, source_dir):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"agentrag resource folder {name!r} not found: looked in {wheel_dir} (installed wheel) "
        f"and {source_dir} (source checkout). The installation looks incomplete; reinstall agentrag."
    )
