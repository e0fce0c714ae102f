"""Random bytes and random (version 4) UUIDs drawn from a pool of ``os.urandom`` bytes.

``uuid.uuid4()`` and ``secrets.token_hex()`` call ``os.urandom`` for every id, and ``getrandom``
releases the GIL: a thread that makes an id hands the GIL to any other runnable thread and waits
for it back (in the service: a request's worker thread behind the speculative admission's thread,
or behind 15 other busy workers at 16 clients). The pool takes the same operating-system
randomness 4 KiB at a time, so one call in 256 UUIDs releases the GIL. It is emptied in a child
after ``fork`` (a child never repeats its parent's bytes).
"""

from __future__ import annotations

import os
import threading
import uuid

__all__ = ["random_bytes", "uuid4", "uuid4_hex"]

_FILL = 4096
_lock = threading.Lock()
_pool = bytearray()


def _reset() -> None:
    global _lock
    _lock = threading.Lock()
    _pool.clear()


os.register_at_fork(after_in_child=_reset)


def random_bytes(n: int) -> bytes:
    """``n`` (at most 4096) bytes of ``os.urandom`` randomness, each handed out once."""
    if not 0 < n <= _FILL:
        raise ValueError(f"n must be in [1, {_FILL}], got {n}")
    with _lock:
        if len(_pool) < n:
            _pool.extend(os.urandom(_FILL))
        taken = bytes(_pool[-n:])
        del _pool[-n:]
    return taken


def uuid4() -> uuid.UUID:
    """A random UUID (version 4, 122 random bits from ``os.urandom``), as ``uuid.uuid4()``."""
    return uuid.UUID(bytes=random_bytes(16), version=4)


def uuid4_hex() -> str:
    """``uuid4().hex``."""
    return uuid4().hex
