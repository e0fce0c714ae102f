"""Search filters: a validated :class:`Filters` model compiled to bound SQL parameters.

A filter restricts the *documents* a search may return; it is enforced inside the SQL of every
retrieval leg (never by dropping ranked rows in Python)::

    Filters(classification="public")                       # or a list: any of them
    Filters(date_range=DateRange(start=date(2024, 1, 1)))  # documents.doc_date, inclusive
    Filters(doc_ids=["doc_0123456789abcdef"])
    Filters(metadata={"tier": "gold", "region": {"in": ["eu", "us"]}})

A plain dict with the same shape is accepted wherever ``Filters`` is (``date_range`` may also be
a ``(start, end)`` pair and dates ISO ``YYYY-MM-DD`` strings). Anything else (an unknown key,
an unknown operator, a value of the wrong type, a NUL byte, an empty list) raises
:class:`~agentrag.errors.FilterError` before any SQL runs.

Semantics:

* ``classification``: ``documents.classification`` equals the string, or one of the list.
* ``date_range``: ``start <= documents.doc_date <= end``; either bound may be omitted, not both.
  Documents without a date never match a date range.
* ``doc_ids``: the document id is one of the list.
* ``metadata``: each key must hold a JSON value equal to the given one (jsonb equality: type
  exact, so ``"1"`` does not match ``1``, while ``1`` matches ``1.0``), or, with
  ``{"in": [...]}``, equal to one of the values. Keys name *top-level* metadata keys
  (``"a.b"`` is the key ``"a.b"``, not a path); they must match
  ``^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`` and are bound as parameters all the same. A document
  without the key does not match (``None`` matches an explicit JSON ``null`` only).

All conditions are combined with AND. :func:`compile_filters` returns an SQL fragment over the
documents alias ``d`` that contains only this module's own text and placeholder names
(``:f_...``); every value travels as a bound parameter.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentrag.errors import FilterError
from agentrag.retrieval.catalog import is_valid_unicode

__all__ = [
    "DateRange",
    "Filters",
    "MetaIn",
    "compile_filters",
    "filter_keys",
    "parse_filter_pairs",
    "validate_filters",
]

#: Metadata keys a filter may name.
META_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
MAX_VALUES = 1000  # values in one list (classification, doc_ids, an "in" operator)
MAX_META_KEYS = 32
MAX_STRING = 10_000  # characters in one filter value
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

Scalar: TypeAlias = str | bool | int | float | None


def _text(value: Any, where: str) -> str:
    """A string safe to bind: no NUL byte (PostgreSQL rejects it), valid UTF-8, bounded."""
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{where} must not contain NUL bytes")
    if len(value) > MAX_STRING:
        raise ValueError(f"{where} is longer than {MAX_STRING} characters")
    if not is_valid_unicode(value):
        raise ValueError(f"{where} is not valid Unicode (lone surrogate)")
    return value


def _texts(value: Any, where: str) -> tuple[str, ...]:
    """A string or a non-empty list/tuple of strings, as a tuple."""
    if isinstance(value, str):
        return (_text(value, where),)
    items = _items(
        value, where, "a string or a list of strings", "an empty list (leave the key out to not filter)"
    )
    return tuple(_text(item, f"{where}[{i}]") for i, item in enumerate(items))


def _items(value: Any, where: str, expected: str, empty: str) -> list[Any] | tuple[Any, ...]:
    """A non-empty list/tuple of at most MAX_VALUES items (``expected`` / ``empty`` for the errors)."""
    if not isinstance(value, list | tuple):
        raise ValueError(f"{where} must be {expected}, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{where} must not be {empty}")
    if len(value) > MAX_VALUES:
        raise ValueError(f"{where} holds more than {MAX_VALUES} values")
    return value


def _scalar(value: Any, where: str) -> Scalar:
    """A JSON scalar: string, boolean, 64-bit integer, finite float or None."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _text(value, where)
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueError(f"{where} is outside the 64-bit integer range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number, got {value!r}")
        return value
    raise ValueError(f"{where} must be a string, number, boolean or None, got {type(value).__name__}")


def _date(value: Any, where: str) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        raise ValueError(f"{where} must be a date, not a datetime")
    if isinstance(value, date):
        return value
    if isinstance(value, str) and _ISO_DATE.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"{where} must be a date or an ISO 'YYYY-MM-DD' string, got {value!r}")


