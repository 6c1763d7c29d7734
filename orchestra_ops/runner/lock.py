"""One writer per run dir: an exclusive `flock` on `RUN_DIR/.lock`, held for the whole `ops eval`.

The file holds one JSON line naming the holder (`{"pid", "host", "since"}`), so a second `ops eval`
on the same run dir is refused at once with who holds it. The kernel releases a flock when its
process dies (kill -9 included); a lock file that still names a holder then is a lock left by a
killed run: it is taken over, and `takeover` says whose it was. A clean release empties the file.
Readers (`ops eval-status`, `ops analyze`) take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

from orchestra_ops.errors import ConfigError

LOCK_FILE = ".lock"


class RunDirBusy(ConfigError):
    """Another process holds the run dir's lock (exit 2)."""


class RunDirLock:
    """`RunDirLock.acquire(run_dir)` or a RunDirBusy naming the holder; `release()` when the run ends."""

    def __init__(self, path: Path, handle: IO[str], takeover: str | None) -> None:
        self.path = path
        self._handle: IO[str] | None = handle
        self.takeover = takeover  # a note when a killed run's lock was taken over, else None

    @classmethod
    def acquire(cls, run_dir: Path) -> RunDirLock:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOCK_FILE
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (closed in release())
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            if holder is None:  # the holder may be between its flock and writing its name
                time.sleep(0.2)
                holder = _read_holder(handle)
            handle.close()
            raise RunDirBusy(f"{run_dir} is in use by another `ops eval`: {describe(holder)}; one run dir has "
                             "one writer: wait for that run to finish (or stop it), or pass --run-dir DIR "
                             "for another run") from None
        except BaseException:
            handle.close()
            raise
        previous = _read_holder(handle)
        takeover = None
        if previous:
            takeover = (f"took over the lock of {run_dir} left by a run that did not finish cleanly "
                        f"({describe(previous)}; that process no longer holds it)")
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(holder_record()) + "\n")
            handle.flush()
        except OSError:  # a full disk: the flock itself is what excludes; the note is a courtesy
            pass
        return cls(path, handle, takeover)

    def release(self) -> None:
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            self._handle.seek(0)
            self._handle.truncate()  # a clean end leaves no holder behind
        with contextlib.suppress(OSError):
            self._handle.close()  # closing drops the flock
        self._handle = None


def holder_record() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "holder unknown (the lock file names no process)"
    return f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('since')}"


def _read_holder(handle: IO[str]) -> dict[str, Any] | None:
    try:
        handle.seek(0)
        text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None
