"""Rich notebook display: a :class:`~agentrag.context.Context` or a search result as HTML or Markdown.

The presentation layer, above everything it renders: :mod:`agentrag.display.context` renders a
Context, :mod:`agentrag.display.result` a :class:`~agentrag.retrieval.result.SearchResult`,
:mod:`agentrag.display.common` holds their escaping, tables and CSS. Nothing below imports this
package: the types declare the hooks Jupyter calls (``_repr_html_`` / ``_repr_markdown_``, see
:mod:`agentrag._renderers`) and :func:`register_renderers`, called when ``agentrag`` loads, fills
them. It imports nothing: each renderer module is imported on its first use.

Every piece of text (question, answer, chunk text, prompts, reasoning, errors, even ids) is escaped
with :func:`html.escape`; Markdown also backslash-escapes its own punctuation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentrag._renderers import register

if TYPE_CHECKING:
    from agentrag.display.context import anchor, context_html, context_markdown
    from agentrag.display.result import search_result_html, search_result_markdown

__all__ = [
    "anchor",
    "context_html",
    "context_markdown",
    "register_renderers",
    "search_result_html",
    "search_result_markdown",
]

# (the type rendered, the kind) -> the renderer's module and function
RENDERERS: dict[tuple[str, str], tuple[str, str]] = {
    ("agentrag.context.Context", "html"): ("agentrag.display.context", "context_html"),
    ("agentrag.context.Context", "markdown"): ("agentrag.display.context", "context_markdown"),
    ("agentrag.retrieval.result.SearchResult", "html"): ("agentrag.display.result", "search_result_html"),
    ("agentrag.retrieval.result.SearchResult", "markdown"): (
        "agentrag.display.result",
        "search_result_markdown",
    ),
}
_MODULE_OF = {function: module for module, function in RENDERERS.values()} | {
    "anchor": "agentrag.display.context"
}


def _lazy_renderer(module: str, function: str) -> Any:
    def renderer(obj: Any) -> str:
        rendered: str = getattr(importlib.import_module(module), function)(obj)
        return rendered

    renderer.__name__ = renderer.__qualname__ = function
    return renderer


def register_renderers() -> None:
    """Register the renderers onto Context and SearchResult (their notebook hooks); idempotent."""
    for (type_name, kind), (module, function) in RENDERERS.items():
        register(type_name, kind, _lazy_renderer(module, function))


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag.display' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