class DateRange(BaseModel):
    """``start <= documents.doc_date <= end`` (both inclusive); one bound may be None."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    start: date | None = None
    end: date | None = None

    @field_validator("start", "end", mode="before")
    @classmethod
    def _parse(cls, value: Any, info: Any) -> date | None:
        return _date(value, f"date_range.{info.field_name}")

    @model_validator(mode="after")
    def _check(self) -> DateRange:
        if self.start is None and self.end is None:
            raise ValueError("date_range needs a start, an end or both")
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(f"date_range start {self.start} is after its end {self.end}")
        return self


class MetaIn(BaseModel):
    """The ``{"in": [...]}`` operator of a metadata filter."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    values: tuple[Scalar, ...] = Field(alias="in")

    def __repr__(self) -> str:
        return f"{{'in': {list(self.values)!r}}}"


class Filters(BaseModel):
    """Document filters; see the module docstring for the semantics of each key."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    classification: tuple[str, ...] | None = None
    date_range: DateRange | None = None
    doc_ids: tuple[str, ...] | None = None
    metadata: dict[str, Scalar | MetaIn] | None = None

    @field_validator("classification", "doc_ids", mode="before")
    @classmethod
    def _strings(cls, value: Any, info: Any) -> tuple[str, ...] | None:
        return None if value is None else _texts(value, info.field_name)

    @field_validator("date_range", mode="before")
    @classmethod
    def _range(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            if len(value) != 2:
                raise ValueError("date_range as a sequence must be (start, end)")
            return {"start": value[0], "end": value[1]}
        if value is not None and not isinstance(value, DateRange | Mapping):
            raise ValueError(
                f"date_range must be a DateRange, a dict or (start, end), got {type(value).__name__}"
            )
        return dict(value) if isinstance(value, Mapping) else value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> dict[str, Scalar | MetaIn] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError(f"metadata must be a dict, got {type(value).__name__}")
        if not value:
            raise ValueError("metadata must not be empty (leave the key out to not filter)")
        if len(value) > MAX_META_KEYS:
            raise ValueError(f"metadata filters at most {MAX_META_KEYS} keys")
        out: dict[str, Scalar | MetaIn] = {}
        for key, condition in value.items():
            if not isinstance(key, str) or not META_KEY.fullmatch(key):
                raise ValueError(
                    f"metadata key {key!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-', "
                    "starting with a letter or '_'"
                )
            where = f"metadata[{key!r}]"
            if isinstance(condition, MetaIn):
                out[key] = condition
            elif isinstance(condition, Mapping):
                ops = list(condition)
                if ops != ["in"]:
                    unknown = [op for op in ops if op != "in"]
                    shown = ", ".join(repr(op) for op in unknown) if unknown else "none"
                    raise ValueError(f"{where}: unknown operator(s) {shown}; the only operator is 'in'")
                items = _items(condition["in"], f"{where}['in']", "a list", "empty")
                out[key] = MetaIn.model_validate(
                    {"in": tuple(_scalar(item, f"{where}['in'][{i}]") for i, item in enumerate(items))}
                )
            else:
                out[key] = _scalar(condition, where)
        return out

    def is_empty(self) -> bool:
        return (
            self.classification is None and self.date_range is None and not self.doc_ids and not self.metadata
        )


def filter_keys() -> tuple[str, ...]:
    """The ``KEY=VALUE`` keys of the command line's ``--filter``: the model's own field names,
    dotted (``date_range.start``, ``metadata.KEY``)."""
    keys: list[str] = []
    for name in Filters.model_fields:
        if name == "date_range":
            keys.extend(f"date_range.{bound}" for bound in DateRange.model_fields)
        elif name == "metadata":
            keys.append("metadata.KEY")
        else:
            keys.append(name)
    return tuple(keys)


# What the command line called these keys before they took the model's names.
_RENAMED = {
    "doc_id": "doc_ids",
    "date_from": "date_range.start",
    "date_to": "date_range.end",
    "meta": "metadata",
}


def _unknown_key(key: str, valid: Sequence[str]) -> str:
    import difflib

    head, _, rest = key.partition(".")
    hint = _RENAMED.get(key) or (f"{_RENAMED[head]}.{rest}" if head in _RENAMED and rest else None)
    if hint is None:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6) or difflib.get_close_matches(
            head, [v.split(".", 1)[0] for v in valid], n=1, cutoff=0.6
        )
        hint = close[0] if close else None
    suggestion = f" (did you mean {hint!r}?)" if hint else ""
    return f"unknown filter key {key!r}{suggestion}; valid keys are {', '.join(valid)}"


def parse_filter_pairs(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``KEY=VALUE`` strings (the CLI's ``--filter``) -> the filters dict :class:`Filters` validates.

    Keys are the model's: ``classification``, ``doc_ids``, ``date_range.start``,
    ``date_range.end`` (``YYYY-MM-DD``) and ``metadata.KEY``. A key given several times matches
    any of its values. Raises FilterError for a malformed pair or an unknown key (naming the
    closest valid one).
    """
    valid = filter_keys()
    lists: dict[str, list[str]] = {}
    dates: dict[str, str] = {}
    meta: dict[str, list[str]] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise FilterError(f"a filter takes KEY=VALUE, got {pair!r}")
        if key in ("classification", "doc_ids"):
            lists.setdefault(key, []).append(value)
        elif key.startswith("date_range.") and key in valid:
            dates[key.removeprefix("date_range.")] = value
        elif key.startswith("metadata.") and len(key) > len("metadata."):
            meta.setdefault(key.removeprefix("metadata."), []).append(value)
        else:
            raise FilterError(_unknown_key(key, valid))
    filters: dict[str, Any] = dict(lists)
    if dates:
        filters["date_range"] = dates
    if meta:
        filters["metadata"] = {k: v[0] if len(v) == 1 else {"in": v} for k, v in meta.items()}
    return filters or None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error.get("loc", ()))
        msg = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error.get("type") == "extra_forbidden":
            msg = _unknown_key(loc, sorted(Filters.model_fields))
            loc = ""
        parts.append(f"{loc}: {msg}" if loc and not msg.startswith(loc.split(".")[0]) else msg)
    return "; ".join(parts)


