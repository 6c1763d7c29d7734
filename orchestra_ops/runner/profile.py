"""ProfileWriter: `profile.jsonl`, one event per model call (role, model, replica, latency, tokens…)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO

from orchestra_ops.client.chat import CallEvent

PROFILE_FILE = "profile.jsonl"


class ProfileWriter:
    def __init__(self, run_dir: str | os.PathLike[str], *, batch_size: int = 256, max_delay_s: float = 1.0) -> None:
        self.path = Path(run_dir) / PROFILE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._buffer: list[str] = []
        self.batch_size = batch_size
        self.max_delay_s = max_delay_s
        self._last = time.monotonic()
        self.events = 0

    def __call__(self, event: CallEvent) -> None:
        self._buffer.append(json.dumps(event.to_json()) + "\n")
        self.events += 1
        if len(self._buffer) >= self.batch_size or time.monotonic() - self._last >= self.max_delay_s:
            self.flush()

    def flush(self) -> None:
        self._last = time.monotonic()
        if self._buffer and self._file is not None:
            self._file.write("".join(self._buffer))
            self._buffer.clear()
            self._file.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
