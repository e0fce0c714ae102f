"""Reading a file of a folder without following a link out of it (issue #37, F-6).

Both ``store.sync`` (a local folder) and ``store.ingest(folder)`` read a listed file through
:func:`read_inside`: the file is opened (non-blocking, so a FIFO never hangs the read), then the
path the kernel actually opened (``/proc/self/fd``, else the resolved path, whose inode must be
the opened one) must lie inside the folder, and the file must be a regular file within the
reader size limit. The bytes come from that descriptor: a file swapped for a link between the
listing (or a check by path) and the read is refused, never read.
"""

from __future__ import annotations

import os
import stat

from agentrag.errors import FileTooLargeError
from agentrag.readers.base import LIMITS

__all__ = ["OutsideFolderError", "is_inside", "read_inside"]

_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
)


class OutsideFolderError(OSError):
    """The file opened is outside the folder, or is not a regular file (the message says which);
    the callers turn it into their own typed error."""


def read_inside(root: str, path: str, *, name: str) -> bytes:
    """The bytes of ``path``, which must open to a regular file inside ``root`` (a resolved,
    absolute folder). FileNotFoundError when it vanished, :class:`OutsideFolderError` when it is
    refused, FileTooLargeError over the size limit, another OSError when it cannot be read."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not _opened_inside(fd, info, path, root):
            raise OutsideFolderError(f"{name}: refused: it resolves outside the folder (a link was followed)")
        if not stat.S_ISREG(info.st_mode):
            raise OutsideFolderError(f"{name}: refused: not a regular file")
        if info.st_size > LIMITS.max_file_bytes:
            raise FileTooLargeError(
                f"{name}: {info.st_size:,} bytes is over the {LIMITS.max_file_bytes:,}-byte limit"
                " (agentrag.readers.LIMITS.max_file_bytes)",
                source=name,
            )
        return _read_all(fd, info.st_size)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    """The file open on ``fd``, to its end (at most one byte past the size limit: a file growing
    meanwhile fails the reader's size check)."""
    parts, total = [], 0
    while total <= LIMITS.max_file_bytes:
        part = os.read(fd, max(size - total, 0) + 65536)
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def _opened_inside(fd: int, info: os.stat_result, path: str, root: str) -> bool:
    """Whether the file open on ``fd`` is inside ``root``: the path the kernel opened (Linux:
    ``/proc/self/fd/N``); elsewhere the resolved ``path``, if it is inside and is the same file
    (device and inode) as the one open -- a swap after the open makes them differ."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        opened = ""
    if opened.startswith("/"):
        return is_inside(opened, root)
    real = os.path.realpath(path)
    try:
        now = os.stat(real)
    except OSError:
        return False
    return is_inside(real, root) and (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def is_inside(path: str, root: str) -> bool:
    """Whether the absolute ``path`` is ``root`` or below it (both resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