def validate_filters(filters: Filters | Mapping[str, Any] | None) -> Filters | None:
    """``filters`` as a validated :class:`Filters` (None stays None); raises FilterError."""
    if filters is None or isinstance(filters, Filters):
        return filters
    if not isinstance(filters, Mapping):
        raise FilterError(f"filters must be a Filters or a dict, got {type(filters).__name__}")
    try:
        return Filters.model_validate(dict(filters))
    except ValidationError as exc:
        raise FilterError(f"invalid filters: {_describe(exc)}") from None
    except (TypeError, ValueError, RecursionError) as exc:  # pragma: no cover - pydantic wraps these
        raise FilterError(f"invalid filters: {exc}") from None


def _json(value: Scalar) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def compile_filters(filters: Filters | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Compile ``filters`` to ``(sql, params)``: a boolean SQL expression over the documents alias ``d``.

    ``sql`` holds only this module's text and ``:f_*`` placeholders; ``params`` the bound values.
    No filter compiles to ``("TRUE", {})``. Raises FilterError for invalid filters.
    """
    validated = validate_filters(filters)
    if validated is None:
        return "TRUE", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if validated.classification is not None:
        clauses.append("d.classification = ANY(CAST(:f_classification AS text[]))")
        params["f_classification"] = list(validated.classification)
    if validated.date_range is not None:
        if validated.date_range.start is not None:
            clauses.append("d.doc_date >= CAST(:f_date_start AS date)")
            params["f_date_start"] = validated.date_range.start
        if validated.date_range.end is not None:
            clauses.append("d.doc_date <= CAST(:f_date_end AS date)")
            params["f_date_end"] = validated.date_range.end
    if validated.doc_ids is not None:
        clauses.append("d.id = ANY(CAST(:f_doc_ids AS text[]))")
        params["f_doc_ids"] = list(validated.doc_ids)
    for i, (key, condition) in enumerate((validated.metadata or {}).items()):
        params[f"f_mk{i}"] = key
        if isinstance(condition, MetaIn):
            clauses.append(f"d.metadata -> CAST(:f_mk{i} AS text) = ANY(CAST(:f_mv{i} AS jsonb[]))")
            params[f"f_mv{i}"] = [_json(v) for v in condition.values]
        else:
            # the containment is implied by the equality (same rows) and served by the GIN index
            # documents_metadata (migration 0045): a selective filter reads only its documents
            clauses.append(
                f"d.metadata @> CAST(:f_mo{i} AS jsonb)"
                f" AND d.metadata -> CAST(:f_mk{i} AS text) = CAST(:f_mv{i} AS jsonb)"
            )
            params[f"f_mv{i}"] = _json(condition)
            params[f"f_mo{i}"] = json.dumps({key: condition}, ensure_ascii=False, allow_nan=False)
    if not clauses:
        return "TRUE", {}
    return " AND ".join(f"({clause})" for clause in clauses), params
