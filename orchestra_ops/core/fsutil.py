"""Small file helpers shared by state, endpoints and results: atomic writes, JSON reads."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from orchestra_ops.core.redact import redact
from orchestra_ops.errors import ConfigError, DiskFull, OpsError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC or EDQUOT: the file system (or the user's quota) has no room left."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def writable_dir(path: str | Path, flag: str = "--out") -> Path:
    """`path` as a directory this process can write a file into (made when missing)."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ops-write-check-"):
            pass
    except FileExistsError:
        raise ConfigError(f"{flag} {folder}: exists and is not a directory") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {folder}: cannot write there ({exc.strerror or exc})") from None
    return folder


def open_for_append(path: str | os.PathLike[str]) -> int:
    """A descriptor appending to `path` (created 0644 with its folder); a full disk is DiskFull naming it."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFull(path, exc) from None
        raise


def append_all(fd: int, data: bytes, path: str | os.PathLike[str], *, sync: bool = False) -> None:
    """Append all of `data` to `fd` (opened O_APPEND by its one writer), or none of it.

    On a full disk (ENOSPC, EDQUOT) what part of `data` was written is cut off again and DiskFull
    names `path`: the file keeps only whole lines. Other OSErrors propagate as they are.
    """
    start = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise DiskFull(path, exc) from None


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` so a reader sees the old file or the new one, never half of one.

    A temp file in the same directory is written, flushed, fsynced and renamed over `path`.
    Secrets are redacted first (orchestra_ops/core/redact.py): nothing ops stores holds a provider key.
    """
    text = redact(text)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def read_json(path: str | os.PathLike[str], *, error: type[OpsError], missing: str) -> Any:
    """Parse a JSON file; every failure is an `error` naming the file (and the line for bad JSON).

    `missing` is what to say when the file does not exist (e.g. "no such endpoints file").
    """
    source = Path(path)
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{source}: {missing}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{source}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{source}:{exc.lineno}: not valid JSON: {exc.msg}") from None
