"""Random (version 4) UUIDs drawn from a pool of ``os.urandom`` bytes.

``uuid.uuid4()`` calls ``os.urandom(16)`` for every id, and ``getrandom`` releases the GIL: a
thread that makes an id hands the GIL to any other runnable thread and waits for it back (in
the service, a request's worker thread behind the speculative admission's thread, or the event
loop behind 16 busy workers). The pool takes the same operating-system randomness 4 KiB at a
time, so one call in 256 releases the GIL. It is refilled in a child after ``fork`` (a child
never repeats its parent's ids).
"""

from __future__ import annotations

import os
import threading
import uuid

__all__ = ["uuid4", "uuid4_hex"]

_IDS_PER_FILL = 256
_lock = threading.Lock()
_pool = bytearray()


def _reset() -> None:
    global _lock
    _lock = threading.Lock()
    _pool.clear()


os.register_at_fork(after_in_child=_reset)


def uuid4() -> uuid.UUID:
    """A random UUID (version 4, 122 random bits from ``os.urandom``), as ``uuid.uuid4()``."""
    with _lock:
        if not _pool:
            _pool.extend(os.urandom(16 * _IDS_PER_FILL))
        raw = bytes(_pool[-16:])
        del _pool[-16:]
    return uuid.UUID(bytes=raw, version=4)


def uuid4_hex() -> str:
    """``uuid4().hex``."""
    return uuid4().hex
