"""RunClock: times the run `orchestra_ops.api.evaluate` makes, through its progress-display hook.

The session enters the display right before the run (after prepare: the lock, the checks, the
dataset) and leaves it after scores.json, so a bench measures exactly what it measured when it
called run_eval itself: wall seconds, CPU seconds of this process, and how busy the machine's
CPUs were (from /proc/stat) meanwhile. It shows nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def busy_jiffies() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [float(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    return (after[0] - before[0]) / max(1.0, after[1] - before[1])


class RunClock:
    """Pass as `display=`; after the call, `wall_s`, `cpu_s` and `busy` hold the run's figures."""

    def __init__(self) -> None:
        self.wall_s = self.cpu_s = self.busy = 0.0
        self._start: tuple[float, float, tuple[float, float]] | None = None

    def __call__(self, tee: Any, progress: Any, run_dir: Path) -> RunClock:
        return self

    def __enter__(self) -> RunClock:
        self._start = (time.process_time(), time.monotonic(), busy_jiffies())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._start is not None
        cpu, wall, busy = self._start
        self.wall_s = time.monotonic() - wall
        self.cpu_s = time.process_time() - cpu
        self.busy = busy_share(busy, busy_jiffies())
