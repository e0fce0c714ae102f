"""Request ids (``X-Request-Id``) without a GIL hand-off per request.

``uuid.uuid4()`` reads ``os.urandom(16)``, whose ``getrandom`` call releases the GIL: on the event
loop, every request would hand the GIL to a busy worker thread and wait for it back. The ids are
taken from a pool of ``os.urandom`` bytes filled 4 KiB at a time (one release per 256 ids), and the
pool is emptied in a child after ``fork`` (a child never repeats its parent's ids).
"""

from __future__ import annotations

import os
import threading

__all__ = ["request_id"]

_IDS_PER_FILL = 256
_lock = threading.Lock()
_pool = bytearray()


def _reset() -> None:
    global _lock
    _lock = threading.Lock()
    _pool.clear()


os.register_at_fork(after_in_child=_reset)


def request_id() -> str:
    """32 hex digits of operating-system randomness (``uuid.uuid4().hex`` carries 122 random bits)."""
    with _lock:
        if not _pool:
            _pool.extend(os.urandom(16 * _IDS_PER_FILL))
        raw = bytes(_pool[-16:])
        del _pool[-16:]
    return raw.hex()
