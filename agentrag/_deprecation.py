"""Deprecations, as docs/explanation/releases.md states them: a public name or parameter that goes away is
first deprecated in a minor release, keeps working and warns with the version it was announced in
and the version that removes it (the next major, or under 1.0 at least two minors later).

* :func:`deprecated` wraps a function, method or class: each use warns.
* :func:`deprecated_parameter` warns when a caller passes a parameter that is going away.
* :func:`warn_deprecated` is the warning itself, for anything else (a module attribute, a value).

The warning is a :class:`DeprecationWarning` (``AgentragDeprecationWarning``, a subclass), raised
at the caller's line (``stacklevel``), so ``python -W error::DeprecationWarning`` and pytest's
``filterwarnings = error`` turn it into a failure in the code that still uses the old name.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["AgentragDeprecationWarning", "deprecated", "deprecated_parameter", "warn_deprecated"]

F = TypeVar("F", bound=Callable[..., Any])
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")


class AgentragDeprecationWarning(DeprecationWarning):
    """A public agentrag name or parameter that a later release removes."""

    def __init__(self, message: str, *, name: str, since: str, removal: str) -> None:
        super().__init__(message)
        self.name, self.since, self.removal = name, since, removal


def _version(value: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, str) or not _VERSION.match(value):
        raise ValueError(f"{what} must be a version like '0.3' or '1.0.0', got {value!r}")
    return tuple(int(part) for part in value.split("."))


def _message(name: str, since: str, removal: str, instead: str | None) -> str:
    if _version(removal, "removal") <= _version(since, "since"):
        raise ValueError(f"removal {removal!r} must come after since {since!r}")
    use = f"; use {instead} instead" if instead else ""
    return f"{name} is deprecated since agentrag {since} and will be removed in {removal}{use}"


def warn_deprecated(
    name: str, *, since: str, removal: str, instead: str | None = None, stacklevel: int = 2
) -> None:
    """Warn that ``name`` is deprecated (at the caller's caller with the default ``stacklevel``)."""
    message = _message(name, since, removal, instead)
    warning = AgentragDeprecationWarning(message, name=name, since=since, removal=removal)
    warnings.warn(warning, stacklevel=stacklevel + 1)


def deprecated(*, since: str, removal: str, instead: str | None = None) -> Callable[[F], F]:
    """Decorate a function, method or class so that each call (or instantiation) warns.

    The message is checked when the decorator is applied: a bad version fails at import, not at
    the first user's call. The wrapped object's docstring gains a ``.. deprecated::`` note.
    """

    def wrap(obj: F) -> F:
        name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        message = _message(name, since, removal, instead)
        note = f"\n\n.. deprecated:: {since}\n   {message}.\n"
        if isinstance(obj, type):
            original_init = obj.__init__  # type: ignore[misc]

            @functools.wraps(original_init)
            def init(self: Any, *args: Any, **kwargs: Any) -> None:
                warn_deprecated(name, since=since, removal=removal, instead=instead)
                original_init(self, *args, **kwargs)

            obj.__init__ = init  # type: ignore[misc]
            obj.__doc__ = (obj.__doc__ or "") + note
            return obj

        @functools.wraps(obj)
        def call(*args: Any, **kwargs: Any) -> Any:
            warn_deprecated(name, since=since, removal=removal, instead=instead)
            return obj(*args, **kwargs)

        call.__doc__ = (obj.__doc__ or "") + note
        return call  # type: ignore[return-value]

    return wrap


def deprecated_parameter(
    parameter: str, *, since: str, removal: str, instead: str | None = None
) -> Callable[[F], F]:
    """Decorate a function so that passing ``parameter`` by keyword warns (the call still runs)."""

    def wrap(func: F) -> F:
        name = f"the {parameter}= parameter of {func.__qualname__}"
        _message(name, since, removal, instead)

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            if parameter in kwargs:
                warn_deprecated(name, since=since, removal=removal, instead=instead)
            return func(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
