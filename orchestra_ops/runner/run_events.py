"""Run events: `events.jsonl` in the run dir, and `--notify CMD` fed one JSON event on stdin each.

Events: `replica_ejected`, `stall` (written by the eval), `restart`, `requeued`, `crashed`,
`stopped`, `finished` (written by the supervisor, or by a plain `ops eval` at its end). Each is
`{"event": KIND, "time": ISO-8601, "run_dir": …, …details}`. The notify command runs in a thread of
its own (`sh -c CMD`, a 60 s deadline): a failing or slow command is logged, never fatal, and never
holds up the run.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import is_disk_full

log = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
NOTIFY_TIMEOUT_S = 60.0


class EventLog:
    def __init__(self, run_dir: str | os.PathLike[str], notify: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.notify = notify
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def emit(self, kind: str, **details: Any) -> dict[str, Any]:
        event = {"event": kind, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "run_dir": str(self.run_dir.resolve()), **details}
        line = json.dumps(event, default=str)
        try:
            with self._lock, open(self.run_dir / EVENTS_FILE, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:  # a full disk is the run's to report (DiskFull); --notify still hears the event
            if not is_disk_full(exc):
                raise
            log.debug("%s not written: %s", EVENTS_FILE, exc)
        if self.notify:
            thread = threading.Thread(target=run_notify, args=(self.notify, line), daemon=True)
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return event

    def close(self, timeout_s: float = NOTIFY_TIMEOUT_S) -> None:
        """Wait (bounded) for the notify commands still running."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []


def run_notify(command: str, line: str) -> bool:
    """`sh -c COMMAND` with the event on stdin; False (and a warning) when it fails."""
    try:
        result = subprocess.run(["sh", "-c", command], input=line + "\n", capture_output=True, text=True,
                                timeout=NOTIFY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("--notify command failed: %s", exc)
        return False
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
        log.warning("--notify command exited %d: %s", result.returncode, tail[0])
        return False
    return True


def read_events(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every event of a run dir (a torn last line is skipped)."""
    path = Path(run_dir) / EVENTS_FILE
    events = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            events.append(item)
    return events
