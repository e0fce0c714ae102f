"""The notebook hooks of agentrag's result types, filled in from above.

:class:`~agentrag.context.Context` and :class:`~agentrag.retrieval.result.SearchResult` sit low in
the layers; what renders them (:mod:`agentrag.display`, the presentation layer) imports what it
renders. So the types only declare the hooks Jupyter calls (:class:`Renderable`:
``_repr_html_`` / ``_repr_markdown_``), and ``agentrag/__init__`` registers display's renderers here
when the package loads (:func:`agentrag.display.register_renderers`): no lower layer imports
display, and nothing is imported to render until a notebook asks.

A type with no renderer registered returns None, which Jupyter takes as "no such view".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrag.errors import InvalidInputError

__all__ = ["KINDS", "Renderable", "register", "render"]

KINDS: tuple[str, ...] = ("html", "markdown")

_RENDERERS: dict[tuple[str, str], Callable[[Any], str]] = {}


def register(type_name: str, kind: str, renderer: Callable[[Any], str]) -> None:
    """Render the instances of ``type_name`` (``module.QualName``) as ``kind`` with ``renderer``."""
    if kind not in KINDS:
        raise InvalidInputError(f"unknown rendering {kind!r}; the kinds are {', '.join(KINDS)}")
    _RENDERERS[(type_name, kind)] = renderer


def render(obj: object, kind: str) -> str | None:
    """``obj`` rendered as ``kind`` by the renderer registered for its type (or a base), else None."""
    for cls in type(obj).__mro__:
        renderer = _RENDERERS.get((f"{cls.__module__}.{cls.__qualname__}", kind))
        if renderer is not None:
            return renderer(obj)
    return None


class Renderable:
    """The notebook hooks, declared on the types and filled by :func:`register`."""

    __slots__ = ()

    def _repr_html_(self) -> str | None:
        return render(self, "html")

    def _repr_markdown_(self) -> str | None:
        return render(self, "markdown")
