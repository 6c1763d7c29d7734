"""RunMonitor: the live view of one `ops eval` for everything outside it.

Every progress tick it writes `live.json` in the run dir (pid, host, state, done/failed/total, rate,
ETA, in flight), which `ops runs` and `ops attach` read, and runs the stall watchdog: when no task has
finished for `stall_after_s` (default: the larger of 10 minutes and 5x the p99 task time so far),
it writes a stall report (each task in flight, the call it waits on, the replica, for how long) to
eval.log and live.json (state `stalled`) and sends a `stall` event. The state goes back to
`running` when a task finishes. At the end, `finish(state, reason)` writes `finished`, `stopped` or
`crashed`, and why when the run ended early (a fleet that vanished, --max-cost). `supervised` says
whether a supervisor runs this eval and `started_epoch` when it started: `ops runs` believes a
foreground eval over an older supervisor record (runstate.py).
`elapsed_total_s` adds this invocation's wall time to that of the run dir's earlier ones (`ops runs`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from orchestra_ops.core.fsutil import atomic_write_text, is_disk_full
from orchestra_ops.core.stats import percentile
from orchestra_ops.runner.inflight import InFlight
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.run_events import EventLog

log = logging.getLogger(__name__)

LIVE_FILE = "live.json"
MIN_STALL_S = 600.0
STALL_P99_FACTOR = 5.0
REPORT_TASKS = 20  # tasks described in eval.log (every one goes to live.json and the event, up to 200)


@dataclass
class RunMonitor:
    run_dir: Path
    progress: Progress
    inflight: InFlight
    events: EventLog
    counts: Callable[[], tuple[int, int, int]]  # (ok, failed, total) of the whole run dir
    stall_after_s: float | None = None
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    started: float = field(default_factory=time.time)
    _latencies: list[float] = field(default_factory=list)
    _last_finish: float = field(default_factory=time.monotonic)
    _stall: dict[str, Any] | None = None
    reason: str | None = None  # why the run ended early (a fleet that vanished, --max-cost)
    supervised: bool = False  # run by a supervisor (`--detach`): its run.json record speaks for the run
    _clock: float = field(default_factory=time.monotonic)
    _before_s: float = 0.0  # wall time of the earlier invocations of this run dir (--resume, a restart)

    def __post_init__(self) -> None:
        previous = _read(self.run_dir / LIVE_FILE)
        if previous.get("pid") != self.pid:
            self._before_s = float(previous.get("elapsed_total_s") or 0.0)

    def task_finished(self, latency_s: float) -> None:
        self._latencies.append(latency_s)
        self._last_finish = time.monotonic()
        self._stall = None

    def stall_threshold_s(self) -> float:
        if self.stall_after_s is not None:
            return self.stall_after_s
        if not self._latencies:
            return MIN_STALL_S
        return max(MIN_STALL_S, STALL_P99_FACTOR * percentile(sorted(self._latencies), 99))

    def tick(self) -> list[str]:
        """Check for a stall and write live.json; the lines of a new stall report (else none)."""
        now = time.monotonic()
        idle = now - self._last_finish
        lines: list[str] = []
        if self._stall is None and self.progress.in_flight > 0 and idle >= (self.stall_after_s or MIN_STALL_S):
            threshold = self.stall_threshold_s()
            if idle >= threshold:
                lines = self._report(now, idle, threshold)
        self.write("stalled" if self._stall is not None else "running")
        return lines

    def _report(self, now: float, idle: float, threshold: float) -> list[str]:
        waits = self.inflight.waits(now)
        self._stall = {"since_s": round(idle, 1), "threshold_s": round(threshold, 1), "in_flight": len(waits),
                       "tasks": [w.to_json(now) for w in waits[:200]]}
        self.events.emit("stall", **self._stall)
        lines = [f"[STALL] no task has finished for {idle:.0f} s (stall threshold {threshold:.0f} s); "
                 f"{len(waits)} task(s) in flight:"]
        lines += [f"[STALL]   {w.describe(now)}" for w in waits[:REPORT_TASKS]]
        if len(waits) > REPORT_TASKS:
            lines.append(f"[STALL]   … and {len(waits) - REPORT_TASKS} more (all in {self.run_dir / LIVE_FILE})")
        return lines

    def write(self, state: str) -> None:
        ok, failed, total = self.counts()
        now = time.monotonic()
        eta = self.progress.eta_s(now)
        live = {"state": state, "pid": self.pid, "create_time": _create_time(self.pid), "host": self.host,
                "started": _iso(self.started), "updated": _iso(time.time()), "updated_epoch": round(time.time(), 3),
                "done": ok, "failed": failed, "total": total, "in_flight": self.progress.in_flight,
                "rate": round(self.progress.rate(now), 3), "eta_s": None if eta is None else round(eta, 1),
                "elapsed_s": round(now - self._clock, 1),
                "elapsed_total_s": round(self._before_s + now - self._clock, 1),
                "stall": self._stall, "supervised": self.supervised, "started_epoch": round(self.started, 3),
                **({"reason": self.reason} if self.reason else {})}
        try:
            atomic_write_text(self.run_dir / LIVE_FILE, _dumps(live))
        except OSError as exc:  # a status file: a full disk is the run's to report (DiskFull), not this one's
            if not is_disk_full(exc):
                raise
            log.debug("%s not written: %s", LIVE_FILE, exc)

    def finish(self, state: str, reason: str | None = None) -> None:
        """The end: `finished`, `stopped` or `crashed`, and why when it ended early (`ops runs` shows it)."""
        self._stall = None
        self.reason = reason
        self.write(state)


def elapsed_s(live: dict[str, Any], *, active: bool) -> float | None:
    """Wall time of a run dir over all its invocations, from its live.json (None: no live.json); an active run
    counts on from its last tick."""
    total = live.get("elapsed_total_s")
    if not isinstance(total, (int, float)):
        return None
    since = time.time() - float(live.get("updated_epoch") or time.time()) if active else 0.0
    return float(total) + max(since, 0.0)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch))


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"
