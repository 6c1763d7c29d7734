"""Progress of a run: counters, the latencies of the last minute, and the one-line summary the
console (without a terminal) and eval.log show.

The live display on a terminal (cli/live_progress.py) reads a Progress from its refresh thread:
the latency windows are guarded by a lock; the counters are plain ints written by the event loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from orchestra_ops.core.stats import percentile

WINDOW_S = 60.0
MAX_WINDOW_ITEMS = 100_000


@dataclass(frozen=True)
class WindowStats:
    count: int
    p50: float
    p99: float


@dataclass
class Progress:
    total: int  # tasks this invocation runs
    ok: int = 0
    failed: int = 0
    in_flight: int = 0
    calls: int = 0  # model calls finished (cache hits included)
    tokens: int = 0  # their prompt and completion tokens
    started_at: float = field(default_factory=time.monotonic)
    _tasks: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=MAX_WINDOW_ITEMS), repr=False)
    _calls: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=MAX_WINDOW_ITEMS), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def finished(self) -> int:
        return self.ok + self.failed

    def rate(self, now: float | None = None) -> float:
        elapsed = (now or time.monotonic()) - self.started_at
        return self.finished / elapsed if elapsed > 0 else 0.0

    def eta_s(self, now: float | None = None) -> float | None:
        rate = self.rate(now)
        if rate <= 0:
            return None
        return max(0, self.total - self.finished) / rate

    def note_task(self, latency_s: float) -> None:
        """A task finished after `latency_s` (kept for the last-minute percentiles)."""
        with self._lock:
            self._tasks.append((time.monotonic(), latency_s))

    def note_call(self, latency_s: float, tokens: int = 0) -> None:
        """A model call finished after `latency_s`, with `tokens` prompt and completion tokens."""
        self.calls += 1
        self.tokens += tokens
        with self._lock:
            self._calls.append((time.monotonic(), latency_s))

    def recent_tasks(self, window_s: float = WINDOW_S) -> WindowStats | None:
        return self._window(self._tasks, window_s)

    def recent_calls(self, window_s: float = WINDOW_S) -> WindowStats | None:
        return self._window(self._calls, window_s)

    def _window(self, items: deque[tuple[float, float]], window_s: float) -> WindowStats | None:
        cutoff = time.monotonic() - window_s
        with self._lock:
            while items and items[0][0] < cutoff:
                items.popleft()
            values = sorted(latency for _, latency in items)
        if not values:
            return None
        return WindowStats(len(values), percentile(values, 50), percentile(values, 99))

    def line(self) -> str:
        now = time.monotonic()
        eta = self.eta_s(now)
        return (f"[PROGRESS] done={self.ok} failed={self.failed} in_flight={self.in_flight} "
                f"remaining={max(0, self.total - self.finished - self.in_flight)}/{self.total} "
                f"rate={self.rate(now):.1f}/s eta={format_duration(eta)}")


def format_wall(seconds: float) -> str:
    """A wall time as a person reads it: `0.4 s`, `42.0 s`, then `12m04s`, `1h02m05s`."""
    return f"{seconds:.1f} s" if seconds < 60 else format_duration(seconds)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
