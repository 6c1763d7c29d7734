"""TeeLog: every line shown on the console also goes, line-buffered, to `eval.log` in the run dir."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

LOG_FILE = "eval.log"


class TeeLog:
    """`line(text)` writes to the console callback and appends to the log file (flushed per line).

    `event(text)` is for the lines a live display replaces on a terminal (`[TASK_COMPLETE]`,
    `[PROGRESS]`): always in the log file, on the console only while `events_to_console`.
    """

    def __init__(self, path: str | os.PathLike[str], console: Callable[[str], None] | None = None,
                 alert_console: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.alert_console = alert_console  # how the console shows a line the user must not miss (the CLI: red)
        self.events_to_console = True
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def line(self, text: str) -> None:
        if self.console is not None:
            self.console(text)
        if self._file is not None:
            self._file.write(text + "\n")

    def alert(self, text: str) -> None:
        """A line the user must not miss: on the console through `alert_console` (else as any line)."""
        show = self.alert_console or self.console
        if show is not None:
            show(text)
        if self._file is not None:
            self._file.write(text + "\n")

    def event(self, text: str) -> None:
        if self.events_to_console:
            self.line(text)
        else:
            self.file_line(text)

    def file_line(self, text: str) -> None:
        """Only to eval.log: for a line the console gets another way (the CLI's error message)."""
        if self._file is not None:
            self._file.write(text + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


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
