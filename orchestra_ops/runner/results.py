"""ResultsStore: `results.jsonl`, one JSON line per finished task, the only record resume trusts.

Lines are `{"id": …, "status": "ok"|"error", …}`. The final state of an id is its last line (a
`--retry-failed` run appends a new line for each id it reruns). Writes are appended and
flushed + fsynced in small batches (`batch_size` lines or `max_delay_s`, whichever first), so a
crash loses at most the last batch, which resume then reruns. A crash mid-write leaves a torn last
line: reading ignores it, and opening for append cuts it off, so the next line starts clean.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"
# Every line this store writes starts `{"id": <string or integer>, "status": "<status>"`: resume reads
# a line of that shape from its head alone (a long agent record need not be parsed to know it is done).
_HEAD = re.compile(rb'\{"id": ("(?:[^"\\\n]|\\.)*"|-?[0-9]+), "status": "([A-Za-z0-9_]+)"[,}]')

TaskId = str | int


class ResultsStore:
    def __init__(self, run_dir: str | os.PathLike[str], *, batch_size: int = 64, max_delay_s: float = 0.5) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self.batch_size = batch_size
        self.max_delay_s = max_delay_s
        self.final: dict[TaskId, str] = {}  # id -> "ok" | "error" (its last line)
        self.lines = 0
        self.bad_lines = 0
        self._valid_bytes = 0
        self._buffer: list[str] = []
        self._last_flush = time.monotonic()
        self._handle: IO[str] | None = None
        self._load()

    # reading

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # bytes after the last newline are a torn line
        if end < len(data):
            log.warning("%s: ignoring a torn last line (%d bytes)", self.path, len(data) - end)
        self._valid_bytes = end
        final = self.final
        for raw in data[:end].splitlines():
            if not raw.strip():
                continue
            head = _HEAD.match(raw)
            try:
                if head is not None and raw.rstrip().endswith(b"}"):
                    value = head.group(1)
                    task_id = value[1:-1].decode() if value[:1] == b'"' and b"\\" not in value else json.loads(value)
                    status = head.group(2).decode()
                else:
                    record = json.loads(raw)
                    task_id, status = record["id"], record["status"]
            except (ValueError, KeyError, TypeError):
                self.bad_lines += 1
                continue
            final[_key(task_id)] = status
            self.lines += 1
        if self.bad_lines:
            log.warning("%s: %d unreadable line(s) ignored", self.path, self.bad_lines)

    @property
    def ok_ids(self) -> set[TaskId]:
        return {k for k, v in self.final.items() if v == "ok"}

    @property
    def failed_ids(self) -> set[TaskId]:
        return {k for k, v in self.final.items() if v != "ok"}

    @property
    def finished_ids(self) -> set[TaskId]:
        return set(self.final)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable line, in file order (the torn tail and unreadable lines skipped)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return
        with handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and "id" in record:
                    yield record

    def final_records(self) -> dict[TaskId, dict[str, Any]]:
        """id -> its last record."""
        return {_key(r["id"]): r for r in self.records()}

    # writing

    def append(self, record: dict[str, Any]) -> None:
        """Queue one finished task; it is on disk after the next flush (at most a batch later)."""
        line = json.dumps(record, ensure_ascii=False, default=str)
        self._buffer.append(line + "\n")
        self.final[_key(record["id"])] = record["status"]
        self.lines += 1
        if len(self._buffer) >= self.batch_size or time.monotonic() - self._last_flush >= self.max_delay_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._buffer:
            return
        handle = self._open()
        handle.write("".join(self._buffer))
        self._buffer.clear()
        handle.flush()
        os.fsync(handle.fileno())

    def _open(self) -> IO[str]:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > self._valid_bytes:
                with open(self.path, "r+b") as raw:  # cut a torn tail so the next line starts clean
                    raw.truncate(self._valid_bytes)
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        return self._handle

    def close(self) -> None:
        self.flush()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _key(task_id: Any) -> TaskId:
    """Ids are kept as they are in the dataset (str or int); anything else by its JSON text."""
    if isinstance(task_id, (str, int)) and not isinstance(task_id, bool):
        return task_id
    return json.dumps(task_id, sort_keys=True)
