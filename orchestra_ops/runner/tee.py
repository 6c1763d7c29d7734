"""TeeLog: every line shown on the console also goes, one write per line, to `eval.log` in the run dir."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.core.fsutil import append_all, open_for_append
from orchestra_ops.core.redact import redact
from orchestra_ops.errors import DiskFull

LOG_FILE = "eval.log"


class TeeLog:
    """`line(text)` writes to the console callback and appends to the log file (one write per line).

    `event(text)` is for the lines a live display replaces on a terminal (`[TASK_COMPLETE]`,
    `[PROGRESS]`): always in the log file, on the console only while `events_to_console`.
    `detail(text)` is for what a person rarely needs at a glance (the routing table, tool aliases,
    budgets, the sandbox, per-suite score tables): always in the log file, on the console with `verbose`.
    Every line is redacted first (orchestra_ops/core/redact.py). A console that went away (a closed
    terminal, a dropped ssh) is dropped, not fatal; a full disk stops the file (`disk_full`) and
    calls `on_disk_full` once, so the run can stop cleanly.
    """

    def __init__(self, path: str | os.PathLike[str], console: Callable[[str], None] | None = None,
                 alert_console: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.console = console
        self.alert_console = alert_console  # how the console shows a line the user must not miss (the CLI: red)
        self.events_to_console = True
        self.verbose = False
        self.disk_full: DiskFull | None = None
        self.on_disk_full: Callable[[DiskFull], None] | None = None
        self._fd: int | None = open_for_append(self.path)

    def line(self, text: str) -> None:
        text = redact(text)
        if self.console is not None:
            try:
                self.console(text)
            except OSError:  # the terminal is gone (SIGHUP: EIO, EPIPE): eval.log still gets every line
                self.console = None
        self._write(text)

    def alert(self, text: str) -> None:
        """A line the user must not miss: on the console through `alert_console` (else as any line)."""
        text = redact(text)
        show = self.alert_console or self.console
        if show is not None:
            try:
                show(text)
            except OSError:  # the terminal is gone: eval.log still gets it
                self.console = self.alert_console = None
        self._write(text)

    def detail(self, text: str) -> None:
        if self.verbose:
            self.line(text)
        else:
            self.file_line(text)

    def event(self, text: str) -> None:
        if self.events_to_console:
            self.line(text)
        else:
            self.file_line(text)

    def file_line(self, text: str) -> None:
        """Only to eval.log: for a line the console gets another way (the CLI's error message)."""
        self._write(redact(text))

    def _write(self, text: str) -> None:
        if self._fd is None:
            return
        try:
            append_all(self._fd, (text + "\n").encode("utf-8"), self.path)
        except DiskFull as exc:
            self.disk_full = exc
            self.close()
            if self.on_disk_full is not None:
                self.on_disk_full(exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class TeeHandler(logging.Handler):
    """A logging handler that writes records through a TeeLog (warnings during a run go to eval.log)."""

    def __init__(self, tee: TeeLog, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.tee = tee

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
            self.tee.line(f"{stamp} {record.levelname.lower()}: {record.getMessage()}")
        except Exception:  # a logging handler must never raise (as logging.StreamHandler)
            self.handleError(record)
