"""ResultsStore: `results.jsonl`, one JSON line per finished task, the only record resume trusts.

Lines are `{"id": …, "status": "ok"|"error", …}`. The final state of an id is its last line (a
`--retry-failed` run appends a new line for each id it reruns). Writes are appended and
flushed + fsynced in small batches (`batch_size` lines or `max_delay_s`, whichever first), so a
crash loses at most the last batch, which resume then reruns. A crash mid-write leaves a torn last
line: reading ignores it, and opening for append cuts it off, so the next line starts clean.

Reading parses every line whole (a line cut mid-record can still end in `}`): a line that is not a
JSON object with an `id` and a `status` is not done, and is counted (`skipped_lines`). A batch that
does not fit on the disk is cut back out (the file keeps whole lines only) and raises DiskFull; its
ids are not done, so resume runs them again. Lines are redacted (orchestra_ops/core/redact.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import append_all, is_disk_full
from orchestra_ops.core.redact import redact
from orchestra_ops.errors import DiskFull

log = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"

TaskId = str | int


class ResultsStore:
    def __init__(self, run_dir: str | os.PathLike[str], *, batch_size: int = 64, max_delay_s: float = 0.5) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self.batch_size = batch_size
        self.max_delay_s = max_delay_s
        self.final: dict[TaskId, str] = {}  # id -> "ok" | "error" (its last line)
        self.lines = 0
        self.bad_lines = 0
        self.torn_bytes = 0
        self._valid_bytes = 0
        self._buffer: list[tuple[TaskId, str | None, str]] = []  # (id, its status before, line)
        self._last_flush = time.monotonic()
        self._fd: int | None = None
        self.disk_full: DiskFull | None = None
        self._load()

    # reading

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # bytes after the last newline are a torn line
        if end < len(data):
            self.torn_bytes = len(data) - end
            log.warning("%s: ignoring a torn last line (%d bytes)", self.path, self.torn_bytes)
        self._valid_bytes = end
        final = self.final
        loads = json.loads
        for raw in data[:end].split(b"\n"):
            if not raw.strip():
                continue
            try:  # every line is parsed whole: a line cut mid-record can still end in `}`
                record = loads(raw)
                task_id, status = record["id"], record["status"]
                if not isinstance(status, str):
                    raise TypeError(status)
            except (ValueError, KeyError, TypeError, IndexError):
                self.bad_lines += 1
                continue
            final[_key(task_id)] = status
            self.lines += 1
        if self.bad_lines:
            log.warning("%s: %d unreadable line(s) ignored (their ids are not done; resume runs them again)",
                        self.path, self.bad_lines)

    @property
    def skipped_lines(self) -> int:
        """Lines resume could not read (unparsable, or not an object with an id and a status), torn tail included."""
        return self.bad_lines + (1 if self.torn_bytes else 0)

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
        """Queue one finished task; it is on disk after the next flush (at most a batch later).

        After a full disk (`disk_full` set) records are dropped: the run is stopping, and those ids
        stay missing, so `--resume` runs them again.
        """
        if self.disk_full is not None:
            return
        line = redact(json.dumps(record, ensure_ascii=False, default=str))
        key = _key(record["id"])
        self._buffer.append((key, self.final.get(key), line + "\n"))
        self.final[key] = record["status"]
        self.lines += 1
        if len(self._buffer) >= self.batch_size or time.monotonic() - self._last_flush >= self.max_delay_s:
            self.flush()

    def flush(self) -> None:
        """Write the queued lines (fsynced), all or none; a full disk raises DiskFull and forgets them."""
        self._last_flush = time.monotonic()
        if not self._buffer:
            return
        pending, self._buffer = self._buffer, []
        try:
            append_all(self._open(), "".join(line for _, _, line in pending).encode("utf-8"), self.path, sync=True)
        except OSError as exc:
            error = exc if isinstance(exc, DiskFull) else DiskFull(self.path, exc) if is_disk_full(exc) else None
            if error is None:
                raise
            self.disk_full = error
            for key, before, _ in reversed(pending):  # not written: not done (resume runs them again)
                if before is None:
                    self.final.pop(key, None)
                else:
                    self.final[key] = before
                self.lines -= 1
            raise error from None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > self._valid_bytes:
                with open(self.path, "r+b") as raw:  # cut a torn tail so the next line starts clean
                    raw.truncate(self._valid_bytes)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _key(task_id: Any) -> TaskId:
    """Ids are kept as they are in the dataset (str or int); anything else by its JSON text."""
    if isinstance(task_id, (str, int)) and not isinstance(task_id, bool):
        return task_id
    return json.dumps(task_id, sort_keys=True)
