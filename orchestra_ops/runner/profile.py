"""ProfileWriter: `profile.jsonl`, one JSON event per line, each with a `type`:

    model_call  one model call, written by the engine (client.chat.CallEvent):
                {"type": "model_call", "task", "role", "model", "replica", "start", "latency",
                 "prompt_tokens", "completion_tokens", "attempts", "status"[, "error"]}
    tool_call   one tool call of an agent suite, written by the suite through its task context
                (ToolEvent below): {"type": "tool_call", "task", "round", "tool", "alias", "target",
                 "model", "replica", "start", "latency", "expert_latency", "<part>_latency"…,
                 "status"[, "error"]}

Times are seconds (`start` since the epoch). Lines written before this schema have no `type`:
read them as model calls.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestra_ops.core.fsutil import append_all, open_for_append
from orchestra_ops.core.redact import redact
from orchestra_ops.errors import DiskFull

PROFILE_FILE = "profile.jsonl"


@dataclass(frozen=True)
class ToolEvent:
    """One tool call of an agent loop (search, enhance_reasoning, answer …), end to end.

    `latency_s` is the whole tool call; `expert_s` the expert model call alone; `parts` the other
    timed pieces by name (`retrieval`, `exec`, `judge`), each written as `<name>_latency`.
    """

    task: str | int
    tool: str
    start: float  # wall clock, seconds since the epoch
    latency_s: float
    status: str = "ok"  # "ok" or an error kind
    round: int | None = None
    alias: str | None = None  # the name the orchestrator used (e.g. search-1)
    target: str | None = None  # the role or model key the alias resolved to
    model: str | None = None  # the served model name of the expert
    replica: str | None = None
    expert_s: float | None = None
    parts: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool_call", "task": self.task, "round": self.round, "tool": self.tool, "alias": self.alias,
            "target": self.target, "model": self.model, "replica": self.replica, "start": round(self.start, 6),
            "latency": round(self.latency_s, 6),
            "expert_latency": None if self.expert_s is None else round(self.expert_s, 6),
        }
        out.update({f"{name}_latency": round(value, 6) for name, value in self.parts.items()})
        out["status"] = self.status
        if self.error:
            out["error"] = self.error
        return out


class Event(Protocol):
    def to_json(self) -> dict[str, Any]: ...


class ProfileWriter:
    """Appends events in batches. A full disk raises DiskFull once (from the call that hit it); after
    that events are dropped (the run is stopping; profile.jsonl keeps only whole lines)."""

    def __init__(self, run_dir: str | os.PathLike[str], *, batch_size: int = 256, max_delay_s: float = 1.0) -> None:
        self.path = Path(run_dir) / PROFILE_FILE
        self._fd: int | None = open_for_append(self.path)
        self._buffer: list[str] = []
        self.batch_size = batch_size
        self.max_delay_s = max_delay_s
        self._last = time.monotonic()
        self.events = 0
        self.disk_full: DiskFull | None = None

    def __call__(self, event: Event) -> None:
        self.line(json.dumps(event.to_json()))

    def line(self, text: str) -> None:
        """One event already written as a JSON object on one line (the gateway formats its own: cheaper)."""
        if self.disk_full is not None:
            return
        self._buffer.append(redact(text) + "\n")
        self.events += 1
        if len(self._buffer) >= self.batch_size or time.monotonic() - self._last >= self.max_delay_s:
            self.flush()

    def flush(self) -> None:
        self._last = time.monotonic()
        if not self._buffer or self._fd is None:
            return
        pending, self._buffer = self._buffer, []
        try:
            append_all(self._fd, "".join(pending).encode("utf-8"), self.path)
        except DiskFull as exc:
            self.disk_full = exc
            raise

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
