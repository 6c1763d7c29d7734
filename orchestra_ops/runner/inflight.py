"""What is in flight right now: each task, and each HTTP call it waits on (role, replica, since when).

The engine marks tasks started/finished (`InFlight.task_started`); `TrackingTransport` wraps the
fleet's transport and records every POST (chat or retrieval) under the task and role of the code that
made it (client/callctx.py). The stall watchdog reads `InFlight.waits()`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestra_ops.client.callctx import current_role, current_task
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.transport import Response, Transport


@dataclass(frozen=True)
class CallInFlight:
    task: str | int | None
    role: str | None
    replica: str
    url: str
    since: float  # time.monotonic()


@dataclass(frozen=True)
class TaskWait:
    """One task in flight, how long it has run, and the calls it is waiting on."""

    task: str | int
    running_s: float
    calls: tuple[CallInFlight, ...]

    def to_json(self, now: float) -> dict[str, Any]:
        return {"task": self.task, "running_s": round(self.running_s, 1),
                "calls": [{"role": c.role, "replica": c.replica, "url": c.url, "waiting_s": round(now - c.since, 1)}
                          for c in self.calls]}

    def describe(self, now: float) -> str:
        if not self.calls:
            return f"task {self.task}: running {self.running_s:.0f} s, no call in flight (waiting for a replica " \
                   "or in the suite's own code)"
        waits = "; ".join(f"{c.role or '?'} on {c.replica} ({c.url}) for {now - c.since:.0f} s" for c in self.calls)
        return f"task {self.task}: running {self.running_s:.0f} s, waiting on {waits}"


class InFlight:
    def __init__(self) -> None:
        self._tasks: dict[str | int, float] = {}
        self._calls: dict[int, CallInFlight] = {}
        self._ids = itertools.count()

    def task_started(self, task: str | int) -> None:
        self._tasks[task] = time.monotonic()

    def task_finished(self, task: str | int) -> None:
        self._tasks.pop(task, None)

    def call_started(self, replica: str, url: str) -> int:
        key = next(self._ids)
        self._calls[key] = CallInFlight(current_task.get(), current_role.get(), replica, url, time.monotonic())
        return key

    def call_finished(self, key: int) -> None:
        self._calls.pop(key, None)

    def waits(self, now: float | None = None) -> list[TaskWait]:
        """Every task in flight, longest-running first, with the calls it waits on."""
        now = time.monotonic() if now is None else now
        calls: dict[str | int | None, list[CallInFlight]] = {}
        for call in self._calls.values():
            calls.setdefault(call.task, []).append(call)
        waits = [TaskWait(task, now - since, tuple(sorted(calls.get(task, []), key=lambda c: c.since)))
                 for task, since in self._tasks.items()]
        return sorted(waits, key=lambda w: -w.running_s)


class TrackingTransport:
    """A Transport that records each POST in an InFlight while it is outstanding."""

    def __init__(self, inner: Transport, inflight: InFlight) -> None:
        self.inner = inner
        self.inflight = inflight

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        key = self.inflight.call_started(replica.address, url)
        try:
            return await self.inner.post(replica, url, body, headers, timeout)
        finally:
            self.inflight.call_finished(key)

    async def get(self, replica: Replica, url: str, timeout: float) -> Response:
        return await self.inner.get(replica, url, timeout)

    async def close(self) -> None:
        await self.inner.close()
