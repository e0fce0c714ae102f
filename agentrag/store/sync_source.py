"""What ``store.sync`` reads from: a local folder or any fsspec URL (S3 through s3fs).

A :class:`SyncSource` lists its files as ``{key: Entry}`` (the key is the path relative to the
source's root, ``/``-separated, the same key ``store.ingest`` gives a file inside a folder) with
the cheap facts the pre-check compares (size, mtime in ns, and the ETag where the store gives
one), and hands a file over as a local path to read (:meth:`SyncSource.local_path`). A file's
grants sidecar (``report.md.grants`` beside ``report.md``, :mod:`agentrag.store.acl`) is never
listed as a file of its own: its facts ride on its file's entry (``Entry.sidecar``), so a changed,
new or deleted sidecar makes its file's entry differ from the one recorded.

Local folders: hidden entries (a part starting with ``.``) are skipped, as ingest skips them;
symbolic links are followed only when their target is inside the folder (a link out of it, or
a loop, is skipped); a file is read through the descriptor it was opened on and only when the
path the kernel opened is inside the folder, so a folder swapped for a link out of it between the
listing and the read is refused (:meth:`LocalSource.read_bytes`). Include / exclude globs
match the key with :func:`fnmatch.fnmatchcase`
(``*`` also matches ``/``): a key is listed when it matches an include glob (default: every
key) and no exclude glob.
"""

from __future__ import annotations

import builtins
import fnmatch
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from agentrag.errors import InvalidInputError, SyncSourceError
from agentrag.readers.base import Source
from agentrag.store.acl import SIDECAR_SUFFIX, parse_sidecar
from agentrag.store.readers import SUPPORTED_SUFFIXES
from agentrag.store.safe_read import OutsideFolderError, is_inside, read_inside

