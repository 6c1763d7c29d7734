"""Run events: `events.jsonl` in the run dir, and `--notify CMD` fed one JSON event on stdin each.

Events: `replica_ejected`, `stall`, `fleet_vanished` (written by the eval), `restart`, `requeued`,
`waiting_for_fleet`, `crashed`, `stopped`, `finished` (written by the supervisor, or by a plain `ops eval`
at its end). Each is `{"event": KIND, "time": ISO-8601, "run_dir": …, …details}`.

The notify command (`sh -c CMD`) never holds a run: it runs in a process group of its own (its own
session), fed by a thread; one that has not finished after `timeout_s` (10 s) is killed as a group
(the shell and everything it started). At the end (`close`) the commands still running get
`grace_s` (5 s) together, then their groups are killed. A failing, slow or killed command is logged
(a warning), never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import is_disk_full

log = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
NOTIFY_TIMEOUT_S = 10.0  # one notify command's limit while the run goes on
NOTIFY_GRACE_S = 5.0  # what the commands still running get at the end, together


class EventLog:
    def __init__(self, run_dir: str | os.PathLike[str], notify: str | None = None, *,
                 timeout_s: float = NOTIFY_TIMEOUT_S) -> None:
        self.run_dir = Path(run_dir)
        self.notify = notify
        self.timeout_s = timeout_s
        self._commands: list[NotifyCommand] = []
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
            command = NotifyCommand.start(self.notify, line, self.timeout_s)
            with self._lock:
                self._commands = [c for c in self._commands if c.running] + ([command] if command else [])
        return event

    def close(self, grace_s: float = NOTIFY_GRACE_S) -> None:
        """Give the notify commands still running `grace_s` (together), then kill their process groups."""
        deadline = time.monotonic() + grace_s
        with self._lock:
            commands, self._commands = self._commands, []
        for command in commands:
            command.finish(max(0.0, deadline - time.monotonic()), why=f"still running {grace_s:g} s after the "
                                                                      "run's last event")


class NotifyCommand:
    """One `sh -c CMD` in a process group of its own, fed one event; a thread waits for it (bounded)."""

    def __init__(self, command: str, process: subprocess.Popen[bytes], line: str, timeout_s: float) -> None:
        self.command = command
        self.process = process
        self._killed = threading.Event()
        self._thread = threading.Thread(target=self._wait, args=(line, timeout_s), daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, command: str, line: str, timeout_s: float) -> NotifyCommand | None:
        try:
            process = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            log.warning("--notify command failed: %s", exc)
            return None
        return cls(command, process, line, timeout_s)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _wait(self, line: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            out, err = self.process.communicate((line + "\n").encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(f"did not finish within {timeout_s:g} s")
            out, err = self.process.communicate()
        except OSError as exc:  # it exited without reading its stdin
            log.debug("--notify command: %s", exc)
            out, err = self.process.communicate()
        while _group_alive(self.process.pid) and not self._killed.is_set():  # what it left in the background
            if time.monotonic() >= deadline:
                self.kill(f"left processes running after {timeout_s:g} s")
                break
            self._killed.wait(0.1)
        code = self.process.returncode
        if code != 0 and not self._killed.is_set():
            tail = (err or out).decode(errors="replace").strip().splitlines()[-1:] or [""]
            log.warning("--notify command exited %d: %s", code, tail[0])

    def kill(self, why: str) -> None:
        """SIGKILL the command's whole process group (the shell and whatever it started)."""
        if self._killed.is_set():
            return
        self._killed.set()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return  # the group is gone already
        log.warning("--notify command %s; killed it (process group %d)", why, self.process.pid)

    def finish(self, wait_s: float, why: str) -> None:
        """Wait up to `wait_s` for the command; then kill its group, reap it, and wait (5 s at most) until no
        member is left: a background child may still be exiting after its shell was reaped."""
        self._thread.join(wait_s)
        if self._thread.is_alive():
            self.kill(why)
            self._thread.join(5.0)
        deadline = time.monotonic() + 5.0
        while self._killed.is_set() and _group_alive(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
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
