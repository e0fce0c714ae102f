"""The public API as text: every name of ``agentrag.__all__`` with its kind and signature, and for a
class its public methods, properties and enum members (tests/test_api_surface.py pins it)."""

from __future__ import annotations

import enum
import inspect
import re
from typing import Any

import agentrag

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_OWN = ("agentrag",)
_KINDS = ("async", "def", "property", "field", "classmethod", "staticmethod")


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return _ADDRESS.sub("", text)


def _is_own(owner: type) -> bool:
    return owner.__module__.split(".")[0] in _OWN


def _members(cls: type) -> list[str]:
    lines = []
    if issubclass(cls, enum.Enum):
        lines += [f"  {m.name} = {m.value!r}" for m in cls]
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not _is_own(owner):
            continue
        for name, value in vars(owner).items():
            if name in seen or (name.startswith("_") and name != "__call__"):  # __init__: the head
                continue
            seen.add(name)
            if isinstance(value, property):
                lines.append(f"  property {name}")
            elif isinstance(value, (classmethod, staticmethod)):
                kind = type(value).__name__
                lines.append(f"  {kind} {name}{_signature(value.__func__)}")
            elif inspect.isfunction(value):
                prefix = "async def" if inspect.iscoroutinefunction(value) else "def"
                lines.append(f"  {prefix} {name}{_signature(value)}")
    fields = getattr(cls, "model_fields", None)  # a pydantic model: its fields are its API
    if isinstance(fields, dict):
        lines += [f"  field {name}: {field.annotation!r}" for name, field in fields.items()]
    return sorted(set(lines), key=lambda line: (_member_name(line), line))


def _member_name(line: str) -> str:
    words = [w for w in line.split() if w not in _KINDS]
    return re.split(r"[(:]", words[0])[0]


def describe(name: str) -> str:
    obj = getattr(agentrag, name)
    if isinstance(obj, type):
        bases = ", ".join(b.__name__ for b in obj.__bases__)
        head = f"class {name}({bases})"
        if not issubclass(obj, BaseException):
            head += _signature(obj)
        return "\n".join([head, *_members(obj)])
    if inspect.iscoroutinefunction(obj):
        return f"async def {name}{_signature(obj)}"
    if callable(obj):
        return f"def {name}{_signature(obj)}"
    return f"{name}: {type(obj).__name__}"


def surface() -> str:
    return "\n".join(describe(name) for name in sorted(agentrag.__all__)) + "\n"
