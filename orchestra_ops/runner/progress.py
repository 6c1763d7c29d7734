"""Progress counters of a run and the one-line summary the console and eval.log show."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Progress:
    total: int  # tasks this invocation runs
    ok: int = 0
    failed: int = 0
    in_flight: int = 0
    started_at: float = field(default_factory=time.monotonic)

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

    def line(self) -> str:
        now = time.monotonic()
        eta = self.eta_s(now)
        return (f"[PROGRESS] done={self.ok} failed={self.failed} in_flight={self.in_flight} "
                f"remaining={max(0, self.total - self.finished - self.in_flight)}/{self.total} "
                f"rate={self.rate(now):.1f}/s eta={format_duration(eta)}")


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
