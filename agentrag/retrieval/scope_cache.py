"""The scope planner's count, kept per store for the state of the collection it was read in.

A restricted search's plan (:func:`agentrag.retrieval.scoped.plan_collection`) reads its scope from
``documents`` under the predicate: how many chunks, how many documents, and their ids when there are
few (the exact scan, the clusters read and BM25 over the scope take their rows by those ids). Under
grants that statement reads the GIN index once per token of the principal (a principal in 100 of 1,000
groups, 1,000 of 10,000 documents: 2-3 ms of a 10-15 ms search, benchmarks/RESULTS.md "Permissions"),
and a principal's next search reads the same answer again.

:class:`ScopeCache` keeps that answer, keyed by everything it depends on: the collection, its
``version`` (bumped in the same transaction by every write of its documents or chunks: ingest, sync,
deletion, re-embedding, a new chunk layout) and ``acl_version`` (bumped by every change of who may see
a document that is not such a write: ``grant``, ``revoke``, ``reset_grants``, ``share``, a sync that
changes grants only, ``link_session``; migration 0057), both read in the search's own snapshot with the
collection's settings (no extra statement), and the count's statement with its bound values (the
scope, the filters, the principal's tokens, the thresholds that cap the count). A search whose
snapshot reads the same two counters reads the same ``documents`` rows for that predicate, so the
entry is exactly what the statement would return: it is used as the statement's answer, ids included.
Any other state is another key (the old entries age out, least recently used first). Bounded by
entries and by the document ids held.

A scope the plan does not count (more than ``COUNT_MAX_TOKENS`` grant tokens and a large share estimated
from PostgreSQL's statistics: one ``EXPLAIN``, ~0.8 ms) keeps its estimate the same way; that only plans
(the walk tests the predicate in its own statement), so the estimate may be as old as the statistics.

Visibility stays decided in SQL: the entries were read under the predicate, and a search that used one
re-tests the predicate on the rows it returns (:func:`agentrag.retrieval.search`'s fetch), so even an
entry gone wrong could not show a row the scope may not read. ``ENABLED`` False counts every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.retrieval.scoped import ScopeCount

__all__ = ["ENABLED", "MAX_ENTRIES", "MAX_IDS", "CachedScope", "ScopeCache", "scope_key"]

#: False: every restricted search counts its scope (the plan before migration 0057).
ENABLED = True
#: at most this many scopes kept per store, and at most this many document ids over all of them
#: (a scope's ids are kept up to SCOPE_MAX_DOCS, 5,000: ~0.3 MB each as Python strings)
MAX_ENTRIES = 256
MAX_IDS = 200_000


@dataclass(frozen=True, slots=True)
class CachedScope:
    """A scope as the plan read it: the count's answer, and whether it held every document of the
    collection (:func:`agentrag.retrieval.scoped.holds_every_document`; None: not asked); or, for a scope
    not counted (many grant tokens, a large share), only its share estimated from the statistics
    (``count`` None), which the plan alone uses: the walk tests the predicate in its own statement."""

    count: ScopeCount | None
    whole: bool | None
    estimate: float | None = None

    @property
    def ids(self) -> int:
        return len(self.count.ids or ()) if self.count is not None else 0


def _frozen(value: Any) -> Any:
    if isinstance(value, str | int | float | bool | type(None)):
        return (type(value).__name__, value)  # 1 and True, "1" and 1 are other keys
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple | set | frozenset):
        items = [_frozen(v) for v in value]
        return tuple(sorted(items, key=repr)) if isinstance(value, set | frozenset) else tuple(items)
    return (type(value).__name__, repr(value))


def scope_key(
    collection_id: int, version: int, acl_version: int, sql: str, params: Mapping[str, Any]
) -> tuple[Any, ...]:
    """The key of a scope's count: the collection and its two counters as the search's snapshot read
    them, the count's statement (the predicate's text and the caps) and every bound value."""
    return (int(collection_id), int(version), int(acl_version), sql, _frozen(dict(params)))


class ScopeCache:
    """A bounded, thread-safe map from :func:`scope_key` to :class:`CachedScope` (least recently used
    out first)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_ids: int = MAX_IDS) -> None:
        self.max_entries = max_entries
        self.max_ids = max_ids
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], CachedScope] = OrderedDict()
        self._ids = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Any, ...]) -> CachedScope | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: tuple[Any, ...], entry: CachedScope) -> None:
        size = entry.ids
        if size > self.max_ids:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._ids -= old.ids
            # the same collection in another state: its entries can only be read by older snapshots
            stale = [k for k in self._entries if k[0] == key[0] and k[1:3] != key[1:3]]
            for k in stale:
                self._ids -= self._entries.pop(k).ids
            self._entries[key] = entry
            self._ids += size
            while len(self._entries) > self.max_entries or self._ids > self.max_ids:
                _k, dropped = self._entries.popitem(last=False)
                self._ids -= dropped.ids

    def drop(self, collection_id: int) -> None:
        """Forget a collection's scopes (a deleted collection)."""
        with self._lock:
            for k in [k for k in self._entries if k[0] == int(collection_id)]:
                self._ids -= self._entries.pop(k).ids

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._ids = 0
