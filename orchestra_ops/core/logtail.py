"""Reading process logs: the last N lines, following a growing file, spotting fatal lines early.

FATAL_PATTERNS is data: a line matching one of them while a fleet comes up means the process will
not serve, so `ops up` fails at once instead of waiting for its timeout.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

FATAL_PATTERNS: tuple[str, ...] = (
    r"Traceback \(most recent call last\)",
    r"CUDA out of memory|torch\.OutOfMemoryError|CUDA error",
    r"Address already in use",
    r"^\W*(?:\([^)]*\)\s*)?ERROR\b",  # vLLM / uvicorn / logging: "ERROR …", "(EngineCore pid=1) ERROR …"
)
_FATAL = re.compile("|".join(f"(?:{pattern})" for pattern in FATAL_PATTERNS))
_TAIL_CHUNK = 64 * 1024


def is_fatal(line: str) -> bool:
    return _FATAL.search(line) is not None


def tail(path: str | Path, lines: int = 20, *, start: int = 0) -> list[str]:
    """The last `lines` lines of `path` after byte offset `start` (an empty list when missing)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            begin = max(start, size - _TAIL_CHUNK * max(1, lines // 100 + 1))
            handle.seek(begin)
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    if begin > start and text:
        text = text[1:]  # the first line may be cut
    return text[-lines:] if lines > 0 else []


class FatalScanner:
    """Reads a log incrementally from an offset and reports the first fatal line it sees."""

    def __init__(self, path: str | Path, start: int = 0) -> None:
        self.path = Path(path)
        self.position = start
        self._partial = b""

    def scan(self) -> str | None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.position)
                data = handle.read()
        except OSError:
            return None
        self.position += len(data)
        chunk = self._partial + data
        *complete, self._partial = chunk.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", errors="replace")
            if is_fatal(line):
                return line.strip()
        return None


def settle(path: str | Path, quiet_s: float = 0.15, limit_s: float = 1.0) -> None:
    """Wait until `path` stops growing (a dying process's last lines still in a pipe), at most `limit_s`."""
    deadline = time.monotonic() + limit_s
    last = -1
    while time.monotonic() < deadline:
        try:
            size = os.path.getsize(path)
        except OSError:
            return
        if size == last:
            return
        last = size
        time.sleep(quiet_s)


def follow(path: str | Path, poll_s: float = 0.25) -> Iterator[str]:
    """Yield lines appended to `path` from now on, forever (the caller stops with Ctrl-C)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        partial = b""
        while True:
            data = handle.read()
            if not data:
                time.sleep(poll_s)
                continue
            chunk = partial + data
            *complete, partial = chunk.split(b"\n")
            for raw in complete:
                yield raw.decode("utf-8", errors="replace")
