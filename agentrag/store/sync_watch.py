"""``agentrag sync PATH --watch``: sync a local folder again whenever it changes (watchfiles,
debounced). Each run is an ordinary ``store.sync``: the pre-check makes a run over a folder
where little changed cost a listing and the changed files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError, SyncSourceError

if TYPE_CHECKING:
    from agentrag.store.store import Store
    from agentrag.store.sync_report import SyncReport

__all__ = ["watch"]


def watch(
    store: Store,
    source: str | Path,
    *,
    collection: str,
    on_report: Callable[[SyncReport], None],
    debounce_ms: int = 1600,
    stop: threading.Event | None = None,
    **options: Any,
) -> None:
    """Sync ``source`` (a local folder) into ``collection`` now, then again after each batch of
    changes (changes within ``debounce_ms`` are one batch), until ``stop`` is set or Ctrl-C.
    ``on_report`` gets every run's report; ``options`` are :meth:`Store.sync`'s."""
    if isinstance(source, str) and "://" in source and not source.startswith("file://"):
        raise InvalidInputError(
            f"{source}: --watch watches local folders; run `agentrag sync URL` from cron or a systemd timer"
        )
    if type(debounce_ms) is not int or debounce_ms < 1:
        raise InvalidInputError(f"debounce_ms must be an integer >= 1, got {debounce_ms!r}")
    try:
        from watchfiles import watch as watch_changes
    except ImportError as exc:  # pragma: no cover - watchfiles comes with the sync extra
        raise SyncSourceError("--watch needs watchfiles: pip install 'agentrag[sync]'") from exc
    path = Path(str(source).removeprefix("file://"))
    on_report(store.sync(path, collection=collection, **options))
    for _changes in watch_changes(path, debounce=debounce_ms, stop_event=stop, recursive=True):
        on_report(store.sync(path, collection=collection, **options))