__all__ = ["Entry", "SyncSource", "open_source"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed file: its size, modification time (ns since the epoch) and ETag (object stores);
    ``sidecar``: its grants sidecar's entry, when it has one."""

    size: int | None
    mtime_ns: int | None
    etag: str | None = None
    sidecar: Entry | None = None


def _with_sidecars(found: dict[str, Entry], sidecars: dict[str, Entry]) -> dict[str, Entry]:
    """The listing, sorted, each file's sidecar on its entry (a sidecar of no listed file: ignored)."""
    for key, entry in sidecars.items():
        if key in found:
            found[key] = replace(found[key], sidecar=entry)
    return dict(sorted(found.items()))


def _wanted(key: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if any(part.startswith(".") for part in PurePosixPath(key).parts):
        return False
    if PurePosixPath(key).suffix.lower() not in SUPPORTED_SUFFIXES:
        return False
    return _globbed(key, include, exclude)


def _globbed(key: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if include and not any(fnmatch.fnmatchcase(key, glob) for glob in include):
        return False
    return not any(fnmatch.fnmatchcase(key, glob) for glob in exclude)


class SyncSource:
    """A source's root, its listing and its files (see the module docstring)."""

    uri: str

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        for glob in (*include, *exclude):
            if not isinstance(glob, str) or not glob:
                raise InvalidInputError(f"include / exclude globs must be non-empty strings, got {glob!r}")
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def list(self) -> dict[str, Entry]:
        raise NotImplementedError

    def local_path(self, key: str) -> Path:
        raise NotImplementedError

    def read_bytes(self, key: str) -> bytes:
        raise NotImplementedError

    def source(self, key: str) -> Source:
        """The file under ``key`` for a reader (named like its file: readers look at the suffix)."""
        return Source.of(self.local_path(key))

    def sidecar(self, key: str) -> builtins.list[str] | None:  # (this class has a method named list)
        """The grants in ``key``'s sidecar (None: it has none, or it vanished since the listing);
        SyncSourceError when it cannot be read."""
        name = key + SIDECAR_SUFFIX
        try:
            return parse_sidecar(self.read_bytes(name).decode("utf-8"))
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise SyncSourceError(f"{name}: a grants sidecar must be UTF-8 text") from None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def scratch(self, key: str) -> Path:
        """A fresh local path named like ``key``'s file (readers look at the suffix; the document's
        ``original_filename`` is that name), in a temporary folder removed by :meth:`close`."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="agentrag-sync-")
        folder = Path(tempfile.mkdtemp(dir=self._tmp.name))
        return folder / PurePosixPath(key).name


class LocalSource(SyncSource):
    def __init__(self, root: Path, include: Sequence[str], exclude: Sequence[str]) -> None:
        super().__init__(include, exclude)
        if not root.exists():
            raise SyncSourceError(f"{root}: no such folder")
        if not root.is_dir():
            raise SyncSourceError(f"{root}: not a folder (sync takes a folder or a URL; ingest takes files)")
        self.root = root.resolve()
        self.uri = self.root.as_posix()

    def list(self) -> dict[str, Entry]:
        """One ``scandir`` per folder, its entries' ``stat`` (cached by the scan on most systems):
        a path is resolved only when it is a symbolic link (a plain entry of a folder inside the
        root is inside it). Folders are walked as ``os.walk(followlinks=True)`` walks them: top
        down, sub-folders in name order, each real folder once (the first key reaching it)."""
        found: dict[str, Entry] = {}
        sidecars: dict[str, Entry] = {}  # by the key of their file
        seen: set[str] = set()
        root = str(self.root)
        suffixes = SUPPORTED_SUFFIXES
        pending = [(root, root, "")]  # (path, real path, key prefix), a stack: last pushed, first walked
        while pending:
            folder, real, prefix = pending.pop()
            if real in seen or not is_inside(real, root):  # a loop, or a link out of the folder
                continue
            seen.add(real)
            try:
                with os.scandir(folder) as scan:
                    entries = list(scan)
            except OSError:  # vanished while listing, or unreadable
                continue
            folders: list[tuple[str, str, str, str]] = []
            for entry in entries:
                name = entry.name
                if name.startswith("."):  # hidden, as ingest skips them
                    continue
                try:
                    link = entry.is_symlink()
                    if entry.is_dir():  # (through a link too)
                        inner = os.path.realpath(entry.path) if link else os.path.join(real, name)
                        folders.append((name, entry.path, inner, prefix + name + "/"))
                        continue
                    into = found
                    if name.endswith(SIDECAR_SUFFIX):  # a sidecar: of the file named by the rest
                        name, into = name[: -len(SIDECAR_SUFFIX)], sidecars
                    key = prefix + name
                    if os.path.splitext(name)[1].lower() not in suffixes or not _globbed(
                        key, self.include, self.exclude
                    ):
                        continue
                    if link and not is_inside(os.path.realpath(entry.path), root):
                        continue
                    stat = entry.stat()
                except OSError:  # vanished while listing, or a dangling link
                    continue
                into[key] = Entry(stat.st_size, stat.st_mtime_ns)
            folders.sort(reverse=True)  # popped in name order
            pending.extend(f[1:] for f in folders)
        return _with_sidecars(found, sidecars)

    def local_path(self, key: str) -> Path:
        return self.root / key

    def source(self, key: str) -> Source:
        """The file's bytes, read through :meth:`read_bytes` (never a path a reader reopens)."""
        return Source(PurePosixPath(key).name, data=self.read_bytes(key))

    def read_bytes(self, key: str) -> bytes:
        """The bytes of the file under ``key``, opened so that no link out of the folder is followed
        at any component, whatever changed since the listing (issue #37, F-6; :func:`read_inside`).
        FileNotFoundError when it vanished; SyncSourceError when it is refused or unreadable."""
        try:
            return read_inside(str(self.root), os.path.join(self.root, *key.split("/")), name=key)
        except FileNotFoundError:
            raise
        except OutsideFolderError as exc:
            raise SyncSourceError(str(exc)) from exc
        except OSError as exc:
            raise SyncSourceError(f"{key}: cannot be read ({type(exc).__name__})") from exc


class FsspecSource(SyncSource):
    def __init__(
        self, url: str, include: Sequence[str], exclude: Sequence[str], options: dict[str, Any]
    ) -> None:
        super().__init__(include, exclude)
        try:
            from fsspec.core import url_to_fs
        except ImportError as exc:  # pragma: no cover - fsspec comes with the sync extra
            raise SyncSourceError(f"{url}: syncing a URL needs fsspec: pip install 'agentrag[sync]'") from exc
        try:
            self.fs, root = url_to_fs(url, **options)
        except ImportError as exc:
            raise SyncSourceError(
                f"{url}: no filesystem for this URL ({exc}); for s3:// install 'agentrag[sync]' (s3fs)"
            ) from exc
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(f"{url}: {exc}") from exc
        self.root = root.rstrip("/")
        self.uri = self.fs.unstrip_protocol(self.root)

    def list(self) -> dict[str, Entry]:
        self.fs.invalidate_cache()
        try:
            listing = self.fs.find(self.root, detail=True)
        except FileNotFoundError as exc:
            raise SyncSourceError(f"{self.uri}: no such folder or bucket") from exc
        except Exception as exc:  # network, credentials: the driver's message, typed
            raise SyncSourceError(f"{self.uri}: cannot be listed ({type(exc).__name__}: {exc})") from exc
        found: dict[str, Entry] = {}
        sidecars: dict[str, Entry] = {}  # by the key of their file
        prefix = self.root + "/"
        for path, info in listing.items():
            if info.get("type") == "directory" or not path.startswith(prefix):
                continue
            key, into = path[len(prefix) :], found
            if key.endswith(SIDECAR_SUFFIX):
                key, into = key[: -len(SIDECAR_SUFFIX)], sidecars
            if not _wanted(key, self.include, self.exclude):
                continue
            etag = info.get("ETag") or info.get("etag")
            into[key] = Entry(info.get("size"), _mtime_ns(info), str(etag).strip('"') if etag else None)
        return _with_sidecars(found, sidecars)

    def local_path(self, key: str) -> Path:
        target = self.scratch(key)
        try:
            self.fs.get_file(f"{self.root}/{key}", str(target))
        except Exception as exc:
            raise SyncSourceError(f"{self.uri}/{key}: cannot be fetched ({type(exc).__name__})") from exc
        return target

    def read_bytes(self, key: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(f"{self.root}/{key}"))
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise SyncSourceError(f"{self.uri}/{key}: cannot be fetched ({type(exc).__name__})") from exc


def _mtime_ns(info: dict[str, Any]) -> int | None:
    value = info.get("LastModified") or info.get("mtime") or info.get("modified")
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1_000_000_000)
    try:
        return int(float(value) * 1_000_000_000)
    except (TypeError, ValueError):
        return None


def open_source(
    source: str | Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    storage_options: dict[str, Any] | None = None,
) -> SyncSource:
    """A local folder (a path, or a ``file://`` URL) or any other fsspec URL (``s3://bucket/prefix``)."""
    if isinstance(include, str) or isinstance(exclude, str):
        raise InvalidInputError("include / exclude take a list of globs, not one string")
    if isinstance(source, Path):
        return LocalSource(source, include, exclude)
    if not isinstance(source, str) or not source:
        raise InvalidInputError(f"source must be a folder or a URL, got {source!r}")
    if source.startswith("file://"):
        return LocalSource(Path(source[len("file://") :]), include, exclude)
    if "://" in source:
        return FsspecSource(source, include, exclude, dict(storage_options or {}))
    return LocalSource(Path(source), include, exclude)
